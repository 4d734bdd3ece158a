//! The HTTP side: the UCP endpoints (resource groups, deployments,
//! resources, operations), the `/_sim/` admin endpoints, the fault
//! injection layer, and a connection loop that can close a TCP connection
//! without answering.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::Utc;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use crate::arm::{self, Evaluation, EvaluationRequest};
use crate::error::{ArmError, codes};
use crate::faults::{FaultsHandle, RequestFault, SettingsPatch, Timings};
use crate::ids::{self, OperationUrl, Target};
use crate::store::{
    Deployment, DeploymentState, OperationKind, OperationStatus, ResourceGroup, Store,
    StoredResource,
};

/// The path under which the Kubernetes API server proxies UCP; requests may
/// carry it in front of a UCP path.
pub const AGGREGATED_PATH: &str = "/apis/api.ucp.dev/v1alpha3";

const DEPLOYMENT_API_VERSION: &str = "2020-10-01";
const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// Shared state of one simulator.
#[derive(Clone)]
pub(crate) struct App {
    pub store: Arc<Mutex<Store>>,
    pub faults: FaultsHandle,
    /// What `/_sim/reset` restores.
    pub initial: Arc<(crate::faults::Faults, Timings)>,
    pub local_addr: SocketAddr,
    /// Set in deployment-engine mode: where deployments put their resources.
    pub engine: Option<Arc<crate::engine::Backend>>,
}

impl App {
    pub fn lock(&self) -> MutexGuard<'_, Store> {
        // Handlers never leave the store half-changed across a panic point
        // that matters to a test double, so a poisoned lock stays usable.
        let mut store = self
            .store
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        store.advance(Instant::now());
        store
    }
}

/// Close this request's TCP connection without answering.
#[derive(Clone)]
struct ConnectionKill(CancellationToken);

pub(crate) fn router(app: App) -> Router {
    Router::new()
        .route(
            "/_sim/health",
            get(|| async { Json(json!({"status": "ok"})) }),
        )
        .route("/_sim/stats", get(admin_stats))
        .route(
            "/_sim/faults",
            get(admin_get_faults)
                .post(admin_patch_faults)
                .delete(admin_clear_faults),
        )
        .route("/_sim/reset", post(admin_reset))
        .route("/_sim/resources", get(admin_resources))
        .fallback(ucp)
        .layer(middleware::from_fn_with_state(app.clone(), inject_faults))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(app)
}

/// Accept connections until `shutdown`; each connection is served by hyper
/// and dropped (socket closed, no answer) when a request asks for it.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: CancellationToken,
    connections: TaskTracker,
) {
    loop {
        let stream = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let shutdown = shutdown.clone();
        connections.spawn(async move {
            let kill = CancellationToken::new();
            let marker = ConnectionKill(kill.clone());
            let service =
                hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
                    request.extensions_mut().insert(marker.clone());
                    router.clone().oneshot(request)
                });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            let mut draining = false;
            loop {
                tokio::select! {
                    result = connection.as_mut() => {
                        if let Err(error) = result {
                            tracing::debug!(%error, "connection ended with an error");
                        }
                        break;
                    }
                    // Dropping the connection closes the socket mid-request.
                    () = kill.cancelled() => break,
                    () = shutdown.cancelled(), if !draining => {
                        connection.as_mut().graceful_shutdown();
                        draining = true;
                    }
                }
            }
        });
    }
}

// ----- responses ----------------------------------------------------------

struct Json(Value);

impl IntoResponse for Json {
    fn into_response(self) -> Response {
        json_response(StatusCode::OK, &self.0)
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    response
}

fn error_response(status: StatusCode, error: ArmError) -> Response {
    json_response(status, &error.to_body())
}

fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    error_response(status, ArmError::new(code, message))
}

fn with_header(mut response: Response, name: &'static str, value: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(value) {
        response.headers_mut().insert(name, value);
    }
    response
}

fn empty(status: StatusCode) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status;
    response
}

/// Where absolute URLs in answers point: the address the client used.
struct Origin {
    /// `http://host:port` plus the aggregated path if the request used it.
    base: String,
}

