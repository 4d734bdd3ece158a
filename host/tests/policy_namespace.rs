//! Contract 0.6: the observation carries the labels and annotations of the
//! object's namespace. The one-layer rule of `docs/layers.md` ("A rule on
//! the namespace") against its cases, the guide's Rust block against the
//! guest that runs it, and guests built against 0.5 (kept in
//! `tests/fixtures/contract-0.5`) loading and deciding as before.
#![allow(
    clippy::too_many_lines,
    reason = "a test or benchmark scenario reads top to bottom as one story"
)]

use std::path::{Path, PathBuf};

use radwasm::policy::{DecisionError, Limits, LoadedPolicy, PolicyEngine, check_case};
use radwasm_policy_model::Observation;
use radwasm_policy_model::cases::{load_case, load_cases};
use radwasm_test_support::repository;

fn guest(name: &str) -> PathBuf {
    PathBuf::from(env!("RADWASM_GUEST_DIR")).join(format!("{name}.wasm"))
}

fn contract_0_5(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/contract-0.5")
        .join(format!("{name}.wasm"))
}

fn engine() -> PolicyEngine {
    radwasm::policy::engine(Limits {
        fuel: 20_000_000,
        memory_bytes: 16 << 20,
        concurrent_decisions: 8,
    })
    .expect("engine")
}

/// Run every case under `dir` against `policy`; panics naming the first
/// that fails. The number of cases run.
fn passes_cases(policy: &LoadedPolicy, dir: &Path) -> usize {
    let cases = load_cases(dir).expect("cases");
    for loaded in &cases {
        if let Err(failed) = check_case(policy, &loaded.case) {
            panic!("{}: {failed}", loaded.path.display());
        }
    }
    cases.len()
}

fn cases_of(guest: &str) -> PathBuf {
    repository().join("guests").join(guest).join("cases")
}

#[test]
fn the_namespace_rule_is_one_layer_that_passes_its_cases() {
    let engine = engine();
    let layer = engine
        .load_file(&guest("prod-owner-layer"))
        .expect("the layer loads");
    assert_eq!(
        layer.worlds().to_string(),
        "world radapp:policy/layer@0.6.0"
    );
    assert_eq!(passes_cases(&layer, &cases_of("prod-owner-layer")), 5);
}

#[test]
fn the_rule_reads_the_namespace_not_the_template() {
    // The refused case, with `env=prod` and no owner moved from the
    // namespace onto the template itself: the layer deploys it, so what
    // refuses is the namespace's metadata the host put in the observation.
    let engine = engine();
    let layer = engine
        .load_file(&guest("prod-owner-layer"))
        .expect("the layer loads");
    let case = cases_of("prod-owner-layer").join("01-prod-namespace-without-owner-is-refused.json");
    let Observation::DeploymentTemplate(mut observation) =
        load_case(&case).expect("case").case.observation
    else {
        panic!("a template case");
    };
    match layer.decide(&Observation::DeploymentTemplate(observation.clone())) {
        Err(DecisionError::Policy { error, .. }) => assert_eq!(error.code, "MissingNamespaceOwner"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    observation.meta.labels = std::mem::take(&mut observation.namespace.labels);
    observation.namespace.annotations.clear();
    layer
        .decide(&Observation::DeploymentTemplate(observation))
        .expect("the template's own labels are not the namespace's");
}

/// Source text as tokens: comments and whitespace gone, and a comma
/// before a closing bracket dropped (rustfmt adds it when it breaks a
/// struct literal over lines), so the guide's compact block and the
/// formatted guest compare equal when their code is the same.
fn tokens(source: &str) -> String {
    let code: String = source
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .flat_map(|line| line.chars().filter(|c| !c.is_whitespace()))
        .collect();
    code.replace(",}", "}").replace(",)", ")")
}

/// The code block of `lang` in `docs/layers.md`'s section "A rule on the
/// namespace".
fn guide_block(lang: &str) -> String {
    let guide = std::fs::read_to_string(repository().join("docs/layers.md")).expect("layers.md");
    let section = &guide[guide
        .find("## A rule on the namespace")
        .expect("the section")..];
    let fence = format!("```{lang}\n");
    let start = section.find(&fence).expect("the block") + fence.len();
    let end = start + section[start..].find("```").expect("its end");
    section[start..end].to_string()
}

#[test]
fn the_guides_rust_rule_is_at_most_ten_lines_and_is_the_guests() {
    let block = guide_block("rust");
    let code_lines = block
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .count();
    assert!(code_lines <= 10, "the rule is {code_lines} lines:\n{block}");
    let source = std::fs::read_to_string(repository().join("guests/prod-owner-layer/src/lib.rs"))
        .expect("the guest's source");
    assert!(
        tokens(&source).contains(&tokens(&block)),
        "guests/prod-owner-layer/src/lib.rs does not hold the guide's block:\n{block}"
    );
}

#[test]
fn a_case_file_with_a_misspelt_namespace_field_names_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bad.json");
    std::fs::write(
        &path,
        r#"{"observation": {"deploymentTemplate": {"meta": {"name": "app"},
             "namespace": {"label": {"env": "prod"}}}},
            "expect": {"match": "partial", "actions": []}}"#,
    )
    .expect("write");
    let error = load_case(&path).expect_err("refused");
    let text = error.to_string();
    assert!(
        text.contains("bad.json")
            && text.contains("unknown field `label`")
            && text.contains("`labels`"),
        "{text}"
    );
}

