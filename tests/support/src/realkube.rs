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

use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

use crate::procs::Procs;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
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
/// Where a control plane listens: [`Listen::loopback`] for every test but
/// the node tests, which need one that pods can reach (`node`).
#[derive(Clone, Debug)]
pub struct Listen {
    /// The address kube-apiserver binds and advertises; it is in its
    /// serving certificate.
    pub address: IpAddr,
    /// The Service range ClusterIPs come from.
    pub service_cidr: String,
    /// The `kubernetes` Service's ClusterIP (the range's first address),
    /// also in the serving certificate.
    pub service_ip: IpAddr,
}

impl Listen {
    /// 127.0.0.1 and a Service range nothing routes to: no node can reach
    /// this API server, and the `kubernetes` Service has no endpoints.
    pub fn loopback() -> Listen {
        Listen {
            address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            service_cidr: SERVICE_CIDR.to_string(),
            service_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        }
    }
}

const BINARIES: [&str; 3] = ["etcd", "kube-apiserver", "kube-controller-manager"];
/// Generous: two cores may be shared with a cargo build and other tests.
const ETCD_READY: Duration = Duration::from_secs(60);
const APISERVER_READY: Duration = Duration::from_secs(180);
const CONTROLLER_MANAGER_READY: Duration = Duration::from_secs(120);

