//! The configuration Radius's processes start with: UCP's and the
//! providers' YAML (as Radius's `build/configs`, on ports picked free), the
//! provider manifests UCP registers (with our addresses), and the
//! encryption key Radius's chart creates.

use std::path::Path;

use anyhow::{Context, Result, bail};

use super::{PATH_BASE, Postgres};
use crate::realkube::ClusterHandle;

/// Where each part listens.
pub(super) struct Ports {
    pub postgres: u16,
    /// Where nothing listens: UCP routes `Applications.Messaging` here, so
    /// a scenario can meet a resource provider that is down.
    pub down: u16,
    pub ucp: u16,
    pub applications_rp: u16,
    pub dynamic_rp: u16,
}

/// UCP's configuration (Radius's `build/configs/ucp.yaml`, on our ports):
/// the radius plane routes `Applications.*` to applications-rp,
/// `Microsoft.Resources` to the deployment engine, and everything else to
/// dynamic-rp; its store is PostgreSQL.
pub(super) fn ucp_config(ports: &Ports, db: &Postgres, engine: &str, manifests: &Path) -> String {
    let rp = format!("http://127.0.0.1:{}", ports.applications_rp);
    format!(
        r#"environment:
  name: "dev"
  roleLocation: "global"
server:
  port: {ucp}
  pathBase: {PATH_BASE}
databaseProvider:
  provider: "postgresql"
  postgresql:
    url: "{db_url}"
secretProvider:
  provider: "kubernetes"
queueProvider:
  provider: "inmemory"
  name: 'ucp'
profilerProvider:
  enabled: false
initialization:
  planes:
    - id: "/planes/radius/local"
      properties:
        resourceProviders:
          Applications.Core: "{rp}"
          Applications.Messaging: "http://127.0.0.1:{down}"
          Applications.Dapr: "{rp}"
          Applications.Datastores: "{rp}"
          Microsoft.Resources: "{engine}"
        kind: "UCPNative"
  manifestDirectory: "{manifests}"
identity:
  authMethod: default
ucp:
  kind: direct
  direct:
    endpoint: "http://127.0.0.1:{ucp}{PATH_BASE}"
routing:
  defaultDownstreamEndpoint: "http://127.0.0.1:{dynamic}"
metricsProvider:
  enabled: false
logging:
  level: "info"
  json: false
tracerProvider:
  enabled: false
"#,
        ucp = ports.ucp,
        db_url = db.url("ucp"),
        dynamic = ports.dynamic_rp,
        down = ports.down,
        manifests = manifests.display(),
    )
}

/// Radius's built-in provider manifests (`deploy/manifest/built-in-providers/dev`),
/// which UCP registers at start-up, with each provider's address on our
/// ports: the manifests carry the addresses UCP routes to (`localhost:8080`
/// for applications-rp, `localhost:5017` for the deployment engine).
/// `Applications.Messaging` goes to the port where nothing listens.
pub(super) fn write_manifests(from: &Path, to: &Path, ports: &Ports, engine: &str) -> Result<()> {
    std::fs::create_dir_all(to)?;
    let rp = format!("http://127.0.0.1:{}", ports.applications_rp);
    let down = format!("http://127.0.0.1:{}", ports.down);
    for entry in std::fs::read_dir(from).with_context(|| format!("read {}", from.display()))? {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path)?;
        let messaging = text.contains("namespace: Applications.Messaging");
        let text = text
            .replace("http://localhost:8080", if messaging { &down } else { &rp })
            .replace("http://localhost:5017", engine);
        std::fs::write(to.join(path.file_name().unwrap_or_default()), text)?;
    }
    Ok(())
}

/// A resource provider's configuration (Radius's
/// `build/configs/applications-rp.yaml` and `dynamic-rp.yaml`).
pub(super) fn provider_config(
    name: &str,
    port: u16,
    ucp_port: u16,
    db_url: &str,
    terraform: &Path,
) -> String {
    // dynamic-rp reaches Kubernetes through its own setting; applications-rp
    // refuses the field.
    let kubernetes = if name == "dynamic-rp" {
        "kubernetes:\n  kind: default\n"
    } else {
        ""
    };
    format!(
        r#"environment:
  name: "dev"
  roleLocation: "global"
databaseProvider:
  provider: "postgresql"
  postgresql:
    url: "{db_url}"
queueProvider:
  provider: "inmemory"
  name: {name}
secretProvider:
  provider: "kubernetes"
metricsProvider:
  enabled: false
profilerProvider:
  enabled: false
{kubernetes}server:
  host: "127.0.0.1"
  port: {port}
  enableArmAuth: false
workerServer:
  maxOperationConcurrency: 10
  maxOperationRetryCount: 2
ucp:
  kind: direct
  direct:
    endpoint: "http://127.0.0.1:{ucp_port}{PATH_BASE}"
logging:
  level: "info"
  json: false
tracerProvider:
  enabled: false
bicep:
  deleteRetryCount: 20
  deleteRetryDelaySeconds: 60
terraform:
  path: "{terraform}"
"#,
        terraform = terraform.display(),
    )
}

/// The Secret Radius's Helm chart creates for dynamic-rp and UCP
/// (`radius-system/radius-encryption-key`: a versioned key store, one random
/// 32-byte key), unless the cluster has it already.
pub(super) async fn install_encryption_key(kube: &ClusterHandle) -> Result<()> {
    use base64::Engine;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let mut key = [0u8; 32];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut key)
        .context("read a random key")?;
    let store = serde_json::json!({
        "currentVersion": 1,
        "keys": {"1": {
            "key": b64(&key),
            "version": 1,
            "createdAt": "2026-01-01T00:00:00Z",
            "expiresAt": "2099-01-01T00:00:00Z",
        }},
    });
    let manifest = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: radius-system\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata:\n  name: radius-encryption-key\n  \
         namespace: radius-system\ntype: Opaque\ndata:\n  keys.json: {}\n",
        b64(store.to_string().as_bytes())
    );
    let file = tempfile::NamedTempFile::new()?;
    std::fs::write(file.path(), manifest)?;
    let path = file.path().display().to_string();
    let exists = kube
        .kubectl(&[
            "-n",
            "radius-system",
            "get",
            "secret",
            "radius-encryption-key",
        ])
        .await?;
    if exists.status.success() {
        return Ok(());
    }
    let out = kube.kubectl(&["apply", "-f", &path]).await?;
    if !out.status.success() {
        bail!(
            "installing Radius's encryption key: {}",
            crate::output_text(&out)
        );
    }
    Ok(())
}
