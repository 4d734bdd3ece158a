//! Helpers shared by radwasm's integration tests (`host/tests`), its
//! end-to-end suite (`tests/e2e`, the `e2e` test of `host`) and its
//! controller benchmark (`host/benches/controller.rs`): one crate instead of
//! the same files included by `#[path]` into each.
//!
//! * [`registry`]: a loopback OCI registry (CNCF distribution).
//! * [`scaffold`]: a policy scaffolded by `radwasm policy new --lang …` and
//!   built with its README's own steps and pinned tools.
//! * [`output_text`] and [`repository`]: a command's output as text, and
//!   the checkout's root.
//! * [`realkube`]: a real Kubernetes control plane (etcd, kube-apiserver and
//!   kube-controller-manager) on loopback.
//! * [`realradius`]: Radius's own control plane (UCP, its resource
//!   providers, PostgreSQL) built from Radius's source, with the Radius
//!   simulator as its deployment engine.
//! * [`node`]: a real Kubernetes node (containerd, kubelet, kube-proxy) with
//!   that control plane on a bridge, for the chart's node tests.
#![allow(
    clippy::too_many_lines,
    reason = "a test or benchmark scenario reads top to bottom as one story"
)]

pub mod node;
pub mod pki;
mod procs;
pub mod realkube;
pub mod realradius;
pub mod registry;
pub mod scaffold;

use std::path::{Path, PathBuf};
use std::process::Output;

/// A finished command's stdout then stderr, as text: what a test prints
/// when the command did not do what it should.
pub fn output_text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The root of the repository checkout the tests run in.
pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root")
}

/// Stop `child` as Kubernetes stops a container: SIGTERM, then up to `grace`
/// for it to exit, then SIGKILL. Its exit status, or `None` if it had to be
/// killed.
pub fn terminate(
    child: &mut std::process::Child,
    grace: std::time::Duration,
) -> Option<std::process::ExitStatus> {
    let _ = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let started = std::time::Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if started.elapsed() > grace {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The case files whose expected plan changed after the guests kept under
/// `host/tests/fixtures/contract-*/` were built, as listed (relative to the
/// repository) in `host/tests/fixtures/cases-changed-since.txt`.
pub fn cases_changed_since_kept_guests() -> Vec<PathBuf> {
    let list = repository().join("host/tests/fixtures/cases-changed-since.txt");
    std::fs::read_to_string(&list)
        .unwrap_or_else(|error| panic!("{}: {error}", list.display()))
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(PathBuf::from)
        .collect()
}

/// Run every case under `dir` against `policy`, a guest kept as a fixture:
/// every case passes except those [`cases_changed_since_kept_guests`]
/// lists, which must fail (so the list cannot outlive the change it
/// records). Panics naming the first case that does otherwise; the number
/// of cases run.
pub fn kept_guest_passes_cases(policy: &radwasm::policy::LoadedPolicy, dir: &Path) -> usize {
    let changed = cases_changed_since_kept_guests();
    let cases = radwasm_policy_model::cases::load_cases(dir).expect("cases");
    for loaded in &cases {
        let listed = changed.iter().any(|case| loaded.path.ends_with(case));
        match (radwasm::policy::check_case(policy, &loaded.case), listed) {
            (Ok(()), false) | (Err(_), true) => {}
            (Err(failed), false) => panic!("{}: {failed}", loaded.path.display()),
            (Ok(()), true) => panic!(
                "{} is listed in host/tests/fixtures/cases-changed-since.txt, yet the kept guest passes it",
                loaded.path.display()
            ),
        }
    }
    cases.len()
}

/// User + system CPU seconds of a process so far (`/proc/<pid>/stat`,
/// USER_HZ = 100 on Linux): what the benchmarks measure each process by.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // Fields 14 and 15 of stat(5); the slice starts at field 3.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}
