//! Watches: the initial events or the changes since a resource version,
//! then each change as it happens, as JSON lines.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::SinkExt;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::{ApiResult, AppState, Target, filter_from, served, served_as_stored, served_json};
use crate::error::ApiError;
use crate::faults::FaultsHandle;
use crate::kinds::Kind;
use crate::selectors::Filter;
use crate::store::{Change, ChangeType, Store};
use crate::table::{self, IncludeObject};

/// One watch event line.
fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = json!({"type": kind, "object": object}).to_string();
    line.push('\n');
    Bytes::from(line)
}

/// What a watch request asks for besides its selectors.
struct WatchOptions {
    /// `allowWatchBookmarks`: a BOOKMARK event every second.
    bookmarks: bool,
    /// `sendInitialEvents`: with bookmarks and no resource version, a
    /// BOOKMARK marks the end of the initial ADDED events.
    initial_events: bool,
    /// `timeoutSeconds`: when the server ends the watch.
    timeout: Option<Duration>,
    /// `resourceVersion` to resume after; `None` starts with a list.
    from: Option<u64>,
}

impl WatchOptions {
    fn parse(query: &HashMap<String, String>) -> Result<Self, ApiError> {
        let from: Option<u64> =
            match query.get("resourceVersion").map(String::as_str) {
                None | Some("") | Some("0") => None,
                Some(text) => Some(text.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid resource version: {text}"))
                })?),
            };
        Ok(WatchOptions {
            bookmarks: query
                .get("allowWatchBookmarks")
                .is_some_and(|b| b == "true"),
            initial_events: query.get("sendInitialEvents").is_some_and(|b| b == "true"),
            timeout: query
                .get("timeoutSeconds")
                .and_then(|t| t.parse::<u64>().ok())
                .map(Duration::from_secs),
            from,
        })
    }
}

/// One watch stream being served: what it shows and what ends it.
struct WatchStream {
    shape: Shape,
    /// The namespace watched; `None` for all or for a cluster-scoped kind.
    namespace: Option<String>,
    filter: Filter,
    bookmarks: bool,
    timeout: Option<Duration>,
    subscription: broadcast::Receiver<Arc<Change>>,
    /// The resource version the client has seen everything up to.
    last_rv: u64,
    faults: FaultsHandle,
    drop_signal: tokio::sync::watch::Receiver<u64>,
    closing: tokio::sync::watch::Receiver<bool>,
}

pub(super) fn watch(
    state: &AppState,
    target: &Target,
    query: &HashMap<String, String>,
) -> ApiResult {
    let filter = filter_from(target, query)?;
    let options = WatchOptions::parse(query)?;
    let shape = Shape {
        kind: target.kind.clone(),
        storage: target.storage.clone(),
        table: target.table,
    };
    let namespace = if shape.kind.namespaced {
        target.namespace.clone()
    } else {
        None
    };
    let (subscription, mut backlog, last_rv) = {
        let store = state.lock_store();
        let subscription = store.events.subscribe();
        match watch_backlog(&store, &shape, namespace.as_deref(), &filter, options.from) {
            Ok((backlog, last_rv)) => (subscription, backlog, last_rv),
            Err(too_old) => {
                return Ok(stream_response(futures::stream::iter(vec![Ok::<
                    _,
                    Infallible,
                >(
                    too_old
                )])));
            }
        }
    };
    if options.initial_events && options.bookmarks && options.from.is_none() {
        let kind = &shape.kind;
        backlog.push(event_line("BOOKMARK", &json!({"kind": kind.kind, "apiVersion": kind.api_version(),
            "metadata": {"resourceVersion": last_rv.to_string(), "annotations": {"k8s.io/initial-events-end": "true"}}})));
    }
    let (tx, rx) = futures::channel::mpsc::channel::<Result<Bytes, Infallible>>(64);
    let stream = WatchStream {
        shape,
        namespace,
        filter,
        bookmarks: options.bookmarks,
        timeout: options.timeout,
        subscription,
        last_rv,
        faults: state.faults.clone(),
        drop_signal: state.faults.drop_watches.subscribe(),
        closing: state.closing.subscribe(),
    };
    tokio::spawn(stream.run(tx, backlog));
    Ok(stream_response(rx))
}

/// The events a watch starts with, and the resource version they bring the
/// client to: every matching object as ADDED without a resource version
/// `from`, else the changes after it. `Err` is the ERROR event for a `from`
/// older than the history kept.
fn watch_backlog(
    store: &Store,
    shape: &Shape,
    namespace: Option<&str>,
    filter: &Filter,
    from: Option<u64>,
) -> Result<(Vec<Bytes>, u64), Bytes> {
    let now = store.resource_version();
    let Some(rv) = from else {
        let items = store.list(&shape.storage, namespace, filter);
        let lines: Vec<Bytes> = items.iter().map(|(_, o)| shape.line("ADDED", o)).collect();
        return Ok((lines, now));
    };
    match store.changes_since(rv) {
        None => {
            let error = ApiError::gone(format!(
                "too old resource version: {rv} ({})",
                store.oldest_rv()
            ));
            Err(event_line("ERROR", &error.status()))
        }
        Some(changes) => {
            let lines = changes
                .iter()
                .filter_map(|c| translate(c, shape, namespace, filter))
                .collect();
            Ok((lines, now.max(rv)))
        }
    }
}

