//! Fixture cases: an observation and what the policy must answer, one case
//! per `.json` file. Used by `radwasm policy test` (through the wasm guest)
//! and by native tests of the policy logic, with the same matching rules.
//!
//! ```json
//! {"description": "a new template gets the finalizer first",
//!  "observation": {"deploymentTemplate": {"meta": {"name": "app"}}},
//!  "expect": {"match": "partial", "actions": ["addFinalizer"]}}
//! ```
//!
//! `expect` is either `{"match": "exact" | "partial", "actions": [...]}` or
//! `{"error": {"code": "...", "messageContains": "..."}}`.
//!
//! * **exact**: the plan's actions equal `actions`, in order.
//! * **partial**: each expected action matches an actual action, in order
//!   (other actions may come between). An expected value matches an actual
//!   one if they are equal or, for objects, if every expected key is present
//!   in the actual object with a matching value. Arrays match element by
//!   element and must have the same length.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::{Observation, Plan, PolicyError};

/// How expected actions are compared with the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MatchMode {
    #[default]
    Exact,
    Partial,
}

/// An expected policy error.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpectedError {
    pub code: String,
    #[serde(default)]
    pub message_contains: Option<String>,
}

/// What a case expects.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expectation {
    #[serde(default, rename = "match")]
    pub match_mode: MatchMode,
    #[serde(default)]
    pub actions: Option<Vec<Value>>,
    #[serde(default)]
    pub error: Option<ExpectedError>,
}

/// One fixture case.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Case {
    #[serde(default)]
    pub description: String,
    pub observation: Observation,
    pub expect: Expectation,
}

/// A case with the file it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedCase {
    pub path: PathBuf,
    pub case: Case,
}

/// A case file that could not be read or understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseError {
    pub path: PathBuf,
    pub problem: String,
}

impl fmt::Display for CaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.problem)
    }
}

impl std::error::Error for CaseError {}

/// Load one case file, or every `*.json` below a directory (sorted by path).
pub fn load_cases(path: &Path) -> Result<Vec<LoadedCase>, CaseError> {
    case_files(path)?
        .iter()
        .map(|file| load_case(file))
        .collect()
}

/// The case files `path` names: itself if it is a file, else every
/// `*.json` below it (sorted by path), each to be loaded with [`load_case`].
pub fn case_files(path: &Path) -> Result<Vec<PathBuf>, CaseError> {
    let mut files = Vec::new();
    collect(path, &mut files)?;
    files.sort();
    Ok(files)
}

fn collect(path: &Path, files: &mut Vec<PathBuf>) -> Result<(), CaseError> {
    let error = |problem: String| CaseError {
        path: path.to_path_buf(),
        problem,
    };
    let metadata = std::fs::metadata(path).map_err(|e| error(format!("cannot read: {e}")))?;
    if metadata.is_file() {
        files.push(path.to_path_buf());
        return Ok(());
    }
    let entries = std::fs::read_dir(path).map_err(|e| error(format!("cannot list: {e}")))?;
    for entry in entries {
        let entry = entry.map_err(|e| error(format!("cannot list: {e}")))?;
        let child = entry.path();
        if child.is_dir() {
            collect(&child, files)?;
        } else if child.extension().is_some_and(|ext| ext == "json") {
            files.push(child);
        }
    }
    Ok(())
}

/// Load one case file.
pub fn load_case(path: &Path) -> Result<LoadedCase, CaseError> {
    let error = |problem: String| CaseError {
        path: path.to_path_buf(),
        problem,
    };
    let text = std::fs::read_to_string(path).map_err(|e| error(format!("cannot read: {e}")))?;
    let case: Case =
        serde_json::from_str(&text).map_err(|e| error(format!("not a valid case: {e}")))?;
    match (&case.expect.actions, &case.expect.error) {
        (Some(_), Some(_)) => {
            return Err(error(
                "expect holds both \"actions\" and \"error\"; give one".into(),
            ));
        }
        (None, None) => {
            return Err(error(
                "expect needs \"actions\" (a plan) or \"error\" (a policy error)".into(),
            ));
        }
        _ => {}
    }
    Ok(LoadedCase {
        path: path.to_path_buf(),
        case,
    })
}

/// How a policy's answer differs from the case's expectation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch(pub String);

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Mismatch {}

/// Compare a policy's answer with what the case expects.
pub fn check(case: &Case, outcome: &Result<Plan, PolicyError>) -> Result<(), Mismatch> {
    match (&case.expect.error, outcome) {
        (Some(expected), Err(actual)) => {
            if expected.code != actual.code {
                return Err(Mismatch(format!(
                    "expected policy error code {:?}, got {:?} ({})",
                    expected.code, actual.code, actual.message
                )));
            }
            match &expected.message_contains {
                Some(part) if !actual.message.contains(part.as_str()) => Err(Mismatch(format!(
                    "policy error message {:?} does not contain {part:?}",
                    actual.message
                ))),
                _ => Ok(()),
            }
        }
        (Some(expected), Ok(plan)) => Err(Mismatch(format!(
            "expected policy error {:?}, got a plan with {} actions: {}",
            expected.code,
            plan.len(),
            compact(&actions_of(plan))
        ))),
        (None, Err(actual)) => Err(Mismatch(format!(
            "expected a plan, got policy error {actual}"
        ))),
        (None, Ok(plan)) => {
            let expected = case.expect.actions.as_deref().unwrap_or_default();
            let actual = actions_of(plan);
            match case.expect.match_mode {
                MatchMode::Exact => check_exact(expected, &actual),
                MatchMode::Partial => check_partial(expected, &actual),
            }
        }
    }
}

