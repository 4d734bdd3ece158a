//! `radwasm dev`, the README's main command, run as a user runs it: it
//! starts its own API server and Radius simulator on loopback, applies the
//! manifests, reports, and exits with a code that says how it went.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::Api;
use radwasm::crd::DeploymentTemplate;

/// A running `radwasm dev` with its output collected line by line.
struct Dev {
    child: Child,
    lines: mpsc::Receiver<String>,
    output: Vec<String>,
    _dir: tempfile::TempDir,
    kubeconfig: std::path::PathBuf,
}

impl Dev {
    fn start(args: &[&str], manifests: &[(&str, &str)]) -> Dev {
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("dev.kubeconfig");
        let mut command = Command::new(env!("CARGO_BIN_EXE_radwasm"));
        command
            .arg("dev")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(args)
            .current_dir(dir.path())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (name, text) in manifests {
            let path = dir.path().join(name);
            std::fs::write(&path, text).expect("write manifest");
            command.arg(path);
        }
        let mut child = command.spawn().expect("start radwasm dev");
        let stdout = child.stdout.take().expect("stdout");
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Dev {
            child,
            lines,
            output: Vec::new(),
            _dir: dir,
            kubeconfig,
        }
    }

    /// Read output until a line contains `text`; false if it exited first.
    fn read_until(&mut self, text: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            match self.lines.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => {
                    let found = line.contains(text);
                    self.output.push(line);
                    if found {
                        return true;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return false,
            }
        }
        false
    }

    /// Wait for the process to exit (killing it after `limit`); all output.
    fn finish(mut self, limit: Duration) -> (ExitStatus, String) {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "radwasm dev did not exit within {limit:?}\n{}",
                    self.output.join("\n")
                );
            }
            while let Ok(line) = self.lines.try_recv() {
                self.output.push(line);
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        // The reader thread ends when the pipe closes.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(2)) {
            self.output.push(line);
        }
        (status, self.output.join("\n"))
    }

    fn terminate(&self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[test]
fn dev_without_arguments_deploys_the_bundled_example_and_exits_0() {
    let dev = Dev::start(&[], &[]);
    let (status, output) = dev.finish(Duration::from_secs(120));
    assert!(status.success(), "{status:?}\n{output}");
    assert!(output.contains("all 1 templates Ready"), "{output}");
    // Live progress: the phase change, the DeploymentResources, Radius.
    assert!(output.contains("template default/demo: Ready"), "{output}");
    assert_eq!(
        output.matches("+ DeploymentResource default/").count(),
        3,
        "{output}"
    );
    assert!(
        output.contains("radius: 1 deployment(s) started"),
        "{output}"
    );
    // The summary table.
    let row = output
        .lines()
        .find(|l| l.starts_with("default/demo "))
        .unwrap_or_else(|| panic!("no summary row\n{output}"));
    assert!(row.contains("Ready"), "{row}");
}

#[test]
fn dev_deploys_the_example_in_the_shape_radius_cli_writes() {
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/examples/app-radius-shape.yaml"
    ))
    .expect("deploy/examples/app-radius-shape.yaml");
    let dev = Dev::start(&[], &[("app-radius-shape.yaml", &example)]);
    let (status, output) = dev.finish(Duration::from_secs(120));
    assert!(status.success(), "{status:?}\n{output}");
    assert!(output.contains("all 1 templates Ready"), "{output}");
    assert!(
        output.contains("template default/demo-from-rad-cli: Ready"),
        "{output}"
    );
}

#[test]
fn dev_exits_non_zero_naming_the_failed_template_and_its_message() {
    // The documented bad example: its template is not JSON.
    let bad = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/examples/instance-bad.yaml"
    ))
    .expect("deploy/examples/instance-bad.yaml");
    let dev = Dev::start(&[], &[("bad.yaml", &bad)]);
    let (status, output) = dev.finish(Duration::from_secs(120));
    assert_eq!(status.code(), Some(1), "{output}");
    let verdict = output
        .lines()
        .find(|l| l.starts_with("template default/bad-template Failed:"))
        .unwrap_or_else(|| panic!("no verdict line\n{output}"));
    assert!(verdict.contains("spec.template"), "{verdict}");
}

