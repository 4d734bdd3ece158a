//! Load-time checks: is this a component, which worlds of the contract does
//! it implement, and does it import only what the sandbox provides? Each
//! failure says precisely what is missing or incompatible.

use std::fmt;

use wasmtime::Engine;
use wasmtime::component::Component;

/// The contract package.
pub const PACKAGE: &str = "radapp:policy";
/// The contract version guests are built against today (`wit/policy.wit`).
pub const VERSION: &str = "0.6.0";

/// A contract version this host loads guests of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contract {
    /// `wit/policy.wit`: observations carry the namespace's metadata.
    V0_6,
    /// `wit/v0.5/policy.wit`: policies and layers; a layer may detach.
    V0_5,
    /// `wit/v0.4/policy.wit`: policies and layers.
    V0_4,
    /// `wit/v0.3/policy.wit`.
    V0_3,
    /// `wit/v0.2/policy.wit`: older guests keep working.
    V0_2,
    /// `wit/v0.1/policy.wit`.
    V0_1,
}

impl Contract {
    /// Every version loaded, newest first.
    pub const ALL: [Contract; 6] = [
        Contract::V0_6,
        Contract::V0_5,
        Contract::V0_4,
        Contract::V0_3,
        Contract::V0_2,
        Contract::V0_1,
    ];

    pub fn version(self) -> &'static str {
        match self {
            Contract::V0_6 => "0.6.0",
            Contract::V0_5 => "0.5.0",
            Contract::V0_4 => "0.4.0",
            Contract::V0_3 => "0.3.0",
            Contract::V0_2 => "0.2.0",
            Contract::V0_1 => "0.1.0",
        }
    }
}

/// "radapp:policy@0.3.0, radapp:policy@0.2.0 and radapp:policy@0.1.0".
fn supported() -> String {
    let names: Vec<String> = Contract::ALL
        .iter()
        .map(|c| format!("{PACKAGE}@{}", c.version()))
        .collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

const METADATA: &str = "metadata";
const TEMPLATE_POLICY: &str = "template-policy";
const RESOURCE_POLICY: &str = "resource-policy";
const TEMPLATE_LAYER: &str = "template-layer";
const RESOURCE_LAYER: &str = "resource-layer";
/// Interfaces of our package that a guest may import (the type-only ones
/// come along with the interfaces that use them).
const IMPORTABLE: &[&str] = &["log", "types", "template-types", "resource-types"];

/// Why a policy could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{source_name}: cannot read the file: {detail}")]
    Read { source_name: String, detail: String },
    #[error(
        "{source_name}: not a WebAssembly file (it does not start with the \\0asm magic bytes)"
    )]
    NotWasm { source_name: String },
    #[error(
        "{source_name}: this is a core WebAssembly module, not a component; build the guest for \
         wasm32-wasip2 (or wrap the module with `wasm-tools component new`)"
    )]
    CoreModule { source_name: String },
    #[error("{source_name}: unsupported WebAssembly binary version/layer {version:#010x}")]
    UnknownLayer { source_name: String, version: u32 },
    #[error("{source_name}: the component does not compile: {detail}")]
    Compile { source_name: String, detail: String },
    #[error("{source_name}: {detail}")]
    WrongWorld { source_name: String, detail: String },
    #[error("{source_name}: imports {import}, which the policy sandbox does not provide ({why})")]
    ForbiddenImport {
        source_name: String,
        import: String,
        why: &'static str,
    },
    #[error("{source_name}: cannot be linked against the host: {detail}")]
    Link { source_name: String, detail: String },
    #[error("{source_name}: its exports do not match the contract it names: {detail}")]
    Incompatible { source_name: String, detail: String },
    #[error("{source_name}: describe() failed at load time: {detail}")]
    Describe { source_name: String, detail: String },
    /// The source supplied no component.
    #[error(transparent)]
    Source(#[from] radwasm_policy_fetch::SourceError),
}

/// Which parts of the contract a guest implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Worlds {
    /// It decides for `DeploymentTemplate`s (alone, or as a layer).
    pub template: bool,
    /// It decides for `DeploymentResource`s (alone, or as a layer).
    pub resource: bool,
    /// It is a layer: each kind it decides for, it decides over the plan of
    /// a base policy (contract 0.4 on). A guest is a policy or a layer, not
    /// both.
    pub layer: bool,
    /// The contract version the guest was built against.
    pub contract: Contract,
}

