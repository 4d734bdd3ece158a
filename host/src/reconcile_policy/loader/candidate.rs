//! One look at a policy's spec: the module it names fetched, its digest
//! checked, its signature checked (`spec.verify`), compiled, its world and
//! contract checked, its cases run; the version to activate, or why not (a
//! [`Problem`]).

use kube::ResourceExt;
use radwasm_policy_model::cases;
use sha2::{Digest, Sha256};

use crate::policy::source::{Fetched, SecretRef, Source};
use crate::policy::trust::Verified;
use crate::policy::{self, LoadError, LoadedPolicy, PolicyEngine, embedded};
use crate::reconcile_policy::crd::{
    ConfigMapKey, PolicyLimits, PolicyModule, PolicyVerify, ReconcilePolicy, ReconcilePolicySpec,
};
use crate::reconcile_policy::registry::{Active, PolicyRegistry, Problem};

use super::refusal::{fetch_problem, problem};
use super::{Loader, trust};

pub(super) enum Candidate {
    /// The loaded version is exactly this candidate.
    Unchanged,
    Loaded(Active),
}

/// Fetch, check, compile and test the policy's module as its spec says now.
pub(super) async fn candidate(
    policy: &ReconcilePolicy,
    loader: &Loader,
) -> Result<Candidate, Problem> {
    let spec = &policy.spec;
    let source =
        check_spec(spec, &loader.policy_namespace).map_err(|m| problem("InvalidSpec", m))?;
    let (fetched, verified) = fetch_and_verify(policy, &source, loader).await?;
    let (source_name, bytes, digest) = (fetched.source_name, fetched.bytes, fetched.digest);
    check_pinned_sha256(spec, &source_name, &digest)?;
    trust::check_base(policy, loader)?;
    let cases = fetch_cases(spec, loader).await?;
    let limits = spec.limits.unwrap_or_default();
    let identity = candidate_identity(&digest, limits, &cases, spec, verified.as_ref());
    if is_active_unrefused(policy, loader, &identity) {
        return Ok(Candidate::Unchanged);
    }
    let engine = loader.engine.clone();
    let registry = loader.registry.clone();
    let (name, base) = (policy.name_any(), spec.base.clone());
    let loaded = tokio::task::spawn_blocking(move || -> Result<LoadedPolicy, Problem> {
        let loaded = compile(&engine, &source_name, &bytes, limits)?;
        // The cases run over the stack the layer decides over now; the
        // registry puts the stack together again at every selection.
        let stack = stack_for_cases(&loaded, base.as_deref(), &registry, &name)?;
        run_cases(&stack, &cases)?;
        Ok(loaded)
    })
    .await
    .map_err(|e| problem("LoadFailed", format!("the load task failed: {e}")))??;
    Ok(Candidate::Loaded(Active {
        policy: loaded,
        identity,
        verified,
    }))
}

/// The module's bytes from its source and, when `spec.verify` names keys,
/// its verified signature. A digest mismatch of a verified source is counted
/// against the policy's trust.
async fn fetch_and_verify(
    policy: &ReconcilePolicy,
    source: &Source,
    loader: &Loader,
) -> Result<(Fetched, Option<Verified>), Problem> {
    let keys = trust::trusted(policy, source, loader).await?;
    let fetched = source.fetch(&loader.fetcher).await.map_err(|error| {
        let refused = fetch_problem(error);
        if keys.is_some() && refused.reason == "DigestMismatch" {
            trust::count(loader, policy, refused.reason);
        }
        refused
    })?;
    let verified = match &keys {
        Some(keys) => Some(trust::verify(policy, source, &fetched, keys, loader).await?),
        None => None,
    };
    Ok((fetched, verified))
}

/// The fetched component's digest is the one `spec.module.sha256` requires,
/// if it requires one.
fn check_pinned_sha256(
    spec: &ReconcilePolicySpec,
    source_name: &str,
    digest: &str,
) -> Result<(), Problem> {
    if let Some(expected) = spec.module.sha256.as_deref() {
        let expected = expected.trim_start_matches("sha256:").to_ascii_lowercase();
        if expected != digest {
            return Err(problem(
                "DigestMismatch",
                format!(
                    "{source_name}: the component's SHA-256 is {digest}, not the {expected} spec.module.sha256 requires; not loaded"
                ),
            ));
        }
    }
    Ok(())
}

