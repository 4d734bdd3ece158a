//! Fixture cases (`radwasm_policy_model::cases`) run against a loaded
//! policy: what `radwasm policy test` and the tests of guests do.

use radwasm_policy_model::cases::{self, Case};

use super::{DecisionError, LoadedPolicy};

/// Decide `case`'s observation with `policy` and compare the outcome with
/// what the case expects. A refusal the policy answers (a policy error) is
/// an outcome a case may expect; a decision that did not finish (a trap,
/// fuel, memory) fails the case. The error says why it failed.
pub fn check_case(policy: &LoadedPolicy, case: &Case) -> Result<(), String> {
    let outcome = match policy.decide(&case.observation) {
        Ok(decision) => Ok(decision.plan),
        Err(DecisionError::Policy { error, .. }) => Err(error),
        Err(error) => return Err(format!("the policy did not decide: {error}")),
    };
    cases::check(case, &outcome).map_err(|mismatch| mismatch.to_string())
}
