//! The custom resources `DeploymentTemplate` and `DeploymentResource`
//! (`radapp.io/v1alpha3`) as Rust types. The CRD YAML in `deploy/crds/` is
//! generated from these types (`radwasm crds`), never written by hand; a test
//! keeps the two in sync.
//!
//! Field names and meanings follow Radius' own
//! implementation (`status.phrase`, `status.operation`, `status.statusHash`,
//! `status.outputResources`), plus the standard `Ready` condition and the
//! policy that took the last decision.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of both kinds.
pub const GROUP: &str = "radapp.io";
/// API version of both kinds.
pub const VERSION: &str = "v1alpha3";

/// A Bicep-compiled ARM template to deploy through Radius, with its
/// parameters and the scopes to deploy into.
// Several printer columns share `type_ = "string"`; clippy mistakes that
// for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "radapp.io",
    version = "v1alpha3",
    kind = "DeploymentTemplate",
    namespaced,
    status = "DeploymentTemplateStatus",
    shortname = "dt",
    category = "all",
    category = "radius",
    doc = "A Bicep-compiled ARM template deployed through Radius; one DeploymentResource is kept per Radius resource it produced.",
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phrase",
        description = "Lifecycle phase"
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        json_path = ".status.message",
        priority = 1
    ),
    printcolumn(
        name = "Policy",
        type_ = "string",
        json_path = ".status.policy.name",
        description = "Policy that took the last decision"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentTemplateSpec {
    /// The compiled ARM template, as JSON text (`bicep build` output).
    #[serde(default)]
    pub template: String,
    /// ARM deployment parameters, in either of two shapes: JSON text
    /// (`{"name": {"value": ...}}`), or a map from parameter name to its
    /// value as text, as Radius's CLI writes it.
    #[serde(default, skip_serializing_if = "is_absent")]
    #[schemars(schema_with = "text_or_map")]
    pub parameters: serde_json::Value,
    /// Where to deploy: one entry per provider, as an object or as JSON text
    /// (Radius's CLI writes the text).
    #[serde(default, skip_serializing_if = "is_absent")]
    #[schemars(schema_with = "text_or_map")]
    pub provider_config: serde_json::Value,
    /// The git repository the Bicep files came from (Radius's CLI may set it;
    /// kept for tools, not used to deploy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
}

fn is_absent(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Null => true,
        serde_json::Value::String(text) => text.is_empty(),
        _ => false,
    }
}

/// Schema of a field that holds either JSON text or an object: the API server
/// keeps whatever is given (a structural schema allows a field with no type
/// only with `x-kubernetes-preserve-unknown-fields`), and the controller
/// names a value of any other shape in the object's status.
fn text_or_map(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "JSON text, or an object.",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

impl DeploymentTemplateSpec {
    /// The parameters as the ARM JSON text the policy and Radius see. Text is
    /// taken as it is. In a map (Radius's shape), a text value becomes
    /// `{"value": text}` (converted to the type the template declares when
    /// the deployment is sent), an object is taken as ARM's own
    /// `{"value": ...}` or `{"reference": ...}` entry, and any other value
    /// becomes `{"value": ...}`. A value of another shape (a number, a list)
    /// is passed on as its JSON text, which the policy refuses by name.
    pub fn parameters_text(&self) -> String {
        use serde_json::Value;
        match &self.parameters {
            Value::Null => String::new(),
            Value::String(text) => text.clone(),
            Value::Object(map) => {
                let entries: serde_json::Map<String, Value> = map
                    .iter()
                    .map(|(name, value)| {
                        let entry = match value {
                            Value::Object(_) => value.clone(),
                            _ => serde_json::json!({ "value": value }),
                        };
                        (name.clone(), entry)
                    })
                    .collect();
                Value::Object(entries).to_string()
            }
            other => other.to_string(),
        }
    }

    /// The provider config as JSON text: text as it is, an object as its
    /// JSON text, nothing as the empty text.
    pub fn provider_config_text(&self) -> String {
        match &self.provider_config {
            serde_json::Value::Null => String::new(),
            serde_json::Value::String(text) => text.clone(),
            other => other.to_string(),
        }
    }

    /// The provider config, if it is one in either shape.
    pub fn provider_config(&self) -> Option<ProviderConfig> {
        match &self.provider_config {
            serde_json::Value::String(text) => serde_json::from_str(text).ok(),
            serde_json::Value::Null => None,
            other => serde_json::from_value(other.clone()).ok(),
        }
    }
}

/// The scopes a deployment targets, per provider (`radius`, `az`, `aws`,
/// `deployments`), as in Radius' provider config.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub radius: Option<ProviderEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub az: Option<ProviderEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws: Option<ProviderEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployments: Option<ProviderEntry>,
}

