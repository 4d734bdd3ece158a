//! Prometheus metrics of the controllers and the policy runtime, and the small
//! HTTP server that serves them with the liveness and readiness probes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

/// Labels of a reconcile: object kind and outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    pub kind: &'static str,
    pub outcome: &'static str,
}

/// Labels of a policy decision: object kind and policy `name@version`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    pub kind: &'static str,
    pub policy: String,
}

/// Labels of a failed decision: the `DecisionError::reason()`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    pub kind: &'static str,
    pub reason: &'static str,
}

/// Every metric the host exports.
pub struct Metrics {
    registry: Registry,
    pub reconciles: Family<ReconcileLabels, Counter>,
    pub decision_seconds: Family<DecisionLabels, Histogram>,
    pub decision_failures: Family<FailureLabels, Counter>,
    pub radius_requests: Family<RadiusLabels, Counter>,
}

/// Labels of a Radius request: operation and HTTP status class.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RadiusLabels {
    pub operation: &'static str,
    pub status: String,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("radwasm");
        let reconciles = Family::<ReconcileLabels, Counter>::default();
        registry.register(
            "reconciles",
            "Reconciles by kind and outcome",
            reconciles.clone(),
        );
        let decision_seconds = Family::<DecisionLabels, Histogram>::new_with_constructor(|| {
            // 5 µs .. ~40 ms
            Histogram::new(exponential_buckets(5e-6, 2.5, 10))
        });
        registry.register(
            "policy_decision_seconds",
            "Time to instantiate the policy guest and decide, per object kind and policy",
            decision_seconds.clone(),
        );
        let decision_failures = Family::<FailureLabels, Counter>::default();
        registry.register(
            "policy_decision_failures",
            "Decisions that failed (trap, fuel, memory cap, policy error, guard rail)",
            decision_failures.clone(),
        );
        let radius_requests = Family::<RadiusLabels, Counter>::default();
        registry.register(
            "radius_requests",
            "Radius API requests by operation and status",
            radius_requests.clone(),
        );
        Self {
            registry,
            reconciles,
            decision_seconds,
            decision_failures,
            radius_requests,
        }
    }
}

impl Metrics {
    /// Record one decision's duration.
    pub fn observe_decision(&self, kind: &'static str, policy: String, elapsed: Duration) {
        self.decision_seconds
            .get_or_create(&DecisionLabels { kind, policy })
            .observe(elapsed.as_secs_f64());
    }

    /// The registry in the Prometheus text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }
}

/// Readiness: false until the controllers have synced their caches.
#[derive(Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    pub fn set_ready(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

#[derive(Clone)]
struct ServerState {
    metrics: Arc<Metrics>,
    readiness: Readiness,
}

/// Serve `/metrics`, `/healthz` and `/readyz` on `address` until `shutdown`.
/// Returns the bound address (useful with port 0).
pub async fn serve(
    address: SocketAddr,
    metrics: Arc<Metrics>,
    readiness: Readiness,
    shutdown: CancellationToken,
) -> anyhow::Result<SocketAddr> {
    let app = Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready_handler))
        .with_state(ServerState { metrics, readiness });
    let listener = tokio::net::TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await;
        if let Err(error) = served {
            tracing::error!(%error, "metrics server stopped");
        }
    });
    Ok(bound)
}

async fn metrics_handler(State(state): State<ServerState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
}

async fn ready_handler(State(state): State<ServerState>) -> impl IntoResponse {
    if state.readiness.is_ready() {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches not synced yet")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_encode_in_the_prometheus_text_format() {
        let metrics = Metrics::default();
        metrics
            .reconciles
            .get_or_create(&ReconcileLabels {
                kind: "DeploymentTemplate",
                outcome: "ok",
            })
            .inc();
        metrics.observe_decision(
            "DeploymentTemplate",
            "default@0.1.0".into(),
            Duration::from_micros(20),
        );
        let text = metrics.encode();
        assert!(
            text.contains(r#"radwasm_reconciles_total{kind="DeploymentTemplate",outcome="ok"} 1"#),
            "{text}"
        );
        assert!(
            text.contains("radwasm_policy_decision_seconds_bucket"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn probes_answer_and_readiness_follows_the_flag() {
        let readiness = Readiness::default();
        let shutdown = CancellationToken::new();
        let address = serve(
            "127.0.0.1:0".parse().expect("address"),
            Arc::new(Metrics::default()),
            readiness.clone(),
            shutdown.clone(),
        )
        .await
        .expect("serves");
        let client = reqwest::Client::new();
        let get = |path: &str| client.get(format!("http://{address}{path}")).send();
        assert_eq!(get("/healthz").await.expect("healthz").status(), 200);
        assert_eq!(get("/readyz").await.expect("readyz").status(), 503);
        readiness.set_ready();
        assert_eq!(get("/readyz").await.expect("readyz").status(), 200);
        let body = get("/metrics")
            .await
            .expect("metrics")
            .text()
            .await
            .expect("body");
        assert!(body.contains("# EOF"), "{body}");
        shutdown.cancel();
    }
}
