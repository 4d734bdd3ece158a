//! A recording proxy in front of UCP: a scenario points its controller at
//! it, and counts what reached Radius (method, path, answer) without
//! sharing counters with the other scenarios on the same Radius.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;

/// One request that went through.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    /// The path, without UCP's path base and the query.
    pub path: String,
    /// UCP's answer (0 when UCP did not answer).
    pub status: u16,
}

#[derive(Clone)]
struct Shared {
    upstream: String,
    own: String,
    http: reqwest::Client,
    log: Arc<Mutex<Vec<Recorded>>>,
}

/// A running proxy; dropping it stops it.
pub struct Recorder {
    addr: SocketAddr,
    log: Arc<Mutex<Vec<Recorded>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Recorder {
    /// Listen on 127.0.0.1 and forward everything to `ucp_url`'s origin
    /// (scheme, host and port; paths are kept as sent).
    pub async fn start(ucp_url: &str) -> Result<Recorder> {
        let parsed = url::Url::parse(ucp_url).context("UCP's URL")?;
        let upstream = parsed.origin().ascii_serialization();
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let shared = Shared {
            upstream,
            own: format!("http://{addr}"),
            http: reqwest::Client::builder().no_proxy().build()?,
            log: log.clone(),
        };
        let app = axum::Router::new().fallback(forward).with_state(shared);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Recorder { addr, log, task })
    }

    /// UCP's URL through the proxy, with UCP's path base: the controller's
    /// `--radius-url`.
    pub fn url(&self) -> String {
        format!("http://{}{}", self.addr, super::PATH_BASE)
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// How many `method` requests had a path containing `fragment`
    /// (compared without case, as UCP compares ids).
    pub fn count(&self, method: &str, fragment: &str) -> usize {
        let fragment = fragment.to_ascii_lowercase();
        self.requests()
            .iter()
            .filter(|r| r.method == method && r.path.to_ascii_lowercase().contains(&fragment))
            .count()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn forward(
    State(shared): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path_and_query = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut request = shared
        .http
        .request(
            method.clone(),
            format!("{}{path_and_query}", shared.upstream),
        )
        .body(body);
    for (name, value) in &headers {
        if name != "host" && name != "content-length" {
            request = request.header(name, value);
        }
    }
    let path = uri
        .path()
        .strip_prefix(super::PATH_BASE)
        .unwrap_or(uri.path())
        .to_string();
    let answer = request.send().await;
    let (status, response) = match answer {
        Ok(answer) => {
            let status = answer.status();
            let mut builder = Response::builder().status(status.as_u16());
            for (name, value) in answer.headers() {
                if name == "content-length" || name == "transfer-encoding" {
                    continue;
                }
                // Operation URLs name UCP; keep the client on the proxy.
                let value = value
                    .to_str()
                    .map(|v| v.replace(&shared.upstream, &shared.own))
                    .unwrap_or_default();
                builder = builder.header(name, value);
            }
            let bytes = answer.bytes().await.unwrap_or_default();
            (
                status.as_u16(),
                builder
                    .body(Body::from(bytes))
                    .unwrap_or_else(|_| Response::new(Body::empty())),
            )
        }
        Err(_) => {
            let mut response = Response::new(Body::from("UCP did not answer"));
            *response.status_mut() = StatusCode::BAD_GATEWAY;
            (0, response)
        }
    };
    if let Ok(mut log) = shared.log.lock() {
        log.push(Recorded {
            method: method.to_string(),
            path,
            status,
        });
    }
    response
}
