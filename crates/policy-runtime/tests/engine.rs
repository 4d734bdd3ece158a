//! The runtime on its own, as another program embeds it: the guests built
//! against contract 0.5 that the workspace keeps as fixtures
//! (`host/tests/fixtures/contract-0.5`) loaded, checked and run against
//! the example cases of the guests' sources.

use std::path::{Path, PathBuf};

use radwasm_policy_model::cases::load_cases;
use radwasm_policy_runtime::{
    BuiltIn, EngineOptions, Limits, LoadError, LoadedPolicy, PolicyEngine, check_case,
};

const DEFAULT_POLICY: &[u8] =
    include_bytes!("../../../host/tests/fixtures/contract-0.5/default-policy.wasm");
const TEAM_LABEL_LAYER: &[u8] =
    include_bytes!("../../../host/tests/fixtures/contract-0.5/team-label-layer.wasm");

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every example case of the guest `guest` against `policy`; panics naming
/// the first that fails. The number of cases run.
fn passes_cases(policy: &LoadedPolicy, guest: &str) -> usize {
    let cases = load_cases(&repository().join("guests").join(guest).join("cases")).expect("cases");
    for loaded in &cases {
        if let Err(failed) = check_case(policy, &loaded.case) {
            panic!("{}: {failed}", loaded.path.display());
        }
    }
    cases.len()
}

#[test]
fn a_policy_loads_and_decides_its_cases() {
    let engine = PolicyEngine::new(Limits::default()).expect("engine");
    let policy = engine
        .load_bytes("default-policy.wasm", DEFAULT_POLICY)
        .expect("loads");
    assert_eq!(
        policy.worlds().to_string(),
        "world radapp:policy/policy@0.5.0"
    );
    assert!(!policy.is_layer());
    assert_eq!(
        policy.digest(),
        radwasm_policy_runtime::digest(DEFAULT_POLICY)
    );
    let passed = passes_cases(&policy, "default-policy");
    assert!(passed >= 100, "{passed} cases");
}

#[test]
fn a_layer_needs_the_base_the_embedder_gives() {
    let alone = PolicyEngine::new(Limits::default()).expect("engine");
    let refused = alone
        .load_bytes("team-label-layer.wasm", TEAM_LABEL_LAYER)
        .err()
        .expect("no base: refused");
    assert!(matches!(refused, LoadError::Link { .. }), "{refused}");
    assert!(
        refused.to_string().contains("EngineOptions::base"),
        "{refused}"
    );

    let engine = PolicyEngine::with_options(
        Limits::default(),
        EngineOptions {
            base: Some(BuiltIn {
                name: "default-policy.wasm",
                bytes: DEFAULT_POLICY,
            }),
            ..EngineOptions::default()
        },
    )
    .expect("engine");
    let layer = engine
        .load_bytes("team-label-layer.wasm", TEAM_LABEL_LAYER)
        .expect("a layer over the base");
    assert!(layer.is_layer());
    assert_eq!(
        layer.base().map(LoadedPolicy::digest),
        Some(radwasm_policy_runtime::digest(DEFAULT_POLICY).as_str())
    );
    assert!(passes_cases(&layer, "team-label-layer") >= 6);
}