#[test]
fn guests_built_against_contract_0_5_load_and_decide_as_before() {
    let engine = engine();
    for (name, world, cases, at_least) in [
        ("default-policy", "policy", "default-policy", 100),
        ("team-label-layer", "layer", "team-label-layer", 6),
        // A 0.5 layer still has its base detach a child.
        ("keep-data-stores", "layer", "keep-data-stores", 4),
    ] {
        let policy = engine
            .load_file(&contract_0_5(name))
            .unwrap_or_else(|error| panic!("the 0.5 {name} loads: {error}"));
        assert_eq!(
            policy.worlds().to_string(),
            format!("world radapp:policy/{world}@0.5.0")
        );
        let passed = radwasm_test_support::kept_guest_passes_cases(&policy, &cases_of(cases));
        assert!(passed >= at_least, "{name}: {passed} cases");
    }
}

#[test]
fn a_0_5_layer_decides_on_an_observation_with_namespace_metadata() {
    // A 0.5 guest has no field for it: the host drops it, and the layer
    // decides as it did (here: over the default, a labelled template
    // deploys).
    let engine = engine();
    let layer = engine
        .load_file(&contract_0_5("team-label-layer"))
        .expect("a 0.5 layer loads");
    let case = cases_of("prod-owner-layer").join("01-prod-namespace-without-owner-is-refused.json");
    let Observation::DeploymentTemplate(mut observation) =
        load_case(&case).expect("case").case.observation
    else {
        panic!("a template case");
    };
    observation.meta.labels.insert("team".into(), "shop".into());
    assert!(!observation.namespace.labels.is_empty());
    let decision = layer
        .decide(&Observation::DeploymentTemplate(observation))
        .expect("decides");
    let radwasm_policy_model::Plan::DeploymentTemplate(plan) = decision.plan else {
        panic!("a template plan");
    };
    assert!(
        plan.actions.iter().any(|action| matches!(
            action,
            radwasm_policy_model::TemplateAction::StartDeployment(_)
        )),
        "{plan:?}"
    );
}

fn radwasm(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_radwasm"))
        .args(args)
        .output()
        .expect("run radwasm")
}

#[test]
fn policy_run_and_test_take_the_namespace_from_the_files() {
    let layer = guest("prod-owner-layer").display().to_string();
    let cases = cases_of("prod-owner-layer").display().to_string();
    let output = radwasm(&["policy", "test", &layer, &cases]);
    let all = radwasm_test_support::output_text(&output);
    assert!(output.status.success(), "{all}");
    assert!(all.contains("5 passed, 0 failed"), "{all}");

    // An observation file: refused with the namespace labelled, decided
    // by the base without it (absent is empty).
    let dir = tempfile::tempdir().expect("temp dir");
    let observation = |namespace: &str| {
        format!(
            r#"{{"deploymentTemplate": {{"meta": {{"name": "app", "namespace": "shop"}}{namespace}}}}}"#
        )
    };
    let labelled = dir.path().join("labelled.json");
    std::fs::write(
        &labelled,
        observation(r#", "namespace": {"labels": {"env": "prod"}}"#),
    )
    .expect("write");
    let output = radwasm(&[
        "policy",
        "run",
        &layer,
        "--observation",
        &labelled.display().to_string(),
    ]);
    let all = radwasm_test_support::output_text(&output);
    assert!(!output.status.success(), "{all}");
    assert!(all.contains("MissingNamespaceOwner"), "{all}");

    let unlabelled = dir.path().join("unlabelled.json");
    std::fs::write(&unlabelled, observation("")).expect("write");
    let output = radwasm(&[
        "policy",
        "run",
        &layer,
        "--observation",
        &unlabelled.display().to_string(),
    ]);
    let all = radwasm_test_support::output_text(&output);
    assert!(output.status.success(), "{all}");
    assert!(all.contains("addFinalizer"), "{all}");
}
