//! The `ReconcilePolicy` custom resource (`radwasm.io/v1alpha1`,
//! cluster-scoped): one policy component, where it comes from, which objects
//! it decides for, and whether it acts or only watches (a shadow canary).
//! The CRD YAML in `deploy/crds/radwasm.io_v1alpha1.yaml` is generated from
//! these types (`radwasm crds`); a test keeps the two in sync.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of `ReconcilePolicy`, owned by this project.
pub const GROUP: &str = "radwasm.io";
/// API version of `ReconcilePolicy`.
pub const VERSION: &str = "v1alpha1";

/// A reconcile policy component and the objects it decides for.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "radwasm.io",
    version = "v1alpha1",
    kind = "ReconcilePolicy",
    status = "ReconcilePolicyStatus",
    shortname = "rpol",
    category = "radius",
    doc = "A reconcile policy (a WebAssembly component) and the DeploymentTemplates it decides for.",
    printcolumn(name = "Mode", type_ = "string", json_path = ".spec.mode"),
    printcolumn(name = "Priority", type_ = "integer", json_path = ".spec.priority"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(name = "Version", type_ = "string", json_path = ".status.version"),
    printcolumn(
        name = "Digest",
        type_ = "string",
        json_path = ".status.digest",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ReconcilePolicySpec {
    /// Where the component comes from: exactly one of `builtin`,
    /// `configMap`, `oci` and `url`.
    pub module: PolicyModule,
    /// The namespaces whose objects this policy decides for (all when
    /// absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// The DeploymentTemplates (by their labels) this policy decides for
    /// (all when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_selector: Option<LabelSelector>,
    /// When several Enforce policies match an object, the highest priority
    /// decides; on a tie, the name that sorts first.
    #[serde(default)]
    pub priority: i32,
    /// `Enforce` decides and acts; `Shadow` decides after the enforcing
    /// policy, and its plan is only compared, never carried out.
    #[serde(default)]
    pub mode: PolicyMode,
    /// Sandbox limits for each decision, at most the controller's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<PolicyLimits>,
    /// Fixture cases (the `radwasm policy test` format) that must all pass
    /// before a version of the module decides anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cases: Option<CasesSource>,
    /// For a module that is a layer (world `layer`): the `ReconcilePolicy`
    /// whose plans it amends. Absent: the built-in default policy. A
    /// module that decides alone (world `policy`) takes no base.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// The keys (or the CA and identities) the module must be signed with,
    /// in cosign's format. With it, `module.oci` may name a tag: the tag is
    /// resolved to a digest, that digest's signature checked, and a new
    /// digest behind the tag is checked before it replaces the running one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<PolicyVerify>,
}

/// Who may sign the module: keys (`configMap`) or certificates from a CA
/// (`certificate`), exactly one; and what a signature must carry.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.configMap) != has(self.certificate)",
    "message": "spec.verify names exactly one of configMap (public keys) and certificate (a CA and identities)"
}]))]
pub struct PolicyVerify {
    /// A ConfigMap in the controller's policy namespace whose every `data`
    /// key is one PEM public key (`cosign.pub`); a signature by any of them
    /// is accepted (several keys: rotation). Removing a key stops a running
    /// version that no remaining key verifies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<SecretName>,
    /// Instead of keys: signatures made with a certificate (`cosign sign
    /// --certificate --certificate-chain`) that chains to one of these
    /// roots and names one of these identities, checked offline (an OCI
    /// module only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<CertificateVerify>,
    /// Annotations an accepted signature must carry in its payload's
    /// `optional`, each with exactly this value, as `cosign verify -a
    /// key=value` requires them (`cosign sign -a` and `radwasm policy sign
    /// -a` write them): e.g. `version: "1.4"` keeps a tag from being moved
    /// back to a digest signed for another release.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Certificate-signed modules: the CA a signer's certificate must chain to,
/// and who may sign (as `cosign verify --certificate-chain
/// --certificate-identity --certificate-oidc-issuer`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertificateVerify {
    /// Where the trusted roots are.
    pub roots: CertificateRoots,
    /// A signer's certificate must match one of them (at least one).
    #[schemars(length(min = 1))]
    pub identities: Vec<CertificateIdentity>,
}

/// The trusted roots of certificate-signed modules.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertificateRoots {
    /// A ConfigMap in the controller's policy namespace whose `data` keys
    /// hold PEM certificates: each self-signed one is a trusted root, every
    /// other an intermediate that may complete a signer's chain.
    pub config_map: SecretName,
}

