//! The real Kubernetes control plane for tests: etcd, kube-apiserver and
//! kube-controller-manager built from the upstream Go modules by
//! `tests/kube/build.sh` and started on loopback the way controller-runtime's
//! envtest starts etcd and kube-apiserver, plus the controller manager so that
//! garbage collection, namespace deletion and service accounts behave as on a
//! cluster. Test infrastructure only; see "The real API server for tests" in
//! `docs/apiserver.md`.
//!
//! These tests run by default. `RADWASM_SKIP_REAL_KUBE=1` skips them
//! (explicitly, with a message); `RADWASM_KUBE_BIN_DIR` points at prebuilt
//! `etcd`, `kube-apiserver` and `kube-controller-manager` binaries instead of
//! building them. If the binaries can be neither found nor built, the tests
//! fail and say how to build them. `RADWASM_REAL_KUBE_KEEP=1` keeps each
//! cluster's temp dir (the three logs among it) after the test.

use std::fs::File;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, Config};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

/// Set to `1` to skip the tests that need the real control plane.
pub const SKIP_ENV: &str = "RADWASM_SKIP_REAL_KUBE";
/// A directory holding prebuilt `etcd`, `kube-apiserver` and
/// `kube-controller-manager`; when unset, `tests/kube/build.sh` provides them.
pub const BIN_DIR_ENV: &str = "RADWASM_KUBE_BIN_DIR";
/// Set to `1` to keep each cluster's temp dir (logs, certificates,
/// kubeconfigs, etcd data) after the test.
pub const KEEP_ENV: &str = "RADWASM_REAL_KUBE_KEEP";

/// The Service IP range kube-apiserver allocates ClusterIPs from. Nothing
/// routes to it here (no kube-proxy, no nodes, no webhooks), so no address in
/// it is ever contacted; it is the range envtest uses.
const SERVICE_CIDR: &str = "10.0.0.0/24";
const BINARIES: [&str; 3] = ["etcd", "kube-apiserver", "kube-controller-manager"];
/// Generous: two cores may be shared with a cargo build and other tests.
const ETCD_READY: Duration = Duration::from_secs(60);
const APISERVER_READY: Duration = Duration::from_secs(180);
const CONTROLLER_MANAGER_READY: Duration = Duration::from_secs(120);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

/// True (after saying so on stderr) when the caller asked to skip the tests
/// that need the real control plane.
pub fn skip_requested() -> bool {
    let skip = std::env::var(SKIP_ENV).is_ok_and(|v| v == "1" || v == "true");
    if skip {
        eprintln!(
            "{SKIP_ENV} is set: skipping a test that needs the real Kubernetes control plane"
        );
    }
    skip
}

