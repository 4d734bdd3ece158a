//! A client-side limit on the rate of requests to the API server
//! (`--kube-api-qps`, `--kube-api-burst`), as client-go's `QPS` and
//! `Burst` and kube-controller-manager's flags of the same names: a token
//! bucket that lets `burst` requests through at once and refills at `qps`
//! a second. A request waits for its token before it is sent; the
//! controller then goes at the pace the limit sets, and the API server
//! holds (in its watch cache, for minutes) only the writes of that pace
//! (docs/benchmarks-apiserver.md measures what that saves).
//!
//! The wait happens in `poll_ready`: kube drives the client through a
//! buffer whose worker polls readiness before each request it sends, so
//! every request is counted, in order, watches by the request that starts
//! them.

use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use governor::clock::Clock;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tower::{Layer, Service};

/// The limit: `qps` requests a second on average, `burst` at once.
#[derive(Clone)]
pub struct Throttle {
    limiter: Arc<DefaultDirectRateLimiter>,
}

impl Throttle {
    /// `None` when `qps` is 0 (no limit). A `burst` of 0 means `qps`
    /// rounded up (at least 1).
    pub fn new(qps: f64, burst: u32) -> Option<Self> {
        if qps.is_nan() || qps <= 0.0 {
            return None;
        }
        let burst = match burst {
            0 => qps.ceil().min(f64::from(u32::MAX)) as u32,
            burst => burst,
        };
        let quota = Quota::with_period(Duration::from_secs_f64(1.0 / qps))?
            .allow_burst(NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN));
        Some(Self {
            limiter: Arc::new(RateLimiter::direct(quota)),
        })
    }
}

impl<S> Layer<S> for Throttle {
    type Service = Throttled<S>;

    fn layer(&self, inner: S) -> Throttled<S> {
        Throttled {
            inner,
            limiter: self.limiter.clone(),
            admitted: false,
            wait: None,
        }
    }
}

pub struct Throttled<S> {
    inner: S,
    limiter: Arc<DefaultDirectRateLimiter>,
    /// A token was taken for the next request.
    admitted: bool,
    /// Until the next token.
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S, R> Service<R> for Throttled<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        while !self.admitted {
            if let Some(wait) = self.wait.as_mut() {
                ready!(wait.as_mut().poll(cx));
                self.wait = None;
            }
            match self.limiter.check() {
                Ok(()) => self.admitted = true,
                Err(not_until) => {
                    // The limiter's own clock: a new `DefaultClock` calibrates
                    // itself (CPUID and a timing loop) each time it is made,
                    // which under a limit cost a few percent of the
                    // controller's CPU (docs/benchmarks-apiserver.md).
                    let wait = not_until.wait_time_from(self.limiter.clock().now());
                    self.wait = Some(Box::pin(tokio::time::sleep(wait)));
                }
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.admitted = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// A service that answers at once.
    struct Echo;

    impl Service<u32> for Echo {
        type Response = u32;
        type Error = std::convert::Infallible;
        type Future = std::future::Ready<Result<u32, Self::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: u32) -> Self::Future {
            std::future::ready(Ok(request))
        }
    }

    #[test]
    fn no_rate_is_no_limit() {
        assert!(Throttle::new(0.0, 10).is_none());
        assert!(Throttle::new(-1.0, 10).is_none());
        assert!(Throttle::new(f64::NAN, 10).is_none());
    }

    #[tokio::test]
    async fn a_burst_goes_at_once_and_the_rest_at_the_rate() {
        use futures::FutureExt;
        use tower::ServiceExt;
        // 20 a second, 5 at once: the first 5 are ready without waiting,
        // and 15 take at least half a second (the 15th token is due 0.5 s
        // after the first).
        let mut service = Throttle::new(20.0, 5).expect("a limit").layer(Echo);
        let started = Instant::now();
        for request in 0..5 {
            let ready = service.ready().now_or_never();
            assert!(ready.is_some(), "request {request} of the burst waited");
            service.call(request).await.ok();
        }
        for request in 5..15 {
            service
                .ready()
                .await
                .expect("ready")
                .call(request)
                .await
                .ok();
        }
        let all = started.elapsed();
        assert!(all >= Duration::from_millis(450), "15 requests in {all:?}");
    }
}