impl WatchStream {
    /// Send `backlog`, then each change as it happens (late by the injected
    /// watch lag), and bookmarks if asked, until the timeout, a dropped
    /// watch, the server closing or the client going away.
    async fn run(
        mut self,
        mut tx: futures::channel::mpsc::Sender<Result<Bytes, Infallible>>,
        backlog: Vec<Bytes>,
    ) {
        for line in backlog {
            if tx.send(Ok(line)).await.is_err() {
                return;
            }
        }
        let deadline = tokio::time::sleep(
            self.timeout
                .unwrap_or(Duration::from_secs(60 * 60 * 24 * 365)),
        );
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(Duration::from_secs(1));
        let kind = self.shape.kind.clone();
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = self.drop_signal.changed() => return,
                _ = async { self.closing.wait_for(|closing| *closing).await.is_ok() } => return,
                _ = ticker.tick(), if self.bookmarks => {
                    let line = event_line("BOOKMARK", &json!({"kind": kind.kind, "apiVersion": kind.api_version(),
                        "metadata": {"resourceVersion": self.last_rv.to_string()}}));
                    if tx.send(Ok(line)).await.is_err() {
                        return;
                    }
                }
                change = self.subscription.recv() => {
                    let change = match change {
                        Ok(change) => change,
                        Err(_) => return, // lagged or closed: the client re-watches
                    };
                    if change.rv <= self.last_rv {
                        continue;
                    }
                    self.last_rv = change.rv;
                    if !self.wait_out_lag(&change).await {
                        return;
                    }
                    if let Some(line) = translate(&change, &self.shape, self.namespace.as_deref(), &self.filter)
                        && tx.send(Ok(line)).await.is_err() {
                            return;
                        }
                }
            }
        }
    }

    /// Hold `change` back by the injected watch lag; false if the watch is
    /// dropped meanwhile. A watch dropped while its changes lag delivers
    /// none of them: the client only learns of them by a list.
    async fn wait_out_lag(&mut self, change: &Change) -> bool {
        let lag = self.faults.current().watch_lag;
        if lag.is_zero() {
            return true;
        }
        tokio::select! {
            _ = tokio::time::sleep_until((change.at + lag).into()) => true,
            _ = self.drop_signal.changed() => false,
        }
    }
}

fn stream_response<S>(stream: S) -> Response
where
    S: futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
{
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// How one watch stream shows objects: the addressed kind's shape, or a
/// one-row Table when kubectl asked for tables.
struct Shape {
    kind: Kind,
    storage: Kind,
    table: Option<IncludeObject>,
}

impl Shape {
    fn line(&self, event: &str, stored: &Value) -> Bytes {
        match self.table {
            Some(include) => {
                let rv = stored
                    .pointer("/metadata/resourceVersion")
                    .cloned()
                    .unwrap_or(json!(""));
                event_line(
                    event,
                    &table::table(
                        &self.kind,
                        std::slice::from_ref(stored),
                        json!({"resourceVersion": rv}),
                        include,
                        |o| served(&self.kind, o),
                    ),
                )
            }
            None => watch_line(event, &served_json(&self.kind, stored)),
        }
    }

    /// Like [`Shape::line`], reusing the change's serialised object.
    fn change_line(&self, event: &str, change: &Change) -> Bytes {
        if self.table.is_none() && served_as_stored(&self.kind, &change.object) {
            return watch_line(event, change.wire.get_or_init(|| change.object.to_string()));
        }
        self.line(event, &change.object)
    }
}

fn watch_line(event: &str, object_json: &str) -> Bytes {
    Bytes::from(format!(
        "{{\"type\":\"{event}\",\"object\":{object_json}}}\n"
    ))
}

/// A change as this watcher sees it, honouring selector transitions.
fn translate(
    change: &Change,
    shape: &Shape,
    namespace: Option<&str>,
    filter: &Filter,
) -> Option<Bytes> {
    if change.key.group != shape.storage.group || change.key.plural != shape.storage.plural {
        return None;
    }
    if namespace.is_some_and(|ns| change.key.namespace != ns) {
        return None;
    }
    let now = filter.matches(&change.object);
    let before = change.old.as_ref().is_some_and(|old| filter.matches(old));
    let event = match change.change {
        ChangeType::Added if now => "ADDED",
        ChangeType::Modified if now && before => "MODIFIED",
        ChangeType::Modified if now => "ADDED",
        ChangeType::Modified if before => "DELETED",
        ChangeType::Deleted if now || before => "DELETED",
        _ => return None,
    };
    Some(shape.change_line(event, change))
}