/// The directory with the three binaries: `RADWASM_KUBE_BIN_DIR`, or what
/// `tests/kube/build.sh` builds (once; later calls reuse the cached build).
pub async fn binaries() -> Result<PathBuf> {
    let how = format!(
        "Build them with `tests/kube/build.sh` (needs Go >= 1.26 and, the first time, the Go \
         module proxy; about 11 minutes on 2 cores), or point {BIN_DIR_ENV} at a directory with \
         prebuilt etcd, kube-apiserver and kube-controller-manager, or skip these tests \
         explicitly with {SKIP_ENV}=1."
    );
    let dir = if let Some(dir) = std::env::var_os(BIN_DIR_ENV) {
        PathBuf::from(dir)
    } else {
        let script = repo_root().join("tests/kube/build.sh");
        // stderr is inherited so that a first build shows its progress.
        let out = tokio::process::Command::new("bash")
            .arg(&script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .output()
            .await
            .with_context(|| format!("cannot run {}. {how}", script.display()))?;
        if !out.status.success() {
            bail!(
                "{} failed ({}; its output is above): the real Kubernetes control plane \
                 binaries are not available. {how}",
                script.display(),
                out.status
            );
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        PathBuf::from(stdout.lines().last().unwrap_or_default().trim())
    };
    for bin in BINARIES {
        let path = dir.join(bin);
        if !path.is_file() {
            bail!("{} is missing. {how}", path.display());
        }
    }
    Ok(dir)
}

/// A free port on 127.0.0.1, kept bound until the caller drops the listener
/// (so that several picked together differ).
fn free_port() -> Result<(u16, TcpListener)> {
    let listener = TcpListener::bind("127.0.0.1:0").context("bind 127.0.0.1:0")?;
    Ok((listener.local_addr()?.port(), listener))
}

/// The certificates and keys of one cluster, all PEM.
struct Pki {
    ca_cert: String,
    ca_key: String,
    serving_cert: String,
    serving_key: String,
    admin_cert: String,
    admin_key: String,
    sa_private_key: String,
    sa_public_key: String,
}

fn name(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    if let Some(org) = organization {
        dn.push(DnType::OrganizationName, org);
    }
    dn
}

/// A CA, kube-apiserver's serving certificate for 127.0.0.1, an admin client
/// certificate (group `system:masters`) and the service-account signing key.
/// Every key is ECDSA P-256; the certificates are valid from 1975 to 4096
/// (rcgen's defaults), so no clock matters.
fn generate_pki() -> Result<Pki> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::default();
    ca.distinguished_name = name("radwasm-test-ca", None);
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key)?.pem();
    let ca_key_pem = ca_key.serialize_pem();
    let issuer = Issuer::new(ca, ca_key);

    let leaf = |params: &mut CertificateParams, usage: ExtendedKeyUsagePurpose| {
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![usage];
    };

    // Names a client inside or outside a cluster would use for the API server.
    let mut serving = CertificateParams::new(vec![
        "127.0.0.1".to_string(),
        "localhost".to_string(),
        "kubernetes".to_string(),
        "kubernetes.default".to_string(),
        "kubernetes.default.svc".to_string(),
        "10.0.0.1".to_string(),
    ])?;
    serving.distinguished_name = name("kube-apiserver", None);
    leaf(&mut serving, ExtendedKeyUsagePurpose::ServerAuth);
    let serving_key = KeyPair::generate()?;
    let serving_cert = serving.signed_by(&serving_key, &issuer)?.pem();

    let mut admin = CertificateParams::default();
    admin.distinguished_name = name("radwasm-test-admin", Some("system:masters"));
    leaf(&mut admin, ExtendedKeyUsagePurpose::ClientAuth);
    let admin_key = KeyPair::generate()?;
    let admin_cert = admin.signed_by(&admin_key, &issuer)?.pem();

    let sa_key = KeyPair::generate()?;
    Ok(Pki {
        ca_cert,
        ca_key: ca_key_pem,
        serving_cert,
        serving_key: serving_key.serialize_pem(),
        admin_cert,
        admin_key: admin_key.serialize_pem(),
        sa_private_key: sa_key.serialize_pem(),
        sa_public_key: sa_key.public_key_pem(),
    })
}

fn write(path: &Path, contents: &str) -> Result<PathBuf> {
    std::fs::write(path, contents).with_context(|| format!("write {}", path.display()))?;
    Ok(path.to_path_buf())
}

fn kubeconfig_yaml(server: &str, ca_pem: &str, user_name: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: real\n  cluster:\n    server: {server}\n    \
         certificate-authority-data: {ca}\nusers:\n- name: {user_name}\n  user:\n{user}contexts:\n\
         - name: real\n  context:\n    cluster: real\n    user: {user_name}\n    namespace: default\n\
         current-context: real\n",
        ca = B64.encode(ca_pem),
    )
}

/// A kube-rs client for a kubeconfig file.
pub async fn client_for(kubeconfig: &Path) -> Result<Client> {
    let kubeconfig = Kubeconfig::read_from(kubeconfig)?;
    let mut config =
        Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    // Loopback only: never send these requests to an HTTPS_PROXY from the
    // environment (kube-rs would otherwise pick it up).
    config.proxy_url = None;
    Ok(Client::try_from(config)?)
}

/// One child process, its output in `<dir>/<name>.log`.
struct Proc {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

/// The running children; dropping this kills them (newest first) and waits
/// for them, so nothing outlives a test, also when it panics.
#[derive(Default)]
struct Procs(Vec<Proc>);

impl Procs {
    fn spawn(&mut self, dir: &Path, bin: &Path, name: &'static str, args: &[String]) -> Result<()> {
        let log = dir.join(format!("{name}.log"));
        let out = File::create(&log).with_context(|| format!("create {}", log.display()))?;
        let mut cmd = Command::new(bin);
        cmd.args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        // If the test process dies without unwinding (SIGKILL, abort), the
        // kernel kills the child too. The signal follows the thread that
        // spawned the child, which is the test's runtime thread and outlives
        // the cluster.
        // SAFETY: prctl is async-signal-safe and touches no memory of ours.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("start {}", bin.display()))?;
        self.0.push(Proc { name, child, log });
        Ok(())
    }