impl Origin {
    fn new(uri: &Uri, headers: &HeaderMap, local: SocketAddr, prefix: &str) -> Self {
        let host = uri
            .authority()
            .map(|a| a.to_string())
            .or_else(|| {
                headers
                    .get(header::HOST)
                    .and_then(|h| h.to_str().ok())
                    .map(str::to_string)
            })
            .unwrap_or_else(|| local.to_string());
        let scheme = headers
            .get("x-forwarded-proto")
            .and_then(|h| h.to_str().ok())
            .unwrap_or("http");
        Self {
            base: format!("{scheme}://{host}{prefix}"),
        }
    }

    fn url(&self, path: &str, api_version: &str) -> String {
        format!("{}{path}?api-version={api_version}", self.base)
    }
}

/// A 201/202 for a started operation, with its headers.
fn operation_started(
    status: StatusCode,
    body: Option<Value>,
    origin: &Origin,
    op: &crate::store::Operation,
    retry_after_secs: u64,
) -> Response {
    let response = match body {
        Some(body) => json_response(status, &body),
        None => empty(status),
    };
    let response = with_header(
        response,
        "azure-asyncoperation",
        &origin.url(&op.path("operationStatuses"), &op.api_version),
    );
    let response = with_header(
        response,
        "location",
        &origin.url(&op.path("operationResults"), &op.api_version),
    );
    with_header(response, "retry-after", &retry_after_secs.to_string())
}

// ----- fault injection ------------------------------------------------------

async fn inject_faults(State(app): State<App>, request: Request, next: Next) -> Response {
    if request.uri().path().starts_with("/_sim/") {
        return next.run(request).await;
    }
    app.lock().stats.requests += 1;
    let (fault, latency) = app.faults.on_request();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    match fault {
        RequestFault::None => next.run(request).await,
        RequestFault::Drop => {
            if let Some(kill) = request.extensions().get::<ConnectionKill>() {
                kill.0.cancel();
                // The connection task drops this future with the connection
                // (HTTP/1). An HTTP/2 stream runs in its own task; it gives
                // up after a while instead of waiting forever.
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            }
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                codes::SERVICE_UNAVAILABLE,
                "The connection should have been dropped (injected fault)",
            )
        }
        RequestFault::Throttle { retry_after_secs } => with_header(
            error(
                StatusCode::TOO_MANY_REQUESTS,
                codes::TOO_MANY_REQUESTS,
                "Too many requests; retry later (injected by the Radius simulator)",
            ),
            "retry-after",
            &retry_after_secs.to_string(),
        ),
        RequestFault::ServerError {
            status,
            retry_after_secs,
        } => {
            if status == 503 {
                with_header(
                    error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        codes::SERVICE_UNAVAILABLE,
                        "The service is unavailable (injected by the Radius simulator)",
                    ),
                    "retry-after",
                    &retry_after_secs.to_string(),
                )
            } else {
                error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    codes::INTERNAL_SERVER_ERROR,
                    "An internal error occurred (injected by the Radius simulator)",
                )
            }
        }
    }
}

// ----- admin ------------------------------------------------------------------

async fn admin_stats(State(app): State<App>) -> Response {
    let mut stats = app.lock().stats();
    stats.faults = app.faults.counts();
    Json(serde_json::to_value(stats).unwrap_or(Value::Null)).into_response()
}

async fn admin_get_faults(State(app): State<App>) -> Response {
    Json(serde_json::to_value(app.faults.settings()).unwrap_or(Value::Null)).into_response()
}

async fn admin_patch_faults(State(app): State<App>, body: Bytes) -> Response {
    let patch: SettingsPatch = match serde_json::from_slice(&body) {
        Ok(patch) => patch,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                codes::INVALID_REQUEST_CONTENT,
                format!("The fault settings are not valid: {e}"),
            );
        }
    };
    match app.faults.apply(patch) {
        Ok(settings) => Json(serde_json::to_value(settings).unwrap_or(Value::Null)).into_response(),
        Err(problem) => error(
            StatusCode::BAD_REQUEST,
            codes::INVALID_REQUEST_CONTENT,
            problem,
        ),
    }
}

async fn admin_clear_faults(State(app): State<App>) -> Response {
    app.faults.clear();
    Json(serde_json::to_value(app.faults.settings()).unwrap_or(Value::Null)).into_response()
}

async fn admin_reset(State(app): State<App>) -> Response {
    reset(&app);
    Json(json!({"reset": true})).into_response()
}

pub(crate) fn reset(app: &App) {
    *app.store.lock().unwrap_or_else(|p| p.into_inner()) = Store::default();
    let (faults, timings) = &*app.initial;
    app.faults.reset(faults.clone(), *timings);
}

