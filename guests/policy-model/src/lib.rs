//! The observation and plan types of the radwasm policy contract, as plain Rust
//! with a documented JSON form.
//!
//! These types mirror `wit/policy.wit` one to one. The host converts them to
//! and from the WIT bindings in one place (`crates/policy-runtime/src/convert.rs`), guests
//! do the same in `radwasm-policy-sdk`, and fixture files, `radwasm policy run`
//! and `radwasm policy test` use the JSON form defined here. Field names are
//! camelCase; enums are externally tagged (`"addFinalizer"`,
//! `{"requeueAfter": 5000}`); unknown fields are rejected so a typo in a
//! fixture is an error, not a silently ignored key. Omitted fields take their
//! default (empty string, empty list, `false`, 0, none).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub mod cases;
mod json_text;
pub mod scope;
pub mod wit;

/// Finalizer the host puts on `DeploymentTemplate`s.
pub const TEMPLATE_FINALIZER: &str = "radapp.io/deployment-template-finalizer";
/// Finalizer the host puts on `DeploymentResource`s.
pub const RESOURCE_FINALIZER: &str = "radapp.io/deployment-resource-finalizer";
/// The standard condition type kept in both kinds' status.
pub const READY_CONDITION: &str = "Ready";

/// Annotation names understood by the default policy.
pub mod annotations {
    /// `manage` (default), `skip` or `detach-on-delete`.
    pub const RECONCILE_POLICY: &str = "radapp.io/reconcile-policy";
    /// `"true"` pauses all reconciling of the object.
    pub const HOLD: &str = "radapp.io/hold";
    /// Comma-separated names of `DeploymentTemplate`s in the same namespace
    /// that must be `Ready` before this one deploys.
    pub const DEPENDS_ON: &str = "radapp.io/depends-on";
    /// `never`, or the first delay of the capped exponential backoff with
    /// which a failed deployment is retried (for example `30s`, `2m`).
    pub const DEPLOYMENT_RETRY: &str = "radapp.io/deployment-retry";
    /// What a template does when resources it deployed are found missing in
    /// Radius: `redeploy` (default) or `report`.
    pub const DRIFT: &str = "radapp.io/drift";
    /// Shown by the host on a template being deleted: how many of its
    /// `DeploymentResource`s its plans deleted and detached so far, as
    /// `{"deleted":N,"kept":M}` (kept in the host's memory, and written on
    /// the template once a child is kept in Radius). A policy reads it with
    /// [`deletion_tally`] to say, when the template goes, what became of
    /// its resources.
    pub const DELETION_TALLY: &str = "radwasm.io/deletion-tally";

    /// What a template's deletion did to its `DeploymentResource`s so far.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
    pub struct DeletionTally {
        /// Deleted with `deleteResource` (their Radius resources deleted,
        /// unless their own policy left them).
        pub deleted: u32,
        /// Released with `detachResource` (their Radius resources kept).
        pub kept: u32,
    }

    /// The template's [`DELETION_TALLY`]; `None` if absent or unreadable.
    pub fn deletion_tally(
        annotations: &std::collections::BTreeMap<String, String>,
    ) -> Option<DeletionTally> {
        annotations
            .get(DELETION_TALLY)
            .and_then(|text| serde_json::from_str(text).ok())
    }

    /// The template names listed in `radapp.io/depends-on`, trimmed, without
    /// empties or duplicates, in the order written; entries that are not
    /// valid object names are left out (see [`depends_on_checked`]). The
    /// host watches these templates for the policy; the default policy waits
    /// for them.
    pub fn depends_on(annotations: &std::collections::BTreeMap<String, String>) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for name in listed(annotations) {
            if crate::is_object_name(name) && !names.iter().any(|seen| seen == name) {
                names.push(name.to_string());
            }
        }
        names
    }

    /// As [`depends_on`], but the first entry that is not a valid object
    /// name (an RFC 1123 subdomain, as every `DeploymentTemplate` name is)
    /// is the error: such a template can never exist, so waiting for it
    /// would wait for ever.
    pub fn depends_on_checked(
        annotations: &std::collections::BTreeMap<String, String>,
    ) -> Result<Vec<String>, &str> {
        match listed(annotations).find(|name| !crate::is_object_name(name)) {
            Some(bad) => Err(bad),
            None => Ok(depends_on(annotations)),
        }
    }

    /// The non-empty, trimmed entries of `radapp.io/depends-on`.
    fn listed(
        annotations: &std::collections::BTreeMap<String, String>,
    ) -> impl Iterator<Item = &str> {
        annotations
            .get(DEPENDS_ON)
            .map(String::as_str)
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
    }
}

