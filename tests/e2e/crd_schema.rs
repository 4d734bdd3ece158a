//! A `DeploymentTemplate` CRD whose schema lacks fields the controller
//! writes (as Radius's own does; an upgrade of Radius's Helm chart puts it
//! back) is reported while the controller runs: one `ERROR` line naming the
//! CRD, the fields and the fix, `radwasm_crd_schema_missing_fields`, a 503
//! from `/readyz` with the reason, and a Warning Event on the CRD. Putting
//! our CRD back withdraws all of it.
//!
//! Both API servers prune what a schema does not declare: the scenario
//! shows a template reaching `Ready` with its conditions dropped.
//!
//! On the real API server this changes a CRD every scenario on a cluster
//! shares, so the scenario starts a cluster of its own; that is why this
//! module is not run again by the real-server pass
//! (`control_plane::every_scenario_also_passes_on_the_real_api_server`):
//! each test picks its server itself.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, CustomResourceExt};
use radwasm::crd::{DeploymentTemplate, ProviderConfig};

use crate::harness::{Backend, SCOPE, System, app_template, metric_sum};
use crate::realkube::eventually;

const TEMPLATES: &str = "deploymenttemplates.radapp.io";
const GAUGE: &str = "radwasm_crd_schema_missing_fields{crd=\"deploymenttemplates.radapp.io\"}";

/// A `v1alpha3` schema in the shape of Radius's `DeploymentTemplate` CRD:
/// the fields it declares, none of the ones radwasm adds.
fn radius_shaped_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": {
                "template": {"type": "string"},
                "parameters": {"type": "object", "additionalProperties": {"type": "string"}},
                "providerConfig": {"type": "string"},
                "repository": {"type": "string"},
            }},
            "status": {"type": "object", "properties": {
                "observedGeneration": {"type": "integer"},
                "operation": {"type": "object", "properties": {
                    "operationKind": {"type": "string"},
                    "resumeToken": {"type": "string"},
                }},
                "outputResources": {"type": "array", "items": {"type": "string"}},
                "phrase": {"type": "string"},
                "statusHash": {"type": "string"},
            }},
        },
    })
}

/// Replace the installed template CRD's `v1alpha3` schema with `schema`.
async fn install_schema(client: &Client, schema: serde_json::Value) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = crds.get(TEMPLATES).await.expect("get the CRD");
    let version = crd
        .spec
        .versions
        .iter_mut()
        .find(|v| v.name == "v1alpha3")
        .expect("v1alpha3 served");
    version.schema = Some(
        serde_json::from_value(serde_json::json!({"openAPIV3Schema": schema})).expect("a schema"),
    );
    crds.replace(TEMPLATES, &PostParams::default(), &crd)
        .await
        .expect("replace the CRD's schema");
}

/// Our own schema of the template CRD, as `radwasm crds` writes it.
fn our_schema() -> serde_json::Value {
    let crd = serde_json::to_value(DeploymentTemplate::crd()).expect("our CRD");
    radwasm::crd_schema::version_schema(&crd, "v1alpha3").expect("v1alpha3")
}

/// `/readyz` of the (only) controller, once its code is `code`.
async fn readyz_becomes(system: &System, code: u16) -> String {
    let address = system.probe_addresses().remove(0);
    eventually(
        &format!("/readyz answers {code}"),
        Duration::from_secs(30),
        || async {
            let (got, body) = System::probe(&address, "/readyz").await;
            Ok((got == code).then_some(body))
        },
    )
    .await
}

/// The Warning Events recorded on the template CRD (in `default`, where
/// Events about cluster-scoped objects go).
async fn crd_events(client: &Client) -> Vec<(String, String)> {
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), "default");
    events
        .list(&ListParams::default())
        .await
        .map(|list| list.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|event| {
            event.regarding.as_ref().and_then(|r| r.kind.as_deref())
                == Some("CustomResourceDefinition")
                && event.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(TEMPLATES)
        })
        .map(|event| {
            (
                event.reason.unwrap_or_default(),
                event.note.unwrap_or_default(),
            )
        })
        .collect()
}

async fn scenario(system: &System) {
    system.wait_for_log("metrics and probes").await;
    // Our own CRDs: ready, nothing missing.
    readyz_becomes(system, 200).await;
    let metrics = system.metrics().await;
    assert!(metrics.contains(&format!("{GAUGE} 0")), "{metrics}");

    install_schema(&system.client, radius_shaped_schema()).await;
    system
        .wait_for_log(&format!("the installed CRD {TEMPLATES} lacks fields"))
        .await;
    let logs = system.all_logs();
    let line = logs
        .lines()
        .find(|line| line.contains("lacks fields"))
        .expect("the report");
    for part in [
        "ERROR",
        "status.conditions",
        "status.deployments",
        "status.message",
        "kubectl apply",
    ] {
        assert!(line.contains(part), "{part} in {line}");
    }
    assert!(!line.contains("spec."), "Radius's spec keeps ours: {line}");
    let body = readyz_becomes(system, 503).await;
    assert!(
        body.contains(TEMPLATES) && body.contains("status.conditions"),
        "{body}"
    );
    let missing = metric_sum(&system.metrics().await, GAUGE);
    assert!(missing >= 3.0, "{missing}");
    let events = eventually(
        "a Warning Event on the CRD",
        Duration::from_secs(30),
        || async {
            Ok(Some(crd_events(&system.client).await)
                .filter(|e| e.iter().any(|(reason, _)| reason == "SchemaMissingFields")))
        },
    )
    .await;
    assert!(
        events
            .iter()
            .any(|(_, note)| note.contains("status.conditions")),
        "{events:?}"
    );

    // What it costs: the API server drops the conditions the controller
    // writes, so the template is Ready by its phase only.
    // (In Radius's shape: its schema takes the provider config as text.)
    let mut app = app_template("app");
    app.spec.provider_config = serde_json::Value::String(
        serde_json::to_string(&ProviderConfig::radius(SCOPE)).expect("provider config"),
    );
    system.create(&app).await;
    let ready = system.wait_phase("app", "Ready").await;
    assert_eq!(
        ready.status.map(|s| s.conditions).unwrap_or_default(),
        Vec::new(),
        "pruned by the installed schema"
    );

    // Our CRD back: all withdrawn.
    install_schema(&system.client, our_schema()).await;
    system
        .wait_for_log("the installed CRD now keeps every field")
        .await;
    readyz_becomes(system, 200).await;
    let metrics = system.metrics().await;
    assert!(metrics.contains(&format!("{GAUGE} 0")), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_lacking_what_the_controller_writes_is_reported_on_the_embedded_api_server() {
    let system = System::start_on(Backend::Embedded, &[], Duration::from_millis(300)).await;
    scenario(&system).await;
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_lacking_what_the_controller_writes_is_reported_on_the_real_api_server() {
    if crate::realkube::skip_requested() {
        return;
    }
    let cluster = crate::realkube::RealCluster::start()
        .await
        .unwrap_or_else(|e| panic!("a cluster of its own: {e:#}"));
    crate::realkube::prepare_for_product(&cluster)
        .await
        .unwrap_or_else(|e| panic!("preparing it: {e:#}"));
    let system = System::start_on_cluster(cluster.handle(), &[]).await;
    scenario(&system).await;
    system.shutdown().await;
    drop(cluster);
}
