//! The small HTTP server of the metrics, the liveness and readiness
//! probes, and the decision-record ring.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use super::Metrics;

/// Readiness (`/readyz`): not ready until the controllers' watch caches
/// have finished their first list, nor while anything is reported that
/// stops the controller from working as it should (a CustomResourceDefinition
/// whose schema would drop fields the controller writes), each under a key
/// of its own so one report can be withdrawn without touching another.
#[derive(Clone)]
pub struct Readiness {
    /// What keeps the process unready, by key; reported in `/readyz`.
    problems: Arc<Mutex<std::collections::BTreeMap<String, String>>>,
    /// Start-up is over (the caches have synced); `/startupz?wait=` waits
    /// on it.
    started: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Default for Readiness {
    fn default() -> Self {
        Self {
            problems: Default::default(),
            started: Arc::new(tokio::sync::watch::Sender::new(false)),
        }
    }
}

impl Readiness {
    /// The caches have synced. True the first time (so that is logged once).
    pub fn set_ready(&self) -> bool {
        !self.started.send_replace(true)
    }

    /// Keep the process unready for `reason` (under `key`) until
    /// [`Readiness::clear_problem`] is called with the same key.
    pub fn set_problem(&self, key: &str, reason: String) {
        let mut problems = self.problems.lock().unwrap_or_else(|e| e.into_inner());
        problems.insert(key.to_string(), reason);
    }

    /// Withdraw what was reported under `key`, if anything.
    pub fn clear_problem(&self, key: &str) {
        let mut problems = self.problems.lock().unwrap_or_else(|e| e.into_inner());
        problems.remove(key);
    }

    /// Start-up is over: the caches have synced, whatever problems are
    /// reported since (those keep `/readyz` at 503, not `/startupz`, so a
    /// reported problem never has the container restarted).
    pub fn has_started(&self) -> bool {
        *self.started.borrow()
    }

    /// [`Readiness::has_started`], waiting up to `wait` for it.
    pub async fn started_within(&self, wait: Duration) -> bool {
        let mut started = self.started.subscribe();
        tokio::time::timeout(wait, started.wait_for(|s| *s))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    pub fn is_ready(&self) -> bool {
        self.not_ready_because().is_none()
    }

    /// Why the process is not ready (one line per reason), or `None`.
    pub fn not_ready_because(&self) -> Option<String> {
        let problems = self.problems.lock().unwrap_or_else(|e| e.into_inner());
        let mut reasons: Vec<String> = problems.values().cloned().collect();
        if !self.has_started() {
            reasons.insert(0, "caches not synced yet".to_string());
        }
        (!reasons.is_empty()).then(|| reasons.join("\n"))
    }
}

#[derive(Clone)]
struct ServerState {
    metrics: Arc<Metrics>,
    readiness: Readiness,
}

/// Serve `/metrics`, `/healthz`, `/startupz`, `/readyz` and `/debug/decisions` (the
/// decision-record ring, when attached with [`Metrics::with_decision_records`])
/// on `address` until `shutdown`.
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
        .route("/startupz", get(startup_handler))
        .route("/readyz", get(ready_handler))
        .route("/debug/decisions", get(decisions_handler))
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

/// `?limit=N` of `/debug/decisions`.
#[derive(serde::Deserialize)]
struct DecisionsQuery {
    limit: Option<usize>,
}

/// The last decision records as JSON lines, newest last.
async fn decisions_handler(
    State(state): State<ServerState>,
    axum::extract::Query(query): axum::extract::Query<DecisionsQuery>,
) -> axum::response::Response {
    match state
        .metrics
        .decision_records
        .as_ref()
        .and_then(|recorder| recorder.recent(query.limit))
    {
        Some(lines) => (
            [(header::CONTENT_TYPE, "application/x-ndjson; charset=utf-8")],
            lines,
        )
            .into_response(),
        None => (
            StatusCode::NOT_FOUND,
            "decision records are not kept in memory (--decision-ring 0)\n",
        )
            .into_response(),
    }
}

/// `?wait=9s` of `/startupz`.
#[derive(serde::Deserialize)]
struct StartupQuery {
    wait: Option<String>,
}

/// The longest `/startupz?wait=` honoured.
const STARTUP_WAIT_CAP: Duration = Duration::from_secs(60);

/// The startup probe's question: has the first policy compiled and have the
/// watch caches synced? Until then kubelet runs neither liveness nor
/// readiness. With `?wait=DURATION` (humantime, at most a minute) the answer
/// waits up to that long for start-up to end, so a probe whose timeout is
/// longer than the start gets its first answer `200` and kubelet records
/// no `Unhealthy` event for a start that was only slow.
async fn startup_handler(
    State(state): State<ServerState>,
    axum::extract::Query(query): axum::extract::Query<StartupQuery>,
) -> axum::response::Response {
    let wait = match query.wait.as_deref().map(humantime::parse_duration) {
        None => Duration::ZERO,
        Some(Ok(wait)) => wait.min(STARTUP_WAIT_CAP),
        Some(Err(error)) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("wait: {error} (a duration such as 9s)\n"),
            )
                .into_response();
        }
    };
    if state.readiness.started_within(wait).await {
        (StatusCode::OK, "started\n")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "starting: caches not synced yet\n",
        )
    }
    .into_response()
}

async fn ready_handler(State(state): State<ServerState>) -> impl IntoResponse {
    match state.readiness.not_ready_because() {
        None => (StatusCode::OK, "ready".to_string()),
        Some(reasons) => (StatusCode::SERVICE_UNAVAILABLE, reasons + "\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(get("/startupz").await.expect("startupz").status(), 503);
        let waited = std::time::Instant::now();
        assert_eq!(
            get("/startupz?wait=200ms")
                .await
                .expect("startupz")
                .status(),
            503
        );
        assert!(waited.elapsed() >= Duration::from_millis(200));
        assert_eq!(
            get("/startupz?wait=soon").await.expect("startupz").status(),
            400
        );
        // A probe waiting when start-up ends is answered then.
        let waiting = tokio::spawn(get("/startupz?wait=30s"));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(readiness.set_ready(), "the first time");
        assert_eq!(
            waiting.await.expect("join").expect("startupz").status(),
            200
        );
        assert_eq!(get("/startupz").await.expect("startupz").status(), 200);
        assert!(!readiness.set_ready(), "not again");
        assert_eq!(get("/readyz").await.expect("readyz").status(), 200);
        readiness.set_problem("crd:a", "a lacks status.id".into());
        let answer = get("/readyz").await.expect("readyz");
        assert_eq!(answer.status(), 503);
        assert_eq!(answer.text().await.expect("body"), "a lacks status.id\n");
        readiness.clear_problem("crd:a");
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
