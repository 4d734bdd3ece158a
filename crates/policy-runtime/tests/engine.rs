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

/// Every example case of the guest `guest` against `policy`, a guest kept
/// as a fixture: it passes each case but those whose expected plan changed
/// after it was built (`host/tests/fixtures/cases-changed-since.txt`),
/// which it must fail. Panics naming the first that does otherwise; the
/// number of cases run.
fn passes_cases(policy: &LoadedPolicy, guest: &str) -> usize {
    let list = repository().join("host/tests/fixtures/cases-changed-since.txt");
    let list = std::fs::read_to_string(&list).expect("the list of changed cases");
    let changed: Vec<&str> = list
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect();
    let cases = load_cases(&repository().join("guests").join(guest).join("cases")).expect("cases");
    for loaded in &cases {
        let listed = changed.iter().any(|case| loaded.path.ends_with(case));
        match check_case(policy, &loaded.case) {
            Err(failed) if !listed => panic!("{}: {failed}", loaded.path.display()),
            Ok(()) if listed => {
                panic!("{} is listed as changed, yet passes", loaded.path.display())
            }
            _ => {}
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