/// One provider's target.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ProviderEntry {
    /// Provider type, for example `Radius`, `AzureResourceManager`, `AWS`, `Microsoft.Resources`.
    #[serde(rename = "type", default)]
    pub kind: String,
    pub value: ProviderValue,
}

/// The scope value of a provider entry.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ProviderValue {
    /// For Radius: `/planes/radius/{plane}/resourceGroups/{group}`.
    #[serde(default)]
    pub scope: String,
}

/// The policy guest that took an object's last decision.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRef {
    pub name: String,
    pub version: String,
    /// `sha256:...` of the component.
    pub digest: String,
    /// The `ReconcilePolicy` it was loaded from; null for the controller's
    /// `--policy` (written as null, so a merge patch clears an earlier one).
    #[serde(default)]
    pub reconcile_policy: Option<String>,
}

/// The Radius operation in flight, enough to resume polling after a restart.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceOperation {
    /// The resume token (compact JSON, see `docs/radius.md`).
    #[serde(default)]
    pub resume_token: String,
    /// `PUT` for a deployment, `DELETE` for a deletion.
    #[serde(default)]
    pub operation_kind: String,
}

/// A Radius request that failed before any operation began: refused with an
/// ARM error, or still failing after the client's own retries. Kept apart from
/// `operation` (which only ever holds a real Radius operation) and shown to
/// the policy as the outcome of that attempt; cleared when the policy clears
/// the operation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailedRequest {
    /// `PUT` for a deployment (or its resource group), `DELETE` for a deletion.
    pub operation_kind: String,
    /// The Radius id the request was for.
    pub target: String,
    /// For a deployment: the spec hash it was to deploy.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subject: String,
    /// ARM error code, or the client's reason (`Unreachable`, `Throttled`...).
    pub code: String,
    pub message: String,
    /// When the request failed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

/// Failed Radius attempts in a row for one subject (a spec hash for a
/// template, the resource id for a resource), so a policy can back off.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastFailure {
    pub subject: String,
    pub count: u32,
    pub code: String,
    pub message: String,
    /// When the last of them failed (RFC 3339).
    pub time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
}

// The parts an object rarely has (a status's `operation`, `failed_request`
// and `last_failure`, a resource's old `provider_config`) are boxed: every watched object is held decoded in the
// controller's cache, and unboxed they took a template 1,064 bytes instead
// of 800 and a `DeploymentResource` 1,096 instead of 648, before any string
// (docs/benchmarks-scale.md, "What a cached object is made of"). Plain
// comments, not doc comments: those become the CRD schema's descriptions.
/// Observed state of a `DeploymentTemplate`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentTemplateStatus {
    /// Generation of the spec the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Radius id of the last deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// The Radius operation in flight, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<Box<ResourceOperation>>,
    /// The last Radius request that failed before an operation began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_request: Option<Box<FailedRequest>>,
    /// Deployments of the current spec that failed in a row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<Box<LastFailure>>,
    /// When the controller last saw a deployment of this template succeed
    /// (RFC 3339, microseconds); the drift check compares with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_deployed: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime>,
    /// Ids of the deployment records started for this template and not yet
    /// deleted, oldest first (at most 32 are remembered).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deployments: Vec<String>,
    /// Lifecycle phase: Updating, Ready, ReadyPendingCleanup, Deleting, Failed, Held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phrase: Option<String>,
    /// Human-readable detail of the phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Radius ids the last successful deployment produced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output_resources: Vec<String>,
    /// Hash of the spec last deployed successfully (no redeploy while it matches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_hash: Option<String>,
    /// Standard conditions; `Ready` is kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The policy that took the last decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyRef>,
}