async fn admin_resources(State(app): State<App>) -> Response {
    let store = app.lock();
    let ids: Vec<Value> = store
        .resources
        .values()
        .filter_map(|r| r.body.get("id").cloned())
        .collect();
    Json(json!({ "value": ids })).into_response()
}

// ----- UCP ----------------------------------------------------------------------

fn api_version(uri: &Uri) -> Option<String> {
    let query = uri.query()?;
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k.eq_ignore_ascii_case("api-version"))
        .map(|(_, v)| v.into_owned())
}

async fn ucp(
    State(app): State<App>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let full_path = uri.path();
    let (prefix, path) = match full_path.strip_prefix(AGGREGATED_PATH) {
        Some(rest) => (AGGREGATED_PATH, rest),
        None => ("", full_path),
    };
    let target = match ids::parse_path(path) {
        Ok(target) => target,
        Err(problem) => return error(StatusCode::NOT_FOUND, codes::NOT_FOUND, problem),
    };
    let version = api_version(&uri);
    if version.is_none() && !matches!(target, Target::Operation { .. }) {
        return error(
            StatusCode::BAD_REQUEST,
            codes::MISSING_API_VERSION,
            "The api-version query parameter (?api-version=) is required for all requests",
        );
    }
    let version = version.unwrap_or_default();
    let origin = Origin::new(&uri, &headers, app.local_addr, prefix);
    let request = Ucp {
        app: &app,
        origin,
        version,
    };
    match (target, method) {
        (Target::ResourceGroups { plane }, Method::GET) => request.list_groups(&plane),
        (Target::ResourceGroup { plane, name }, Method::GET) => request.get_group(&plane, &name),
        (Target::ResourceGroup { plane, name }, Method::PUT) => {
            request.put_group(&plane, &name, &body)
        }
        (Target::ResourceGroup { plane, name }, Method::DELETE) => {
            request.delete_group(&plane, &name)
        }
        (Target::Deployment { scope, name }, Method::PUT) => {
            request.put_deployment(&scope, &name, &body)
        }
        (Target::Deployment { scope, name }, Method::GET) => request.get_deployment(&scope, &name),
        (Target::Deployment { scope, name }, Method::DELETE) => {
            request.delete_deployment(&scope, &name)
        }
        (Target::DeploymentCancel { scope, name }, Method::POST) => {
            request.cancel_deployment(&scope, &name)
        }
        (Target::Operation { url, id }, Method::GET) => request.get_operation(url, &id),
        (
            Target::ResourceCollection {
                scope,
                resource_type,
            },
            Method::GET,
        ) => request.list_resources(&scope, &resource_type),
        (Target::Resource { id }, Method::GET) => request.get_resource(&id),
        (Target::Resource { id }, Method::PUT) => request.put_resource(&id, &body),
        (Target::Resource { id }, Method::DELETE) => request.delete_resource(&id),
        (_, method) => error(
            StatusCode::METHOD_NOT_ALLOWED,
            codes::METHOD_NOT_ALLOWED,
            format!("The method {method} is not supported for '{path}'"),
        ),
    }
}

/// One UCP request being answered.
struct Ucp<'a> {
    app: &'a App,
    origin: Origin,
    version: String,
}

fn parse_body(body: &Bytes) -> Result<Value, ArmError> {
    if body.is_empty() {
        return Err(ArmError::invalid_request_content(
            "The request content is empty; a JSON object is required",
        ));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(other) => Err(ArmError::invalid_request_content(format!(
            "The request content must be a JSON object, not {}",
            crate::arm::expr_type_name(&other)
        ))),
        Err(e) => Err(ArmError::invalid_request_content(format!(
            "The request content was invalid and could not be deserialized: {e}"
        ))),
    }
}

fn valid_deployment_name(name: &str) -> bool {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '(' | ')');
    !name.is_empty() && name.len() <= 64 && name.chars().all(ok)
}

/// A deployment accepted and evaluated, about to start.
struct StartedDeployment<'r> {
    /// `{scope}/providers/Microsoft.Resources/deployments/{name}`.
    id: String,
    name: &'r str,
    /// The resource group the deployment is in.
    scope: &'r str,
    /// As supplied, `{"name": {"value": ...}}`.
    parameters: &'r Value,
    evaluation: Evaluation,
}

