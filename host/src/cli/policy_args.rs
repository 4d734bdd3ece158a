//! The policy a `radwasm policy` command runs, as its arguments name it:
//! shared by the author's tools (`policy.rs`) and the decision-record tools
//! (`policy_records.rs`).

use clap::Args;

use crate::policy::{Limits, LoadCounter, LoadedPolicy, PolicyEngine, embedded};

/// Which policy to load and the sandbox limits to run it under.
#[derive(Debug, Args)]
pub struct PolicyArgs {
    /// Path to a policy component (`.wasm`), or `default` for the embedded default policy.
    pub wasm: String,
    /// A policy the layer decides over, instead of the built-in default:
    /// repeat it for a stack, bottom first. The first `--base` may decide
    /// alone or be a layer (then over the built-in default); each further
    /// one is a layer over the one before, and `<wasm>` is over the last.
    #[arg(long = "base", value_name = "WASM")]
    pub bases: Vec<String>,
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
        let engine = crate::policy::engine_with_options(self.limits(), options)?;
        let (loaded, size) = load_one(&engine, &self.wasm)?;
        if self.bases.is_empty() {
            return Ok((loaded, size));
        }
        anyhow::ensure!(
            loaded.is_layer(),
            "{}: --base is for a layer, and {} decides alone",
            self.wasm,
            loaded.display_name()
        );
        Ok((loaded.on_base(self.base_stack(&engine)?), size))
    }

    /// The policies `--base` names, each over the one before: bottom first.
    fn base_stack(&self, engine: &PolicyEngine) -> anyhow::Result<LoadedPolicy> {
        let mut below: Option<LoadedPolicy> = None;
        for wasm in &self.bases {
            let (base, _) = load_one(engine, wasm)?;
            below = Some(match below {
                None => base,
                Some(under) => {
                    anyhow::ensure!(
                        base.is_layer(),
                        "--base {wasm}: {} decides alone, so it can only be the first --base \
                         (the bottom of the stack)",
                        base.display_name()
                    );
                    base.on_base(under)
                }
            });
        }
        below.ok_or_else(|| anyhow::anyhow!("no --base given"))
    }
}

/// One policy from a path, or `default`; also its size in bytes.
fn load_one(engine: &PolicyEngine, wasm: &str) -> anyhow::Result<(LoadedPolicy, usize)> {
    let fetched = embedded::source(wasm).fetch_local()?;
    let loaded = engine.load_bytes(&fetched.source_name, &fetched.bytes)?;
    Ok((loaded, fetched.bytes.len()))
}
