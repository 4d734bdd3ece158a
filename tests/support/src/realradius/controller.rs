//! Radius's own Kubernetes controller (`cmd/controller`, built by
//! `tests/radius/build.sh`), run as Radius's contributors run it
//! (`build/configs/controller.yaml`, webhooks off), for the takeover
//! scenario and the side-by-side benchmark. It watches every namespace:
//! give it a cluster of its own.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, anyhow};

use crate::procs::{Procs, Spawn};
use crate::realkube::ClusterHandle;

/// Radius's controller, running; dropping it stops it.
pub struct RadiusController {
    procs: Procs,
    dir: tempfile::TempDir,
}

impl RadiusController {
    /// The CRDs Radius's controller needs beyond this product's (which are
    /// a superset of Radius's DeploymentTemplate and DeploymentResource):
    /// its `Recipe`, from Radius's chart.
    pub async fn install_crds(kube: &ClusterHandle) -> Result<()> {
        let bins = super::binaries().await?;
        let recipes = bins.join("src/deploy/Chart/crds/radius/radapp.io_recipes.yaml");
        let out = kube
            .kubectl(&["apply", "-f", &recipes.display().to_string()])
            .await?;
        if !out.status.success() {
            return Err(anyhow!(
                "installing Radius's Recipe CRD: {}",
                crate::output_text(&out)
            ));
        }
        Ok(())
    }

    /// Start it against `kube`, sending Radius requests to `ucp_url`, and
    /// wait until its health endpoint answers.
    pub async fn start(kube: &ClusterHandle, ucp_url: &str) -> Result<RadiusController> {
        let bins = super::binaries().await?;
        let dir = tempfile::Builder::new()
            .prefix("radius-controller-")
            .tempdir()?;
        let d = dir.path();
        let home = d.join("home");
        std::fs::create_dir_all(home.join(".kube"))?;
        std::fs::copy(&kube.kubeconfig, home.join(".kube/config"))?;
        let (webhook, l1) = super::free_port()?;
        let (health, l2) = super::free_port()?;
        drop((l1, l2));
        let config = format!(
            r#"environment:
  name: "dev"
  roleLocation: "global"
profilerProvider:
  enabled: false
metricsProvider:
  enabled: false
tracerProvider:
  enabled: false
server:
  host: "127.0.0.1"
  port: {webhook}
workerServer:
  port: {health}
ucp:
  kind: direct
  direct:
    endpoint: "{ucp_url}"
logging:
  level: "info"
  json: false
"#
        );
        let config_path = d.join("controller.yaml");
        std::fs::write(&config_path, config)?;
        let args = vec![
            format!("--config-file={}", config_path.display()),
            // No TLS certificates: Radius skips its webhooks.
            "--cert-dir=".to_string(),
        ];
        let env = [
            ("HOME", home.display().to_string()),
            (
                "KUBECONFIG",
                home.join(".kube/config").display().to_string(),
            ),
        ];
        let mut procs = Procs::default();
        procs.spawn_with(Spawn {
            env: &env,
            ..Spawn::new("radius-controller", &bins.join("controller"), &args, d)
        })?;
        let http = reqwest::Client::builder().no_proxy().build()?;
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        loop {
            procs
                .check_running()
                .map_err(|e| anyhow!("{e:#}{}", procs.log_tails(40)))?;
            if http
                .get(format!("http://127.0.0.1:{health}/readyz"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                break;
            }
            if std::time::Instant::now() > deadline {
                return Err(anyhow!(
                    "Radius's controller was not ready within 120 s{}",
                    procs.log_tails(40)
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(RadiusController { procs, dir })
    }

    /// Its process id (for measuring its CPU and memory).
    pub fn pid(&self) -> u32 {
        self.procs.pids()[0]
    }

    /// The last lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        self.procs.log_tails(lines)
    }

    /// Where its log is.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("radius-controller.log")
    }
}