#[test]
fn dev_times_out_non_zero_naming_what_is_not_ready() {
    // Radius takes longer than the timeout allows.
    let dev = Dev::start(&["--timeout", "2s", "--radius-deploy-time", "30s"], &[]);
    let (status, output) = dev.finish(Duration::from_secs(60));
    assert_eq!(status.code(), Some(1), "{output}");
    assert!(output.contains("timed out after"), "{output}");
    assert!(output.contains("not Ready: default/demo"), "{output}");
}

#[test]
fn dev_stay_serves_kubectl_until_sigterm() {
    let mut dev = Dev::start(&["--stay"], &[]);
    assert!(
        dev.read_until("staying up", Duration::from_secs(90)),
        "{}",
        dev.output.join("\n")
    );
    let printed = dev.output.join("\n");
    assert!(
        printed.contains(&dev.kubeconfig.display().to_string()),
        "{printed}"
    );
    // Drive it through the kubeconfig it wrote, as kubectl would.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let phase = runtime.block_on(async {
        let kubeconfig =
            kube::config::Kubeconfig::read_from(&dev.kubeconfig).expect("read kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("config");
        let client = Client::try_from(config).expect("client");
        let templates: Api<DeploymentTemplate> = Api::namespaced(client, "default");
        templates
            .get("demo")
            .await
            .expect("get demo")
            .status
            .and_then(|s| s.phrase)
    });
    assert_eq!(phase.as_deref(), Some("Ready"));
    dev.terminate();
    let (status, output) = dev.finish(Duration::from_secs(30));
    assert!(status.success(), "{status:?}\n{output}");
}

#[test]
fn dev_prints_the_api_servers_message_for_a_refused_manifest_not_a_debug_dump() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = dir.path().join("bad.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: radapp.io/v1alpha3\nkind: DeploymentTemplate\nmetadata:\n  name: bad\nspec:\n  template: 42\n",
    )
    .expect("write manifest");
    let output = Command::new(env!("CARGO_BIN_EXE_radwasm"))
        .arg("dev")
        .arg("--kubeconfig")
        .arg(dir.path().join("dev.kubeconfig"))
        .arg(&manifest)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run radwasm dev");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("creating DeploymentTemplate default/bad")
            && stderr.contains("spec.template"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("Status {") && !stderr.contains("ErrorResponse"),
        "a debug dump: {stderr}"
    );
}

#[test]
fn dev_applies_reconcile_policies_first_and_they_decide() {
    use base64::Engine;
    // The guardrail, from a ConfigMap, for templates labelled team=strict;
    // the example pins its image, so only an unpinned copy is refused.
    let guardrail = std::fs::read(format!(
        "{}/image-tag-guardrail.wasm",
        env!("RADWASM_GUEST_DIR")
    ))
    .expect("guardrail guest");
    let example = radwasm::cli::dev::EXAMPLE_APP.replace("samples/demo:0.42", "samples/demo");
    assert_ne!(example, radwasm::cli::dev::EXAMPLE_APP);
    let example = example.replacen(
        "  name: demo\n",
        "  name: demo\n  labels: {team: strict}\n",
        1,
    );
    let manifests = format!(
        "{example}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: guardrail, namespace: default}}\n\
         binaryData:\n  policy.wasm: {}\n---\napiVersion: radwasm.io/v1alpha1\nkind: ReconcilePolicy\n\
         metadata: {{name: strict}}\nspec:\n  module: {{configMap: {{namespace: default, name: guardrail, key: policy.wasm}}}}\n\
         \x20 objectSelector: {{matchLabels: {{team: strict}}}}\n",
        base64::engine::general_purpose::STANDARD.encode(&guardrail)
    );
    let dev = Dev::start(&[], &[("strict.yaml", &manifests)]);
    let (status, output) = dev.finish(Duration::from_secs(120));
    assert!(!status.success(), "{output}");
    assert!(
        output.contains("policy          strict: Loaded"),
        "{output}"
    );
    let policy_line = output.find("policy          strict:").expect("policy line");
    let template_line = output
        .find("applied         DeploymentTemplate")
        .expect("template applied");
    assert!(
        policy_line < template_line,
        "the template waited for its policy\n{output}"
    );
    assert!(
        output.contains("demo Failed") && output.contains("pin a version"),
        "{output}"
    );
}

