//! `radwasm policy cases [--write DIR]`: the default policy's fixture cases,
//! carried by the binary (listed by `host/build/cases.rs` from
//! `guests/default-policy/cases/`), so a policy author without this
//! repository has examples of every observation the controller makes: a
//! template being deleted, a resource with its owner, drift, holds, retries.
//! Written out, they pass `radwasm policy test default DIR`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/default_policy_cases.rs"));
}
pub use embedded::DEFAULT_POLICY_CASES;

#[derive(Debug, Args)]
pub struct CasesArgs {
    /// Write the cases under DIR (created if absent; files of the same
    /// names are replaced, others left alone), as `template/*.json` and
    /// `resource/*.json`. Without it, list them with their descriptions.
    #[arg(long, value_name = "DIR")]
    pub write: Option<PathBuf>,
}

/// `radwasm policy cases`.
pub fn run(args: &CasesArgs) -> anyhow::Result<ExitCode> {
    match &args.write {
        Some(dir) => write(dir),
        None => {
            list();
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// One line per case: its path and its description.
fn list() {
    let width = DEFAULT_POLICY_CASES
        .iter()
        .map(|(path, _)| path.len())
        .max()
        .unwrap_or(0);
    for (path, text) in DEFAULT_POLICY_CASES {
        println!("{path:width$}  {}", description(text));
    }
    println!(
        "{} cases of the default policy; `radwasm policy cases --write DIR` writes them",
        DEFAULT_POLICY_CASES.len()
    );
}

/// A case's `description`, or nothing if it has none.
fn description(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|case| case.get("description")?.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn write(dir: &Path) -> anyhow::Result<ExitCode> {
    for (path, text) in DEFAULT_POLICY_CASES {
        let file = dir.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("{}: cannot create the directory", parent.display()))?;
        }
        std::fs::write(&file, text)
            .with_context(|| format!("{}: cannot write the file", file.display()))?;
    }
    println!(
        "wrote {} cases of the default policy into {}",
        DEFAULT_POLICY_CASES.len(),
        dir.display()
    );
    println!(
        "they pass `radwasm policy test default {}`; a layer that changes \
         nothing passes them too",
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}