/// Everything a loaded version was checked with: the same identity means
/// the same version, with nothing to load again.
fn candidate_identity(
    digest: &str,
    limits: PolicyLimits,
    cases: &[(String, String)],
    spec: &ReconcilePolicySpec,
    verified: Option<&Verified>,
) -> String {
    format!(
        "{digest} fuel={:?} memory={:?} cases={} base={:?} verified={:?}",
        limits.fuel,
        limits.memory_bytes,
        cases_fingerprint(cases),
        spec.base,
        verified.map(|v| (&v.digest, &v.key)),
    )
}

/// The policy's loaded version has exactly this identity, and no refusal
/// stands against it.
fn is_active_unrefused(policy: &ReconcilePolicy, loader: &Loader, identity: &str) -> bool {
    loader
        .registry
        .get(&policy.name_any())
        .is_some_and(|entry| {
            entry
                .active
                .as_ref()
                .is_some_and(|a| a.identity == identity)
                && entry.problem.is_none()
        })
}

/// Compile the component and give it the spec's sandbox limits.
fn compile(
    engine: &PolicyEngine,
    source_name: &str,
    bytes: &[u8],
    limits: PolicyLimits,
) -> Result<LoadedPolicy, Problem> {
    let loaded = engine
        .load_bytes(source_name, bytes)
        .map_err(load_problem)?;
    Ok(loaded.with_limits(
        limits.fuel,
        limits
            .memory_bytes
            .map(|m| usize::try_from(m).unwrap_or(usize::MAX)),
    ))
}

/// What the cases run over: a layer on its base as the registry has it
/// now, or a policy that decides alone by itself. A base named for a
/// policy that decides alone is refused.
fn stack_for_cases(
    loaded: &LoadedPolicy,
    base: Option<&str>,
    registry: &PolicyRegistry,
    name: &str,
) -> Result<LoadedPolicy, Problem> {
    match (base, loaded.is_layer()) {
        (Some(base), false) => Err(problem(
            "InvalidSpec",
            format!(
                "spec.base names {base:?}, but {} is a policy that decides alone ({}); only a layer (world layer) decides over a base",
                loaded.display_name(),
                loaded.worlds()
            ),
        )),
        (Some(base), true) => Ok(loaded.on_base(registry.base_stack(name, base)?)),
        (None, _) => Ok(loaded.clone()),
    }
}

/// Where the module comes from, once the spec is known to name exactly one.
pub(super) fn check_spec(
    spec: &ReconcilePolicySpec,
    policy_namespace: &str,
) -> Result<Source, String> {
    check_config_map_namespaces(spec, policy_namespace)?;
    let module: &PolicyModule = &spec.module;
    check_one_module_source(module)?;
    check_selectors(spec)?;
    if let Some(verify) = &spec.verify {
        check_verify(verify, module, policy_namespace)?;
    }
    if let Some(sha) = &module.sha256 {
        let hex = sha.trim_start_matches("sha256:");
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "spec.module.sha256 must be 64 hex digits (optionally after sha256:); got {sha:?}"
            ));
        }
    }
    if module.builtin.is_some() {
        // `default` is the only built-in policy.
        return Ok(Source::BuiltIn(embedded::DEFAULT));
    }
    if let Some(config_map) = &module.config_map {
        return config_map_source(config_map);
    }
    if let Some(url) = &module.url {
        return url_source(url, module);
    }
    oci_source(spec)
}

/// The module's and the cases' ConfigMaps are in the namespace the
/// controller reads policy ConfigMaps in.
fn check_config_map_namespaces(
    spec: &ReconcilePolicySpec,
    policy_namespace: &str,
) -> Result<(), String> {
    for (field, namespace) in [
        (
            "module.configMap",
            spec.module.config_map.as_ref().map(|c| &c.namespace),
        ),
        (
            "cases.configMap",
            spec.cases.as_ref().map(|c| &c.config_map.namespace),
        ),
    ] {
        if let Some(namespace) = namespace
            && namespace != policy_namespace
        {
            return Err(format!(
                "spec.{field}.namespace is {namespace:?}: this controller reads policy ConfigMaps in {policy_namespace:?} only (--policy-namespace)"
            ));
        }
    }
    Ok(())
}

