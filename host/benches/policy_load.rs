//! What the compile cache saves: loading a policy in a fresh `radwasm`
//! process (`radwasm policy check`) with an empty cache directory (it
//! compiles) against the same with the directory the first run filled (it
//! maps the artifact), for the embedded default policy and any component
//! files given. Each process's wall time and peak RSS (`ru_maxrss` from
//! `wait4`), and the load's own time as the process logs it (`took_ms`).
//!
//! ```sh
//! cargo bench -p radwasm --bench policy_load -- [--reps 3] [FILE.wasm ...]
//! ```
//!
//! `RADWASM_BENCH_BINARY=<path>` measures another build of `radwasm`.
//! Figures and the components measured are in
//! `docs/benchmarks-policy-activation.md`, "Loading a policy".
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// One `radwasm policy check` process.
struct Run {
    wall: Duration,
    peak_rss_kib: i64,
    /// The load as the process logged it: its outcome and milliseconds.
    outcome: String,
    load_ms: f64,
}

fn binary() -> PathBuf {
    std::env::var_os("RADWASM_BENCH_BINARY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_radwasm")))
}

/// Run `radwasm policy check <wasm> --compile-cache <cache>` and wait for
/// it with `wait4`, for its own resource usage.
fn check(wasm: &str, cache: &std::path::Path) -> Result<Run, String> {
    let started = Instant::now();
    let child = Command::new(binary())
        .args(["policy", "check", wasm, "--compile-cache"])
        .arg(cache)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| format!("starting {}: {error}", binary().display()))?;
    let pid = libc::pid_t::try_from(child.id()).map_err(|error| error.to_string())?;
    // Read stderr to its end before reaping, so a full pipe cannot stall it.
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr {
        std::io::Read::read_to_string(&mut pipe, &mut stderr).map_err(|e| e.to_string())?;
    }
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet reaped; both pointers are to
    // live locals of the types `wait4` writes.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = started.elapsed();
    if reaped != pid || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(format!("radwasm policy check {wasm} failed:\n{stderr}"));
    }
    let line = stderr
        .lines()
        .find(|line| line.contains("took_ms="))
        .ok_or_else(|| format!("no load logged:\n{stderr}"))?;
    let outcome = if line.contains("policy compiled") {
        "compiled"
    } else if line.contains("from the compile cache") {
        "disk cache"
    } else {
        "other"
    };
    let load_ms = line
        .split("took_ms=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse().ok())
        .unwrap_or(f64::NAN);
    Ok(Run {
        wall,
        peak_rss_kib: usage.ru_maxrss,
        outcome: outcome.to_string(),
        load_ms,
    })
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() -> ExitCode {
    let mut reps = 3usize;
    let mut components = vec!["default".to_string()];
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--reps" => reps = args.next().and_then(|n| n.parse().ok()).unwrap_or(reps),
            // What `cargo bench` passes to every bench target.
            "--bench" => {}
            file => components.push(file.to_string()),
        }
    }
    println!(
        "{:<40} {:>11} {:>9} {:>9} {:>10} {:>9} {:>9} {:>10}",
        "component (median of runs)",
        "cold load",
        "cold wall",
        "cold RSS",
        "warm load",
        "warm wall",
        "warm RSS",
        "load ratio"
    );
    for component in &components {
        let mut cold = Vec::new();
        let mut warm = Vec::new();
        for _ in 0..reps.max(1) {
            let Ok(dir) = tempfile::tempdir() else {
                eprintln!("no temporary directory");
                return ExitCode::FAILURE;
            };
            let pair = check(component, dir.path())
                .and_then(|first| Ok((first, check(component, dir.path())?)));
            match pair {
                Ok((first, second)) => {
                    if first.outcome != "compiled" || second.outcome != "disk cache" {
                        eprintln!(
                            "{component}: expected compiled then disk cache, got {} then {}",
                            first.outcome, second.outcome
                        );
                        return ExitCode::FAILURE;
                    }
                    cold.push(first);
                    warm.push(second);
                }
                Err(error) => {
                    eprintln!("{error}");
                    return ExitCode::FAILURE;
                }
            }
        }
        let load = |runs: &[Run]| median(runs.iter().map(|r| r.load_ms).collect());
        let wall = |runs: &[Run]| median(runs.iter().map(|r| r.wall.as_secs_f64() * 1e3).collect());
        let rss = |runs: &[Run]| {
            median(
                runs.iter()
                    .map(|r| r.peak_rss_kib as f64 / 1024.0)
                    .collect(),
            )
        };
        let name = std::path::Path::new(component)
            .file_name()
            .map_or(component.clone(), |n| n.to_string_lossy().into_owned());
        println!(
            "{name:<40} {:>8.1} ms {:>6.0} ms {:>5.0} MiB {:>7.1} ms {:>6.0} ms {:>5.0} MiB {:>9.1}x",
            load(&cold),
            wall(&cold),
            rss(&cold),
            load(&warm),
            wall(&warm),
            rss(&warm),
            load(&cold) / load(&warm)
        );
    }
    ExitCode::SUCCESS
}
