//! The policy a `radwasm policy` command runs, as its arguments name it:
//! shared by the author's tools (`policy.rs`) and the decision-record tools
//! (`policy_records.rs`).

use clap::Args;

use crate::policy::{Limits, LoadCounter, LoadedPolicy, PolicyEngine, Source};

/// Which policy to load and the sandbox limits to run it under.
#[derive(Debug, Args)]
pub struct PolicyArgs {
    /// Path to a policy component (`.wasm`), or `default` for the embedded default policy.
    pub wasm: String,
    /// Fuel (about one unit per wasm instruction) one decision may use.
    #[arg(long, default_value_t = Limits::default().fuel)]
    pub fuel: u64,
    /// Linear-memory cap per guest instance, in MiB.
    #[arg(long, default_value_t = (Limits::default().memory_bytes >> 20) as u64)]
    pub memory_mib: u64,
    #[command(flatten)]
    pub runtime: super::runtime_args::RuntimeArgs,
}

impl PolicyArgs {
    fn limits(&self) -> Limits {
        Limits {
            fuel: self.fuel,
            memory_bytes: usize::try_from(self.memory_mib << 20).unwrap_or(usize::MAX),
            ..Limits::default()
        }
    }

    /// Load the policy named on the command line.
    pub fn load(&self) -> anyhow::Result<LoadedPolicy> {
        Ok(self.load_with_size()?.0)
    }

    /// Load the policy named on the command line; also its size in bytes.
    pub fn load_with_size(&self) -> anyhow::Result<(LoadedPolicy, usize)> {
        let options = self.runtime.engine_options(LoadCounter::default())?;
        let engine = PolicyEngine::with_options(self.limits(), options)?;
        let fetched = Source::parse(&self.wasm).fetch_local()?;
        let loaded = engine.load_bytes(&fetched.source_name, &fetched.bytes)?;
        Ok((loaded, fetched.bytes.len()))
    }
}
