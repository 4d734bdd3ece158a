//! `radwasm policy check|run|test|bench`: a policy author's tools, running a
//! guest on its own from files with the same runtime the controllers use.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Subcommand;
use radwasm_policy_model as model;

use super::policy_args::PolicyArgs;
use crate::policy;

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Load and validate a policy; print what it says about itself.
    Check {
        #[command(flatten)]
        policy: PolicyArgs,
    },
    /// Decide once for an observation file and print the plan as JSON.
    Run {
        #[command(flatten)]
        policy: PolicyArgs,
        /// Observation JSON: `{"deploymentTemplate": {...}}` or
        /// `{"deploymentResource": {...}}` (the `observation` of a case file).
        /// `-o` means this in every `policy` command that has it.
        #[arg(long, short = 'o', value_name = "FILE")]
        observation: PathBuf,
    },
    /// Run fixture cases (observation + expected plan); non-zero exit on any failure.
    Test {
        #[command(flatten)]
        policy: PolicyArgs,
        /// Case files or directories of them (`*.json`, searched recursively).
        #[arg(required = true)]
        cases: Vec<PathBuf>,
    },
    /// Measure decisions per second and latency for one observation.
    Bench {
        #[command(flatten)]
        policy: PolicyArgs,
        /// The observation to decide, again and again: JSON
        /// `{"deploymentTemplate": {...}}` or `{"deploymentResource": {...}}`
        /// (the `observation` of a case file).
        #[arg(long, short = 'o', value_name = "FILE")]
        observation: PathBuf,
        /// Decisions to measure (after a warm-up of a tenth as many).
        #[arg(long, default_value_t = 20_000)]
        iterations: u32,
        /// Also time the default policy's logic called natively in-process,
        /// and print the ratio (only meaningful for the default policy).
        #[arg(long)]
        compare_native: bool,
    },
    /// Re-decide recorded decisions (`--decision-records-dir` files) with a
    /// policy and report the records it answers differently.
    Replay(super::policy_records::ReplayArgs),
    /// Turn one decision record into a fixture case for `policy test`.
    RecordToCase(super::policy_records::RecordToCaseArgs),
    /// Print the JSON Schema of observation files or plans (the committed
    /// copies are in `docs/schema/`).
    Schema {
        #[arg(value_enum)]
        which: SchemaKind,
    },
    /// Validate a policy and push it to an OCI registry; print its digest reference.
    Push(super::policy_oci::PushArgs),
    /// Pull a policy from an OCI registry, verify its digests, validate it, write it.
    Pull(super::policy_oci::PullArgs),
    /// Sign a policy artifact in an OCI registry with a cosign key, in
    /// cosign's format (the `sha256-<digest>.sig` tag).
    Sign(super::policy_sign::SignArgs),
    /// Verify a policy artifact's cosign signature with public keys, or one
    /// made with a certificate against a CA and an identity, offline: exit
    /// non-zero naming why if it is unsigned, signed by another key or
    /// certificate, signed for another digest, or its content does not
    /// match its digest.
    Verify(super::policy_sign::VerifyArgs),
    /// Write the WIT files of every contract version this binary loads into
    /// DIR (created if absent): the current one as `policy.wit`, older ones
    /// as `v0.N/policy.wit`. Bindings for any component-model language are
    /// generated from these.
    Wit {
        #[arg(value_name = "DIR")]
        dir: std::path::PathBuf,
    },
    /// List the default policy's fixture cases this binary carries (every
    /// kind of observation: a template deployed, drifted, deleted; a
    /// resource and its owner), or write them with `--write DIR`.
    Cases(super::policy_cases::CasesArgs),
    /// Create a policy layer over the default policy, in Rust, Python or
    /// JavaScript (`--lang`), that builds on its own into a component, with
    /// a sample rule, fixture cases and a README giving its build command.
    New(super::policy_new::NewArgs),
}

/// Which JSON form `policy schema` describes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum SchemaKind {
    Observation,
    Plan,
}

/// The JSON Schema of an observation file or of a plan, pretty-printed.
pub fn schema_json(which: SchemaKind) -> String {
    let schema = match which {
        SchemaKind::Observation => schemars::schema_for!(radwasm_policy_model::Observation),
        SchemaKind::Plan => schemars::schema_for!(radwasm_policy_model::Plan),
    };
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}

pub fn run(command: PolicyCommand) -> anyhow::Result<ExitCode> {
    match command {
        PolicyCommand::Check { policy } => check(&policy),
        PolicyCommand::Run {
            policy,
            observation,
        } => run_once(&policy, &observation),
        PolicyCommand::Test { policy, cases } => super::policy_test::test(&policy, &cases),
        PolicyCommand::Bench {
            policy,
            observation,
            iterations,
            compare_native,
        } => bench(&policy, &observation, iterations, compare_native),
        PolicyCommand::Replay(args) => super::policy_records::replay(&args),
        PolicyCommand::RecordToCase(args) => super::policy_records::record_to_case(&args),
        PolicyCommand::Schema { which } => {
            print!("{}", schema_json(which));
            Ok(ExitCode::SUCCESS)
        }
        PolicyCommand::Push(args) => super::policy_oci::push(args),
        PolicyCommand::Pull(args) => super::policy_oci::pull(args),
        PolicyCommand::Sign(args) => super::policy_sign::sign(args),
        PolicyCommand::Verify(args) => super::policy_sign::verify(args),
        PolicyCommand::Cases(args) => super::policy_cases::run(&args),
        PolicyCommand::New(args) => super::policy_new::run(&args),
        PolicyCommand::Wit { dir } => write_wit(&dir),
    }
}