impl fmt::Display for Worlds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let version = self.contract.version();
        let (both, template, resource) = if self.layer {
            ("layer", "template-layer-guest", "resource-layer-guest")
        } else {
            ("policy", "template-policy-guest", "resource-policy-guest")
        };
        match (self.template, self.resource) {
            (true, true) => write!(f, "world {PACKAGE}/{both}@{version}"),
            (true, false) => write!(f, "world {PACKAGE}/{template}@{version}"),
            (false, true) => write!(f, "world {PACKAGE}/{resource}@{version}"),
            (false, false) => write!(f, "no world of {PACKAGE}@{version}"),
        }
    }
}

/// Tell a component from a core module or something else, before compiling.
pub fn check_binary_kind(source_name: &str, bytes: &[u8]) -> Result<(), LoadError> {
    let source_name = source_name.to_string();
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(LoadError::NotWasm { source_name });
    }
    let version = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    match version {
        // version 1, layer 0: a core module
        0x0000_0001 => Err(LoadError::CoreModule { source_name }),
        // layer 1: a component (version 0x0d of the binary format)
        v if v >> 16 == 1 => Ok(()),
        version => Err(LoadError::UnknownLayer {
            source_name,
            version,
        }),
    }
}

/// Check a compiled component's exports and imports against the contract.
pub fn check_component(
    source_name: &str,
    engine: &Engine,
    component: &Component,
) -> Result<Worlds, LoadError> {
    let ty = component.component_type();
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    let worlds = check_exports(source_name, &exports)?;
    for (name, _) in ty.imports(engine) {
        check_import(source_name, worlds.contract, name)?;
    }
    Ok(worlds)
}

/// Which worlds the export names implement, or what is missing.
fn check_exports(source_name: &str, exports: &[String]) -> Result<Worlds, LoadError> {
    // The version is the one its `metadata` export names; every other export
    // of the package must name the same one.
    let contract = Contract::ALL
        .into_iter()
        .find(|contract| {
            exports
                .iter()
                .any(|name| name == &qualified(METADATA, contract.version()))
        })
        .unwrap_or(Contract::V0_6);
    let version = contract.version();
    let qualified = |interface: &str| qualified(interface, version);
    let has = |interface: &str| exports.iter().any(|name| name == &qualified(interface));
    let policy = has(TEMPLATE_POLICY) || has(RESOURCE_POLICY);
    let layer = has(TEMPLATE_LAYER) || has(RESOURCE_LAYER);
    let worlds = Worlds {
        template: has(TEMPLATE_POLICY) || has(TEMPLATE_LAYER),
        resource: has(RESOURCE_POLICY) || has(RESOURCE_LAYER),
        layer,
        contract,
    };

    let mismatched: Vec<&String> = exports
        .iter()
        .filter(|name| {
            name.starts_with(&format!("{PACKAGE}/")) && !name.ends_with(&format!("@{version}"))
        })
        .collect();
    let wrong_world = |detail: String| LoadError::WrongWorld {
        source_name: source_name.to_string(),
        detail,
    };
    if !mismatched.is_empty() && has(METADATA) {
        let found: Vec<&str> = mismatched.iter().map(|name| name.as_str()).collect();
        return Err(wrong_world(format!(
            "mixes contract versions: it exports {} beside {}",
            found.join(", "),
            qualified(METADATA)
        )));
    }
    if policy && layer {
        let found: Vec<String> = [
            TEMPLATE_POLICY,
            RESOURCE_POLICY,
            TEMPLATE_LAYER,
            RESOURCE_LAYER,
        ]
        .into_iter()
        .filter(|interface| has(interface))
        .map(qualified)
        .collect();
        return Err(wrong_world(format!(
            "exports {}: a guest is a policy (world policy) or a layer (world layer), not both",
            found.join(" and ")
        )));
    }
    if !has(METADATA) || !(worlds.template || worlds.resource) {
        let detail = missing_exports(
            version,
            exports,
            &mismatched,
            has(METADATA),
            worlds.template || worlds.resource,
        );
        return Err(wrong_world(detail));
    }
    Ok(worlds)
}

