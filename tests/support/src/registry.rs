//! A real OCI registry for tests: CNCF distribution (`docker-registry`,
//! Debian's package), started on loopback with its storage in a temp dir
//! and stopped when dropped (also when the test fails). Shared by the OCI
//! tests of `host/tests` and the end-to-end scenarios. The node scenarios,
//! whose pods cannot reach the host's loopback, start it on the address of
//! the bridge the test node creates instead ([`Registry::start_on`]).
//!
//! The registry must be installed (`apt-get install docker-registry`; CI's
//! `.ci/run` installs it). Without it the tests using it fail and say so.

use std::fs::File;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use radwasm::policy::source::oci::OciOptions;

pub const REGISTRY_READY: Duration = Duration::from_secs(60);
pub const USER: &str = "policy-author";
pub const PASSWORD: &str = "radwasm-test-password";
/// bcrypt (cost 4) of PASSWORD: distribution reads only bcrypt htpasswd files.
pub const HTPASSWD: &str =
    "policy-author:$2b$04$O05lURlHBLWocjsG9WT1jeR1nsQh7c7cuVa9Fh7riSJd.dhCLh/Ia\n";

/// A `docker-registry serve` on 127.0.0.1 (or the address given to
/// [`Registry::start_on`]), killed when dropped.
pub struct Registry {
    child: Option<Child>,
    /// `127.0.0.1:PORT` (`ADDRESS:PORT` with [`Registry::start_on`]).
    pub addr: String,
    pub dir: tempfile::TempDir,
}

impl Registry {
    pub fn start() -> Registry {
        Registry::start_with(false)
    }

    /// A registry that wants `USER`/`PASSWORD` (htpasswd, HTTP basic auth).
    pub fn start_with_auth() -> Registry {
        Registry::start_with(true)
    }

    pub fn start_with(auth: bool) -> Registry {
        Registry::start_on(IpAddr::V4(Ipv4Addr::LOCALHOST), auth)
    }

    /// A registry listening on `address` (a free port on it) rather than
    /// loopback: for clients that cannot reach the host's loopback, such
    /// as pods on a test node's bridge. Only addresses a test itself owns
    /// (loopback, or a bridge it created) belong here.
    pub fn start_on(address: IpAddr, auth: bool) -> Registry {
        let binary = registry_binary();
        let dir = tempfile::tempdir().expect("temp dir");
        let port = {
            let listener = TcpListener::bind(SocketAddr::new(address, 0))
                .unwrap_or_else(|error| panic!("bind {address}:0 for the registry: {error}"));
            listener.local_addr().expect("local addr").port()
        };
        let addr = SocketAddr::new(address, port).to_string();
        let mut config = format!(
            "version: 0.1\n\
             log:\n  level: info\n\
             storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
             http:\n  addr: {addr}\n  secret: radwasm-test-only\n",
            dir.path().join("storage").display()
        );
        if auth {
            let htpasswd = dir.path().join("htpasswd");
            std::fs::write(&htpasswd, HTPASSWD).expect("write htpasswd");
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: radwasm-test\n    path: {}\n",
                htpasswd.display()
            ));
        }
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).expect("write registry config");
        let log = File::create(dir.path().join("registry.log")).expect("registry log");
        let mut command = Command::new(&binary);
        command
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log);
        // If the test process dies without dropping the registry, the kernel
        // kills the registry too (the signal follows the spawning thread,
        // which is the test's and outlives the registry).
        // SAFETY: prctl is async-signal-safe and touches no memory of ours.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command
            .spawn()
            .unwrap_or_else(|error| panic!("starting {}: {error}", binary.display()));
        let mut registry = Registry {
            child: Some(child),
            addr,
            dir,
        };
        registry.wait_ready();
        registry
    }

    fn wait_ready(&mut self) {
        let started = Instant::now();
        let url = format!("http://{}/v2/", self.addr);
        loop {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait().expect("registry status")
            {
                panic!(
                    "docker-registry exited before answering ({status}); its log:\n{}",
                    self.log()
                );
            }
            // Any HTTP answer (200, or 401 with auth) means it serves.
            if let Ok(mut stream) = std::net::TcpStream::connect(&self.addr) {
                use std::io::{Read, Write};
                let request = format!(
                    "GET /v2/ HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
                    self.addr
                );
                let mut answer = String::new();
                if stream.write_all(request.as_bytes()).is_ok()
                    && stream.read_to_string(&mut answer).is_ok()
                    && answer.starts_with("HTTP/1.1 ")
                {
                    return;
                }
            }
            assert!(
                started.elapsed() < REGISTRY_READY,
                "docker-registry did not answer {url} within {REGISTRY_READY:?}; its log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn reference(&self, repository_and_tag: &str) -> String {
        format!("{}/{repository_and_tag}", self.addr)
    }

    pub fn options(&self) -> OciOptions {
        OciOptions {
            insecure_registries: vec![self.addr.clone()],
            auth: None,
            user_agent: radwasm::USER_AGENT,
        }
    }

    /// Where the registry keeps a blob (manifests are blobs too).
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.dir
            .path()
            .join("storage/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `docker-registry` from PATH (or Debian's place for it); a failing test
/// that says how to install it otherwise.
pub fn registry_binary() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|dir| dir.join("docker-registry"))
        .chain([PathBuf::from("/usr/bin/docker-registry")])
        .find(|candidate| candidate.is_file());
    on_path.unwrap_or_else(|| {
        panic!(
            "docker-registry (CNCF distribution, the OCI registry these tests push to) is not \
             installed: run `apt-get install docker-registry` (CI's .ci/run installs it)"
        )
    })
}
