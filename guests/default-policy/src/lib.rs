//! The default reconcile policy as a wasm component: the logic of
//! `radwasm-policy-core`, exported through the SDK. The host embeds this
//! guest; it is also the template for a custom policy.

struct DefaultPolicy;

impl radwasm_policy_sdk::Policy for DefaultPolicy {}

radwasm_policy_sdk::export_policy!(DefaultPolicy);