/// Why a guest of contract `version` with `exports` is refused when it
/// lacks the metadata export (`metadata` false) or a world's export
/// (`world` false): what it does not export and, after it, what it exports
/// (`mismatched`: those of another contract version).
fn missing_exports(
    version: &str,
    exports: &[String],
    mismatched: &[&String],
    metadata: bool,
    world: bool,
) -> String {
    let qualified = |interface: &str| qualified(interface, version);
    let mut missing = Vec::new();
    if !metadata {
        missing.push(qualified(METADATA));
    }
    if !world {
        missing.push(format!(
            "{} or {} (a policy), or {} or {} (a layer)",
            qualified(TEMPLATE_POLICY),
            qualified(RESOURCE_POLICY),
            qualified(TEMPLATE_LAYER),
            qualified(RESOURCE_LAYER)
        ));
    }
    let mut detail = format!("does not export {}", missing.join(", and "));
    if !mismatched.is_empty() {
        let found: Vec<&str> = mismatched.iter().map(|name| name.as_str()).collect();
        detail.push_str(&format!(
            "; it exports {} — built against another version of the contract; this host implements {}",
            found.join(", "),
            supported()
        ));
    } else if exports.is_empty() {
        detail.push_str("; it exports nothing");
    } else {
        detail.push_str(&format!("; it exports {}", exports.join(", ")));
    }
    detail
}

fn qualified(interface: &str, version: &str) -> String {
    format!("{PACKAGE}/{interface}@{version}")
}

