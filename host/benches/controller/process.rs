//! The controller a benchmark measures, as a process of its own: `radwasm
//! run` (or `RADWASM_BENCH_BINARY`), or Radius's own controller built from
//! Radius's source; its CPU, memory, `/metrics` and log.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail};
use radwasm_test_support::realkube;
use radwasm_test_support::realradius::RadiusController;

use super::{NAMESPACE, cpu_seconds, proc_status_kib};

/// The controller under measurement, as a child process: `radwasm run`, or
/// Radius's own controller.
pub(crate) struct ControllerProcess {
    process: Process,
    pub(crate) log: PathBuf,
    /// Its `/metrics` (radwasm's counters; `None` for Radius's controller,
    /// which has none of them).
    metrics_url: Option<String>,
}

/// The controller a [`ControllerProcess`] runs.
pub(crate) enum Process {
    Radwasm(Child),
    /// Radius's own, built from Radius's source (`--controller radius`).
    Radius(RadiusController),
}

impl ControllerProcess {
    pub(crate) fn start(
        kubeconfig: &Path,
        radius_url: &str,
        dir: &Path,
        rust_log: &str,
        drift_resync: Option<&str>,
    ) -> anyhow::Result<Self> {
        let log = dir.join("controller.log");
        // A free loopback port for /metrics (released just before the
        // controller binds it).
        let metrics_address = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        // `RADWASM_BENCH_BINARY`: another build of radwasm to measure (two
        // builds compared in one session); this build's by default.
        let binary = std::env::var_os("RADWASM_BENCH_BINARY")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_radwasm").into());
        let mut command = Command::new(binary);
        command.arg("run");
        if let Some(every) = drift_resync {
            command.arg("--drift-resync").arg(every);
        }
        let child = command
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--radius-url")
            .arg(radius_url)
            .arg("--metrics-address")
            .arg(metrics_address.to_string())
            .arg("--policy-namespace")
            .arg(NAMESPACE)
            .env("RUST_LOG", rust_log)
            .env_remove("POD_NAMESPACE")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("starting radwasm run")?;
        Ok(Self {
            process: Process::Radwasm(child),
            log,
            metrics_url: Some(format!("http://{metrics_address}/metrics")),
        })
    }

    /// Radius's own controller against the simulator at `radius_url`, on
    /// the real API server `cluster`.
    pub(crate) async fn start_radius(
        cluster: &realkube::RealCluster,
        radius_url: &str,
    ) -> anyhow::Result<Self> {
        let ucp = format!(
            "{radius_url}{}",
            radwasm_test_support::realradius::PATH_BASE
        );
        let theirs = RadiusController::start(&cluster.handle(), &ucp).await?;
        Ok(Self {
            log: theirs.log_path(),
            process: Process::Radius(theirs),
            metrics_url: None,
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        match &self.process {
            Process::Radwasm(child) => child.id(),
            Process::Radius(theirs) => theirs.pid(),
        }
    }

    /// The controller's `/metrics` text (empty for Radius's controller).
    pub(crate) async fn metrics(&self) -> anyhow::Result<String> {
        let Some(url) = &self.metrics_url else {
            return Ok(String::new());
        };
        let response = reqwest::get(url)
            .await
            .with_context(|| format!("GET {url}"))?;
        Ok(response.error_for_status()?.text().await?)
    }

    /// Resident set size now, in KiB.
    pub(crate) fn rss_kib(&self) -> Option<u64> {
        self.proc_status("VmRSS:")
    }

    fn proc_status(&self, field: &str) -> Option<u64> {
        proc_status_kib(self.pid(), field)
    }

    /// Peak resident set size so far, in KiB.
    pub(crate) fn peak_rss_kib(&self) -> Option<u64> {
        self.proc_status("VmHWM:")
    }

    /// User + system CPU seconds so far.
    pub(crate) fn cpu_seconds(&self) -> Option<f64> {
        cpu_seconds(&self.pid().to_string())
    }

    pub(crate) fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// SIGTERM, then wait (SIGKILL after 20 s). Radius's controller is
    /// stopped by its harness.
    pub(crate) fn stop(mut self) -> anyhow::Result<()> {
        let Process::Radwasm(child) = &mut self.process else {
            return Ok(());
        };
        match radwasm_test_support::terminate(child, Duration::from_secs(20)) {
            Some(status) if !status.success() => {
                bail!("controller exited with {status}:\n{}", self.log_tail())
            }
            Some(_) => Ok(()),
            None => bail!("controller did not stop within 20 s of SIGTERM"),
        }
    }
}

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        let Process::Radwasm(child) = &mut self.process else {
            return;
        };
        if let Ok(None) = child.try_wait() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
