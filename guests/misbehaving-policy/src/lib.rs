//! A guest that misbehaves on purpose, for the host's sandbox tests only.
//! The annotation `radwasm.test/misbehave` on the observed object chooses how:
//!
//! | value | behaviour |
//! | --- | --- |
//! | `loop` | spins forever (the fuel budget must stop it) |
//! | `allocate` | grows memory without bound (the memory cap must stop it) |
//! | `trap` | panics (a trap) |
//! | `error` | returns a policy error |
//! | `log-flood` | logs 5,000 messages (the host keeps a capped number) |
//! | `clock` | reports the wall clock and a random number (both must be fixed) |
//! | `count` | reports how many decisions this instance has made (must be 1) |
//! | `oversized-plan` | returns 1,100 actions (the host's guard rails allow 1,024) |
//! | `hasty` | decides as the default policy, but asks to be requeued at once after every decision (for both kinds, read from the template) |
//! | `rename-deployments` | decides as the default policy, but names its deployments `renamed-{10 hex of the spec hash}` (for both kinds, read from the template) |
//!
//! Anything else gives an empty plan. Never ship this guest.

use std::sync::atomic::{AtomicU64, Ordering};

use radwasm_policy_sdk::model::{
    Description, PolicyError, ResourceAction, ResourceObservation, ResourcePlan, TemplateAction,
    TemplateObservation, TemplatePlan, TemplateStatusUpdate,
};
use radwasm_policy_sdk::{Level, Policy, log};

const MISBEHAVE: &str = "radwasm.test/misbehave";

static DECISIONS: AtomicU64 = AtomicU64::new(0);

struct Misbehaving;

fn report(message: String) -> TemplatePlan {
    TemplatePlan {
        actions: vec![TemplateAction::SetStatus(TemplateStatusUpdate {
            message: Some(message),
            ..TemplateStatusUpdate::default()
        })],
    }
}

impl Policy for Misbehaving {
    fn describe() -> Description {
        Description {
            name: "misbehaving".to_string(),
            version: "0.0.0".to_string(),
            summary: "Test-only guest that loops, allocates, traps and floods logs on request"
                .to_string(),
            annotations: Vec::new(),
        }
    }

    fn decide_template(observation: &TemplateObservation) -> Result<TemplatePlan, PolicyError> {
        let decisions = DECISIONS.fetch_add(1, Ordering::SeqCst) + 1;
        match observation
            .meta
            .annotations
            .get(MISBEHAVE)
            .map(String::as_str)
        {
            Some("loop") => {
                let mut spins: u64 = 0;
                loop {
                    spins = std::hint::black_box(spins.wrapping_add(1));
                }
            }
            Some("allocate") => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            Some("trap") => panic!("misbehaving guest asked to trap"),
            Some("error") => Err(PolicyError {
                code: "Misbehaving".to_string(),
                message: "asked to refuse".to_string(),
            }),
            Some("log-flood") => {
                for i in 0..5_000 {
                    log(Level::Info, &format!("flood message {i}"));
                }
                Ok(TemplatePlan::default())
            }
            Some("clock") => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|elapsed| elapsed.as_secs())
                    .unwrap_or(0);
                let random = std::collections::hash_map::RandomState::new();
                let hash = std::hash::BuildHasher::hash_one(&random, "radwasm");
                Ok(report(format!("clock {now} random {hash}")))
            }
            Some("count") => Ok(report(format!("decisions in this instance: {decisions}"))),
            Some("oversized-plan") => Ok(TemplatePlan {
                actions: vec![TemplateAction::AddFinalizer; 1_100],
            }),
            Some("rename-deployments") => {
                let mut plan = radwasm_policy_core::decide_template(observation)?;
                for action in &mut plan.actions {
                    if let TemplateAction::StartDeployment(start) = action {
                        let hash = &observation.spec_hash;
                        start.deployment_name = format!("renamed-{}", &hash[..hash.len().min(10)]);
                    }
                }
                Ok(plan)
            }
            Some("hasty") => {
                let mut plan = radwasm_policy_core::decide_template(observation)?;
                for action in &mut plan.actions {
                    if let TemplateAction::RequeueAfter(ms) = action {
                        *ms = 0;
                    }
                }
                Ok(plan)
            }
            _ => Ok(TemplatePlan::default()),
        }
    }

    fn decide_resource(observation: &ResourceObservation) -> Result<ResourcePlan, PolicyError> {
        let mode = observation
            .owner
            .as_ref()
            .and_then(|owner| owner.annotations.get(MISBEHAVE))
            .map(String::as_str);
        match mode {
            Some("rename-deployments") => radwasm_policy_core::decide_resource(observation),
            Some("hasty") => {
                let mut plan = radwasm_policy_core::decide_resource(observation)?;
                for action in &mut plan.actions {
                    if let ResourceAction::RequeueAfter(ms) = action {
                        *ms = 0;
                    }
                }
                Ok(plan)
            }
            _ => Ok(ResourcePlan::default()),
        }
    }
}

radwasm_policy_sdk::export_policy!(Misbehaving);
