//! Command-line surface of `radwasm`. Each subcommand lives in its own module
//! and calls into the library; nothing here holds product logic.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::telemetry::LogFormat;

pub mod policy;
pub mod run;

/// Kubernetes controller host for Radius DeploymentTemplates, with the
/// reconcile policy in sandboxed WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "radwasm", version, about, propagate_version = true)]
pub struct Cli {
    /// Log line format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check, run, test and benchmark a policy guest on its own, from files.
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// Run the controllers against a cluster (kubeconfig or in-cluster).
    Run(run::RunArgs),
    /// Print the CustomResourceDefinitions (YAML) generated from the Rust types.
    Crds,
}

/// Run a parsed command line; the exit code says how it went.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Policy(command) => policy::run(command),
        Command::Run(args) => run::run(args),
        Command::Crds => {
            print!("{}", crate::crd::crd_yaml()?);
            Ok(ExitCode::SUCCESS)
        }
    }
}