/// True if `name` is a valid Kubernetes object name: an RFC 1123 subdomain
/// (at most 253 characters; dot-separated labels of lowercase letters,
/// digits and '-', each starting and ending with a letter or digit).
pub fn is_object_name(name: &str) -> bool {
    name.len() <= 253
        && !name.is_empty()
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(feature = "schema")]
use schemars::JsonSchema;

/// The JSON Schema of a JSON-text field (`json_text`): JSON text in a
/// string, or the same value written inline, as fixture files may.
#[cfg(feature = "schema")]
fn json_text_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "JSON text in a string, or the same JSON value written inline",
        "anyOf": [
            {"type": "string"},
            {"type": ["object", "array", "number", "boolean", "null"]}
        ]
    })
}

macro_rules! model {
    ($($item:item)*) => {
        $(
            #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
            #[cfg_attr(feature = "schema", derive(JsonSchema))]
            $item
        )*
    };
}

model! {
    /// Status of a Kubernetes condition.
    pub enum ConditionStatus {
        True,
        False,
        Unknown,
    }

    /// A standard Kubernetes condition.
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct Condition {
        /// Condition type, for example `Ready`.
        #[serde(rename = "type")]
        pub kind: String,
        pub status: ConditionStatus,
        #[serde(default)]
        pub reason: String,
        #[serde(default)]
        pub message: String,
    }

    /// The object metadata a policy may base decisions on.
    #[serde(rename_all = "camelCase", deny_unknown_fields, default)]
    #[derive(Default)]
    pub struct ObjectMeta {
        pub name: String,
        pub namespace: String,
        pub uid: String,
        pub generation: i64,
        pub deletion_requested: bool,
        pub finalizers: Vec<String>,
        pub labels: BTreeMap<String, String>,
        pub annotations: BTreeMap<String, String>,
    }

    /// The labels and annotations of the namespace an object lives in
    /// (contract 0.6). Empty for a cluster-scoped object and for a
    /// namespace the host does not know (not yet seen, or deleted); in a
    /// fixture, an absent `namespace` or list is empty.
    #[serde(rename_all = "camelCase", deny_unknown_fields, default)]
    #[derive(Default)]
    pub struct NamespaceMeta {
        pub labels: BTreeMap<String, String>,
        pub annotations: BTreeMap<String, String>,
    }

    /// Severity of a Kubernetes Event.
    pub enum EventType {
        Normal,
        Warning,
    }

    /// A Kubernetes Event recorded against the object.
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct Event {
        #[serde(rename = "type")]
        pub event_type: EventType,
        pub reason: String,
        pub message: String,
    }

    /// A failure reported by Radius (an ARM error body).
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct RadiusError {
        pub code: String,
        pub message: String,
    }

    /// Which kind of Radius long-running operation is recorded in status.
    #[serde(rename_all = "camelCase")]
    pub enum OperationKind {
        Deployment,
        Deletion,
    }

    /// What the host learned by polling the recorded operation once.
    #[serde(rename_all = "camelCase")]
    pub enum OperationResult {
        #[serde(rename_all = "camelCase")]
        InProgress {
            #[serde(default, skip_serializing_if = "Option::is_none")]
            retry_after_ms: Option<u32>,
        },
        #[serde(rename_all = "camelCase")]
        Succeeded {
            #[serde(default)]
            output_resources: Vec<String>,
        },
        Failed(RadiusError),
        Canceled,
        NotFound,
        PollError(String),
        /// No operation began: Radius refused the request, or could not be
        /// reached after the host's own retries.
        Refused(RadiusError),
    }

    /// Failed Radius attempts in a row for one subject, kept by the host.
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct FailureRecord {
        /// Deployment: the spec hash deployed. Deletion: the Radius id.
        pub subject: String,
        /// Consecutive failed attempts (1 after the first).
        pub count: u32,
        /// Milliseconds since the last failure when the observation was made.
        #[serde(default)]
        pub age_ms: u64,
        pub error: RadiusError,
    }

    /// The operation recorded in status and the outcome of polling it.
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct OperationObservation {
        pub kind: OperationKind,
        /// Deployment: the spec hash deployed. Deletion: the Radius id deleted.
        pub subject: String,
        pub result: OperationResult,
    }

    /// Why a policy could not decide.
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct PolicyError {
        pub code: String,
        pub message: String,
    }

    /// An annotation a policy reads, with what it does.
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct AnnotationDoc {
        pub name: String,
        pub description: String,
    }

    /// A guest's description of itself.
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct Description {
        pub name: String,
        pub version: String,
        pub summary: String,
        pub annotations: Vec<AnnotationDoc>,
    }

    /// Lifecycle phase of a `DeploymentTemplate` (`status.phrase`).
    #[derive(Copy)]
    pub enum TemplatePhase {
        Updating,
        Ready,
        ReadyPendingCleanup,
        Deleting,
        Failed,
        Held,
    }

    /// `spec` of a `DeploymentTemplate`. In JSON each field may be given as
    /// JSON text (a string) or inline as a JSON value.
    #[serde(rename_all = "camelCase", deny_unknown_fields, default)]
    #[derive(Default)]
    pub struct TemplateSpec {
        #[serde(deserialize_with = "json_text::deserialize")]
        #[cfg_attr(feature = "schema", schemars(schema_with = "json_text_schema"))]
        pub template: String,
        #[serde(deserialize_with = "json_text::deserialize")]
        #[cfg_attr(feature = "schema", schemars(schema_with = "json_text_schema"))]
        pub parameters: String,
        #[serde(deserialize_with = "json_text::deserialize")]
        #[cfg_attr(feature = "schema", schemars(schema_with = "json_text_schema"))]
        pub provider_config: String,
    }

    /// A template's current status.
    #[serde(rename_all = "camelCase", deny_unknown_fields, default)]
    #[derive(Default)]
    pub struct TemplateStatus {
        pub phase: Option<TemplatePhase>,
        pub message: String,
        pub observed_generation: i64,
        pub status_hash: Option<String>,
        pub output_resources: Vec<String>,
        pub conditions: Vec<Condition>,
    }

    /// A `DeploymentResource` controlled by the template.
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct OwnedResource {
        pub name: String,
        pub radius_id: String,
        #[serde(default)]
        pub deletion_requested: bool,
        #[serde(default)]
        pub phase: String,
        /// Milliseconds since the host's drift check first found its Radius
        /// resource missing (in the current run of checks that missed it);
        /// `None` if the last check found it, or none has run. Contract 0.3.
        #[serde(default)]
        pub missing_age_ms: Option<u64>,
    }

    /// A template named in `radapp.io/depends-on`.
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct Dependency {
        pub name: String,
        #[serde(default)]
        pub exists: bool,
        #[serde(default)]
        pub phase: Option<TemplatePhase>,
    }

    /// Everything observed for one reconcile of one template.
    #[serde(rename_all = "camelCase", deny_unknown_fields, default)]
    #[derive(Default)]
    pub struct TemplateObservation {
        pub meta: ObjectMeta,
        pub spec: TemplateSpec,
        pub spec_hash: String,
        pub status: TemplateStatus,
        pub owned_resources: Vec<OwnedResource>,
        pub operation: Option<OperationObservation>,
        pub dependencies: Vec<Dependency>,
        /// Failed deployments in a row, if the last attempt failed.
        pub last_failure: Option<FailureRecord>,
        /// The `radapp.io/depends-on` cycle through this template, if any:
        /// names in order, starting and ending with this template.
        pub dependency_cycle: Vec<String>,
        /// Ids of the deployment records the host started for this template
        /// and has not deleted, oldest first.
        pub deployments: Vec<String>,
        /// Milliseconds since the host saw this template's last deployment
        /// succeed; `None` if it has recorded none. Contract 0.3.
        pub deployed_age_ms: Option<u64>,
        /// The labels and annotations of the template's namespace.
        /// Contract 0.6.
        pub namespace: NamespaceMeta,
    }

    /// A change to a template's status; absent fields are kept.
    #[serde(rename_all = "camelCase", deny_unknown_fields, default)]
    #[derive(Default)]
    pub struct TemplateStatusUpdate {
        #[serde(skip_serializing_if = "Option::is_none")]
        pub phase: Option<TemplatePhase>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub message: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub observed_generation: Option<i64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub status_hash: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub output_resources: Option<Vec<String>>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub conditions: Vec<Condition>,
        #[serde(skip_serializing_if = "is_false")]
        pub clear_operation: bool,
    }

    /// Start a deployment of the observed spec.
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct StartDeployment {
        pub scope: String,
        pub deployment_name: String,
    }

    /// Create a `DeploymentResource` owned by the template.
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct CreateResource {
        pub name: String,
        pub radius_id: String,
    }

    /// One step of a template plan.
    #[serde(rename_all = "camelCase")]
    pub enum TemplateAction {
        AddFinalizer,
        RemoveFinalizer,
        EnsureResourceGroup(String),
        StartDeployment(StartDeployment),
        CreateResource(CreateResource),
        DeleteResource(String),
        /// Release the owned `DeploymentResource` of this name, keeping its
        /// Radius resource: the host marks it
        /// `radapp.io/reconcile-policy: detach-on-delete` and deletes it, so
        /// its own policy removes it without a DELETE in Radius. A layer puts
        /// it where its base planned `DeleteResource` for that name.
        DetachResource(String),
        /// Delete a deployment record (an id from `deployments`) in Radius.
        DeleteDeployment(String),
        SetStatus(TemplateStatusUpdate),
        EmitEvent(Event),
        RequeueAfter(u32),
    }

    /// What to do for one template, in order.
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[derive(Default)]
    pub struct TemplatePlan {
        pub actions: Vec<TemplateAction>,
    }

    /// Lifecycle phase of a `DeploymentResource` (`status.phrase`).
    #[derive(Copy)]
    pub enum ResourcePhase {
        Ready,
        Deleting,
        Failed,
        /// The Radius resource was not found by the host's drift check.
        /// Contract 0.3.
        Missing,
    }

    /// A resource's current status.
    #[serde(rename_all = "camelCase", deny_unknown_fields, default)]
    #[derive(Default)]
    pub struct ResourceStatus {
        pub phase: Option<ResourcePhase>,
        pub message: String,
        pub conditions: Vec<Condition>,
    }

    /// The template named by the resource's controller owner reference.
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct OwnerTemplate {
        pub name: String,
        pub reference_uid: String,
        #[serde(default)]
        pub found_uid: Option<String>,
        #[serde(default)]
        pub deletion_requested: bool,
        #[serde(default)]
        pub annotations: BTreeMap<String, String>,
        #[serde(default, deserialize_with = "json_text::deserialize")]
        #[cfg_attr(feature = "schema", schemars(schema_with = "json_text_schema"))]
        pub provider_config: String,
    }

    /// Everything observed for one reconcile of one resource.
    #[serde(rename_all = "camelCase", deny_unknown_fields, default)]
    #[derive(Default)]
    pub struct ResourceObservation {
        pub meta: ObjectMeta,
        pub radius_id: String,
        pub status: ResourceStatus,
        pub owner: Option<OwnerTemplate>,
        pub operation: Option<OperationObservation>,
        /// Failed DELETEs in a row, if the last attempt failed.
        pub last_failure: Option<FailureRecord>,
        /// Milliseconds since the host's drift check first found `radius-id`
        /// missing in Radius (in the current run of checks that missed it);
        /// `None` if the last check found it, or none has run. Contract 0.3.
        pub missing_age_ms: Option<u64>,
        /// The labels and annotations of the resource's namespace.
        /// Contract 0.6.
        pub namespace: NamespaceMeta,
    }

    /// A change to a resource's status; absent fields are kept.
    #[serde(rename_all = "camelCase", deny_unknown_fields, default)]
    #[derive(Default)]
    pub struct ResourceStatusUpdate {
        #[serde(skip_serializing_if = "Option::is_none")]
        pub phase: Option<ResourcePhase>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub message: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub conditions: Vec<Condition>,
        #[serde(skip_serializing_if = "is_false")]
        pub clear_operation: bool,
    }

    /// One step of a resource plan.
    #[serde(rename_all = "camelCase")]
    pub enum ResourceAction {
        AddFinalizer,
        RemoveFinalizer,
        StartRadiusDelete,
        SetStatus(ResourceStatusUpdate),
        EmitEvent(Event),
        RequeueAfter(u32),
    }

    /// What to do for one resource, in order.
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[derive(Default)]
    pub struct ResourcePlan {
        pub actions: Vec<ResourceAction>,
    }

    /// An observation of either kind: the JSON form of an observation file,
    /// `{"deploymentTemplate": {...}}` or `{"deploymentResource": {...}}`.
    #[serde(rename_all = "camelCase")]
    pub enum Observation {
        DeploymentTemplate(TemplateObservation),
        DeploymentResource(ResourceObservation),
    }

    /// A plan of either kind, tagged like [`Observation`].
    #[serde(rename_all = "camelCase")]
    pub enum Plan {
        DeploymentTemplate(TemplatePlan),
        DeploymentResource(ResourcePlan),
    }
}

