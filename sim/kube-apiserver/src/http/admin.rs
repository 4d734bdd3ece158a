//! The simulator's own endpoints under `/_sim/`: faults, dropping watches,
//! expiring history and stats.

use std::time::Duration;

use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{AppState, json_response};
use crate::body::{self, Expect};
use crate::error::ApiError;

pub(super) async fn admin_request(state: &AppState, path: &str, request: Request) -> Response {
    let method = request.method().clone();
    let body = match body::read(request, Expect::Json).await {
        Ok((_, body)) => body,
        Err(error) => return error.into_response(),
    };
    match (method, path) {
        (Method::POST, "faults") => {
            let rate = body.get("errorRate").and_then(Value::as_f64).unwrap_or(0.0);
            let code = body.get("errorCode").and_then(Value::as_u64).unwrap_or(500) as u16;
            let latency_ms = body.get("latencyMs").and_then(Value::as_u64).unwrap_or(0);
            let watch_lag_ms = body.get("watchLagMs").and_then(Value::as_u64).unwrap_or(0);
            state.faults.set_error_rate(rate, code);
            state.faults.set_latency(Duration::from_millis(latency_ms));
            state
                .faults
                .set_watch_lag(Duration::from_millis(watch_lag_ms));
            json_response(
                StatusCode::OK,
                &json!({"errorRate": rate, "errorCode": code, "latencyMs": latency_ms,
                        "watchLagMs": watch_lag_ms}),
            )
        }
        (Method::POST, "drop-watches") => {
            state.faults.drop_watches();
            json_response(StatusCode::OK, &json!({"dropped": true}))
        }
        (Method::POST, "expire-history") => {
            state.faults.expire_history();
            json_response(StatusCode::OK, &json!({"expired": true}))
        }
        (Method::GET, "stats") => {
            let store = state.lock_store();
            json_response(
                StatusCode::OK,
                &json!({"resourceVersion": store.resource_version(), "oldestResourceVersion": store.oldest_rv()}),
            )
        }
        _ => ApiError::new(404, "NotFound", format!("no admin endpoint /_sim/{path}"))
            .into_response(),
    }
}
