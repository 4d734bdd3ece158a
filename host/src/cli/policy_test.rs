//! `radwasm policy test`: run fixture cases against a policy (a layer over
//! the built-in default, or over the stack `--base` names). Each case file
//! is its own result: one that cannot be read, or whose `expect` names an
//! action the contract does not have, is a failed case, and the rest run.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use radwasm_policy_model::{self as model, cases};
use serde_json::Value;

use super::policy_args::PolicyArgs;
use crate::policy::{self, LoadedPolicy};

/// `radwasm policy test <wasm> <cases...>`.
pub fn test(args: &PolicyArgs, paths: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let policy = args.load()?;
    let files = case_files(paths)?;
    let (mut passed, mut failed) = (0usize, 0usize);
    for file in &files {
        match run_case(&policy, file) {
            Ok(()) => {
                passed += 1;
                println!("ok   {}", file.display());
            }
            Err(why) => {
                failed += 1;
                println!("FAIL {}: {why}", file.display());
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Every case file the arguments name; a path that cannot be read stops
/// the run (there is nothing to test), as does finding no file at all.
fn case_files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        files.extend(cases::case_files(path)?);
    }
    if files.is_empty() {
        let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        anyhow::bail!("no case files (*.json) found in {}", names.join(", "));
    }
    Ok(files)
}

/// Load one case, check its expectation names real actions, decide it and
/// compare; the error says why the case failed.
fn run_case(policy: &LoadedPolicy, file: &Path) -> Result<(), String> {
    let loaded = cases::load_case(file).map_err(|error| error.problem)?;
    let case = &loaded.case;
    check_action_names(case)?;
    policy::check_case(policy, case)
}

/// Refuse an expected action whose name no action of the observation's
/// kind has (`detach_resource` for `detachResource`), naming the valid
/// ones: otherwise it would only be "not found" in the plan.
fn check_action_names(case: &cases::Case) -> Result<(), String> {
    let (kind, valid) = match case.observation {
        model::Observation::DeploymentTemplate(_) => (
            "DeploymentTemplate",
            action_names(schemars::schema_for!(model::TemplateAction)),
        ),
        model::Observation::DeploymentResource(_) => (
            "DeploymentResource",
            action_names(schemars::schema_for!(model::ResourceAction)),
        ),
    };
    let expected = case.expect.actions.as_deref().unwrap_or_default();
    for (index, action) in expected.iter().enumerate() {
        let name = match action {
            Value::String(name) => Some(name.as_str()),
            Value::Object(fields) if fields.len() == 1 => fields.keys().next().map(String::as_str),
            _ => None,
        };
        match name {
            Some(name) if valid.iter().any(|v| v == name) => {}
            Some(name) => {
                return Err(format!(
                    "expect: action #{index} {name:?} is not a {kind} action; they are: {}",
                    valid.join(", ")
                ));
            }
            None => {
                return Err(format!(
                    "expect: action #{index} {action} is not an action: give its name (\"addFinalizer\") \
                     or an object with its name as the one key ({{\"deleteResource\": \"x\"}})"
                ));
            }
        }
    }
    Ok(())
}

/// The names of an action enum's variants, from its JSON Schema: the
/// strings of unit variants and the one key of the others.
fn action_names(schema: schemars::Schema) -> Vec<String> {
    let schema = schema.to_value();
    let mut names = Vec::new();
    let variants = schema.get("oneOf").and_then(Value::as_array);
    for variant in variants.into_iter().flatten() {
        let constant = variant.get("const").and_then(Value::as_str);
        names.extend(constant.map(String::from));
        for list in ["enum", "required"] {
            let found = variant.get(list).and_then(Value::as_array);
            names.extend(
                found
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(String::from),
            );
        }
    }
    names
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_template_action_is_named() {
        let names =
            super::action_names(schemars::schema_for!(radwasm_policy_model::TemplateAction));
        for name in [
            "addFinalizer",
            "deleteResource",
            "detachResource",
            "requeueAfter",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
        }
    }
}