/// The refusal of a deployment name ARM would refuse, or of a scope that is
/// not a resource group; `None` if both are fine.
fn deployment_target_refusal(scope: &str, name: &str) -> Option<Response> {
    if !valid_deployment_name(name) {
        return Some(error(
            StatusCode::BAD_REQUEST,
            codes::INVALID_DEPLOYMENT_NAME,
            format!(
                "The deployment name '{name}' is invalid: use 1 to 64 letters, digits, '-', '_', '.', '(' or ')'"
            ),
        ));
    }
    if ids::resource_group_of(scope).is_none() {
        return Some(error(
            StatusCode::BAD_REQUEST,
            codes::INVALID_REQUEST_CONTENT,
            format!(
                "The deployment scope '{scope}' must be inside a resource group (/planes/radius/{{plane}}/resourceGroups/{{name}})"
            ),
        ));
    }
    None
}

/// Evaluate the template of the deployment `name` into `radius_scope`. Its
/// `existing` resources are looked up in `store`, except in engine mode.
fn evaluate_deployment(
    store: &Store,
    radius_scope: &str,
    request: &DeploymentBody<'_>,
    name: &str,
    engine: bool,
) -> Result<Evaluation, ArmError> {
    let resources = &store.resources;
    let lookup = |id: &str| resources.get(&ids::key(id)).map(|r| r.body.clone());
    arm::evaluate(&EvaluationRequest {
        scope: radius_scope,
        template: request.template,
        parameters: request.parameters,
        deployment_name: name,
        // The engine checks `existing` resources against UCP when it
        // runs; their declared bodies stand in for `reference()`.
        existing: if engine { None } else { Some(&lookup) },
    })
}

