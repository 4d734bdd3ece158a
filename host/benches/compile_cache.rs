//! The engine's compile cache (`crates/policy-runtime/src/compile_cache.rs`) against
//! wasmtime's own (`Config::cache`, the `cache` feature), on the same
//! components: the embedded default policy and any component files given.
//!
//! ```sh
//! cargo bench -p radwasm --bench compile_cache -- [--reps 3] [FILE.wasm ...]
//! ```
//!
//! For each cache, a fresh process of this bench with an empty cache
//! directory loads the component twice: a **cold** start (nothing cached)
//! and a **warm** one (the same process loads the same bytes again). A
//! second process on the same directory loads it once: a **restart** (the
//! cache on disk). A third, after one byte in the middle of every cached
//! file is flipped, says what a **damaged** entry does: compiled again, or
//! loaded as it is. Times are milliseconds for the compiled component:
//! radwasm's own `took_ms` (the step after the component's SHA-256, which
//! the `sha256` column gives) and, for wasmtime, `Component::new` on an
//! engine with the same compiler settings (component model, fuel) and
//! wasmtime's cache in the directory. Figures are in
//! `docs/benchmarks-policy-activation.md`, "The compile cache against
//! wasmtime's".
#![allow(
    clippy::too_many_lines,
    reason = "a test or benchmark scenario reads top to bottom as one story"
)]

use std::path::Path;
use std::process::{Command, ExitCode};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use radwasm::policy::{DiskCacheConfig, EngineOptions};
use sha2::{Digest, Sha256};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::SubscriberExt;

/// The `took_ms` of every load radwasm logs, with the policy it names (a
/// layer's load also loads its base, the embedded default policy).
#[derive(Clone, Default)]
struct TookMs(Arc<Mutex<Vec<(String, f64, String)>>>);

#[derive(Default)]
struct TookVisitor {
    policy: Option<String>,
    took_ms: Option<f64>,
    message: String,
}

