//! What the kubectl scenarios share: the embedded server on an ephemeral
//! loopback port with a kubeconfig in a temp dir, and the real kubectl
//! driven against it, each run bounded in time. Each test file uses part
//! of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use radwasm_sim_apiserver::{ApiServer, ApiServerConfig, start};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// Upper bound for one kubectl invocation; kubectl is killed after it.
pub const KUBECTL_BOUND: Duration = Duration::from_secs(60);

/// The product's CRDs, generated from the Rust types.
pub fn product_crds() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds/radapp.io_v1alpha3.yaml")
}

/// Every CRD file the product ships (`deploy/crds/*.yaml`), sorted.
pub fn product_crd_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

pub fn product_example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/examples/app.yaml")
}

pub const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Phase, type: string, jsonPath: .status.phase}
    schema:
      openAPIV3Schema:
        type: object
        description: A test widget.
        properties:
          spec:
            type: object
            description: What the widget should be.
            required: [size]
            properties:
              size: {type: integer, description: How big the widget is.}
              color: {type: string, default: blue}
          status:
            type: object
            properties:
              phase: {type: string}
              conditions:
                type: array
                items:
                  type: object
                  properties:
                    type: {type: string}
                    status: {type: string}
"#;

pub fn widget_yaml(name: &str, size: i64) -> String {
    format!(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  size: {size}\n"
    )
}

pub fn kubectl_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("kubectl"))
        .find(|candidate| candidate.is_file())
}

/// What one kubectl run printed.
pub struct Run {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn ok(self, what: &str) -> String {
        assert!(
            self.success,
            "kubectl {what} failed\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self.stdout
    }

    pub fn failed(self, what: &str) -> String {
        assert!(
            !self.success,
            "kubectl {what} should have failed\nstdout: {}",
            self.stdout
        );
        self.stderr
    }
}

/// A running server, a kubeconfig for it, and the kubectl to drive it.
pub struct Cluster {
    server: ApiServer,
    kubectl: PathBuf,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Cluster {
    /// `None` (after saying why) when kubectl is not on PATH.
    pub async fn start(test: &str) -> Option<Self> {
        let Some(kubectl) = kubectl_on_path() else {
            eprintln!("SKIPPED {test}: no `kubectl` on PATH; these tests drive the real kubectl");
            return None;
        };
        let server = start(ApiServerConfig::default()).await.expect("start");
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
        Some(Self {
            server,
            kubectl,
            dir,
            kubeconfig,
        })
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.kubectl);
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .args(args)
            .env("HOME", self.dir.path())
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }

    /// Run kubectl to completion (killed after [`KUBECTL_BOUND`]).
    pub async fn run(&self, args: &[&str]) -> Run {
        self.run_with_stdin(args, None).await
    }

    pub async fn run_with_stdin(&self, args: &[&str], stdin: Option<&str>) -> Run {
        let mut command = self.command(args);
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        if stdin.is_some() {
            command.stdin(Stdio::piped());
        }
        let mut child = command.spawn().expect("spawn kubectl");
        if let Some(text) = stdin {
            use tokio::io::AsyncWriteExt;
            let mut pipe = child.stdin.take().expect("stdin");
            pipe.write_all(text.as_bytes()).await.expect("write stdin");
            drop(pipe);
        }
        let output = tokio::time::timeout(KUBECTL_BOUND, child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish in {KUBECTL_BOUND:?}"))
            .expect("kubectl output");
        Run {
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    pub async fn ok(&self, args: &[&str]) -> String {
        self.run(args).await.ok(&args.join(" "))
    }

    pub async fn apply(&self, yaml: &str) -> String {
        self.run_with_stdin(&["apply", "-f", "-"], Some(yaml))
            .await
            .ok("apply -f -")
    }

    /// `kubectl get ... -o json`, parsed.
    pub async fn get_json(&self, args: &[&str]) -> Value {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", "json"]);
        let text = self.ok(&all).await;
        serde_json::from_str(&text).expect("kubectl -o json")
    }

    /// Start a long-running kubectl (watch, wait, delete) in the background.
    pub fn spawn(&self, args: &[&str]) -> Background {
        let mut child = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn kubectl");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Background {
            what: args.join(" "),
            child,
            lines,
        }
    }

    pub async fn with_widgets(&self) {
        let out = self.apply(WIDGET_CRD).await;
        assert!(
            out.contains(
                "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created"
            ),
            "{out}"
        );
        self.ok(&[
            "wait",
            "--for=condition=Established",
            "crd/widgets.example.com",
            "--timeout=30s",
        ])
        .await;
    }

    pub async fn stop(self) {
        self.server.shutdown().await;
    }
}

/// A kubectl process running in the background (killed when dropped).
pub struct Background {
    what: String,
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Background {
    /// The next line it prints, or a panic if none comes within the bound.
    pub async fn next_line(&mut self) -> String {
        match tokio::time::timeout(KUBECTL_BOUND, self.lines.next_line()).await {
            Ok(Ok(Some(line))) => line,
            Ok(Ok(None)) => panic!("kubectl {} ended early", self.what),
            Ok(Err(error)) => panic!("kubectl {}: {error}", self.what),
            Err(_) => panic!("kubectl {} printed nothing in {KUBECTL_BOUND:?}", self.what),
        }
    }

    /// Read lines until one satisfies `want`; returns it.
    pub async fn line_matching(&mut self, want: impl Fn(&str) -> bool) -> String {
        loop {
            let line = self.next_line().await;
            if want(&line) {
                return line;
            }
        }
    }

    pub fn still_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Wait for it to exit (bounded); returns success and the rest of its output.
    pub async fn finish(mut self) -> (bool, String, String) {
        let mut rest = String::new();
        let stderr = self.child.stderr.take();
        let collect = async {
            while let Ok(Some(line)) = self.lines.next_line().await {
                rest.push_str(&line);
                rest.push('\n');
            }
            let mut err = String::new();
            if let Some(mut stderr) = stderr {
                use tokio::io::AsyncReadExt;
                let _ = stderr.read_to_string(&mut err).await;
            }
            let status = self.child.wait().await.expect("wait");
            (status.success(), err)
        };
        let (success, err) = tokio::time::timeout(KUBECTL_BOUND, collect)
            .await
            .unwrap_or_else(|_| panic!("kubectl {} did not exit in {KUBECTL_BOUND:?}", self.what));
        (success, rest, err)
    }
}