/// `spec.module` names exactly one of its sources.
fn check_one_module_source(module: &PolicyModule) -> Result<(), String> {
    let named: Vec<&str> = [
        module.builtin.is_some().then_some("builtin"),
        module.config_map.is_some().then_some("configMap"),
        module.oci.is_some().then_some("oci"),
        module.url.is_some().then_some("url"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if named.len() != 1 {
        return Err(format!(
            "spec.module must name exactly one of builtin, configMap, oci and url; it names {}",
            if named.is_empty() {
                "none".to_string()
            } else {
                named.join(", ")
            }
        ));
    }
    Ok(())
}

/// The namespace and object selectors, if set, are valid label selectors.
fn check_selectors(spec: &ReconcilePolicySpec) -> Result<(), String> {
    for (field, selector) in [
        ("namespaceSelector", &spec.namespace_selector),
        ("objectSelector", &spec.object_selector),
    ] {
        if let Some(selector) = selector {
            kube::core::Selector::try_from(selector.clone())
                .map_err(|e| format!("spec.{field}: {e}"))?;
        }
    }
    Ok(())
}

/// `spec.verify` fits the module's source, names exactly one kind of trust
/// (keys or a certificate), and its ConfigMap is one the controller reads.
fn check_verify(
    verify: &PolicyVerify,
    module: &PolicyModule,
    policy_namespace: &str,
) -> Result<(), String> {
    if module.oci.is_none() && module.config_map.is_none() {
        return Err(
            "spec.verify checks cosign signatures of OCI artifacts and of ConfigMap modules \
             (a blob signature under the module's key + .sig): it needs spec.module.oci or \
             spec.module.configMap"
                .to_string(),
        );
    }
    let (field, keys) = match (&verify.config_map, &verify.certificate) {
        (Some(keys), None) => ("configMap", keys),
        (None, Some(certificate)) => {
            if module.oci.is_none() {
                return Err("spec.verify.certificate checks cosign signatures of OCI \
                     artifacts: it needs spec.module.oci (a ConfigMap module's blob \
                     signature carries no certificate)"
                    .to_string());
            }
            trust::identities(verify)?;
            ("certificate.roots.configMap", &certificate.roots.config_map)
        }
        _ => {
            return Err(
                "spec.verify must name exactly one of configMap (public keys) and \
                 certificate (a CA and identities)"
                    .to_string(),
            );
        }
    };
    if keys.namespace != policy_namespace || keys.name.is_empty() {
        return Err(format!(
            "spec.verify.{field} must name a ConfigMap in {policy_namespace:?} (--policy-namespace), where the controller reads ConfigMaps; got {:?}/{:?}",
            keys.namespace, keys.name
        ));
    }
    if !verify.annotations.is_empty() && module.oci.is_none() {
        return Err(
            "spec.verify.annotations are checked in an OCI signature's payload: a \
             ConfigMap module's blob signature carries none (remove them, or serve the \
             module from a registry)"
                .to_string(),
        );
    }
    Ok(())
}

/// A ConfigMap module, once its namespace, name and key are all set.
fn config_map_source(config_map: &ConfigMapKey) -> Result<Source, String> {
    if config_map.namespace.is_empty() || config_map.name.is_empty() || config_map.key.is_empty() {
        return Err("spec.module.configMap needs namespace, name and key".to_string());
    }
    Ok(Source::ConfigMap {
        namespace: config_map.namespace.clone(),
        name: config_map.name.clone(),
        key: config_map.key.clone(),
    })
}

/// A module from a URL: https (plain http only on loopback), and pinned by
/// `spec.module.sha256`.
fn url_source(url: &str, module: &PolicyModule) -> Result<Source, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("spec.module.url {url:?}: {e}"))?;
    let loopback = matches!(parsed.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
    if parsed.scheme() != "https" && !(parsed.scheme() == "http" && loopback) {
        return Err(format!(
            "spec.module.url must be https (plain http only on loopback); got {url:?}"
        ));
    }
    if module.sha256.is_none() {
        return Err("spec.module.url needs spec.module.sha256: a component from a URL is loaded only by its digest".to_string());
    }
    Ok(Source::Url(url.to_string()))
}

/// An OCI module, pinned by a digest (inline or `spec.module.digest`, which
/// must agree), or following a tag when `spec.verify` checks each digest.
fn oci_source(spec: &ReconcilePolicySpec) -> Result<Source, String> {
    let module = &spec.module;
    let reference = module.oci.as_deref().unwrap_or_default();
    let pinned = match (reference.rsplit_once('@'), &module.digest) {
        (Some((_, digest)), None) => {
            check_oci_digest(digest)?;
            reference.to_string()
        }
        (None, Some(digest)) => {
            check_oci_digest(digest)?;
            format!("{reference}@{digest}")
        }
        (Some((_, inline)), Some(digest)) if inline == digest => reference.to_string(),
        (Some((_, inline)), Some(digest)) => {
            return Err(format!(
                "spec.module.oci pins {inline} but spec.module.digest says {digest}"
            ));
        }
        // A tag is followed only when its digests are verified.
        (None, None) if spec.verify.is_some() => reference.to_string(),
        (None, None) => {
            return Err(format!(
                "spec.module.oci {reference:?} needs a digest: write it as repository@sha256:… or set spec.module.digest (or set spec.verify to follow a tag, verifying each digest behind it)"
            ));
        }
    };
    Ok(Source::Oci {
        reference: pinned,
        pull_secret: module.pull_secret.as_ref().map(|secret| SecretRef {
            namespace: secret.namespace.clone(),
            name: secret.name.clone(),
        }),
    })
}

pub(super) fn check_oci_digest(digest: &str) -> Result<(), String> {
    let hex = digest.strip_prefix("sha256:").unwrap_or("");
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(format!(
            "OCI digest {digest:?} is not sha256: followed by 64 hex digits"
        ))
    }
}