fn is_false(value: &bool) -> bool {
    !*value
}

impl Observation {
    /// The object kind this observation is for, as Kubernetes names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Observation::DeploymentTemplate(_) => "DeploymentTemplate",
            Observation::DeploymentResource(_) => "DeploymentResource",
        }
    }
}

impl Plan {
    /// Number of actions in the plan.
    pub fn len(&self) -> usize {
        match self {
            Plan::DeploymentTemplate(plan) => plan.actions.len(),
            Plan::DeploymentResource(plan) => plan.actions.len(),
        }
    }

    /// True if the plan does nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for PolicyError {}

/// Error for a phase string that names no known phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPhase(pub String);

impl fmt::Display for UnknownPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown phase {:?}", self.0)
    }
}

impl std::error::Error for UnknownPhase {}

macro_rules! phase_strings {
    ($ty:ident { $($variant:ident => $text:literal),* $(,)? }) => {
        impl $ty {
            /// Every phase, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),*];

            /// The text stored in `status.phrase`.
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$variant => $text),* }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $ty {
            type Err = UnknownPhase;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                match text {
                    $($text => Ok($ty::$variant),)*
                    other => Err(UnknownPhase(other.to_string())),
                }
            }
        }
    };
}

phase_strings!(TemplatePhase {
    Updating => "Updating",
    Ready => "Ready",
    ReadyPendingCleanup => "ReadyPendingCleanup",
    Deleting => "Deleting",
    Failed => "Failed",
    Held => "Held",
});

