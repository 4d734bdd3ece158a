//! `radwasm sim ...`: the local stand-ins on their own, for a person with
//! kubectl or curl. Each serves on loopback until SIGINT/SIGTERM.

use std::process::ExitCode;

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// The embedded Kubernetes API server; writes a kubeconfig once ready.
    Apiserver(radwasm_sim_apiserver::StandaloneArgs),
    /// The Radius (UCP) simulator, for curl or `radwasm run --radius-url`.
    Radius(radwasm_sim_radius::StandaloneArgs),
}

pub fn run(command: SimCommand) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        match command {
            SimCommand::Apiserver(args) => radwasm_sim_apiserver::run_standalone(args).await?,
            SimCommand::Radius(args) => radwasm_sim_radius::run_standalone(args).await?,
        }
        anyhow::Ok(ExitCode::SUCCESS)
    })
}
