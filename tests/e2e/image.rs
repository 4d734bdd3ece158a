//! The controller image (`deploy/image/`): built from scratch by
//! `deploy/image/build.sh` with podman (nothing is pulled), then run as a
//! container against the stand-ins, where it takes a template to Ready.
//!
//! The image is built from the binary these tests run (`--binary`), so the
//! suite reuses its own build; the script's default builds the deployable
//! binary (release, without the `dev` feature). `RADWASM_IMAGE_BINARY=<path>`
//! builds it from another binary, e.g. that deployable one, to measure it:
//! the test prints the image's size and the time from `podman run` to the
//! template `Ready` (docs/benchmarks.md). podman runs with `runc`,
//! `vfs` storage in a temp dir and the `cgroupfs` cgroup manager, so it
//! needs no daemon and leaves nothing behind. podman must be installed
//! (`apt-get install podman`; CI's `.ci/run` installs it): without it the
//! test fails and says so.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::harness::{System, app_template};

/// podman with its configuration and storage in `dir`.
fn podman(dir: &Path) -> Command {
    let mut command = Command::new("podman");
    command
        .env("CONTAINERS_CONF", dir.join("containers.conf"))
        .env("CONTAINERS_STORAGE_CONF", dir.join("storage.conf"));
    command
}

fn ok(output: Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Removes the container and the image (and their storage) at the end,
/// also when the test fails.
struct Cleanup {
    dir: PathBuf,
    container: String,
    image: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = podman(&self.dir)
            .args(["rm", "--force", &self.container])
            .output();
        let _ = podman(&self.dir)
            .args(["rmi", "--force", &self.image])
            .output();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_built_from_scratch_runs_the_controller() {
    assert!(
        Command::new("podman").arg("--version").output().is_ok(),
        "podman is not installed: run `apt-get install podman` (CI's .ci/run installs it)"
    );
    let mut system = System::start(&[]).await;
    system.kill_controller();
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::write(
        root.join("containers.conf"),
        "[containers]\ndefault_ulimits = []\n[engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n",
    )
    .expect("containers.conf");
    std::fs::write(
        root.join("storage.conf"),
        format!(
            "[storage]\ndriver = \"vfs\"\nrunroot = \"{}\"\ngraphroot = \"{}\"\n",
            root.join("run").display(),
            root.join("graph").display()
        ),
    )
    .expect("storage.conf");
    let id = std::process::id();
    let cleanup = Cleanup {
        dir: root.to_path_buf(),
        container: format!("radwasm-e2e-{id}"),
        image: format!("localhost/radwasm-e2e:{id}"),
    };

    let binary = std::env::var_os("RADWASM_IMAGE_BINARY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_radwasm")));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/image/build.sh");
    let built = ok(
        Command::new("bash")
            .arg(&script)
            .arg("--binary")
            .arg(&binary)
            .args(["--tag", &cleanup.image])
            .arg("--context")
            .arg(root.join("context"))
            .env("CONTAINERS_CONF", root.join("containers.conf"))
            .env("CONTAINERS_STORAGE_CONF", root.join("storage.conf"))
            .output()
            .expect("run deploy/image/build.sh"),
        "deploy/image/build.sh",
    );
    assert!(
        built.contains(&format!("built {}", cleanup.image)),
        "{built}"
    );
    // Nothing in the image but the binary, its libraries and CA certificates.
    let mut files = Vec::new();
    collect(&root.join("context/rootfs"), Path::new("/"), &mut files);
    assert!(files.iter().any(|f| f == "/radwasm"), "{files:?}");
    assert!(
        files.iter().all(|f| f == "/radwasm"
            || f.starts_with("/lib")
            || f == "/etc/ssl/certs/ca-certificates.crt"),
        "{files:?}"
    );
    let user = ok(
        podman(root)
            .args([
                "image",
                "inspect",
                "--format",
                "{{.Config.User}}",
                &cleanup.image,
            ])
            .output()
            .expect("podman image inspect"),
        "podman image inspect",
    );
    assert_eq!(user.trim(), "65532:65532", "runs as non-root");
    let size = ok(
        podman(root)
            .args(["image", "inspect", "--format", "{{.Size}}", &cleanup.image])
            .output()
            .expect("podman image inspect"),
        "podman image inspect",
    );

    // The container, as non-root, reads a copy of the sandbox's kubeconfig.
    let kube = root.join("kube");
    std::fs::create_dir(&kube).expect("kube dir");
    std::fs::copy(&system.kubeconfig, kube.join("config")).expect("kubeconfig");
    for path in [&kube, &kube.join("config")] {
        use std::os::unix::fs::PermissionsExt;
        let mode = if path.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }
    let started = std::time::Instant::now();
    ok(
        podman(root)
            .args([
                "run",
                "--detach",
                "--name",
                &cleanup.container,
                "--network",
                "host",
            ])
            .arg("--volume")
            .arg(format!("{}:/kube:ro", kube.display()))
            .args([
                &cleanup.image,
                "run",
                "--kubeconfig",
                "/kube/config",
                "--radius-url",
                &system.radius().base_url(),
                "--metrics-address",
                "127.0.0.1:0",
            ])
            .output()
            .expect("podman run"),
        "podman run",
    );
    system.create(&app_template("app")).await;
    let logs = || {
        podman(root)
            .args(["logs", &cleanup.container])
            .output()
            .map(|o| {
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                )
            })
            .unwrap_or_default()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let template = system.templates().get("app").await.expect("get app");
        if template.status.as_ref().and_then(|s| s.phrase.as_deref()) == Some("Ready") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the containerised controller did not make the template Ready; its log:\n{}",
            logs()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    println!(
        "image from {}: {:.1} MB; from `podman run` to the template Ready: {:.2} s",
        binary.display(),
        size.trim().parse::<f64>().unwrap_or(0.0) / 1e6,
        started.elapsed().as_secs_f64()
    );
    assert_eq!(system.radius().stats().deployment_puts, 1);
    drop(cleanup);
    system.shutdown().await;
}

/// Every file under `dir`, as absolute paths in the image.
fn collect(dir: &Path, at: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir)
        .expect("read the image context")
        .flatten()
    {
        let path = entry.path();
        let inside = at.join(entry.file_name());
        if path.is_dir() {
            collect(&path, &inside, out);
        } else {
            out.push(inside.display().to_string());
        }
    }
}