/// The audit log kube-apiserver writes in the cluster's temp dir: every
/// request made by a ServiceAccount (the controller under test), metadata
/// only (who, verb, resource, namespace, response code). The controller
/// manager and the tests act as the admin, so they are not logged.
pub const AUDIT_LOG: &str = "audit.log";
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [\"RequestReceived\"]
rules:
  - level: Metadata
    userGroups: [\"system:serviceaccounts\"]
  - level: None
";

/// Where `deploy/rbac.yaml` puts the controller's ServiceAccount.
pub const CONTROLLER_NAMESPACE: &str = "radwasm-system";
pub const CONTROLLER_SERVICE_ACCOUNT: &str = "radwasm";

pub fn repo_root() -> PathBuf {
    // This crate is tests/support: the repository is two levels up.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tests/support/ has a grandparent")
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
    free_port_on(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

fn free_port_on(address: IpAddr) -> Result<(u16, TcpListener)> {
    let listener = TcpListener::bind((address, 0)).with_context(|| format!("bind {address}:0"))?;
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

/// A CA, kube-apiserver's serving certificate for 127.0.0.1 (and `listen`'s
/// addresses), an admin client
/// certificate (group `system:masters`) and the service-account signing key.
/// Every key is ECDSA P-256; the certificates are valid from 1975 to 4096
/// (rcgen's defaults), so no clock matters.
fn generate_pki(listen: &Listen) -> Result<Pki> {
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
    let mut names = vec![
        "127.0.0.1".to_string(),
        "localhost".to_string(),
        "kubernetes".to_string(),
        "kubernetes.default".to_string(),
        "kubernetes.default.svc".to_string(),
        "10.0.0.1".to_string(),
    ];
    for address in [listen.address, listen.service_ip] {
        if !names.contains(&address.to_string()) {
            names.push(address.to_string());
        }
    }
    let mut serving = CertificateParams::new(names)?;
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

/// The control plane's certificates, keys and audit policy, as written
/// in its dir.
struct Files {
    ca: PathBuf,
    ca_key: PathBuf,
    serving_cert: PathBuf,
    serving_key: PathBuf,
    sa_key: PathBuf,
    sa_pub: PathBuf,
    audit_policy: PathBuf,
}

impl Files {
    fn write(d: &Path, pki: &Pki) -> Result<Files> {
        Ok(Files {
            ca: write(&d.join("ca.crt"), &pki.ca_cert)?,
            ca_key: write(&d.join("ca.key"), &pki.ca_key)?,
            serving_cert: write(&d.join("apiserver.crt"), &pki.serving_cert)?,
            serving_key: write(&d.join("apiserver.key"), &pki.serving_key)?,
            sa_key: write(&d.join("sa.key"), &pki.sa_private_key)?,
            sa_pub: write(&d.join("sa.pub"), &pki.sa_public_key)?,
            audit_policy: write(&d.join("audit-policy.yaml"), AUDIT_POLICY)?,
        })
    }
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// The admin kubeconfig (the admin client certificate, group
/// `system:masters`) for `server`, written in `d`.
fn write_admin_kubeconfig(d: &Path, server: &str, pki: &Pki) -> Result<PathBuf> {
    let admin_user = format!(
        "    client-certificate-data: {}\n    client-key-data: {}\n",
        B64.encode(&pki.admin_cert),
        B64.encode(&pki.admin_key)
    );
    write(
        &d.join("admin.kubeconfig"),
        &kubeconfig_yaml(server, &pki.ca_cert, "admin", &admin_user),
    )
}

/// The control plane did not start: why, with the tails of its logs.
fn fail(procs: &Procs, e: anyhow::Error) -> anyhow::Error {
    anyhow!(
        "the real control plane did not start: {e:#}{}",
        procs.log_tails(40)
    )
}

/// etcd's command line: one member, data in `d`, no fsync.
fn etcd_args(d: &Path, etcd_url: &str, peer_url: &str) -> Vec<String> {
    vec![
        "--name=realkube".to_string(),
        format!("--data-dir={}", path(&d.join("etcd"))),
        format!("--listen-client-urls={etcd_url}"),
        format!("--advertise-client-urls={etcd_url}"),
        format!("--listen-peer-urls={peer_url}"),
        format!("--initial-advertise-peer-urls={peer_url}"),
        format!("--initial-cluster=realkube={peer_url}"),
        "--unsafe-no-fsync=true".to_string(),
        "--log-level=warn".to_string(),
    ]
}

/// Until etcd says it is healthy (or a process of the control plane
/// exits, or [`ETCD_READY`] passes).
async fn etcd_ready(procs: &mut Procs, etcd_url: &str) -> Result<()> {
    let http = reqwest::Client::builder().no_proxy().build()?;
    let deadline = Instant::now() + ETCD_READY;
    loop {
        procs.check_running()?;
        if let Ok(resp) = http.get(format!("{etcd_url}/health")).send().await
            && resp.status().is_success()
            && resp.text().await.unwrap_or_default().contains("true")
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("etcd not healthy after {ETCD_READY:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What kube-apiserver's command line is made of.
struct ApiServerArgs<'a> {
    /// The control plane's dir.
    dir: &'a Path,
    listen: &'a Listen,
    etcd_url: &'a str,
    api_port: u16,
    /// Its URL, also the service accounts' issuer.
    server: &'a str,
    files: &'a Files,
}

impl ApiServerArgs<'_> {
    /// kube-apiserver's command line (off loopback, the admin certificate
    /// it reaches kubelets with is written too).
    fn args(&self, pki: &Pki) -> Result<Vec<String>> {
        let Self {
            dir: d,
            listen,
            etcd_url,
            api_port,
            server,
            files,
        } = *self;
        let mut apiserver_args = vec![
            format!("--etcd-servers={etcd_url}"),
            format!("--bind-address={}", listen.address),
            format!("--advertise-address={}", listen.address),
            format!("--secure-port={api_port}"),
            format!("--cert-dir={}", path(d)),
            format!("--tls-cert-file={}", path(&files.serving_cert)),
            format!("--tls-private-key-file={}", path(&files.serving_key)),
            format!("--client-ca-file={}", path(&files.ca)),
            "--authorization-mode=Node,RBAC".to_string(),
            // Off by default upstream, on in some distributions (OpenShift):
            // setting `blockOwnerDeletion` in an ownerReference needs
            // `update` on the owner's `finalizers` subresource. On here so
            // that the rule deploy/rbac.yaml has for it is exercised.
            "--enable-admission-plugins=OwnerReferencesPermissionEnforcement".to_string(),
            format!("--service-account-issuer={server}"),
            format!("--service-account-key-file={}", path(&files.sa_pub)),
            format!("--service-account-signing-key-file={}", path(&files.sa_key)),
            format!("--service-cluster-ip-range={}", listen.service_cidr),
            // Upstream's default: `/debug/pprof` for the admin, which the
            // controller benchmark reads to profile the API server's side.
            "--profiling=true".to_string(),
            format!("--audit-policy-file={}", path(&files.audit_policy)),
            format!("--audit-log-path={}", path(&d.join(AUDIT_LOG))),
            "--audit-log-format=json".to_string(),
        ];
        if listen.address.is_loopback() {
            // The `kubernetes` Service's endpoints would be the advertise
            // address, which Endpoints validation refuses when it is
            // loopback (an error every reconcile); manage none.
            apiserver_args.push("--endpoint-reconciler-type=none".to_string());
        } else {
            // Pods reach the API server through the `kubernetes` Service
            // (the default `lease` reconciler keeps its endpoints), and
            // `kubectl logs` goes through the API server to the kubelet,
            // which trusts this cluster's CA.
            let admin_cert = write(&d.join("admin.crt"), &pki.admin_cert)?;
            let admin_key = write(&d.join("admin.key"), &pki.admin_key)?;
            apiserver_args.extend([
                format!("--kubelet-client-certificate={}", path(&admin_cert)),
                format!("--kubelet-client-key={}", path(&admin_key)),
                "--kubelet-preferred-address-types=InternalIP".to_string(),
            ]);
        }
        Ok(apiserver_args)
    }
}

/// Until kube-apiserver answers `/readyz` (or a process of the control
/// plane exits, or [`APISERVER_READY`] passes).
async fn apiserver_ready(procs: &mut Procs, client: &Client) -> Result<()> {
    let deadline = Instant::now() + APISERVER_READY;
    loop {
        procs.check_running()?;
        let req = http::Request::get("/readyz").body(Vec::new())?;
        if client.request_text(req).await.is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("kube-apiserver not ready after {APISERVER_READY:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// kube-controller-manager's command line: every controller, with the
/// admin kubeconfig, signing with the cluster's CA.
fn controller_manager_args(kubeconfig: &Path, files: &Files) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", path(kubeconfig)),
        "--controllers=*".to_string(),
        "--use-service-account-credentials=false".to_string(),
        format!("--service-account-private-key-file={}", path(&files.sa_key)),
        format!("--root-ca-file={}", path(&files.ca)),
        format!("--cluster-signing-cert-file={}", path(&files.ca)),
        format!("--cluster-signing-key-file={}", path(&files.ca_key)),
        "--leader-elect=false".to_string(),
        "--bind-address=127.0.0.1".to_string(),
        "--secure-port=0".to_string(),
        "--profiling=false".to_string(),
    ]
}

/// Until kube-controller-manager works: once its service-account
/// controller has made the `default` ServiceAccount of the `default`
/// namespace (or a process of the control plane exits, or
/// [`CONTROLLER_MANAGER_READY`] passes).
async fn controller_manager_ready(procs: &mut Procs, client: &Client) -> Result<()> {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let deadline = Instant::now() + CONTROLLER_MANAGER_READY;
    loop {
        procs.check_running()?;
        if sas.get_opt("default").await?.is_some() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "kube-controller-manager made no default ServiceAccount in \
                 {CONTROLLER_MANAGER_READY:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
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
        Self::start_on(Listen::loopback()).await
    }

    /// [`RealCluster::start`] with kube-apiserver on `listen.address`
    /// instead of loopback. Off loopback it also keeps the `kubernetes`
    /// Service's endpoints (the advertised address) and reaches kubelets
    /// with the admin certificate (`kubectl logs`).
    pub async fn start_on(listen: Listen) -> Result<RealCluster> {
        let bins = binaries().await?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Self::start_with(&bins, &listen).await {
                Err(e) if attempt < 3 && format!("{e:#}").contains("address already in use") => {
                    eprintln!("realkube: a port was taken while starting, retrying: {e:#}");
                }
                other => return other,
            }
        }
    }

    async fn start_with(bins: &Path, listen: &Listen) -> Result<RealCluster> {
        let started = Instant::now();
        let mut dir = tempfile::Builder::new().prefix("realkube-").tempdir()?;
        if std::env::var(KEEP_ENV).is_ok_and(|v| v == "1") {
            dir.disable_cleanup(true);
            eprintln!("realkube: {KEEP_ENV}=1, keeping {}", dir.path().display());
        }
        let d = dir.path();
        let pki = generate_pki(listen)?;
        let files = Files::write(d, &pki)?;

        let (etcd_port, l1) = free_port()?;
        let (peer_port, l2) = free_port()?;
        let (api_port, l3) = free_port_on(listen.address)?;
        drop((l1, l2, l3));
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let server = format!(
            "https://{}",
            std::net::SocketAddr::new(listen.address, api_port)
        );

        let kubeconfig = write_admin_kubeconfig(d, &server, &pki)?;

        let mut procs = Procs::default();

        let etcd_args = etcd_args(d, &etcd_url, &peer_url);
        procs.spawn(d, &bins.join("etcd"), "etcd", &etcd_args)?;
        if let Err(e) = etcd_ready(&mut procs, &etcd_url).await {
            return Err(fail(&procs, e));
        }
        let etcd_done = started.elapsed();

        let apiserver = ApiServerArgs {
            dir: d,
            listen,
            etcd_url: &etcd_url,
            api_port,
            server: &server,
            files: &files,
        };
        let apiserver_args = apiserver.args(&pki)?;
        let kube_apiserver = bins.join("kube-apiserver");
        procs.spawn(d, &kube_apiserver, "kube-apiserver", &apiserver_args)?;
        let client = match client_for(&kubeconfig).await {
            Ok(c) => c,
            Err(e) => return Err(fail(&procs, e)),
        };
        if let Err(e) = apiserver_ready(&mut procs, &client).await {
            return Err(fail(&procs, e));
        }
        let apiserver_done = started.elapsed();

        let kcm_args = controller_manager_args(&kubeconfig, &files);
        let kcm = bins.join("kube-controller-manager");
        procs.spawn(d, &kcm, "kube-controller-manager", &kcm_args)?;
        if let Err(e) = controller_manager_ready(&mut procs, &client).await {
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

    /// The process ids of etcd, kube-apiserver and kube-controller-manager
    /// (for measuring their CPU and memory; the controller benchmark does).
    pub fn pids(&self) -> Vec<u32> {
        self.procs.pids()
    }

    /// The cluster's temp dir (logs, certificates, kubeconfigs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The cluster's addresses and files, usable from any tokio runtime.
    pub fn handle(&self) -> ClusterHandle {
        ClusterHandle {
            server: self.server.clone(),
            ca_pem: self.ca_pem.clone(),
            kubeconfig: self.kubeconfig.clone(),
            dir: self.dir.path().to_path_buf(),
            startup: self.startup,
        }
    }

    /// Run kubectl against this cluster (admin), bounded to 60 s.
    pub async fn kubectl(&self, args: &[&str]) -> Result<std::process::Output> {
        kubectl(self.kubeconfig_path(), args).await
    }
}

/// A running cluster as any test can use it, whatever tokio runtime it runs
/// on: addresses and files only. (A kube-rs `Client` belongs to the runtime
/// that built it: its background task dies with that runtime.)
#[derive(Clone, Debug)]
pub struct ClusterHandle {
    /// `https://127.0.0.1:<port>`.
    pub server: String,
    pub ca_pem: String,
    /// The admin kubeconfig (group `system:masters`).
    pub kubeconfig: PathBuf,
    /// The cluster's temp dir (logs, certificates, kubeconfigs, audit log).
    pub dir: PathBuf,
    /// How long the control plane took to start.
    pub startup: Duration,
}

impl ClusterHandle {
    /// A new admin client on the caller's runtime.
    pub async fn client(&self) -> Result<Client> {
        client_for(&self.kubeconfig).await
    }

    /// Mint a one-hour token for ServiceAccount `ns/name` with `client`
    /// (which must be allowed to create `serviceaccounts/token`) and write
    /// a kubeconfig that uses it to `path` (default: a file named after the
    /// ServiceAccount in the cluster's dir); returns its path.
    pub async fn kubeconfig_for_service_account(
        &self,
        client: &Client,
        ns: &str,
        name: &str,
        path: Option<&Path>,
    ) -> Result<PathBuf> {
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
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
        let path = path.map_or_else(
            || self.dir.join(format!("sa-{ns}-{name}.kubeconfig")),
            Path::to_path_buf,
        );
        write(
            &path,
            &kubeconfig_yaml(&self.server, &self.ca_pem, &user_name, &user),
        )
    }

    /// Run kubectl against this cluster (admin), bounded to 60 s.
    pub async fn kubectl(&self, args: &[&str]) -> Result<std::process::Output> {
        kubectl(&self.kubeconfig, args).await
    }

    /// The audit log's records (see [`AUDIT_LOG`]) of requests made by
    /// `user` so far, as JSON.
    pub fn audit_records(&self, user: &str) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.dir.join(AUDIT_LOG))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|record| record["user"]["username"] == user)
            .collect()
    }
}

/// The cluster shared by every test of this process that asks for one.
static SHARED: OnceLock<std::result::Result<ClusterHandle, String>> = OnceLock::new();
/// What the exit handler stops and removes: the children's pids, the temp
/// dir, and whether to keep it.
static SHARED_CLEANUP: Mutex<Option<(Vec<u32>, PathBuf, bool)>> = Mutex::new(None);

/// The real control plane shared by the tests of this process, started on
/// the first call and prepared for the product once: its CRDs
/// (`deploy/crds/`) Established, and `deploy/namespace.yaml` and
/// `deploy/rbac.yaml` applied as they are, so the controller can run as the
/// `radwasm-system/radwasm` ServiceAccount. Each test uses namespaces of its
/// own on it. The cluster lives until the process exits: its children are
/// owned by a thread that never ends (their parent-death signal follows that
/// thread), and an exit handler kills them and removes the temp dir.
pub async fn shared() -> Result<ClusterHandle> {
    let shared = tokio::task::spawn_blocking(|| SHARED.get_or_init(start_shared).clone())
        .await
        .context("starting the shared cluster")?;
    shared.map_err(|e| anyhow!("{e}"))
}

fn start_shared() -> std::result::Result<ClusterHandle, String> {
    let (sender, receiver) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("realkube-shared".to_string())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = sender.send(Err(format!("tokio runtime: {e}")));
                    return;
                }
            };
            let started = runtime.block_on(async {
                let cluster = RealCluster::start().await?;
                if let Err(e) = prepare_for_product(&cluster).await {
                    bail!(
                        "preparing the shared cluster for the product failed: {e:#}{}",
                        cluster.procs.log_tails(40)
                    );
                }
                Ok(cluster)
            });
            match started {
                Ok(cluster) => {
                    let keep = std::env::var(KEEP_ENV).is_ok_and(|v| v == "1");
                    if let Ok(mut cleanup) = SHARED_CLEANUP.lock() {
                        *cleanup = Some((cluster.procs.pids(), cluster.dir().to_path_buf(), keep));
                    }
                    // SAFETY: registers a plain `extern "C" fn` with no arguments.
                    unsafe {
                        libc::atexit(stop_shared_cluster);
                    }
                    let _ = sender.send(Ok(cluster.handle()));
                    // Own the children (and the runtime) for the rest of the
                    // process.
                    loop {
                        std::thread::park();
                    }
                }
                Err(e) => {
                    let _ = sender.send(Err(format!("{e:#}")));
                }
            }
        });
    if let Err(e) = spawned {
        return Err(format!(
            "cannot start the thread owning the shared cluster: {e}"
        ));
    }
    receiver
        .recv()
        .unwrap_or_else(|_| Err("the thread starting the shared cluster died".to_string()))
}

/// At process exit: kill the shared cluster's processes (newest first),
/// reap them, and remove its temp dir unless asked to keep it.
extern "C" fn stop_shared_cluster() {
    let Some((pids, dir, keep)) = SHARED_CLEANUP.lock().ok().and_then(|mut c| c.take()) else {
        return;
    };
    let stops: Vec<(u32, libc::c_int)> = pids.iter().map(|pid| (*pid, libc::SIGKILL)).collect();
    crate::procs::stop_all(&stops);
    if !keep {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Install what the product needs as an operator would: the CRDs, the
/// controller's namespace and its RBAC, all from `deploy/` as committed;
/// then wait until the CRDs are served and RBAC lets the ServiceAccount
/// list them (the authorizer's caches lag the writes a little).
pub async fn prepare_for_product(cluster: &RealCluster) -> Result<()> {
    let deploy = repo_root().join("deploy");
    let file = |name: &str| deploy.join(name).display().to_string();
    let (crds, policy_crds, namespace, rbac) = (
        file("crds/radapp.io_v1alpha3.yaml"),
        file("crds/radwasm.io_v1alpha1.yaml"),
        file("namespace.yaml"),
        file("rbac.yaml"),
    );
    let out = cluster
        .kubectl(&[
            "apply",
            "--server-side",
            "-f",
            &crds,
            "-f",
            &policy_crds,
            "-f",
            &namespace,
            "-f",
            &rbac,
        ])
        .await?;
    if !out.status.success() {
        bail!(
            "kubectl apply of deploy/crds, deploy/namespace.yaml and deploy/rbac.yaml failed: \
             {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    product_crds_established(&cluster.client()).await?;
    let user = format!("system:serviceaccount:{CONTROLLER_NAMESPACE}:{CONTROLLER_SERVICE_ACCOUNT}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !can(
        &cluster.client(),
        &user,
        "list",
        "radapp.io",
        "deploymenttemplates",
        None,
    )
    .await?
    {
        if Instant::now() > deadline {
            bail!("RBAC does not let {user} list deploymenttemplates 60 s after deploy/rbac.yaml");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Wait (at most 60 s each) until both of the product's CRDs are
/// `Established`, i.e. served.
pub async fn product_crds_established(client: &Client) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in [
        "deploymenttemplates.radapp.io",
        "deploymentresources.radapp.io",
        "reconcilepolicies.radwasm.io",
    ] {
        tokio::time::timeout(
            Duration::from_secs(60),
            await_condition(crds.clone(), crd, conditions::is_crd_established()),
        )
        .await
        .map_err(|_| anyhow!("{crd} not Established within 60 s"))??;
    }
    Ok(())
}

/// Whether RBAC lets `user` (with the groups of a ServiceAccount when it is
/// one) do `verb` on `group`/`resource` (`resource/subresource` allowed) in
/// `namespace` (all namespaces when `None`): a SubjectAccessReview.
pub async fn can(
    client: &Client,
    user: &str,
    verb: &str,
    group: &str,
    resource: &str,
    namespace: Option<&str>,
) -> Result<bool> {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    let (resource, subresource) = match resource.split_once('/') {
        Some((resource, sub)) => (resource, Some(sub.to_string())),
        None => (resource, None),
    };
    let mut groups = vec!["system:authenticated".to_string()];
    if let Some(rest) = user.strip_prefix("system:serviceaccount:")
        && let Some((ns, _)) = rest.split_once(':')
    {
        groups.push("system:serviceaccounts".to_string());
        groups.push(format!("system:serviceaccounts:{ns}"));
    }
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_string()),
            groups: Some(groups),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.to_string()),
                group: Some(group.to_string()),
                resource: Some(resource.to_string()),
                subresource,
                namespace: namespace.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .context("SubjectAccessReview")?;
    Ok(answer.status.is_some_and(|s| s.allowed))
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

pub fn ok_stdout(out: &std::process::Output, what: &str) -> String {
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
pub async fn eventually<T, F, Fut>(what: &str, within: Duration, mut check: F) -> T
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