/// Who may have signed: the certificate's subject (a subject alternative
/// name: email, URI, DNS name or IP address) and its OIDC issuer (Sigstore's
/// extension 1.3.6.1.4.1.57264.1.8, or the older 1.3.6.1.4.1.57264.1.1).
/// One of `subject` and `subjectRegExp`, and one of `issuer` and
/// `issuerRegExp`; a regular expression matches anywhere in the value, as
/// cosign's do, unless anchored (`^…$`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.subject) != has(self.subjectRegExp)",
     "message": "one of subject and subjectRegExp"},
    {"rule": "has(self.issuer) != has(self.issuerRegExp)",
     "message": "one of issuer and issuerRegExp"}
]))]
pub struct CertificateIdentity {
    /// The subject exactly (`cosign verify --certificate-identity`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// A regular expression of the subject (`--certificate-identity-regexp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_reg_exp: Option<String>,
    /// The OIDC issuer exactly (`--certificate-oidc-issuer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// A regular expression of the issuer (`--certificate-oidc-issuer-regexp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer_reg_exp: Option<String>,
}

/// Where a policy component comes from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyModule {
    /// A policy built into the controller: `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builtin: Option<BuiltinModule>,
    /// The component in a ConfigMap's `binaryData`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapKey>,
    /// An OCI artifact (`registry/repository@sha256:…`, or a tag with
    /// `digest` set) in the Wasm OCI artifact layout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci: Option<String>,
    /// An `https` URL of the component; `sha256` is required with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The OCI manifest digest (`sha256:…`) when `oci` names a tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// SHA-256 (hex) of the component bytes: required with `url`, checked
    /// when given with `configMap`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// A `kubernetes.io/dockerconfigjson` Secret holding the credentials of
    /// the OCI registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret: Option<SecretName>,
}

/// The policies built into the controller.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum BuiltinModule {
    /// The default policy (`docs/default-policy.md`).
    Default,
}

/// One key of one ConfigMap.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ConfigMapKey {
    pub namespace: String,
    pub name: String,
    pub key: String,
}

/// A namespaced object by name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct SecretName {
    pub namespace: String,
    pub name: String,
}

/// Fixture cases a module must pass: every `*.json` key of a ConfigMap.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CasesSource {
    pub config_map: SecretName,
}

/// Whether a policy acts.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum PolicyMode {
    #[default]
    Enforce,
    Shadow,
}

/// Sandbox limits for one decision.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyLimits {
    /// Fuel (roughly, wasm instructions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
    /// Bytes of linear memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
}

/// What the controller made of a `ReconcilePolicy`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReconcilePolicyStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`: a version of the module is loaded and deciding, and the
    /// latest candidate passed its signature check. Its reason says why
    /// not: `InvalidSpec`, `FetchFailed`, `DigestMismatch`, `LoadFailed`,
    /// `WorldMismatch`, `CasesFailed`, `BaseNotFound`, `BaseNotReady`,
    /// `BaseCycle`, and for trust `SignatureMissing`, `SignatureUntrusted`,
    /// `SignatureDigestMismatch`, `SignatureReferenceMismatch`,
    /// `SignatureAnnotationMismatch`, `VerifyKeysMissing`,
    /// `VerifyKeysInvalid`, `SignatureRequired`, and for certificates
    /// `CertificateMissing`, `CertificateInvalid`, `CertificateUntrusted`,
    /// `CertificateUsageMismatch`, `CertificateIdentityMismatch`,
    /// `CertificateExpired` (the running version, if
    /// any, keeps deciding while the keys and annotations it was verified
    /// with still verify it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The loaded policy's own name (from its `describe`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `sha256:…` of the loaded component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The worlds the loaded component implements (`template-policy`,
    /// `resource-policy`; for a layer `template-layer`, `resource-layer`)
    /// and its contract version.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worlds: Vec<String>,
    /// Decisions taken by this policy since the controller started.
    #[serde(default)]
    pub decisions: u64,
    /// Shadow decisions whose plan differed from the enforcing policy's.
    #[serde(default)]
    pub shadow_disagreements: u64,
    /// The signature check that let the loaded version in (with
    /// spec.verify).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<VerifiedStatus>,
    /// Why the last candidate was refused (the loaded version, if any,
    /// stays in charge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// The artifact a loaded version came from and the key that verified it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerifiedStatus {
    /// `registry/repository@sha256:…`: the manifest digest that was verified.
    pub reference: String,
    /// The key that verified it: its ConfigMap key and `sha256:`
    /// fingerprint; or the certificate and the root it chained to.
    pub key: String,
}
