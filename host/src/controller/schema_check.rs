//! Is the installed schema of our two CustomResourceDefinitions one the
//! controller can work with? The API server drops every field a CRD's
//! schema does not declare. Radius's own CRDs (put back by an upgrade of
//! Radius's Helm chart, say) have the same names as ours but lack
//! `status.conditions`, `status.deployments` and more: on them the
//! controller would go on reconciling while its `Ready` condition, its
//! messages and its failure history silently vanish (the deployment
//! records survive in an annotation: `deployment_records`).
//!
//! Each CRD is watched by name, at the start and whenever it changes. When
//! its schema lacks fields the controller writes: one `ERROR` line naming
//! the CRD, the fields and the fix; `radwasm_crd_schema_missing_fields{crd}`
//! counts them; `/readyz` answers 503 with the same reason; and a Warning
//! Event is recorded on the CRD (cluster-scoped, so it lands in the
//! `default` namespace). All of it is withdrawn once the schema is whole.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::runtime::events::{Event, EventType};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, CustomResourceExt, ResourceExt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::crd::{DeploymentResource, DeploymentTemplate, VERSION};
use crate::crd_schema;
use crate::metrics::{Metrics, Readiness};

use crate::kube_client::events::EventRecorders;

/// The fix, as the log line, `/readyz` and the Event say it.
pub const FIX: &str = "apply radwasm's CRDs: `radwasm crds --group radapp.io | kubectl apply --server-side --force-conflicts -f -` (or `kubectl apply --server-side --force-conflicts -f deploy/crds/`)";

/// Our CRD's name and its schema of `v1alpha3`, for both kinds.
fn ours() -> [(String, Value); 2] {
    [DeploymentTemplate::crd(), DeploymentResource::crd()].map(|crd| {
        let name = crd.name_any();
        let json = serde_json::to_value(&crd).unwrap_or_default();
        let schema = crd_schema::version_schema(&json, VERSION).unwrap_or_default();
        (name, schema)
    })
}

/// The fields the controller writes that the installed CRD lacks, topmost
/// first, and whether it serves our version at all (when it does not, or is
/// not installed, that is everything: `spec` and `status`).
pub fn check(ours: &Value, installed: Option<&CustomResourceDefinition>) -> (bool, Vec<String>) {
    let schema = installed
        .and_then(|crd| serde_json::to_value(crd).ok())
        .and_then(|json| crd_schema::version_schema(&json, VERSION));
    let missing = crd_schema::missing(ours, schema.as_ref().unwrap_or(&Value::Null));
    (schema.is_some(), missing)
}

/// The one-line report of a CRD that lacks `missing`.
pub fn report(crd: &str, serves: bool, missing: &[String]) -> String {
    if serves {
        format!(
            "the installed CRD {crd} lacks fields the controller writes, so the API server drops them \
             (no Ready condition, so `kubectl wait --for=condition=Ready` never returns; no failure history or message): {}; {FIX}",
            missing.join(", ")
        )
    } else {
        format!("the CRD {crd} is not installed (or does not serve {VERSION}); {FIX}")
    }
}

/// Watch both CRDs until `shutdown`, reporting as the module says.
pub fn spawn(
    client: Client,
    metrics: Arc<Metrics>,
    readiness: Readiness,
    recorders: EventRecorders,
    shutdown: CancellationToken,
) {
    for (name, schema) in ours() {
        let watch = watch_one(
            client.clone(),
            name,
            schema,
            metrics.clone(),
            readiness.clone(),
            recorders.clone(),
        );
        let stop = shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = watch => {}
                () = stop.cancelled() => {}
            }
        });
    }
}