/// The fixture cases the module must pass: every `*.json` key of the
/// ConfigMap, by key.
pub(super) async fn fetch_cases(
    spec: &ReconcilePolicySpec,
    loader: &Loader,
) -> Result<Vec<(String, String)>, Problem> {
    let Some(source) = &spec.cases else {
        return Ok(Vec::new());
    };
    let key = &source.config_map;
    let what = format!("cases ConfigMap {}/{}", key.namespace, key.name);
    let config_map = loader
        .fetcher
        .config_map(&key.namespace, &key.name, &what)
        .await
        .map_err(|error| problem("FetchFailed", error.to_string()))?;
    let cases: Vec<(String, String)> = config_map
        .data
        .into_iter()
        .filter(|(k, _)| k.ends_with(".json"))
        .collect();
    if cases.is_empty() {
        return Err(problem(
            "CasesFailed",
            format!("{what}: no *.json keys in data"),
        ));
    }
    Ok(cases)
}

pub(super) fn cases_fingerprint(cases: &[(String, String)]) -> String {
    let mut hasher = Sha256::new();
    for (key, text) in cases {
        hasher.update(key.as_bytes());
        hasher.update([0]);
        hasher.update(text.as_bytes());
        hasher.update([0]);
    }
    hex::encode(&hasher.finalize()[..8])
}

/// Every case must pass; the refusal names the first failures.
pub(super) fn run_cases(policy: &LoadedPolicy, texts: &[(String, String)]) -> Result<(), Problem> {
    let mut failures = Vec::new();
    for (key, text) in texts {
        let case: cases::Case = match serde_json::from_str(text) {
            Ok(case) => case,
            Err(error) => {
                failures.push(format!("{key}: not a case file: {error}"));
                continue;
            }
        };
        let outcome = match policy.decide(&case.observation) {
            Ok(decision) => Ok(decision.plan),
            Err(policy::DecisionError::Policy { error, .. }) => Err(error),
            Err(error) => {
                failures.push(format!("{key}: the policy did not decide: {error}"));
                continue;
            }
        };
        if let Err(mismatch) = cases::check(&case, &outcome) {
            failures.push(format!("{key}: {mismatch}"));
        }
    }
    if failures.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = failures.iter().take(3).map(String::as_str).collect();
    Err(problem(
        "CasesFailed",
        format!(
            "{} of {} cases failed: {}",
            failures.len(),
            texts.len(),
            shown.join("; ")
        ),
    ))
}

pub(super) fn load_problem(error: LoadError) -> Problem {
    let reason = match &error {
        LoadError::WrongWorld { .. }
        | LoadError::ForbiddenImport { .. }
        | LoadError::Incompatible { .. }
        | LoadError::Link { .. } => "WorldMismatch",
        _ => "LoadFailed",
    };
    problem(reason, error.to_string())
}