fn check_import(source_name: &str, contract: Contract, import: &str) -> Result<(), LoadError> {
    let forbidden = |why: &'static str| LoadError::ForbiddenImport {
        source_name: source_name.to_string(),
        import: import.to_string(),
        why,
    };
    if let Some(rest) = import.strip_prefix(&format!("{PACKAGE}/")) {
        let (interface, version) = rest.split_once('@').unwrap_or((rest, ""));
        if version != contract.version() {
            return Err(forbidden(
                "a guest imports the same contract version it exports",
            ));
        }
        if IMPORTABLE.contains(&interface) {
            return Ok(());
        }
        return Err(forbidden(
            "guests may import only radapp:policy/log and radapp:policy/types",
        ));
    }
    if import.starts_with("wasi:http/") {
        return Err(forbidden(
            "policies may not make network calls; the host does all I/O",
        ));
    }
    if import.starts_with("wasi:") {
        // Linked with a context that grants nothing (see sandbox.rs); the
        // linker reports any WASI interface or version it does not have.
        return Ok(());
    }
    Err(forbidden(
        "only radapp:policy/log and WASI 0.2 interfaces are provided",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_modules_and_garbage_are_told_apart_from_components() {
        let core = b"\0asm\x01\0\0\0";
        assert!(matches!(
            check_binary_kind("m.wasm", core),
            Err(LoadError::CoreModule { .. })
        ));
        let component = b"\0asm\x0d\0\x01\0";
        assert!(check_binary_kind("c.wasm", component).is_ok());
        let text = b"(module)";
        let error = check_binary_kind("t.wasm", text).expect_err("text is not wasm");
        assert!(error.to_string().contains("t.wasm"), "{error}");
    }

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn worlds_follow_the_exported_interfaces() {
        let both = names(&[
            "radapp:policy/metadata@0.1.0",
            "radapp:policy/template-policy@0.1.0",
            "radapp:policy/resource-policy@0.1.0",
        ]);
        let worlds = check_exports("p.wasm", &both).expect("implements world policy");
        assert_eq!(
            worlds,
            Worlds {
                template: true,
                resource: true,
                layer: false,
                contract: Contract::V0_1,
            }
        );
        let template_only = names(&[
            "radapp:policy/metadata@0.2.0",
            "radapp:policy/template-policy@0.2.0",
        ]);
        let worlds =
            check_exports("p.wasm", &template_only).expect("implements the template world");
        assert_eq!(
            worlds.to_string(),
            "world radapp:policy/template-policy-guest@0.2.0"
        );
        assert_eq!(worlds.contract, Contract::V0_2);
        let resource_only = names(&[
            "radapp:policy/metadata@0.3.0",
            "radapp:policy/resource-policy@0.3.0",
        ]);
        let worlds =
            check_exports("p.wasm", &resource_only).expect("implements the resource world");
        assert_eq!(
            worlds.to_string(),
            "world radapp:policy/resource-policy-guest@0.3.0"
        );
        assert_eq!(worlds.contract, Contract::V0_3);
    }

    #[test]
    fn layers_are_told_from_policies_and_never_both() {
        let layer = names(&[
            "radapp:policy/metadata@0.4.0",
            "radapp:policy/template-layer@0.4.0",
            "radapp:policy/resource-layer@0.4.0",
        ]);
        let worlds = check_exports("l.wasm", &layer).expect("a layer");
        assert!(worlds.layer && worlds.template && worlds.resource);
        assert_eq!(worlds.to_string(), "world radapp:policy/layer@0.4.0");
        let template_layer = names(&[
            "radapp:policy/metadata@0.4.0",
            "radapp:policy/template-layer@0.4.0",
        ]);
        let worlds = check_exports("l.wasm", &template_layer).expect("a template layer");
        assert_eq!(
            worlds.to_string(),
            "world radapp:policy/template-layer-guest@0.4.0"
        );
        let both = names(&[
            "radapp:policy/metadata@0.4.0",
            "radapp:policy/template-policy@0.4.0",
            "radapp:policy/resource-layer@0.4.0",
        ]);
        let error = check_exports("both.wasm", &both).expect_err("policy or layer");
        assert!(
            error.to_string().contains("not both")
                && error
                    .to_string()
                    .contains("radapp:policy/resource-layer@0.4.0"),
            "{error}"
        );
    }

    #[test]
    fn a_guest_built_against_another_contract_version_is_told_so() {
        let newer = names(&[
            "radapp:policy/metadata@0.7.0",
            "radapp:policy/template-policy@0.7.0",
        ]);
        let error = check_exports("new.wasm", &newer).expect_err("0.7.0 is not loaded");
        let message = error.to_string();
        assert!(message.contains("new.wasm"), "{message}");
        assert!(
            message.contains("radapp:policy/template-policy@0.7.0"),
            "{message}"
        );
        assert!(
            message.contains(
                "this host implements radapp:policy@0.6.0, radapp:policy@0.5.0, radapp:policy@0.4.0, radapp:policy@0.3.0, radapp:policy@0.2.0 and radapp:policy@0.1.0"
            ),
            "{message}"
        );
        let mixed = names(&[
            "radapp:policy/metadata@0.3.0",
            "radapp:policy/template-policy@0.2.0",
        ]);
        let error = check_exports("mixed.wasm", &mixed).expect_err("one version per guest");
        assert!(
            error.to_string().contains("mixes contract versions"),
            "{error}"
        );
    }

    #[test]
    fn a_guest_without_describe_is_told_what_is_missing() {
        let error = check_exports("p.wasm", &names(&["radapp:policy/template-policy@0.6.0"]))
            .expect_err("metadata is required");
        assert!(
            error
                .to_string()
                .contains("does not export radapp:policy/metadata@0.6.0"),
            "{error}"
        );
    }

    #[test]
    fn imports_outside_the_sandbox_are_named() {
        let error = check_import("p.wasm", Contract::V0_2, "wasi:http/outgoing-handler@0.2.0")
            .expect_err("http is forbidden");
        assert!(
            error
                .to_string()
                .contains("wasi:http/outgoing-handler@0.2.0"),
            "{error}"
        );
        assert!(check_import("p.wasm", Contract::V0_1, "radapp:policy/log@0.1.0").is_ok());
        assert!(check_import("p.wasm", Contract::V0_2, "radapp:policy/log@0.2.0").is_ok());
        assert!(check_import("p.wasm", Contract::V0_3, "radapp:policy/log@0.3.0").is_ok());
        assert!(check_import("p.wasm", Contract::V0_2, "radapp:policy/log@0.1.0").is_err());
        assert!(check_import("p.wasm", Contract::V0_3, "radapp:policy/log@0.2.0").is_err());
        assert!(check_import("p.wasm", Contract::V0_2, "acme:secrets/vault").is_err());
    }
}