async fn watch_one(
    client: Client,
    name: String,
    ours: Value,
    metrics: Arc<Metrics>,
    readiness: Readiness,
    recorders: EventRecorders,
) {
    // By name: RBAC grants list and watch of these two CRDs only
    // (`resourceNames`), which the API server matches on this selector.
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = std::pin::pin!(watcher(crds, config).default_backoff());
    let key = format!("crd:{name}");
    // What was last reported: `None` before the first look.
    let mut reported: Option<Vec<String>> = None;
    let mut listed: Option<CustomResourceDefinition> = None;
    let mut warned = false;
    while let Some(event) = events.next().await {
        let seen = match event {
            Ok(watcher::Event::Apply(crd)) => Some(crd),
            Ok(watcher::Event::Delete(_)) => None,
            Ok(watcher::Event::Init) => {
                listed = None;
                continue;
            }
            Ok(watcher::Event::InitApply(crd)) => {
                listed = Some(crd);
                continue;
            }
            Ok(watcher::Event::InitDone) => listed.take(),
            Err(error) => {
                if !warned {
                    warned = true;
                    tracing::warn!(
                        crd = %name,
                        %error,
                        "cannot watch the CRD, so its schema is not checked (deploy/rbac.yaml grants list and watch of it)"
                    );
                }
                continue;
            }
        };
        warned = false;
        let (serves, missing) = check(&ours, seen.as_ref());
        metrics.set_crd_schema_missing_fields(&name, missing.len());
        if reported.as_ref() == Some(&missing) {
            continue;
        }
        let first = reported.is_none();
        reported = Some(missing.clone());
        if missing.is_empty() {
            readiness.clear_problem(&key);
            if !first {
                tracing::info!(crd = %name, "the installed CRD now keeps every field the controller writes");
                publish(
                    &recorders,
                    seen.as_ref(),
                    EventType::Normal,
                    "SchemaComplete",
                    "the CRD keeps every field the controller writes".to_string(),
                )
                .await;
            }
            continue;
        }
        let text = report(&name, serves, &missing);
        readiness.set_problem(&key, text.clone());
        tracing::error!(crd = %name, missing = %missing.join(","), "{text}");
        publish(
            &recorders,
            seen.as_ref(),
            EventType::Warning,
            "SchemaMissingFields",
            text,
        )
        .await;
    }
}

/// An Event on the CRD, if there is one to put it on.
async fn publish(
    recorders: &EventRecorders,
    crd: Option<&CustomResourceDefinition>,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let Some(crd) = crd else {
        return;
    };
    let reference = ObjectReference {
        api_version: Some("apiextensions.k8s.io/v1".to_string()),
        kind: Some("CustomResourceDefinition".to_string()),
        name: crd.metadata.name.clone(),
        uid: crd.metadata.uid.clone(),
        resource_version: crd.metadata.resource_version.clone(),
        ..Default::default()
    };
    let event = Event {
        type_,
        reason: reason.to_string(),
        // The API server refuses a note over 1 kB.
        note: Some(note.chars().take(1000).collect()),
        action: "CheckSchema".to_string(),
        secondary: None,
    };
    if let Err(error) = recorders.publish(&event, &reference).await {
        tracing::debug!(%error, "recording the CRD's Event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CRD of `name` whose `v1alpha3` schema is `schema`.
    fn installed(name: &str, schema: Value) -> CustomResourceDefinition {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {
                "group": "radapp.io",
                "names": {"kind": "X", "plural": "x"},
                "scope": "Namespaced",
                "versions": [{"name": "v1alpha3", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": schema}}],
            },
        }))
        .expect("a CRD")
    }

    #[test]
    fn our_own_crds_lack_nothing_and_a_radius_shaped_one_lacks_what_we_write() {
        for (name, schema) in ours() {
            let crd = installed(&name, schema.clone());
            assert_eq!(check(&schema, Some(&crd)), (true, Vec::new()), "{name}");
        }
        let [(template, ours_template), _] = ours();
        // A schema in the shape of Radius's (a few fields of its own).
        let radius = installed(
            &template,
            serde_json::json!({"type": "object", "properties": {
                "spec": {"type": "object", "properties": {
                    "template": {"type": "string"},
                    "parameters": {"type": "object", "additionalProperties": {"type": "string"}},
                    "providerConfig": {"type": "string"},
                    "repository": {"type": "string"},
                }},
                "status": {"type": "object", "properties": {
                    "phrase": {"type": "string"},
                    "statusHash": {"type": "string"},
                }},
            }}),
        );
        let (serves, missing) = check(&ours_template, Some(&radius));
        assert!(serves);
        for field in ["status.conditions", "status.deployments", "status.message"] {
            assert!(missing.iter().any(|m| m == field), "{field} in {missing:?}");
        }
        assert!(
            !missing.iter().any(|m| m.starts_with("spec")),
            "{missing:?}"
        );
        assert!(!missing.iter().any(|m| m == "status.phrase"), "{missing:?}");
        let text = report(&template, true, &missing);
        assert!(text.contains("deploymenttemplates.radapp.io"), "{text}");
        assert!(text.contains("status.conditions"), "{text}");
        assert!(text.contains("kubectl apply"), "{text}");
        // Not installed: everything.
        let none = check(&ours_template, None);
        assert_eq!(
            none,
            (false, vec!["spec".to_string(), "status".to_string()])
        );
        assert!(report(&template, false, &none.1).contains("not installed"));
    }
}
