//! The controller's Kubernetes client: kube's default stack with one more
//! layer that counts every request by verb, resource and status code
//! (`radwasm_kube_requests_total`), the way controller-runtime's
//! `rest_client_requests_total` does, but with the verb and resource a
//! reader needs to see which call a change saves; and the reader of
//! ConfigMaps and Secrets the policy sources use ([`KubeReader`]).

use std::sync::Arc;
use std::task::{Context, Poll};

use futures::FutureExt;
use futures::future::Map;
use http::{Method, Request, Response};
use kube::client::ClientBuilder;
use tower::{Layer, Service};

use crate::metrics::Metrics;

mod cluster_reader;
pub mod events;
mod throttle;
pub use cluster_reader::KubeReader;
pub use throttle::Throttle;

/// A client for `config` whose requests are counted in `metrics` and, with
/// `throttle`, limited in rate (a request waits for its turn before it is
/// counted and sent); sent
/// with radwasm's `User-Agent` unless `config` names one: `managedFields`
/// then say `radwasm` owns the finalizers, annotations and status it
/// writes, and a server-side apply that conflicts with them names it
/// (kube sends no `User-Agent`, which the API server records as `unknown`).
pub fn counted_client(
    mut config: kube::Config,
    metrics: Arc<Metrics>,
    throttle: Option<Throttle>,
) -> kube::Result<kube::Client> {
    if !config
        .headers
        .iter()
        .any(|(name, _)| name == http::header::USER_AGENT)
    {
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_static(crate::USER_AGENT),
        ));
    }
    let builder = ClientBuilder::try_from(config)?.with_layer(&CountRequests { metrics });
    Ok(match throttle {
        Some(throttle) => builder.with_layer(&throttle).build(),
        None => builder.build(),
    })
}

/// The layer: wraps kube's service in [`Counted`].
#[derive(Clone)]
struct CountRequests {
    metrics: Arc<Metrics>,
}

impl<S> Layer<S> for CountRequests {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

#[derive(Clone)]
struct Counted<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

type Record<R, E> = Box<dyn FnOnce(Result<R, E>) -> Result<R, E> + Send>;

impl<S, B, RB> Service<Request<B>> for Counted<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Error: 'static,
    RB: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Map<S::Future, Record<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let info = RequestInfo::of(request.method(), request.uri());
        let metrics = self.metrics.clone();
        // A watch is counted when its response starts, as the API server
        // counts it: its events are not requests.
        let record: Record<S::Response, S::Error> = Box::new(move |result| {
            let code = result
                .as_ref()
                .map_or(0, |response| response.status().as_u16());
            metrics.count_kube_request(info.verb, info.resource, code);
            result
        });
        self.inner.call(request).map(record)
    }
}

/// What a request does, read from its method and path as the API server's
/// request info reads it: `/api/v1/...` or `/apis/{group}/{version}/...`,
/// then an optional `namespaces/{ns}/`, the resource, the name and a
/// subresource.
#[derive(Debug, PartialEq, Eq)]
pub struct RequestInfo {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, or the lower-case method for anything else.
    pub verb: &'static str,
    /// The resource, with its subresource after a `/`
    /// (`deploymenttemplates/status`); `other` for a path that is not a
    /// resource (discovery, `/version`).
    pub resource: String,
}

impl RequestInfo {
    pub fn of(method: &Method, uri: &http::Uri) -> Self {
        let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
        let rest: &[&str] = match segments.as_slice() {
            ["api", _version, rest @ ..] => rest,
            ["apis", _group, _version, rest @ ..] => rest,
            _ => &[],
        };
        // `namespaces/{ns}/{resource}...` is namespaced; `namespaces` and
        // `namespaces/{name}` are the namespaces themselves.
        let rest = match rest {
            ["namespaces", _namespace, resource, rest @ ..] => std::iter::once(*resource)
                .chain(rest.iter().copied())
                .collect(),
            rest => rest.to_vec(),
        };
        let Some((resource, named)) = rest.split_first() else {
            return Self {
                verb: method_verb(method),
                resource: "other".to_string(),
            };
        };
        let collection = named.is_empty();
        let query = uri.query().unwrap_or("");
        let watching = query
            .split('&')
            .any(|pair| pair == "watch=true" || pair == "watch=1");
        let verb = match *method {
            Method::GET if watching => "watch",
            Method::GET if collection => "list",
            Method::GET => "get",
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE if collection => "deletecollection",
            Method::DELETE => "delete",
            ref other => method_verb(other),
        };
        let resource = match named.get(1) {
            Some(subresource) => format!("{resource}/{subresource}"),
            None => (*resource).to_string(),
        };
        Self { verb, resource }
    }
}

fn method_verb(method: &Method) -> &'static str {
    match *method {
        Method::GET => "get",
        Method::POST => "post",
        Method::PUT => "put",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        Method::HEAD => "head",
        _ => "other",
    }
}

/// A Kubernetes client error as a person reads it: the API server's message
/// (and the field causes it lists, one per line), not a debug dump.
pub fn describe_kube_error(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            let mut text = format!("{} ({})", status.message, status.code);
            if let Some(details) = &status.details {
                for cause in &details.causes {
                    text.push_str(&format!(
                        "\n  {}: {}",
                        if cause.field.is_empty() {
                            "-"
                        } else {
                            &cause.field
                        },
                        cause.message
                    ));
                }
            }
            text
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: Method, uri: &str) -> (&'static str, String) {
        let info = RequestInfo::of(&method, &uri.parse().unwrap());
        (info.verb, info.resource)
    }

    #[test]
    fn requests_are_named_by_verb_and_resource() {
        let base = "/apis/radapp.io/v1alpha3/namespaces/default/deploymenttemplates";
        assert_eq!(
            info(Method::GET, base),
            ("list", "deploymenttemplates".into())
        );
        assert_eq!(
            info(Method::GET, &format!("{base}?watch=true&resourceVersion=5")),
            ("watch", "deploymenttemplates".into())
        );
        assert_eq!(
            info(
                Method::GET,
                "/apis/radapp.io/v1alpha3/deploymentresources?watch=1"
            ),
            ("watch", "deploymentresources".into())
        );
        assert_eq!(
            info(Method::GET, &format!("{base}/app")),
            ("get", "deploymenttemplates".into())
        );
        assert_eq!(
            info(Method::PATCH, &format!("{base}/app/status")),
            ("patch", "deploymenttemplates/status".into())
        );
        assert_eq!(
            info(Method::POST, "/api/v1/namespaces/default/events"),
            ("create", "events".into())
        );
        assert_eq!(
            info(
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/radius-system/leases/radwasm"
            ),
            ("update", "leases".into())
        );
        assert_eq!(
            info(Method::DELETE, &format!("{base}/app")),
            ("delete", "deploymenttemplates".into())
        );
        assert_eq!(
            info(Method::DELETE, base),
            ("deletecollection", "deploymenttemplates".into())
        );
        // The namespaces themselves, and paths that are not resources.
        assert_eq!(
            info(Method::GET, "/api/v1/namespaces"),
            ("list", "namespaces".into())
        );
        assert_eq!(
            info(Method::GET, "/api/v1/namespaces/default"),
            ("get", "namespaces".into())
        );
        assert_eq!(info(Method::GET, "/version"), ("get", "other".into()));
        assert_eq!(info(Method::GET, "/apis"), ("get", "other".into()));
    }
}