phase_strings!(ResourcePhase {
    Ready => "Ready",
    Deleting => "Deleting",
    Failed => "Failed",
    Missing => "Missing",
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_observation_round_trips_through_json() {
        let text = r#"{"deploymentTemplate": {
            "meta": {"name": "app", "namespace": "default", "generation": 2,
                     "annotations": {"radapp.io/hold": "true"}},
            "spec": {"template": {"resources": {}}, "parameters": "{}", "providerConfig": {}},
            "specHash": "abc",
            "operation": {"kind": "deployment", "subject": "abc",
                          "result": {"inProgress": {"retryAfterMs": 500}}}
        }}"#;
        let observation: Observation = serde_json::from_str(text).expect("valid observation");
        let Observation::DeploymentTemplate(template) = &observation else {
            panic!("expected a template observation");
        };
        assert_eq!(template.spec.template, r#"{"resources":{}}"#);
        assert_eq!(template.spec.parameters, "{}");
        let again: Observation =
            serde_json::from_str(&serde_json::to_string(&observation).expect("serialises"))
                .expect("round trip");
        assert_eq!(again, observation);
    }

    #[test]
    fn unknown_fields_are_rejected_with_their_name() {
        let text = r#"{"deploymentTemplate": {"meta": {"nmae": "typo"}}}"#;
        let error = serde_json::from_str::<Observation>(text).expect_err("typo must fail");
        assert!(error.to_string().contains("nmae"), "{error}");
    }

    #[test]
    fn actions_have_a_compact_json_form() {
        let plan = TemplatePlan {
            actions: vec![
                TemplateAction::AddFinalizer,
                TemplateAction::RequeueAfter(5000),
                TemplateAction::SetStatus(TemplateStatusUpdate {
                    phase: Some(TemplatePhase::ReadyPendingCleanup),
                    ..Default::default()
                }),
            ],
        };
        let json = serde_json::to_value(&plan).expect("serialises");
        assert_eq!(
            json,
            serde_json::json!({"actions": [
                "addFinalizer",
                {"requeueAfter": 5000},
                {"setStatus": {"phase": "ReadyPendingCleanup"}}
            ]})
        );
    }

    #[test]
    fn phases_parse_from_their_status_text() {
        for phase in TemplatePhase::ALL {
            assert_eq!(phase.as_str().parse::<TemplatePhase>(), Ok(*phase));
        }
        assert!("Bogus".parse::<ResourcePhase>().is_err());
    }
}