/// One Radius resource produced by a `DeploymentTemplate`; deleting it
/// deletes the Radius resource (when this template put it there).
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "radapp.io",
    version = "v1alpha3",
    kind = "DeploymentResource",
    namespaced,
    status = "DeploymentResourceStatus",
    shortname = "dr",
    category = "all",
    category = "radius",
    doc = "One Radius resource deployed by a DeploymentTemplate (its controller owner).",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phrase"),
    printcolumn(
        name = "Resource",
        type_ = "string",
        json_path = ".spec.id",
        priority = 1
    ),
    printcolumn(name = "Policy", type_ = "string", json_path = ".status.policy.name"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentResourceSpec {
    /// The Radius resource id.
    pub id: String,
    /// Not written by this controller (nor by Radius's); accepted on objects
    /// an earlier version wrote with the owner template's provider config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_config: Option<Box<ProviderConfig>>,
}

/// Observed state of a `DeploymentResource`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentResourceStatus {
    /// The Radius resource id tracked, written with the `Ready` phase (as
    /// Radius's controller writes it: `spec.id` once the resource is ready).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The Radius deletion in flight, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<Box<ResourceOperation>>,
    /// The last Radius DELETE that failed before an operation began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_request: Option<Box<FailedRequest>>,
    /// DELETEs of this resource that failed in a row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<Box<LastFailure>>,
    /// When the controller's drift check that first found the Radius
    /// resource missing was sent (RFC 3339, microseconds); cleared when a
    /// check finds it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_since: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime>,
    /// Lifecycle phase: Ready, Deleting, Failed, Missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phrase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyRef>,
}

/// The API groups whose CRDs `radwasm crds` prints, each as one file of
/// `deploy/crds/` (`<group>_<version>.yaml`).
pub const CRD_GROUPS: [&str; 2] = [GROUP, crate::reconcile_policy::crd::GROUP];

/// One group's CRDs as a multi-document YAML, as `radwasm crds --group`
/// prints it and `deploy/crds/` holds it; `None` for another group.
pub fn crd_yaml_for(group: &str) -> Option<Result<String, serde_yaml::Error>> {
    let (source, crds) = if group == GROUP {
        (
            "host/src/crd.rs",
            vec![DeploymentTemplate::crd(), DeploymentResource::crd()],
        )
    } else if group == crate::reconcile_policy::crd::GROUP {
        (
            "host/src/reconcile_policy/crd.rs",
            vec![crate::reconcile_policy::ReconcilePolicy::crd()],
        )
    } else {
        return None;
    };
    let mut out =
        format!("# Generated by `radwasm crds --group {group}` from {source}; do not edit.\n");
    for crd in crds {
        out.push_str("---\n");
        match serde_yaml::to_string(&crd) {
            Ok(text) => out.push_str(&text),
            Err(error) => return Some(Err(error)),
        }
    }
    Some(Ok(out))
}

/// Every CRD of the product, as `radwasm crds` prints it.
pub fn crd_yaml() -> Result<String, serde_yaml::Error> {
    let mut out = String::new();
    for group in CRD_GROUPS {
        if let Some(text) = crd_yaml_for(group) {
            out.push_str(&text?);
        }
    }
    Ok(out)
}

impl ProviderConfig {
    /// A provider config that deploys into the Radius resource-group `scope`.
    pub fn radius(scope: &str) -> Self {
        Self {
            radius: Some(ProviderEntry {
                kind: "Radius".into(),
                value: ProviderValue {
                    scope: scope.into(),
                },
            }),
            ..Self::default()
        }
    }