impl Ucp<'_> {
    fn group_missing(&self, scope: &str) -> Response {
        let name = ids::resource_group_of(scope)
            .map(|(_, name)| name)
            .unwrap_or_else(|| scope.to_string());
        error(
            StatusCode::NOT_FOUND,
            codes::RESOURCE_GROUP_NOT_FOUND,
            format!("Resource group '{name}' could not be found (scope '{scope}')"),
        )
    }

    // -- resource groups

    fn list_groups(&self, plane: &str) -> Response {
        let store = self.app.lock();
        let prefix = format!("{}/", ids::key(plane));
        let groups: Vec<Value> = store
            .groups
            .iter()
            .filter(|(key, _)| key.starts_with(&prefix))
            .map(|(_, g)| g.body())
            .collect();
        json_response(StatusCode::OK, &json!({ "value": groups }))
    }

    fn get_group(&self, plane: &str, name: &str) -> Response {
        let store = self.app.lock();
        match store
            .groups
            .get(&ids::key(&ids::resource_group_id(plane, name)))
        {
            Some(group) => json_response(StatusCode::OK, &group.body()),
            None => error(
                StatusCode::NOT_FOUND,
                codes::NOT_FOUND,
                format!(
                    "the resource with id '{}' was not found",
                    ids::resource_group_id(plane, name)
                ),
            ),
        }
    }

    fn put_group(&self, plane: &str, name: &str, body: &Bytes) -> Response {
        let body = match parse_body(body) {
            Ok(body) => body,
            Err(problem) => return error_response(StatusCode::BAD_REQUEST, problem),
        };
        let location = match body.get("location") {
            None | Some(Value::Null) => "global".to_string(),
            Some(Value::String(location)) => location.clone(),
            Some(_) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    codes::INVALID_REQUEST_CONTENT,
                    "The resource group's 'location' must be a string",
                );
            }
        };
        let id = ids::resource_group_id(plane, name);
        let mut store = self.app.lock();
        let key = ids::key(&id);
        let created = !store.groups.contains_key(&key);
        let group = ResourceGroup {
            id: store.groups.get(&key).map(|g| g.id.clone()).unwrap_or(id),
            name: store
                .groups
                .get(&key)
                .map(|g| g.name.clone())
                .unwrap_or_else(|| name.to_string()),
            location,
            tags: body.get("tags").cloned(),
        };
        let answer = group.body();
        store.groups.insert(key, group);
        let status = if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        json_response(status, &answer)
    }

    fn delete_group(&self, plane: &str, name: &str) -> Response {
        let id = ids::resource_group_id(plane, name);
        let key = ids::key(&id);
        let mut store = self.app.lock();
        if !store.groups.contains_key(&key) {
            return empty(StatusCode::NO_CONTENT);
        }
        let inside = format!("{key}/");
        if store.resources.keys().any(|k| k.starts_with(&inside)) {
            return error(
                StatusCode::CONFLICT,
                codes::CONFLICT,
                format!("The resource group '{name}' is not empty; delete its resources first"),
            );
        }
        store.groups.remove(&key);
        empty(StatusCode::OK)
    }

    // -- deployments

    fn put_deployment(&self, scope: &str, name: &str, body: &Bytes) -> Response {
        let now = Instant::now();
        let mut store = self.app.lock();
        store.stats.deployment_puts += 1;
        *store
            .stats
            .deployment_puts_by_name
            .entry(name.to_string())
            .or_default() += 1;
        if let Some(refused) = deployment_target_refusal(scope, name) {
            return refused;
        }
        // Behind a real UCP the groups are UCP's: it answers 404 itself for a
        // deployment in a group it does not have.
        let engine = self.app.engine.is_some();
        if !engine && !store.group_exists(scope) {
            return self.group_missing(scope);
        }
        let body = match parse_body(body) {
            Ok(body) => body,
            Err(problem) => return error_response(StatusCode::BAD_REQUEST, problem),
        };
        let request = match DeploymentBody::parse(&body) {
            Ok(request) => request,
            Err(error) => return error_response(StatusCode::BAD_REQUEST, error),
        };
        let radius_scope = match request.radius_scope() {
            Ok(Some(radius_scope)) => radius_scope,
            Ok(None) => scope.to_string(),
            Err(error) => return error_response(StatusCode::BAD_REQUEST, error),
        };
        if !engine && !store.group_exists(&radius_scope) {
            return self.group_missing(&radius_scope);
        }
        let id = format!("{scope}/providers/Microsoft.Resources/deployments/{name}");
        if let Some(previous) = store.deployments.get(&ids::key(&id))
            && previous.is_running()
        {
            return error(
                StatusCode::CONFLICT,
                codes::DEPLOYMENT_ACTIVE,
                format!(
                    "Unable to edit or replace deployment '{name}': previous deployment is still active; wait for it to finish or cancel it"
                ),
            );
        }
        let evaluation = match evaluate_deployment(&store, &radius_scope, &request, name, engine) {
            Ok(evaluation) => evaluation,
            Err(error) => return error_response(StatusCode::BAD_REQUEST, error),
        };
        let started = StartedDeployment {
            id,
            name,
            scope,
            parameters: request.parameters,
            evaluation,
        };
        self.start_deployment(&mut store, now, started)
    }

    /// Record `started` as running, with the operation that tracks it
    /// (handed to the deployment engine in engine mode, which then runs it),
    /// and answer 201 with the deployment and the operation's headers.
    fn start_deployment(
        &self,
        store: &mut Store,
        now: Instant,
        started: StartedDeployment<'_>,
    ) -> Response {
        let key = ids::key(&started.id);
        let pending_failure = self.app.faults.on_new_deployment();
        let vanished = self.app.faults.on_new_operation();
        let timings = self.app.faults.timings();
        let op = store.start_operation(
            OperationKind::Deployment { key: key.clone() },
            &started.id,
            "Microsoft.Resources",
            if self.version.is_empty() {
                DEPLOYMENT_API_VERSION
            } else {
                &self.version
            },
            timings.deploy,
            vanished,
            now,
        );
        let op = match self.app.engine.is_some() {
            true => store.hand_to_engine(&op.id, started.scope).unwrap_or(op),
            false => op,
        };
        let deployment = Deployment {
            id: store
                .deployments
                .get(&key)
                .map(|d| d.id.clone())
                .unwrap_or(started.id),
            name: started.name.to_string(),
            state: DeploymentState::Running,
            operation: op.id.clone(),
            parameters: started.parameters.clone(),
            timestamp: Utc::now(),
            correlation_id: uuid::Uuid::new_v4().to_string(),
            planned: started.evaluation.resources,
            outputs: started.evaluation.outputs,
            output_resources: Vec::new(),
            pending_failure,
        };
        let answer = deployment.body(true);
        if let Some(backend) = self.app.engine.clone() {
            self.spawn_engine_run(backend, &deployment, &key, timings);
        }
        store.deployments.insert(key, deployment);
        // A zero duration finishes now; the answer still says Accepted.
        store.advance(now);
        operation_started(
            StatusCode::CREATED,
            Some(answer),
            &self.origin,
            &op,
            timings.retry_after_secs,
        )
    }

    /// Run `deployment` (stored under `key`) on the deployment engine in
    /// the background, until it finishes or its operation is canceled.
    fn spawn_engine_run(
        &self,
        backend: Arc<crate::engine::Backend>,
        deployment: &Deployment,
        key: &str,
        timings: Timings,
    ) {
        let (app, finished) = (self.app.clone(), self.app.clone());
        let (key, operation, running) = (
            key.to_string(),
            deployment.operation.clone(),
            deployment.operation.clone(),
        );
        tokio::spawn(crate::engine::run(
            backend,
            deployment.planned.clone(),
            deployment.pending_failure.clone(),
            timings.deploy,
            move || !app.lock().engine_operation_running(&running),
            move |outcome| {
                finished
                    .lock()
                    .finish_engine_deployment(&key, &operation, outcome)
            },
        ));
    }

    fn get_deployment(&self, scope: &str, name: &str) -> Response {
        let id = format!("{scope}/providers/Microsoft.Resources/deployments/{name}");
        let store = self.app.lock();
        match store.deployments.get(&ids::key(&id)) {
            Some(deployment) => json_response(StatusCode::OK, &deployment.body(false)),
            None => error(
                StatusCode::NOT_FOUND,
                codes::DEPLOYMENT_NOT_FOUND,
                format!("Deployment '{name}' could not be found in scope '{scope}'"),
            ),
        }
    }

    fn delete_deployment(&self, scope: &str, name: &str) -> Response {
        let key = ids::key(&format!(
            "{scope}/providers/Microsoft.Resources/deployments/{name}"
        ));
        let mut store = self.app.lock();
        match store.deployments.get(&key) {
            None => empty(StatusCode::NO_CONTENT),
            Some(deployment) if deployment.is_running() => error(
                StatusCode::CONFLICT,
                codes::DEPLOYMENT_ACTIVE,
                format!("The deployment '{name}' is still running; cancel it first"),
            ),
            Some(_) => {
                store.deployments.remove(&key);
                empty(StatusCode::OK)
            }
        }
    }

    fn cancel_deployment(&self, scope: &str, name: &str) -> Response {
        let key = ids::key(&format!(
            "{scope}/providers/Microsoft.Resources/deployments/{name}"
        ));
        let mut store = self.app.lock();
        if !store.deployments.contains_key(&key) {
            return error(
                StatusCode::NOT_FOUND,
                codes::DEPLOYMENT_NOT_FOUND,
                format!("Deployment '{name}' could not be found in scope '{scope}'"),
            );
        }
        if store.cancel_deployment(&key, Utc::now()) {
            empty(StatusCode::NO_CONTENT)
        } else {
            error(
                StatusCode::CONFLICT,
                codes::CONFLICT,
                format!("The deployment '{name}' is not running and cannot be canceled"),
            )
        }
    }

    // -- operations

    fn get_operation(&self, url: OperationUrl, id: &str) -> Response {
        let store = self.app.lock();
        let not_found = || {
            error(
                StatusCode::NOT_FOUND,
                codes::NOT_FOUND,
                format!("The operation '{id}' was not found"),
            )
        };
        let Some(op) = store.operations.get(id) else {
            return not_found();
        };
        if op.vanished || self.app.faults.all_operations_vanished() {
            return not_found();
        }
        let retry_after = self.app.faults.timings().retry_after_secs.to_string();
        match url {
            OperationUrl::Status => {
                let response = json_response(StatusCode::OK, &op.body());
                if op.status == OperationStatus::InProgress {
                    with_header(response, "retry-after", &retry_after)
                } else {
                    response
                }
            }
            OperationUrl::Result => {
                if op.status == OperationStatus::InProgress {
                    let response = with_header(
                        empty(StatusCode::ACCEPTED),
                        "location",
                        &self
                            .origin
                            .url(&op.path("operationResults"), &op.api_version),
                    );
                    return with_header(response, "retry-after", &retry_after);
                }
                match &op.kind {
                    OperationKind::Deployment { key } => match store.deployments.get(key) {
                        Some(deployment) => json_response(StatusCode::OK, &deployment.body(false)),
                        None => not_found(),
                    },
                    OperationKind::Delete { .. } => match &op.status {
                        OperationStatus::Failed(error) => {
                            error_response(StatusCode::INTERNAL_SERVER_ERROR, error.clone())
                        }
                        _ => empty(StatusCode::NO_CONTENT),
                    },
                }
            }
        }
    }

    // -- resources

    fn not_found(id: &str) -> Response {
        error(
            StatusCode::NOT_FOUND,
            codes::NOT_FOUND,
            format!("the resource with id '{id}' was not found"),
        )
    }

    fn list_resources(&self, scope: &str, resource_type: &str) -> Response {
        let store = self.app.lock();
        if ids::resource_group_of(scope).is_some() && !store.group_exists(scope) {
            return self.group_missing(scope);
        }
        let prefix = format!("{}/providers/", ids::key(scope));
        let wanted = resource_type.to_ascii_lowercase();
        let items: Vec<Value> = store
            .resources
            .iter()
            .filter(|(key, _)| key.starts_with(&prefix))
            .filter(|(key, _)| {
                ids::type_of(key).is_some_and(|(_, t)| t.eq_ignore_ascii_case(&wanted))
            })
            .map(|(_, r)| r.body.clone())
            .collect();
        json_response(StatusCode::OK, &json!({ "value": items }))
    }

    fn get_resource(&self, id: &str) -> Response {
        let store = self.app.lock();
        match store.resources.get(&ids::key(id)) {
            Some(resource) => {
                let mut body = resource.body.clone();
                if resource.deleting.is_some()
                    && let Some(properties) =
                        body.get_mut("properties").and_then(Value::as_object_mut)
                {
                    properties.insert("provisioningState".into(), json!("Deleting"));
                }
                json_response(StatusCode::OK, &body)
            }
            None => Self::not_found(id),
        }
    }

    fn put_resource(&self, id: &str, body: &Bytes) -> Response {
        let body = match parse_body(body) {
            Ok(body) => body,
            Err(problem) => return error_response(StatusCode::BAD_REQUEST, problem),
        };
        let mut store = self.app.lock();
        if ids::resource_group_of(id).is_some() && !store.group_exists(id) {
            return self.group_missing(id);
        }
        let Some((_, resource_type)) = ids::type_of(id) else {
            return error(
                StatusCode::BAD_REQUEST,
                codes::INVALID_RESOURCE_ID,
                format!("'{id}' is not a resource id"),
            );
        };
        let key = ids::key(id);
        if store
            .resources
            .get(&key)
            .is_some_and(|r| r.deleting.is_some())
        {
            return error(
                StatusCode::CONFLICT,
                codes::CONFLICT,
                format!("The resource '{id}' is being deleted"),
            );
        }
        let name = id.rsplit('/').next().unwrap_or_default().to_string();
        let resource = crate::arm::EvaluatedResource {
            symbolic_name: name.clone(),
            id: store
                .resources
                .get(&key)
                .and_then(|r| r.body.get("id"))
                .and_then(Value::as_str)
                .unwrap_or(id)
                .to_string(),
            name,
            resource_type,
            api_version: Some(self.version.clone()),
            existing: false,
            body,
            depends_on: Vec::new(),
            module_path: Vec::new(),
        };
        let created = !store.resources.contains_key(&key);
        let previous = store.resources.get(&key).map(|r| r.body.clone());
        let stored = crate::store::stored_body(&resource, previous.as_ref(), Utc::now());
        store.resources.insert(
            key,
            StoredResource {
                body: stored.clone(),
                deleting: None,
            },
        );
        let status = if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        json_response(status, &stored)
    }

    fn delete_resource(&self, id: &str) -> Response {
        let now = Instant::now();
        let mut store = self.app.lock();
        store.stats.deletes += 1;
        *store.stats.deletes_by_id.entry(ids::key(id)).or_default() += 1;
        store.stats.deleted.push(ids::key(id));
        let key = ids::key(id);
        let Some(resource) = store.resources.get(&key) else {
            return Self::not_found(id);
        };
        if self.app.faults.on_delete_request() {
            return error_response(
                StatusCode::CONFLICT,
                ArmError::new(
                    "Conflict",
                    format!("{id} cannot be deleted now (refused by the Radius simulator)"),
                ),
            );
        }
        let retry_after = self.app.faults.timings().retry_after_secs;
        if let Some(op) = resource
            .deleting
            .as_ref()
            .and_then(|op| store.operations.get(op))
        {
            return operation_started(StatusCode::ACCEPTED, None, &self.origin, op, retry_after);
        }
        let stored_id = resource
            .body
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or(id)
            .to_string();
        let timings = self.app.faults.timings();
        if timings.delete.is_zero() {
            store.resources.remove(&key);
            return empty(StatusCode::OK);
        }
        let namespace = ids::type_of(&stored_id)
            .map(|(ns, _)| ns)
            .unwrap_or_else(|| "System.Resources".into());
        let vanished = self.app.faults.on_new_operation();
        let failure = self.app.faults.on_new_deletion();
        let op = store.start_operation(
            OperationKind::Delete {
                key: key.clone(),
                failure,
            },
            &stored_id,
            &namespace,
            &self.version,
            timings.delete,
            vanished,
            now,
        );
        if let Some(resource) = store.resources.get_mut(&key) {
            resource.deleting = Some(op.id.clone());
        }
        operation_started(StatusCode::ACCEPTED, None, &self.origin, &op, retry_after)
    }
}

