//! Command-line surface of `radwasm`. Each subcommand lives in its own module
//! and calls into the library; nothing here holds product logic.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::telemetry::LogFormat;

#[cfg(feature = "dev")]
pub mod dev;
pub mod manifest;
pub mod policy;
pub mod policy_args;
pub mod policy_cases;
pub mod policy_new;
pub mod policy_oci;
pub mod policy_records;
pub mod policy_sign;
pub mod policy_sign_blob;
pub mod policy_test;
pub mod policy_verify_certificate;
pub mod record_args;
pub mod run;
pub mod runtime_args;
#[cfg(feature = "dev")]
pub mod sim;
pub mod trust_args;

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
    /// The local sandbox: embedded API server, Radius simulator and the
    /// controllers; applies manifests (an example app by default) and
    /// reports until every template is Ready.
    #[cfg(feature = "dev")]
    Dev(dev::DevArgs),
    /// Run the controllers against a cluster (kubeconfig or in-cluster).
    Run(run::RunArgs),
    /// Run a local stand-in (Kubernetes API server, Radius) on its own.
    #[cfg(feature = "dev")]
    #[command(subcommand)]
    Sim(sim::SimCommand),
    /// Print the CustomResourceDefinitions (YAML) generated from the Rust types.
    Crds {
        /// Only this API group's (`radapp.io` or `radwasm.io`), as its file
        /// in `deploy/crds/` holds them.
        #[arg(long)]
        group: Option<String>,
    },
    /// Generate a DeploymentTemplate manifest from a Bicep file or an ARM template.
    #[command(subcommand)]
    Manifest(manifest::ManifestCommand),
    /// Radius CLI names: `bicep generate-kubernetes-manifest` is `manifest generate`.
    #[command(subcommand)]
    Bicep(manifest::BicepCommand),
}

/// Run a parsed command line; the exit code says how it went.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Policy(command) => policy::run(command),
        #[cfg(feature = "dev")]
        Command::Dev(args) => dev::run(args),
        Command::Run(args) => run::run(args),
        #[cfg(feature = "dev")]
        Command::Sim(command) => sim::run(command),
        Command::Crds { group: None } => {
            print!("{}", crate::crd::crd_yaml()?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Crds { group: Some(group) } => match crate::crd::crd_yaml_for(&group) {
            Some(text) => {
                print!("{}", text?);
                Ok(ExitCode::SUCCESS)
            }
            None => anyhow::bail!(
                "--group {group:?}: the groups are {}",
                crate::crd::CRD_GROUPS.join(" and ")
            ),
        },
        Command::Manifest(command) => manifest::run_manifest(command),
        Command::Bicep(command) => manifest::run_bicep(command),
    }
}
