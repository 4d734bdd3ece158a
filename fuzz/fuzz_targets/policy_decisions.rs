//! The default policy's decisions (`radwasm_policy_core::decide_template`,
//! `decide_resource`) on observations built from the fuzz input: mostly what
//! the host observes (valid scopes and ids, the finalizers, every operation
//! result, failure records, dependency cycles, deployment records), with
//! hostile or very long values anywhere. Never a panic, the same answer when
//! asked twice, and a plan the host's guard rails accept.

#![no_main]

use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use radwasm_fuzz::{
    check_resource_decision, check_template_decision, resource_observation, template_observation,
};

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(template) = u.arbitrary::<bool>() else {
        return;
    };
    if template {
        if let Ok(observation) = template_observation(&mut u) {
            check_template_decision(&observation);
        }
    } else if let Ok(observation) = resource_observation(&mut u) {
        check_resource_decision(&observation);
    }
});
