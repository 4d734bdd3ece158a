//! `radwasm manifest generate` (also `radwasm bicep generate-kubernetes-manifest`):
//! the command-line arguments. The manifest is made by [`crate::manifest`].

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::manifest::{self, GenerateOptions};

#[derive(Debug, Subcommand)]
pub enum ManifestCommand {
    /// Write a DeploymentTemplate manifest for a Bicep file or a compiled
    /// ARM template, after checking its parameters.
    Generate(GenerateArgs),
}

/// `radwasm bicep ...`: the same command under the name Radius's CLI uses.
#[derive(Debug, Subcommand)]
pub enum BicepCommand {
    /// The same as `radwasm manifest generate`.
    GenerateKubernetesManifest(GenerateArgs),
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// The template: a `.bicep` file (compiled with `bicep build` from PATH)
    /// or a compiled ARM template (`.json`).
    pub file: PathBuf,
    /// A parameter: `@FILE.json` (ARM parameter file), `@FILE.bicepparam`,
    /// `NAME=VALUE`, or `NAME=@FILE` (the value is the JSON in FILE).
    /// Repeatable; a later value for the same parameter wins.
    #[arg(long = "parameters", short = 'p', value_name = "PARAMETER")]
    pub parameters: Vec<String>,
    /// Write the manifest to this file (`.yaml` or `.yml`) instead of stdout.
    #[arg(
        long,
        short = 'o',
        visible_alias = "destination-file",
        visible_short_alias = 'd'
    )]
    pub outfile: Option<PathBuf>,
    /// `metadata.name` of the DeploymentTemplate [default: the file's name,
    /// for example `app.bicep`].
    #[arg(long)]
    pub name: Option<String>,
    /// `metadata.namespace` of the DeploymentTemplate (left out by default).
    #[arg(long)]
    pub namespace: Option<String>,
    /// Radius resource group to deploy into: the scope becomes
    /// `/planes/radius/local/resourceGroups/GROUP`.
    #[arg(long, short = 'g', conflicts_with = "scope")]
    pub group: Option<String>,
    /// The Radius scope itself: `/planes/radius/PLANE/resourceGroups/GROUP`.
    #[arg(long)]
    pub scope: Option<String>,
    /// Radius environment (name in the scope's group, or full id): the value
    /// of the template's `environment` parameter when it declares one and no
    /// value is given. A full id also supplies the scope when there is no
    /// `--group` or `--scope`.
    #[arg(long, short = 'e')]
    pub environment: Option<String>,
    /// Scope for Azure resources (provider `az`, type `AzureResourceManager`).
    #[arg(long)]
    pub azure_scope: Option<String>,
    /// Scope for AWS resources (provider `aws`, type `AWS`).
    #[arg(long)]
    pub aws_scope: Option<String>,
}

pub fn run_manifest(command: ManifestCommand) -> anyhow::Result<ExitCode> {
    match command {
        ManifestCommand::Generate(args) => generate(args),
    }
}

pub fn run_bicep(command: BicepCommand) -> anyhow::Result<ExitCode> {
    match command {
        BicepCommand::GenerateKubernetesManifest(args) => generate(args),
    }
}

fn generate(args: GenerateArgs) -> anyhow::Result<ExitCode> {
    manifest::generate(&args.into())?;
    Ok(ExitCode::SUCCESS)
}

impl From<GenerateArgs> for GenerateOptions {
    fn from(args: GenerateArgs) -> Self {
        Self {
            file: args.file,
            parameters: args.parameters,
            outfile: args.outfile,
            name: args.name,
            namespace: args.namespace,
            group: args.group,
            scope: args.scope,
            environment: args.environment,
            azure_scope: args.azure_scope,
            aws_scope: args.aws_scope,
        }
    }
}