fn check(args: &PolicyArgs) -> anyhow::Result<ExitCode> {
    let (policy, size) = args.load_with_size()?;
    let description = policy.description();
    println!("policy:      {}", policy.display_name());
    println!("summary:     {}", description.summary);
    println!("source:      {}", policy.source_name());
    println!("digest:      sha256:{}", policy.digest());
    println!("size:        {}", shipping(size));
    let worlds = policy.worlds();
    let mut kinds = Vec::new();
    if worlds.template {
        kinds.push("DeploymentTemplate");
    }
    if worlds.resource {
        kinds.push("DeploymentResource");
    }
    println!("implements:  {worlds} (decides for {})", kinds.join(", "));
    if policy.is_layer() {
        // What it decides over, down to the policy that decides alone.
        println!("layers on:   {}", policy.stack()[1..].join(" over "));
    }
    if description.annotations.is_empty() {
        println!("annotations: none");
    } else {
        println!("annotations:");
        let width = description
            .annotations
            .iter()
            .map(|a| a.name.len())
            .max()
            .unwrap_or(0);
        for annotation in &description.annotations {
            println!("  {:width$}  {}", annotation.name, annotation.description);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A component's size, and for one a ConfigMap cannot carry, the sources
/// that can: what `policy check` tells an author before they ship it.
fn shipping(size: usize) -> String {
    let limit = policy::source::MAX_CONFIG_MAP_COMPONENT_BYTES;
    if size as u64 <= limit {
        format!("{size} bytes (a ConfigMap, an OCI registry or an HTTPS URL can serve it)")
    } else {
        format!(
            "{size} bytes, over the {} MiB a ConfigMap source holds: ship it through an OCI \
             registry (`radwasm policy push`, then spec.module.oci) or an HTTPS URL \
             (spec.module.url with its sha256)",
            limit >> 20
        )
    }
}

/// Read and parse an observation file; errors name the file and the problem.
pub fn read_observation(path: &Path) -> anyhow::Result<model::Observation> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read the file", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{}: not a valid observation", path.display()))
}

fn run_once(args: &PolicyArgs, observation: &Path) -> anyhow::Result<ExitCode> {
    let observation = read_observation(observation)?;
    let policy = args.load()?;
    let decision = policy.decide(&observation)?;
    for log in &decision.logs {
        eprintln!("guest {:?}: {}", log.level, log.message);
    }
    if decision.dropped_logs > 0 {
        eprintln!(
            "guest: {} further log messages dropped",
            decision.dropped_logs
        );
    }
    println!("{}", serde_json::to_string_pretty(&decision.plan)?);
    Ok(ExitCode::SUCCESS)
}

/// Latency summary of one benchmark series.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub p50: Duration,
    pub p99: Duration,
    pub mean: Duration,
    pub per_second: f64,
}

/// Time `iterations` calls of `decide` after a warm-up.
pub fn measure(
    iterations: u32,
    mut decide: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<Timing> {
    let iterations = iterations.max(10);
    for _ in 0..iterations / 10 {
        decide()?;
    }
    let mut samples = Vec::with_capacity(iterations as usize);
    let started = Instant::now();
    for _ in 0..iterations {
        let before = Instant::now();
        decide()?;
        samples.push(before.elapsed());
    }
    let total = started.elapsed();
    samples.sort_unstable();
    let at = |quantile: f64| samples[((samples.len() - 1) as f64 * quantile).round() as usize];
    Ok(Timing {
        p50: at(0.50),
        p99: at(0.99),
        mean: total / iterations,
        per_second: f64::from(iterations) / total.as_secs_f64(),
    })
}

fn print_timing(label: &str, timing: &Timing) {
    println!(
        "{label:<28} {:>10.0} decisions/s   p50 {:>8.2} µs   p99 {:>8.2} µs   mean {:>8.2} µs",
        timing.per_second,
        micros(timing.p50),
        micros(timing.p99),
        micros(timing.mean)
    );
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

fn bench(
    args: &PolicyArgs,
    observation: &Path,
    iterations: u32,
    compare_native: bool,
) -> anyhow::Result<ExitCode> {
    let observation = read_observation(observation)?;
    anyhow::ensure!(
        !compare_native || cfg!(feature = "native-bench"),
        "this radwasm was built without the `native-bench` feature, so --compare-native \
         has no native policy to compare with"
    );
    let policy = args.load()?;
    let first = policy.decide(&observation)?;
    println!(
        "policy {} ({} actions per plan, {} fuel per decision), {iterations} decisions",
        policy.display_name(),
        first.plan.len(),
        first.fuel_used
    );
    let wasm = measure(iterations, || {
        policy.decide(&observation)?;
        Ok(())
    })?;
    print_timing("wasm (fresh instance each)", &wasm);
    #[cfg(feature = "native-bench")]
    if compare_native {
        let native = measure(iterations, || {
            let plan = native_decide(&observation);
            let _ = std::hint::black_box(plan);
            Ok(())
        })?;
        print_timing("native (in-process)", &native);
        println!(
            "ratio wasm/native: p50 {:.2}x   mean {:.2}x",
            micros(wasm.p50) / micros(native.p50).max(1e-3),
            micros(wasm.mean) / micros(native.mean).max(1e-3)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The default policy's logic called directly, for comparison with the guest.
#[cfg(feature = "native-bench")]
fn native_decide(observation: &model::Observation) -> Result<model::Plan, model::PolicyError> {
    match observation {
        model::Observation::DeploymentTemplate(observation) => {
            radwasm_policy_core::decide_template(observation).map(model::Plan::DeploymentTemplate)
        }
        model::Observation::DeploymentResource(observation) => {
            radwasm_policy_core::decide_resource(observation).map(model::Plan::DeploymentResource)
        }
    }
}

fn write_wit(dir: &Path) -> anyhow::Result<ExitCode> {
    for (name, text) in policy::wit::FILES {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        println!("{}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
