//! What the Radius client measures: each request attempt, by method,
//! outcome and status code, and its latency.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::Metrics;

/// Labels of one Radius HTTP request: method, outcome (`ok` for 2xx,
/// `client_error`, `server_error`, `throttled`, `unreachable`) and status
/// code (`0` when no answer came).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RadiusLabels {
    pub method: String,
    pub outcome: &'static str,
    pub code: u16,
}

/// Labels of Radius request latency: the method.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    pub method: String,
}

/// The Radius client's metrics (`host/src/radius/client/`).
pub(super) struct RadiusMetrics {
    requests: Family<RadiusLabels, Counter>,
    request_seconds: Family<MethodLabels, Histogram>,
}

impl RadiusMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            requests: Family::default(),
            // 500 µs .. ~130 s
            request_seconds: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(5e-4, 4.0, 10))
            }),
        };
        registry.register(
            "radius_requests",
            "Radius API requests (each attempt) by method, outcome and status code",
            metrics.requests.clone(),
        );
        registry.register(
            "radius_request_seconds",
            "Latency of one Radius API request attempt, by method",
            metrics.request_seconds.clone(),
        );
        metrics
    }
}

impl Metrics {
    /// One Radius request attempt; `code` 0 when no answer came.
    pub fn observe_radius_request(&self, method: &str, code: u16, took: Duration) {
        let outcome = match code {
            0 => "unreachable",
            200..=299 => "ok",
            429 => "throttled",
            400..=499 => "client_error",
            _ => "server_error",
        };
        self.radius
            .requests
            .get_or_create(&RadiusLabels {
                method: method.to_string(),
                outcome,
                code,
            })
            .inc();
        self.radius
            .request_seconds
            .get_or_create(&MethodLabels {
                method: method.to_string(),
            })
            .observe(took.as_secs_f64());
    }
}