#[test]
fn dev_with_no_example_starts_empty() {
    let dev = Dev::start(&["--no-example"], &[]);
    let (status, output) = dev.finish(Duration::from_secs(60));
    assert!(status.success(), "{status:?}\n{output}");
    assert!(output.contains("all 0 templates Ready"), "{output}");
}

/// Serve `body` over plain HTTP on loopback, answering each request only
/// after `delay`: a module URL that takes that long to fetch.
fn slow_module_server(body: Vec<u8>, delay: Duration) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let body = body.clone();
            std::thread::spawn(move || {
                let mut request = Vec::new();
                let mut buffer = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buffer) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buffer[..n]),
                    }
                }
                std::thread::sleep(delay);
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(&body);
            });
        }
    });
    format!("http://{address}/team-label-layer.wasm")
}

fn guest_bytes(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/{name}.wasm", env!("RADWASM_GUEST_DIR"))).expect("guest")
}

#[test]
fn dev_waits_for_a_layers_base_still_loading_and_the_template_gets_ready() {
    use base64::Engine;
    // The base (the team-label layer) takes 4 s to fetch; the layer over
    // it (keep-data-stores, from a ConfigMap) is first refused with
    // BaseNotReady and loads again 5 s later. Its template waits meanwhile.
    let base = guest_bytes("team-label-layer");
    let url = slow_module_server(base.clone(), Duration::from_secs(4));
    let example = radwasm::cli::dev::EXAMPLE_APP.replacen(
        "  name: demo\n",
        "  name: demo\n  labels: {team: a}\n",
        1,
    );
    let manifests = format!(
        "{example}\n---\napiVersion: radwasm.io/v1alpha1\nkind: ReconcilePolicy\n\
         metadata: {{name: base}}\nspec:\n  module: {{url: \"{url}\", sha256: {}}}\n\
         \x20 mode: Shadow\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: keep, namespace: default}}\n\
         binaryData:\n  policy.wasm: {}\n---\napiVersion: radwasm.io/v1alpha1\nkind: ReconcilePolicy\n\
         metadata: {{name: keep}}\nspec:\n  module: {{configMap: {{namespace: default, name: keep, key: policy.wasm}}}}\n\
         \x20 base: base\n",
        radwasm::policy::digest(&base),
        base64::engine::general_purpose::STANDARD.encode(guest_bytes("keep-data-stores"))
    );
    let dev = Dev::start(&[], &[("stack.yaml", &manifests)]);
    let (status, output) = dev.finish(Duration::from_secs(120));
    assert!(status.success(), "{status:?}\n{output}");
    assert!(output.contains("policy          base: Loaded"), "{output}");
    assert!(output.contains("all 1 templates Ready"), "{output}");
    assert!(!output.contains("Failed"), "{output}");
    assert!(!output.contains("PolicyNotReady"), "{output}");
}

#[test]
fn dev_names_a_cluster_scoped_object_without_a_namespace() {
    let manifests = "apiVersion: v1\nkind: Namespace\nmetadata: {name: dev}\n";
    let dev = Dev::start(&[], &[("namespace.yaml", manifests)]);
    let (status, output) = dev.finish(Duration::from_secs(60));
    assert!(status.success(), "{status:?}\n{output}");
    assert!(
        output.lines().any(|l| l == "applied         Namespace dev"),
        "{output}"
    );
}