    /// An error if any child has exited.
    fn check_running(&mut self) -> Result<()> {
        for p in &mut self.0 {
            if let Some(status) = p.child.try_wait()? {
                bail!("{} exited early ({status})", p.name);
            }
        }
        Ok(())
    }

    /// The last lines of every log, for error messages.
    fn log_tails(&self, lines: usize) -> String {
        let mut out = String::new();
        for p in &self.0 {
            let text = std::fs::read_to_string(&p.log).unwrap_or_default();
            let all: Vec<&str> = text.lines().collect();
            let tail = &all[all.len().saturating_sub(lines)..];
            out.push_str(&format!(
                "\n--- last {} lines of {} ({}) ---\n{}\n",
                tail.len(),
                p.name,
                p.log.display(),
                tail.join("\n")
            ));
        }
        out
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for p in self.0.iter_mut().rev() {
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
    }
}

/// etcd, kube-apiserver and kube-controller-manager on 127.0.0.1, with an
/// admin kubeconfig. Dropping it stops all three and removes the temp dir.
pub struct RealCluster {
    // Field order is drop order: the processes go before their directory.
    procs: Procs,
    server: String,
    ca_pem: String,
    kubeconfig: PathBuf,
    client: Client,
    /// How long `start` took once the binaries were there.
    pub startup: Duration,
    dir: tempfile::TempDir,
}

impl RealCluster {
    /// Build or find the binaries, then start the control plane and wait
    /// until kube-apiserver is ready and kube-controller-manager is working.
    /// A port picked free can be taken before the server binds it; that case
    /// is retried.
    pub async fn start() -> Result<RealCluster> {
        let bins = binaries().await?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Self::start_with(&bins).await {
                Err(e) if attempt < 3 && format!("{e:#}").contains("address already in use") => {
                    eprintln!("realkube: a port was taken while starting, retrying: {e:#}");
                }
                other => return other,
            }
        }
    }

    async fn start_with(bins: &Path) -> Result<RealCluster> {
        let started = Instant::now();
        let mut dir = tempfile::Builder::new().prefix("realkube-").tempdir()?;
        if std::env::var(KEEP_ENV).is_ok_and(|v| v == "1") {
            dir.disable_cleanup(true);
            eprintln!("realkube: {KEEP_ENV}=1, keeping {}", dir.path().display());
        }
        let d = dir.path();
        let pki = generate_pki()?;
        let ca = write(&d.join("ca.crt"), &pki.ca_cert)?;
        let ca_key = write(&d.join("ca.key"), &pki.ca_key)?;
        let serving_cert = write(&d.join("apiserver.crt"), &pki.serving_cert)?;
        let serving_key = write(&d.join("apiserver.key"), &pki.serving_key)?;
        let sa_key = write(&d.join("sa.key"), &pki.sa_private_key)?;
        let sa_pub = write(&d.join("sa.pub"), &pki.sa_public_key)?;

        let (etcd_port, l1) = free_port()?;
        let (peer_port, l2) = free_port()?;
        let (api_port, l3) = free_port()?;
        drop((l1, l2, l3));
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let server = format!("https://127.0.0.1:{api_port}");

        let admin_user = format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            B64.encode(&pki.admin_cert),
            B64.encode(&pki.admin_key)
        );
        let kubeconfig = write(
            &d.join("admin.kubeconfig"),
            &kubeconfig_yaml(&server, &pki.ca_cert, "admin", &admin_user),
        )?;

        let mut procs = Procs::default();
        let fail = |procs: &Procs, e: anyhow::Error| -> anyhow::Error {
            anyhow!(
                "the real control plane did not start: {e:#}{}",
                procs.log_tails(40)
            )
        };

