use super::*;
use crate::controller::worker_fuel::{HEADROOM, WORKER_FUEL_CEILING, WORKER_FUEL_FLOOR};
use crate::policy::{Limits, embedded};

/// A new template (nothing deployed yet, so the policy reads the whole
/// template) of `containers` containers.
fn new_template(containers: usize) -> model::TemplateObservation {
    let resources: serde_json::Map<String, serde_json::Value> = (0..containers)
        .map(|i| {
            let resource = serde_json::json!({
                "import": "Radius",
                "type": "Applications.Core/containers@2023-10-01-preview",
                "properties": {
                    "name": format!("worker-{i}"),
                    "properties": {"container": {"image": "ghcr.io/radius-project/samples/demo:0.0"}}
                }
            });
            (format!("c{i}"), resource)
        })
        .collect();
    let template = serde_json::json!({
        "languageVersion": "2.1-experimental",
        "imports": {"Radius": {"provider": "Radius", "version": "latest"}},
        "resources": resources,
    });
    serde_json::from_value(serde_json::json!({
        "meta": {
            "name": "big",
            "namespace": "default",
            "uid": "u-1",
            "generation": 1,
            "finalizers": [model::TEMPLATE_FINALIZER],
        },
        "spec": {
            "template": template.to_string(),
            "parameters": "{}",
            "providerConfig": r#"{"radius": {"type": "radius", "value": {"scope": "/planes/radius/local/resourceGroups/default"}}}"#,
        },
        "specHash": "h-1",
    }))
    .expect("a template observation")
}

type Ask = fn(
    &LoadedPolicy,
    &model::TemplateObservation,
) -> Result<Decision<model::TemplatePlan>, DecisionError>;
const ASK: Ask = LoadedPolicy::decide_template;

fn default_policy() -> LoadedPolicy {
    let engine = crate::policy::engine(Limits::default()).expect("engine");
    let policy = embedded::load_default(&engine).expect("the default policy");
    assert!(!policy.uses_wasi(), "the default policy imports no WASI");
    policy
}

/// Decide `times` times for `observation`; where each ran.
async fn decide_times(
    policy: &LoadedPolicy,
    observation: &model::TemplateObservation,
    times: usize,
    fuel: &WorkerFuel,
    metrics: &Metrics,
) -> Vec<Ran> {
    let direct = ASK(policy, observation).expect("decided with the whole budget");
    let mut ran = Vec::new();
    for _ in 0..times {
        let decided = decide(policy, observation.clone(), ASK, fuel, metrics)
            .await
            .expect("decided");
        let decision = decided.decision.expect("a plan");
        assert_eq!(decision.plan, direct.plan);
        assert_eq!(decision.fuel_used, direct.fuel_used);
        ran.push(decided.ran);
    }
    ran
}

/// `radwasm_policy_decision_reruns_total` of the default policy.
fn reruns(metrics: &Metrics, policy: &LoadedPolicy) -> u64 {
    let labels = PolicyLabels::new(policy);
    let line = format!(
        "radwasm_policy_decision_reruns_total{{policy=\"{}\",version=\"{}\"}} ",
        labels.policy, labels.version
    );
    metrics
        .encode()
        .lines()
        .find_map(|text| text.strip_prefix(line.as_str()))
        .map_or(0, |count| count.trim().parse().expect("a count"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_light_policy_stays_on_the_worker() {
    let policy = default_policy();
    let (fuel, metrics) = (WorkerFuel::default(), Metrics::default());
    let small = new_template(3);
    let ran = decide_times(&policy, &small, 3, &fuel, &metrics).await;
    assert_eq!(ran, [Ran::Worker; 3]);
    assert_eq!(reruns(&metrics, &policy), 0);
    assert_eq!(
        fuel.placement(policy.digest(), policy.limits().fuel),
        Placement::Worker(WORKER_FUEL_FLOOR)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_heavy_policy_is_decided_twice_once_then_fits_its_slice() {
    let policy = default_policy();
    let (fuel, metrics) = (WorkerFuel::default(), Metrics::default());
    // Reading 500 containers takes about three times the floor: what an
    // interpreted guest needs for a small decision.
    let medium = new_template(500);
    let needs = ASK(&policy, &medium).expect("a plan").fuel_used;
    assert!(
        needs > WORKER_FUEL_FLOOR && needs * HEADROOM <= WORKER_FUEL_CEILING,
        "{needs}"
    );
    let ran = decide_times(&policy, &medium, 4, &fuel, &metrics).await;
    assert_eq!(ran, [Ran::Rerun, Ran::Worker, Ran::Worker, Ran::Worker]);
    assert_eq!(reruns(&metrics, &policy), 1);
    // Lighter decisions of the same policy keep the slice learned.
    let ran = decide_times(&policy, &new_template(3), 1, &fuel, &metrics).await;
    assert_eq!(ran, [Ran::Worker]);
    assert_eq!(
        fuel.placement(policy.digest(), policy.limits().fuel),
        Placement::Worker(needs * HEADROOM)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn past_the_ceiling_a_policy_starts_on_the_blocking_pool() {
    let policy = default_policy();
    let (fuel, metrics) = (WorkerFuel::default(), Metrics::default());
    let large = new_template(1_000);
    let needs = ASK(&policy, &large).expect("a plan").fuel_used;
    assert!(needs * HEADROOM > WORKER_FUEL_CEILING, "{needs}");
    let ran = decide_times(&policy, &large, 3, &fuel, &metrics).await;
    assert_eq!(ran, [Ran::Rerun, Ran::Blocking, Ran::Blocking]);
    assert_eq!(reruns(&metrics, &policy), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_decision_over_its_own_budget_is_out_of_fuel_against_that_budget() {
    let policy = default_policy();
    let (fuel, metrics) = (WorkerFuel::default(), Metrics::default());
    let large = new_template(3_000);
    let direct = ASK(&policy, &large).expect("decided with the whole budget");
    // Half of what it needs is out of fuel, reported against that
    // budget, after the rerun with the whole of it.
    let short = direct.fuel_used / 2;
    let limited = policy.with_fuel(short);
    for expected in [Ran::Rerun, Ran::Blocking] {
        let decided = decide(&limited, large.clone(), ASK, &fuel, &metrics)
            .await
            .expect("decided");
        assert_eq!(decided.ran, expected);
        match decided.decision {
            Err(DecisionError::OutOfFuel { fuel, .. }) => assert_eq!(fuel, short),
            other => panic!(
                "expected out of fuel at {short}, got {:?}",
                other.map(|d| d.plan)
            ),
        }
    }
    // A budget within the slice is final on the worker: nothing to rerun.
    let tiny = policy.with_fuel(10_000);
    let decided = decide(
        &tiny,
        new_template(3),
        ASK,
        &WorkerFuel::default(),
        &metrics,
    )
    .await
    .expect("decided");
    assert_eq!(decided.ran, Ran::Worker);
    assert!(matches!(
        decided.decision,
        Err(DecisionError::OutOfFuel { fuel: 10_000, .. })
    ));
}
