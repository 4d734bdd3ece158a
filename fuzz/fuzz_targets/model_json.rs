//! The JSON form of observations and plans (`radwasm_policy_model`): any
//! bytes as each of `Observation`, `Plan`, `TemplateObservation`,
//! `ResourceObservation`, `TemplatePlan` and `ResourcePlan`. Whatever
//! deserializes must serialize, read back to an equal value and serialize to
//! the same text; and every observation that deserializes goes to the
//! default policy, whose decision must not panic, must be the same when
//! asked twice and must pass the host's guard rails.

#![no_main]

use libfuzzer_sys::fuzz_target;
use radwasm_fuzz::{check_resource_decision, check_template_decision};
use radwasm_policy_model::{
    Observation, Plan, ResourceObservation, ResourcePlan, TemplateObservation, TemplatePlan,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

fn round_trip<T>(data: &[u8]) -> Option<T>
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let parsed: T = serde_json::from_slice(data).ok()?;
    let text = serde_json::to_string(&parsed).expect("an accepted value serializes");
    let again: T = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{e}: its own JSON is refused: {text}"));
    assert_eq!(again, parsed, "{text}");
    assert_eq!(serde_json::to_string(&again).expect("serializes"), text);
    // The value form (what fixture files go through) agrees.
    let value = serde_json::to_value(&parsed).expect("serializes to a value");
    let from_value: T = serde_json::from_value(value).expect("its own value is accepted");
    assert_eq!(from_value, parsed);
    Some(parsed)
}

fuzz_target!(|data: &[u8]| {
    match round_trip::<Observation>(data) {
        Some(Observation::DeploymentTemplate(observation)) => check_template_decision(&observation),
        Some(Observation::DeploymentResource(observation)) => check_resource_decision(&observation),
        None => {}
    }
    if let Some(observation) = round_trip::<TemplateObservation>(data) {
        check_template_decision(&observation);
    }
    if let Some(observation) = round_trip::<ResourceObservation>(data) {
        check_resource_decision(&observation);
    }
    let _ = round_trip::<Plan>(data);
    let _ = round_trip::<TemplatePlan>(data);
    let _ = round_trip::<ResourcePlan>(data);
});