        let path = |p: &Path| p.display().to_string();
        let etcd_args = vec![
            "--name=realkube".to_string(),
            format!("--data-dir={}", path(&d.join("etcd"))),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=realkube={peer_url}"),
            "--unsafe-no-fsync=true".to_string(),
            "--log-level=warn".to_string(),
        ];
        procs.spawn(d, &bins.join("etcd"), "etcd", &etcd_args)?;
        let etcd_ready = async {
            let http = reqwest::Client::builder().no_proxy().build()?;
            let deadline = Instant::now() + ETCD_READY;
            loop {
                procs.check_running()?;
                if let Ok(resp) = http.get(format!("{etcd_url}/health")).send().await
                    && resp.status().is_success()
                    && resp.text().await.unwrap_or_default().contains("true")
                {
                    return Ok::<_, anyhow::Error>(());
                }
                if Instant::now() > deadline {
                    bail!("etcd not healthy after {ETCD_READY:?}");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        if let Err(e) = etcd_ready.await {
            return Err(fail(&procs, e));
        }
        let etcd_done = started.elapsed();

        let apiserver_args = vec![
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".to_string(),
            "--advertise-address=127.0.0.1".to_string(),
            // The `kubernetes` Service's endpoints would be the advertise
            // address, which Endpoints validation refuses when it is
            // loopback (an error every reconcile); manage none.
            "--endpoint-reconciler-type=none".to_string(),
            format!("--secure-port={api_port}"),
            format!("--cert-dir={}", path(d)),
            format!("--tls-cert-file={}", path(&serving_cert)),
            format!("--tls-private-key-file={}", path(&serving_key)),
            format!("--client-ca-file={}", path(&ca)),
            "--authorization-mode=Node,RBAC".to_string(),
            format!("--service-account-issuer={server}"),
            format!("--service-account-key-file={}", path(&sa_pub)),
            format!("--service-account-signing-key-file={}", path(&sa_key)),
            format!("--service-cluster-ip-range={SERVICE_CIDR}"),
            "--profiling=false".to_string(),
        ];
        procs.spawn(
            d,
            &bins.join("kube-apiserver"),
            "kube-apiserver",
            &apiserver_args,
        )?;
        let client = match client_for(&kubeconfig).await {
            Ok(c) => c,
            Err(e) => return Err(fail(&procs, e)),
        };
        let apiserver_ready = async {
            let deadline = Instant::now() + APISERVER_READY;
            loop {
                procs.check_running()?;
                let req = http::Request::get("/readyz").body(Vec::new())?;
                if client.request_text(req).await.is_ok() {
                    return Ok::<_, anyhow::Error>(());
                }
                if Instant::now() > deadline {
                    bail!("kube-apiserver not ready after {APISERVER_READY:?}");
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        };
        if let Err(e) = apiserver_ready.await {
            return Err(fail(&procs, e));
        }
        let apiserver_done = started.elapsed();

        let kcm_args = vec![
            format!("--kubeconfig={}", path(&kubeconfig)),
            "--controllers=*".to_string(),
            "--use-service-account-credentials=false".to_string(),
            format!("--service-account-private-key-file={}", path(&sa_key)),
            format!("--root-ca-file={}", path(&ca)),
            format!("--cluster-signing-cert-file={}", path(&ca)),
            format!("--cluster-signing-key-file={}", path(&ca_key)),
            "--leader-elect=false".to_string(),
            "--bind-address=127.0.0.1".to_string(),
            "--secure-port=0".to_string(),
            "--profiling=false".to_string(),
        ];
        procs.spawn(
            d,
            &bins.join("kube-controller-manager"),
            "kube-controller-manager",
            &kcm_args,
        )?;
        // Working once its service-account controller has made the
        // `default` ServiceAccount of the `default` namespace.
        let kcm_ready = async {
            let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
            let deadline = Instant::now() + CONTROLLER_MANAGER_READY;
            loop {
                procs.check_running()?;
                if sas.get_opt("default").await?.is_some() {
                    return Ok::<_, anyhow::Error>(());
                }
                if Instant::now() > deadline {
                    bail!(
                        "kube-controller-manager made no default ServiceAccount in \
                         {CONTROLLER_MANAGER_READY:?}"
                    );
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        };
        if let Err(e) = kcm_ready.await {
            return Err(fail(&procs, e));
        }
        let startup = started.elapsed();
        eprintln!(
            "realkube: control plane ready in {:.1} s (etcd {:.1} s, kube-apiserver {:.1} s, \
             kube-controller-manager {:.1} s) in {}",
            startup.as_secs_f64(),
            etcd_done.as_secs_f64(),
            (apiserver_done - etcd_done).as_secs_f64(),
            (startup - apiserver_done).as_secs_f64(),
            d.display()
        );
        procs.check_running().map_err(|e| fail(&procs, e))?;
        Ok(RealCluster {
            procs,
            server,
            ca_pem: pki.ca_cert,
            kubeconfig,
            client,
            startup,
            dir,
        })
    }

    /// The admin kubeconfig (group `system:masters`), for kubectl and for
    /// processes under test.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// A kube-rs client with the admin identity.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// `https://127.0.0.1:<port>`.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The cluster's temp dir (logs, certificates, kubeconfigs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Mint a one-hour token for ServiceAccount `ns/name` through the
    /// TokenRequest API and write a kubeconfig that uses it; returns its path.
    pub async fn kubeconfig_for_service_account(&self, ns: &str, name: &str) -> Result<PathBuf> {
        let sas: Api<ServiceAccount> = Api::namespaced(self.client(), ns);
        let request = TokenRequest {
            spec: TokenRequestSpec {
                expiration_seconds: Some(3600),
                ..Default::default()
            },
            ..Default::default()
        };
        let minted = sas
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .with_context(|| format!("TokenRequest for ServiceAccount {ns}/{name}"))?;
        let token = minted
            .status
            .map(|s| s.token)
            .ok_or_else(|| anyhow!("TokenRequest for {ns}/{name} returned no token"))?;
        let user = format!("    token: {token}\n");
        let user_name = format!("system:serviceaccount:{ns}:{name}");
        write(
            &self.dir().join(format!("sa-{ns}-{name}.kubeconfig")),
            &kubeconfig_yaml(&self.server, &self.ca_pem, &user_name, &user),
        )
    }

    /// Run kubectl against this cluster (admin), bounded to 60 s.
    pub async fn kubectl(&self, args: &[&str]) -> Result<std::process::Output> {
        kubectl(self.kubeconfig_path(), args).await
    }
}

impl Drop for RealCluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "realkube: the test failed; control-plane logs:{}",
                self.procs.log_tails(30)
            );
        }
    }
}

/// Run kubectl with a kubeconfig, bounded to 60 s; an error if it cannot be
/// started or overruns (not if it exits non-zero: see the status).
pub async fn kubectl(kubeconfig: &Path, args: &[&str]) -> Result<std::process::Output> {
    let child = tokio::process::Command::new("kubectl")
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(Duration::from_secs(60), child)
        .await
        .map_err(|_| anyhow!("kubectl {args:?} ran over 60 s"))?
        .with_context(|| {
            format!(
                "cannot run kubectl {args:?} (needs kubectl on PATH; or skip these tests \
                 explicitly with {SKIP_ENV}=1)"
            )
        })
}

fn ok_stdout(out: &std::process::Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Poll `check` until it yields a value; panic after `within`.
async fn eventually<T, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + within;
    let mut last = None;
    loop {
        match check().await {
            Ok(Some(value)) => return value,
            Ok(None) => {}
            Err(e) => last = Some(format!("{e:#}")),
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {within:?} (last error: {last:?})"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The product's CRDs and example on the real API server, garbage collection
/// by the real controller manager, and a TokenRequest-minted identity that
/// RBAC refuses.
#[tokio::test]
async fn real_control_plane_serves_product_crds_gc_and_service_account_tokens() {
    if skip_requested() {
        return;
    }
    let cluster = RealCluster::start()
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let client = cluster.client();
    let root = repo_root();

    // The product's generated CRDs, applied as a user would, become
    // Established.
    let crds_dir = root.join("deploy/crds");
    let out = cluster
        .kubectl(&[
            "apply",
            "--server-side",
            "-f",
            &crds_dir.display().to_string(),
        ])
        .await
        .unwrap();
    ok_stdout(&out, "kubectl apply --server-side -f deploy/crds/");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in [
        "deploymenttemplates.radapp.io",
        "deploymentresources.radapp.io",
    ] {
        tokio::time::timeout(
            Duration::from_secs(60),
            await_condition(crds.clone(), crd, conditions::is_crd_established()),
        )
        .await
        .unwrap_or_else(|_| panic!("{crd} not Established within 60 s"))
        .unwrap();
    }

    // kubectl explain reads the CRD's schema from the published OpenAPI,
    // which the server updates shortly after the CRD is Established.
    let explained = eventually(
        "kubectl explain deploymenttemplates.spec",
        Duration::from_secs(60),
        || async {
            let out = cluster
                .kubectl(&["explain", "deploymenttemplates.spec"])
                .await?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            Ok((out.status.success() && text.contains("FIELDS")).then_some(text))
        },
    )
    .await;
    assert!(explained.contains("template"), "{explained}");

    // The bundled example validates against the CRD schema (strict field
    // validation) in a namespace of its own.
    let ns = "realkube";
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(ns.to_string()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut example: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(root.join("deploy/examples/app.yaml")).unwrap(),
    )
    .unwrap();
    example["metadata"]["namespace"] = ns.into();
    let example_path = cluster.dir().join("app.yaml");
    std::fs::write(&example_path, serde_yaml::to_string(&example).unwrap()).unwrap();
    let out = cluster
        .kubectl(&[
            "apply",
            "--server-side",
            "--validate=strict",
            "-f",
            &example_path.display().to_string(),
        ])
        .await
        .unwrap();
    ok_stdout(
        &out,
        "kubectl apply --server-side -f deploy/examples/app.yaml",
    );
    let templates: Api<radwasm::crd::DeploymentTemplate> = Api::namespaced(client.clone(), ns);
    let demo = templates.get("demo").await.unwrap();
    assert!(
        demo.spec
            .template
            .contains("Applications.Core/applications"),
        "the stored template is the example's"
    );

    // Garbage collection by kube-controller-manager: deleting the owner
    // removes the ConfigMap that names it in ownerReferences.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let owner = cms
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("owner".to_string()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    cms.create(
        &PostParams::default(),
        &ConfigMap {
            metadata: ObjectMeta {
                name: Some("dependent".to_string()),
                owner_references: Some(vec![OwnerReference {
                    api_version: "v1".to_string(),
                    kind: "ConfigMap".to_string(),
                    name: "owner".to_string(),
                    uid: owner.metadata.uid.clone().unwrap(),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .unwrap();
    cms.delete("owner", &DeleteParams::default()).await.unwrap();
    eventually(
        "the garbage collector deletes the dependent ConfigMap",
        Duration::from_secs(90),
        || {
            let cms = cms.clone();
            async move { Ok(cms.get_opt("dependent").await?.is_none().then_some(())) }
        },
    )
    .await;

    // A token minted through the TokenRequest API authenticates as the
    // ServiceAccount, and RBAC (which grants it nothing) forbids listing
    // Secrets.
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    sas.create(
        &PostParams::default(),
        &ServiceAccount {
            metadata: ObjectMeta {
                name: Some("reader".to_string()),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let sa_kubeconfig = cluster
        .kubeconfig_for_service_account(ns, "reader")
        .await
        .unwrap();
    let sa_client = client_for(&sa_kubeconfig).await.unwrap();
    let review = Api::<SelfSubjectReview>::all(sa_client.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    let user = review.status.and_then(|s| s.user_info).unwrap_or_default();
    assert_eq!(
        user.username.as_deref(),
        Some("system:serviceaccount:realkube:reader")
    );
    assert!(
        user.groups
            .unwrap_or_default()
            .contains(&"system:serviceaccounts:realkube".to_string())
    );
    match Api::<Secret>::namespaced(sa_client, ns)
        .list(&ListParams::default())
        .await
    {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("listing Secrets as the ServiceAccount must be forbidden: {other:?}"),
    }
    // The same through kubectl with the written kubeconfig.
    let out = kubectl(
        &sa_kubeconfig,
        &["auth", "can-i", "list", "secrets", "-n", ns],
    )
    .await
    .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "no");
    assert!(cluster.server().starts_with("https://127.0.0.1:"));
    eprintln!("realkube: startup took {:?}", cluster.startup);
}