/// The accepted shape of a deployment PUT body.
struct DeploymentBody<'a> {
    template: &'a Value,
    parameters: &'a Value,
    provider_config: Option<&'a Value>,
}

static EMPTY_PARAMETERS: Value = Value::Null;

impl<'a> DeploymentBody<'a> {
    fn parse(body: &'a Value) -> Result<Self, ArmError> {
        let properties = body
            .get("properties")
            .and_then(Value::as_object)
            .ok_or_else(|| {
                ArmError::invalid_request_content("The request content has no 'properties' object")
            })?;
        if properties.contains_key("templateLink") {
            return Err(ArmError::invalid_request_content(
                "'properties.templateLink' is not supported by the Radius simulator; send 'properties.template'",
            ));
        }
        let template = properties.get("template").ok_or_else(|| {
            ArmError::invalid_request_content("The request content has no 'properties.template'")
        })?;
        if !template.is_object() {
            return Err(ArmError::invalid_template(format!(
                "'properties.template' must be a JSON object, not {}",
                crate::arm::expr_type_name(template)
            )));
        }
        let parameters = properties.get("parameters").unwrap_or(&EMPTY_PARAMETERS);
        if !(parameters.is_object() || parameters.is_null()) {
            return Err(ArmError::invalid_request_content(format!(
                "'properties.parameters' must be an ARM parameters object ({{\"name\": {{\"value\": ...}}}}), not {}",
                crate::arm::expr_type_name(parameters)
            )));
        }
        let provider_config = properties
            .get("providerConfig")
            .or_else(|| properties.get("providerconfig"))
            .or_else(|| {
                properties
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("providerConfig"))
                    .map(|(_, v)| v)
            })
            .filter(|v| !v.is_null());
        if let Some(config) = provider_config
            && !config.is_object()
        {
            return Err(ArmError::invalid_request_content(
                "'properties.providerConfig' must be a JSON object",
            ));
        }
        match properties.get("mode") {
            None | Some(Value::Null) => {}
            Some(Value::String(mode)) if mode.eq_ignore_ascii_case("Incremental") => {}
            Some(other) => {
                return Err(ArmError::invalid_request_content(format!(
                    "The deployment mode {other} is not supported; Radius deploys in 'Incremental' mode"
                )));
            }
        }
        Ok(Self {
            template,
            parameters,
            provider_config,
        })
    }

    /// `providerConfig.radius.value.scope`: where Radius resources go.
    fn radius_scope(&self) -> Result<Option<String>, ArmError> {
        let Some(scope) = self
            .provider_config
            .and_then(|c| c.get("radius"))
            .and_then(|r| r.get("value"))
            .and_then(|v| v.get("scope"))
        else {
            return Ok(None);
        };
        let scope = scope.as_str().ok_or_else(|| {
            ArmError::invalid_request_content(
                "'providerConfig.radius.value.scope' must be a string",
            )
        })?;
        let scope = ids::normalize_scope(scope).map_err(ArmError::invalid_request_content)?;
        if ids::resource_group_of(&scope).is_none() {
            return Err(ArmError::invalid_request_content(format!(
                "'providerConfig.radius.value.scope' ('{scope}') must be a resource group scope"
            )));
        }
        Ok(Some(scope))
    }
}