fn actions_of(plan: &Plan) -> Vec<Value> {
    let value = match plan {
        Plan::DeploymentTemplate(plan) => serde_json::to_value(&plan.actions),
        Plan::DeploymentResource(plan) => serde_json::to_value(&plan.actions),
    };
    match value {
        Ok(Value::Array(actions)) => actions,
        _ => Vec::new(),
    }
}

fn compact(values: &[Value]) -> String {
    serde_json::to_string(values).unwrap_or_default()
}

fn check_exact(expected: &[Value], actual: &[Value]) -> Result<(), Mismatch> {
    for (index, (want, got)) in expected.iter().zip(actual).enumerate() {
        if want != got {
            return Err(Mismatch(format!(
                "action {index}: expected {want} but got {got}"
            )));
        }
    }
    if expected.len() != actual.len() {
        let (more, which) = if actual.len() > expected.len() {
            ("unexpected extra", &actual[expected.len()..])
        } else {
            ("missing", &expected[actual.len()..])
        };
        return Err(Mismatch(format!(
            "expected {} actions, got {}; {more}: {}",
            expected.len(),
            actual.len(),
            compact(which)
        )));
    }
    Ok(())
}

fn check_partial(expected: &[Value], actual: &[Value]) -> Result<(), Mismatch> {
    let mut from = 0;
    for (index, want) in expected.iter().enumerate() {
        match actual[from..].iter().position(|got| matches(want, got)) {
            Some(offset) => from += offset + 1,
            None => {
                return Err(Mismatch(format!(
                    "expected action #{index} {want} not found (in order) among the plan's actions {}",
                    compact(actual)
                )));
            }
        }
    }
    Ok(())
}

/// Partial match: equal, or every expected object key matches recursively.
pub fn matches(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Object(want), Value::Object(got)) => want
            .iter()
            .all(|(key, value)| got.get(key).is_some_and(|actual| matches(value, actual))),
        (Value::Array(want), Value::Array(got)) => {
            want.len() == got.len() && want.iter().zip(got).all(|(w, g)| matches(w, g))
        }
        _ => expected == actual,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{TemplateAction, TemplatePlan};
    use serde_json::json;

    fn case(expect: Value) -> Case {
        serde_json::from_value(json!({
            "observation": {"deploymentTemplate": {}},
            "expect": expect
        }))
        .expect("valid case")
    }

    fn plan(actions: Vec<TemplateAction>) -> Result<Plan, PolicyError> {
        Ok(Plan::DeploymentTemplate(TemplatePlan { actions }))
    }

    #[test]
    fn exact_match_passes_only_on_the_same_actions() {
        let outcome = plan(vec![
            TemplateAction::AddFinalizer,
            TemplateAction::RequeueAfter(200),
        ]);
        check(
            &case(json!({"actions": ["addFinalizer", {"requeueAfter": 200}]})),
            &outcome,
        )
        .expect("same");
        let error = check(
            &case(json!({"actions": ["addFinalizer", {"requeueAfter": 1}]})),
            &outcome,
        )
        .expect_err("different value");
        assert!(error.0.contains("action 1"), "{error}");
        let error =
            check(&case(json!({"actions": ["addFinalizer"]})), &outcome).expect_err("extra action");
        assert!(error.0.contains("unexpected extra"), "{error}");
    }

    #[test]
    fn partial_match_allows_gaps_and_subset_objects_but_keeps_order() {
        let outcome = plan(vec![
            TemplateAction::AddFinalizer,
            TemplateAction::DeleteResource("a".into()),
            TemplateAction::RequeueAfter(200),
        ]);
        check(
            &case(json!({"match": "partial", "actions": ["addFinalizer", {"requeueAfter": 200}]})),
            &outcome,
        )
        .expect("gap allowed");
        let error = check(
            &case(json!({"match": "partial", "actions": [{"requeueAfter": 200}, "addFinalizer"]})),
            &outcome,
        )
        .expect_err("order matters");
        assert!(error.0.contains("#1"), "{error}");
        assert!(matches(
            &json!({"setStatus": {"phase": "Ready"}}),
            &json!({"setStatus": {"phase": "Ready", "message": "x"}})
        ));
        assert!(!matches(
            &json!({"setStatus": {"phase": "Ready"}}),
            &json!({"setStatus": {"message": "x"}})
        ));
    }

    #[test]
    fn expected_errors_compare_code_and_message() {
        let outcome: Result<Plan, PolicyError> = Err(PolicyError {
            code: "Invalid".into(),
            message: "bad spec.template".into(),
        });
        check(
            &case(json!({"error": {"code": "Invalid", "messageContains": "spec.template"}})),
            &outcome,
        )
        .expect("matches");
        assert!(check(&case(json!({"error": {"code": "Other"}})), &outcome).is_err());
        assert!(check(&case(json!({"actions": []})), &outcome).is_err());
    }

    #[test]
    fn bad_case_files_are_named_with_the_problem() {
        let dir = std::env::temp_dir().join(format!("radwasm-cases-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tempdir");
        let file = dir.join("typo.json");
        std::fs::write(&file, r#"{"observation": {"deploymentTemplate": {}}, "expect": {"match": "sometimes", "actions": []}}"#)
            .expect("write");
        let error = load_cases(&file).expect_err("bad match mode");
        assert!(
            error.to_string().contains("typo.json") && error.to_string().contains("sometimes"),
            "{error}"
        );
        std::fs::write(
            &file,
            r#"{"observation": {"deploymentTemplate": {}}, "expect": {}}"#,
        )
        .expect("write");
        let error = load_cases(&file).expect_err("no expectation");
        assert!(error.to_string().contains("needs"), "{error}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