impl Visit for TookVisitor {
    fn record_f64(&mut self, field: &Field, value: f64) {
        if field.name() == "took_ms" {
            self.took_ms = Some(value);
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "policy" {
            self.policy = Some(value.to_string());
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for TookMs {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let mut visitor = TookVisitor::default();
        event.record(&mut visitor);
        if let (Some(policy), Some(ms), Ok(mut all)) =
            (visitor.policy, visitor.took_ms, self.0.lock())
        {
            all.push((policy, ms, visitor.message));
        }
    }
}

fn component_bytes(component: &str) -> Result<Vec<u8>, String> {
    if component == "default" {
        return Ok(radwasm::policy::embedded::DEFAULT_POLICY.to_vec());
    }
    std::fs::read(component).map_err(|error| format!("reading {component}: {error}"))
}

/// One child process: `loads` loads of `component` with `cache` in `dir`.
/// Prints `ms outcome` per load, then `sha256 ms`.
fn child(cache: &str, dir: &Path, component: &str, loads: usize) -> Result<(), String> {
    let bytes = component_bytes(component)?;
    let hashed = Instant::now();
    let _ = Sha256::digest(&bytes);
    let sha_ms = hashed.elapsed().as_secs_f64() * 1e3;
    match cache {
        "radwasm" => {
            let took = TookMs::default();
            tracing::subscriber::set_global_default(
                tracing_subscriber::registry().with(took.clone()),
            )
            .map_err(|error| error.to_string())?;
            let engine = radwasm::policy::engine_with_options(
                radwasm::policy::Limits::default(),
                EngineOptions {
                    compile_cache: Some(DiskCacheConfig::new(dir)),
                    ..EngineOptions::default()
                },
            )
            .map_err(|error| format!("{error:#}"))?;
            for _ in 0..loads {
                engine
                    .load_bytes(component, &bytes)
                    .map_err(|error| error.to_string())?;
                // This load's own line, not its base's.
                let line = took
                    .0
                    .lock()
                    .map_err(|e| e.to_string())?
                    .drain(..)
                    .rfind(|(policy, _, _)| policy == component)
                    .ok_or("no took_ms logged")?;
                let outcome = match line.2.as_str() {
                    "policy compiled" => "compiled",
                    "policy loaded from the compile cache" => "disk_cache",
                    "policy already compiled" => "memory_cache",
                    other => other,
                };
                let ms = line.1;
                println!("{ms} {outcome}");
            }
        }
        "wasmtime" => {
            let mut cache_config = wasmtime::CacheConfig::new();
            cache_config.with_directory(dir);
            let cache = wasmtime::Cache::new(cache_config).map_err(|error| format!("{error:#}"))?;
            let mut config = wasmtime::Config::new();
            config
                .wasm_component_model(true)
                .concurrency_support(false)
                .consume_fuel(true)
                .cache(Some(cache.clone()));
            let engine = wasmtime::Engine::new(&config).map_err(|error| format!("{error:#}"))?;
            for _ in 0..loads {
                // Clones of a `Cache` share its counts.
                let hits = cache.cache_hits();
                let started = Instant::now();
                wasmtime::component::Component::new(&engine, &bytes)
                    .map_err(|error| format!("{error:#}"))?;
                let ms = started.elapsed().as_secs_f64() * 1e3;
                let hit = cache.cache_hits() > hits;
                println!("{ms} {}", if hit { "disk_cache" } else { "compiled" });
            }
        }
        other => return Err(format!("no cache {other:?}")),
    }
    println!("sha256 {sha_ms}");
    Ok(())
}

/// A child's loads: (ms, outcome) each, and its SHA-256 time.
struct Loads {
    loads: Vec<(f64, String)>,
    sha_ms: f64,
}

fn spawn(cache: &str, dir: &Path, component: &str, loads: usize) -> Result<Loads, String> {
    let exe = std::env::current_exe().map_err(|error| error.to_string())?;
    let output = Command::new(exe)
        .args(["--child", cache])
        .arg(dir)
        .args([component, &loads.to_string()])
        .output()
        .map_err(|error| format!("starting a child: {error}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "{cache} {component}: {}{stdout}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let mut result = Loads {
        loads: Vec::new(),
        sha_ms: f64::NAN,
    };
    for line in stdout.lines() {
        let mut words = line.split_whitespace();
        match (words.next(), words.next()) {
            (Some("sha256"), Some(ms)) => result.sha_ms = ms.parse().unwrap_or(f64::NAN),
            (Some(ms), Some(outcome)) => result
                .loads
                .push((ms.parse().unwrap_or(f64::NAN), outcome.to_string())),
            _ => {}
        }
    }
    if result.loads.len() != loads {
        return Err(format!(
            "{cache} {component}: {loads} loads expected:\n{stdout}"
        ));
    }
    Ok(result)
}

/// Flip one byte in the middle of every file under `dir`; how many.
fn damage(dir: &Path) -> std::io::Result<usize> {
    let mut damaged = 0;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            damaged += damage(&path)?;
        } else if !path.to_string_lossy().ends_with(".sha256") {
            let mut bytes = std::fs::read(&path)?;
            if bytes.len() > 1024 {
                let middle = bytes.len() / 2;
                bytes[middle] ^= 0x5a;
                std::fs::write(&path, bytes)?;
                damaged += 1;
            }
        }
    }
    Ok(damaged)
}

fn size(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .map(|entry| {
                let path = entry.path();
                if path.is_dir() {
                    size(&path)
                } else {
                    entry.metadata().map_or(0, |m| m.len())
                }
            })
            .sum()
    })
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Cold, warm, restart and damaged figures of one cache, `reps` times.
struct Figures {
    cold: Vec<f64>,
    warm: Vec<f64>,
    restart: Vec<f64>,
    sha: Vec<f64>,
    outcomes: String,
    damaged: String,
    disk_bytes: u64,
}

fn measure(cache: &str, component: &str, reps: usize) -> Result<Figures, String> {
    let mut figures = Figures {
        cold: Vec::new(),
        warm: Vec::new(),
        restart: Vec::new(),
        sha: Vec::new(),
        outcomes: String::new(),
        damaged: String::new(),
        disk_bytes: 0,
    };
    for rep in 0..reps.max(1) {
        let dir = tempfile::tempdir().map_err(|error| error.to_string())?;
        let first = spawn(cache, dir.path(), component, 2)?;
        let second = spawn(cache, dir.path(), component, 1)?;
        figures.cold.push(first.loads[0].0);
        figures.warm.push(first.loads[1].0);
        figures.restart.push(second.loads[0].0);
        figures.sha.push(first.sha_ms);
        figures.outcomes = format!(
            "{} / {} / {}",
            first.loads[0].1, first.loads[1].1, second.loads[0].1
        );
        if rep == 0 {
            figures.disk_bytes = size(dir.path());
            let flipped = damage(dir.path()).map_err(|error| error.to_string())?;
            let third = spawn(cache, dir.path(), component, 1)?;
            figures.damaged = format!("{flipped} file(s) damaged: {}", third.loads[0].1);
        }
    }
    Ok(figures)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("--child") {
        let rest: Vec<String> = args.skip(1).collect();
        let [cache, dir, component, loads] = rest.as_slice() else {
            eprintln!("--child CACHE DIR COMPONENT LOADS");
            return ExitCode::FAILURE;
        };
        let loads = loads.parse().unwrap_or(1);
        return match child(cache, Path::new(dir), component, loads) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("{error}");
                ExitCode::FAILURE
            }
        };
    }
    let mut reps = 3usize;
    let mut components = vec!["default".to_string()];
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--reps" => reps = args.next().and_then(|n| n.parse().ok()).unwrap_or(reps),
            // What `cargo bench` passes to every bench target.
            "--bench" => {}
            file => components.push(file.to_string()),
        }
    }
    println!(
        "{:<14} {:<9} {:>10} {:>9} {:>10} {:>8} {:>8} {:>9} {:>9}  outcomes; damaged entry",
        "component",
        "cache",
        "cold ms",
        "warm ms",
        "restart ms",
        "sha ms",
        "disk MB",
        "cold/warm",
        "cold/rst"
    );
    for component in &components {
        let name = Path::new(component)
            .file_name()
            .map_or(component.clone(), |n| n.to_string_lossy().into_owned());
        for cache in ["radwasm", "wasmtime"] {
            let figures = match measure(cache, component, reps) {
                Ok(figures) => figures,
                Err(error) => {
                    eprintln!("{error}");
                    return ExitCode::FAILURE;
                }
            };
            let (cold, warm, restart) = (
                median(figures.cold),
                median(figures.warm),
                median(figures.restart),
            );
            println!(
                "{name:<14} {cache:<9} {cold:>10.1} {warm:>9.2} {restart:>10.1} {:>8.1} {:>8.1} {:>8.0}x {:>8.0}x  {}; {}",
                median(figures.sha),
                figures.disk_bytes as f64 / 1e6,
                cold / warm,
                cold / restart,
                figures.outcomes,
                figures.damaged
            );
        }
    }
    ExitCode::SUCCESS
}
