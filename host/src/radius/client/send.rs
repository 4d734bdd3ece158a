//! One request to Radius, with retries: a timeout per attempt, jittered
//! exponential backoff on 429, 5xx and connection failures, and
//! `Retry-After` honoured up to a ceiling.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde_json::Value;

use super::RadiusClient;
use crate::radius::error::{self, RadiusError};

/// Timeouts and retries for every request.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts per request, the first included.
    pub attempts: u32,
    /// Backoff before the second attempt; doubles per attempt, jittered.
    pub base_delay: Duration,
    /// Backoff ceiling (a longer `Retry-After` is honoured up to `max_retry_after`).
    pub max_delay: Duration,
    /// Longest `Retry-After` waited for inside one call; longer ones are
    /// returned to the caller as [`RadiusError::Throttled`].
    pub max_retry_after: Duration,
    /// Timeout of one request, connect included.
    pub timeout: Duration,
}

impl RetryPolicy {
    /// The sleeps between attempts when Radius gives no `Retry-After`: a
    /// random 50-100 % of a step that starts at `base_delay` and doubles up
    /// to `max_delay`. (backon's jitter adds up to one more step to its
    /// delay, so its steps here are half of ours.)
    fn backoff(&self) -> ExponentialBackoff {
        ExponentialBuilder::new()
            .with_min_delay(self.base_delay / 2)
            .with_factor(2.0)
            .with_max_delay(self.max_delay / 2)
            .with_jitter()
            .without_max_times()
            .build()
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 5,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(5),
            max_retry_after: Duration::from_secs(30),
            timeout: Duration::from_secs(15),
        }
    }
}

/// One HTTP answer.
pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) headers: HeaderMap,
    pub(super) body: String,
}

impl Answer {
    pub(super) fn json(&self, what: &str) -> Result<Value, RadiusError> {
        if self.body.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&self.body).map_err(|e| RadiusError::BadResponse {
            what: what.to_string(),
            reason: format!("body is not JSON: {e}"),
        })
    }

    pub(super) fn retry_after(&self) -> Option<Duration> {
        retry_after(&self.headers)
    }

    pub(super) fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }
}

fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    text.parse::<u64>().ok().map(Duration::from_secs)
}

impl RadiusClient {
    /// Send one request with retries. Returns any answer that is not 429 or
    /// 5xx (those are retried), so callers interpret 2xx/4xx themselves.
    pub(super) async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        what: &str,
    ) -> Result<Answer, RadiusError> {
        let url = format!("{}{path}", self.endpoint.base);
        let policy = &self.retry;
        let mut backoff = policy.backoff();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let started = std::time::Instant::now();
            let sent = self.request(&method, &url, body).send().await;
            self.observe(
                &method,
                sent.as_ref().map_or(0, |r| r.status().as_u16()),
                started,
            );
            let wait = match sent {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let headers = response.headers().clone();
                    let text = match response.text().await {
                        Ok(text) => text,
                        Err(error) if attempt < policy.attempts => {
                            tracing::debug!(%what, attempt, %error, "reading Radius' answer failed; retrying");
                            sleep(backoff.next()).await;
                            continue;
                        }
                        Err(error) => {
                            return Err(RadiusError::Unreachable {
                                what: what.to_string(),
                                attempts: attempt,
                                reason: error.to_string(),
                            });
                        }
                    };
                    if status != 429 && status < 500 {
                        return Ok(Answer {
                            status,
                            headers,
                            body: text,
                        });
                    }
                    let hint = retry_after(&headers);
                    if attempt >= policy.attempts
                        || hint.is_some_and(|h| h > policy.max_retry_after)
                    {
                        return Err(still_busy(what, status, &text, attempt, hint));
                    }
                    tracing::debug!(%what, attempt, status, retry_after_s = hint.map(|h| h.as_secs()), "Radius is busy; retrying");
                    hint
                }
                Err(error) => {
                    if attempt >= policy.attempts {
                        return Err(RadiusError::Unreachable {
                            what: what.to_string(),
                            attempts: attempt,
                            reason: describe(&error),
                        });
                    }
                    tracing::debug!(%what, attempt, error = %describe(&error), "request failed; retrying");
                    None
                }
            };
            match wait {
                Some(hint) => tokio::time::sleep(hint).await,
                None => sleep(backoff.next()).await,
            }
        }
    }

    /// One attempt's request: with the endpoint's bearer token and the
    /// JSON body, if any.
    fn request(
        &self,
        method: &reqwest::Method,
        url: &str,
        body: Option<&Value>,
    ) -> reqwest::RequestBuilder {
        let mut request = self.http.request(method.clone(), url);
        if let Some(token) = &self.endpoint.bearer {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        request
    }
}

/// Why a request answered busy (429 or 5xx) is given up, after its last
/// attempt or when Radius asks to wait longer than one call waits: the ARM
/// error Radius answered, if any (but for 429 and 503), else
/// [`RadiusError::Throttled`].
fn still_busy(
    what: &str,
    status: u16,
    text: &str,
    attempts: u32,
    retry_after: Option<Duration>,
) -> RadiusError {
    if let Some(arm) = error::arm_error(status, text).filter(|_| status != 429 && status != 503) {
        return arm;
    }
    RadiusError::Throttled {
        what: what.to_string(),
        status,
        attempts,
        retry_after,
    }
}

/// Sleep the backoff's next delay (it has no last one: the attempts are
/// counted here).
async fn sleep(delay: Option<Duration>) {
    tokio::time::sleep(delay.unwrap_or_default()).await;
}

fn describe(error: &reqwest::Error) -> String {
    let mut text = crate::error_chain::joined(error);
    if error.is_timeout() {
        text.push_str(" (timed out)");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_sleep_half_to_all_of_a_step_of_200_ms_doubling_to_5_s() {
        let steps_ms = [200, 400, 800, 1600, 3200, 5000, 5000, 5000];
        for _ in 0..50 {
            let mut backoff = RetryPolicy::default().backoff();
            for step in steps_ms {
                let step = Duration::from_millis(step);
                let sleep = backoff.next().expect("no last delay");
                assert!(
                    sleep >= step / 2 - Duration::from_micros(1) && sleep <= step,
                    "{sleep:?} outside 50-100 % of {step:?}"
                );
            }
        }
    }

    #[test]
    fn a_policy_s_own_delays_are_kept() {
        let policy = RetryPolicy {
            base_delay: Duration::from_millis(20),
            max_delay: Duration::from_millis(100),
            ..RetryPolicy::default()
        };
        let mut backoff = policy.backoff();
        for step in [20, 40, 80, 100, 100] {
            let step = Duration::from_millis(step);
            let sleep = backoff.next().expect("no last delay");
            assert!(
                sleep >= step / 2 - Duration::from_micros(1) && sleep <= step,
                "{sleep:?} outside 50-100 % of {step:?}"
            );
        }
    }
}