    /// The Radius scope, if one is configured.
    pub fn radius_scope(&self) -> Option<&str> {
        self.radius
            .as_ref()
            .map(|entry| entry.value.scope.as_str())
            .filter(|s| !s.is_empty())
    }
}

impl From<ProviderConfig> for serde_json::Value {
    fn from(config: ProviderConfig) -> Self {
        serde_json::to_value(config).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd_schema::admits;

    /// Every field of Radius's own `DeploymentTemplate` CRD, with its type.
    /// Read from `deploy/Chart/crds/radius/radapp.io_deploymenttemplates.yaml`
    /// of radius-project/radius at commit 8f1079d7bc05 (generated by
    /// controller-gen v0.21.0, version `v1alpha3`). Paths as in
    /// `crd_schema`: `[]` the items of an array, `*` the values of a map.
    const RADIUS_DEPLOYMENT_TEMPLATE: &[(&str, &str)] = &[
        ("spec", "object"),
        ("spec.parameters", "object"),
        ("spec.parameters.*", "string"),
        ("spec.providerConfig", "string"),
        ("spec.repository", "string"),
        ("spec.template", "string"),
        ("status", "object"),
        ("status.observedGeneration", "integer"),
        ("status.operation", "object"),
        ("status.operation.operationKind", "string"),
        ("status.operation.resumeToken", "string"),
        ("status.outputResources", "array"),
        ("status.outputResources.[]", "string"),
        ("status.phrase", "string"),
        ("status.statusHash", "string"),
    ];

    /// The same for its `DeploymentResource` CRD
    /// (`radapp.io_deploymentresources.yaml`, same commit).
    const RADIUS_DEPLOYMENT_RESOURCE: &[(&str, &str)] = &[
        ("spec", "object"),
        ("spec.id", "string"),
        ("status", "object"),
        ("status.id", "string"),
        ("status.observedGeneration", "integer"),
        ("status.operation", "object"),
        ("status.operation.operationKind", "string"),
        ("status.operation.resumeToken", "string"),
        ("status.phrase", "string"),
    ];

    fn schema(
        crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    ) -> serde_json::Value {
        let json = serde_json::to_value(crd).expect("the CRD as JSON");
        crate::crd_schema::version_schema(&json, VERSION).expect("our version")
    }

    /// Taking over from Radius's controller (and handing back) must not
    /// lose a field Radius's controller writes or reads: our generated
    /// schemas keep every field of Radius's, with a compatible type (the
    /// same, or a field that keeps any value, as `spec.parameters` and
    /// `spec.providerConfig` do to take both manifest shapes).
    #[test]
    fn our_crds_keep_every_field_of_radiuss_with_a_compatible_type() {
        for (crd, radius) in [
            (DeploymentTemplate::crd(), RADIUS_DEPLOYMENT_TEMPLATE),
            (DeploymentResource::crd(), RADIUS_DEPLOYMENT_RESOURCE),
        ] {
            let ours = schema(&crd);
            let lost: Vec<_> = radius
                .iter()
                .filter(|(path, kind)| !admits(&ours, path, kind))
                .collect();
            assert!(
                lost.is_empty(),
                "{} drops or retypes Radius's fields {lost:?}",
                crd.spec.names.kind
            );
            // Radius's controller reads and writes them through the status
            // subresource, and lists them under the same categories.
            assert!(crd.spec.versions[0].subresources.is_some());
            let categories = crd.spec.names.categories.clone().unwrap_or_default();
            assert_eq!(categories, ["all", "radius"]);
        }
        // And the check can fail: a field we do not have, or retyped.
        let ours = schema(&DeploymentResource::crd());
        assert!(!admits(&ours, "status.idx", "string"));
        assert!(!admits(&ours, "status.id", "integer"));
    }
}