#[test]
fn dev_shows_why_a_module_url_cannot_be_fetched() {
    // A port nothing listens on: the cause is a refused connection.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let manifests = format!(
        "{}\n---\napiVersion: radwasm.io/v1alpha1\nkind: ReconcilePolicy\nmetadata: {{name: unreachable}}\n\
         spec:\n  module: {{url: \"http://127.0.0.1:{port}/p.wasm\", sha256: {}}}\n\
         \x20 objectSelector: {{matchLabels: {{team: nobody}}}}\n",
        radwasm::cli::dev::EXAMPLE_APP,
        "0".repeat(64)
    );
    let dev = Dev::start(&[], &[("unreachable.yaml", &manifests)]);
    let (status, output) = dev.finish(Duration::from_secs(120));
    assert!(status.success(), "{status:?}\n{output}");
    let line = output
        .lines()
        .find(|l| l.starts_with("policy          unreachable: FetchFailed"))
        .unwrap_or_else(|| panic!("no policy line\n{output}"));
    assert!(
        line.to_ascii_lowercase().contains("connection refused"),
        "{line}"
    );
}

/// What docs/reconcile-policies.md tells a user to do, done under `radwasm
/// dev --stay` with kubectl: the component goes into a ConfigMap with
/// `kubectl create configmap --from-file=policy.wasm=...` (kubectl sends
/// that as protobuf), and a ReconcilePolicy naming the ConfigMap decides
/// for the template it selects.
#[test]
fn dev_stay_runs_a_policy_from_a_configmap_kubectl_creates_from_the_wasm_file() {
    use base64::Engine;
    use radwasm_test_support::realkube::{kubectl, ok_stdout};
    let mut dev = Dev::start(&["--stay", "--no-example"], &[]);
    assert!(
        dev.read_until("staying up", Duration::from_secs(90)),
        "{}",
        dev.output.join("\n")
    );
    let guardrail = format!("{}/image-tag-guardrail.wasm", env!("RADWASM_GUEST_DIR"));
    let from_file = format!("--from-file=policy.wasm={guardrail}");
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: radwasm.io/v1alpha1\nkind: ReconcilePolicy\nmetadata: {name: strict}\n\
         spec:\n  module: {configMap: {namespace: default, name: guardrail, key: policy.wasm}}\n\
         \x20 objectSelector: {matchLabels: {team: strict}}\n",
    )
    .expect("write policy");
    // The example with its image unpinned, which the guardrail refuses.
    let template = dir.path().join("template.yaml");
    let unpinned = radwasm::cli::dev::EXAMPLE_APP
        .replace("samples/demo:0.42", "samples/demo")
        .replacen(
            "  name: demo\n",
            "  name: demo\n  labels: {team: strict}\n",
            1,
        );
    std::fs::write(&template, unpinned).expect("write template");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let template_status = runtime.block_on(async {
        let run = async |args: &[&str]| {
            let out = kubectl(&dev.kubeconfig, args).await.expect("kubectl");
            ok_stdout(&out, &format!("kubectl {}", args.join(" ")))
        };
        let created = run(&["create", "configmap", "guardrail", &from_file]).await;
        assert_eq!(created.trim(), "configmap/guardrail created");
        let stored = run(&["get", "configmap", "guardrail", "-o", "json"]).await;
        let stored: serde_json::Value = serde_json::from_str(&stored).expect("json");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(
                stored["binaryData"]["policy.wasm"]
                    .as_str()
                    .expect("binaryData"),
            )
            .expect("base64");
        assert_eq!(bytes, std::fs::read(&guardrail).expect("guest"));
        run(&["apply", "-f", &policy.display().to_string()]).await;
        let ready = [
            "wait",
            "--for=condition=Ready",
            "reconcilepolicy/strict",
            "--timeout=60s",
        ];
        run(&ready).await;
        run(&["apply", "-f", &template.display().to_string()]).await;
        let failed = [
            "wait",
            "--for=jsonpath={.status.phrase}=Failed",
            "deploymenttemplate/demo",
            "--timeout=60s",
        ];
        run(&failed).await;
        let template = run(&["get", "deploymenttemplate", "demo", "-o", "json"]).await;
        let template: serde_json::Value = serde_json::from_str(&template).expect("json");
        template["status"].clone()
    });
    assert!(
        template_status["message"]
            .as_str()
            .is_some_and(|m| m.contains("pin a version")),
        "{template_status}"
    );
    dev.terminate();
    let (status, output) = dev.finish(Duration::from_secs(30));
    assert!(status.success(), "{status:?}\n{output}");
}
