//! `radwasm policy push|pull` and the `policy::source::oci` library against a real
//! OCI registry: CNCF distribution (`docker-registry`, Debian's package),
//! started by each test on loopback with its storage in a temp dir and
//! stopped when the test ends, passed or failed.
//!
//! The registry must be installed (`apt-get install docker-registry`; CI's
//! `.ci/run` installs it). Without it these tests fail and say so: they are
//! never skipped silently.
#![allow(
    clippy::too_many_lines,
    reason = "a test or benchmark scenario reads top to bottom as one story"
)]

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use radwasm::policy::embedded::DEFAULT_POLICY;
use radwasm::policy::source::oci::{self, Credentials, OciError, OciOptions};
use sha2::{Digest, Sha256};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

use radwasm_test_support::registry::{PASSWORD, Registry, USER};

fn radwasm(args: &[&str]) -> Output {
    radwasm_with(args, &[], None)
}

/// Run the binary with extra environment variables and, optionally, stdin.
fn radwasm_with(args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut command = Command::new(env!("CARGO_BIN_EXE_radwasm"));
    command
        .args(args)
        .env_remove("RADWASM_REGISTRY_USERNAME")
        .env_remove("RADWASM_REGISTRY_PASSWORD")
        .envs(env.iter().copied())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("run radwasm");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("write stdin");
    }
    child.wait_with_output().expect("radwasm output")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn path_arg(path: &Path) -> String {
    path.display().to_string()
}

/// Push the default policy through the CLI; the digest reference it prints.
fn cli_push_default(registry: &Registry, repository_and_tag: &str) -> String {
    let output = radwasm(&[
        "policy",
        "push",
        "default",
        &registry.reference(repository_and_tag),
        "--insecure-registry",
        &registry.addr,
    ]);
    assert!(output.status.success(), "push failed: {}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout).trim().to_string();
    let repository = repository_and_tag.split(':').next().expect("repository");
    let prefix = format!("{}/{repository}@sha256:", registry.addr);
    assert!(
        stdout.starts_with(&prefix) && stdout.len() == prefix.len() + 64,
        "push prints the digest reference: {}",
        text(&output)
    );
    stdout
}

fn digest_of(pinned: &str) -> String {
    pinned
        .split_once('@')
        .expect("a digest reference")
        .1
        .to_string()
}

/// The raw manifest and its Docker-Content-Digest, straight from the registry.
async fn raw_manifest(registry: &Registry, repository: &str, tag: &str) -> (Vec<u8>, String) {
    let url = format!("http://{}/v2/{repository}/manifests/{tag}", registry.addr);
    let response = reqwest::Client::new()
        .get(&url)
        .header("Accept", OCI_MANIFEST)
        .send()
        .await
        .expect("GET manifest");
    assert_eq!(response.status(), 200, "{url}");
    let header = response
        .headers()
        .get("Docker-Content-Digest")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (response.bytes().await.expect("body").to_vec(), header)
}

async fn raw_blob(registry: &Registry, repository: &str, digest: &str) -> Vec<u8> {
    let url = format!("http://{}/v2/{repository}/blobs/{digest}", registry.addr);
    let response = reqwest::get(&url).await.expect("GET blob");
    assert_eq!(response.status(), 200, "{url}");
    response.bytes().await.expect("body").to_vec()
}

#[tokio::test]
async fn push_then_pull_the_default_policy_through_the_cli_and_the_library() {
    let registry = Registry::start();
    let work = tempfile::tempdir().expect("temp dir");

    // CLI push, CLI pull: the same bytes come back, validated.
    let pinned = cli_push_default(&registry, "policies/default:v1");
    let digest = digest_of(&pinned);
    let out = work.path().join("pulled.wasm");
    let output = radwasm(&[
        "policy",
        "pull",
        &registry.reference("policies/default:v1"),
        "--output",
        &path_arg(&out),
        "--insecure-registry",
        &registry.addr,
    ]);
    let all = text(&output);
    assert!(output.status.success(), "{all}");
    assert!(all.contains(&format!("digest:  {digest}")), "{all}");
    assert!(all.contains("policy:  default@"), "{all}");
    assert_eq!(std::fs::read(&out).expect("pulled file"), DEFAULT_POLICY);

    // The library sees the same artifact.
    let pulled = oci::pull(
        &registry.reference("policies/default:v1"),
        &registry.options(),
    )
    .await
    .expect("library pull");
    assert_eq!(pulled.component, DEFAULT_POLICY);
    assert_eq!(pulled.digest, digest);
    assert_eq!(pulled.reference, pinned);

    // A library push of the same component writes the same manifest: the
    // layout is deterministic.
    let pushed = oci::push(
        &registry.reference("policies/again:latest"),
        DEFAULT_POLICY,
        &registry.options(),
    )
    .await
    .expect("library push");
    assert_eq!(pushed.digest, digest);
    assert_eq!(
        pushed.reference,
        format!("{}/policies/again@{digest}", registry.addr)
    );
    let again = oci::pull(&pushed.reference, &registry.options())
        .await
        .expect("pull what the library pushed");
    assert_eq!(again.component, DEFAULT_POLICY);

    // The manifest, read raw: the Wasm OCI artifact layout.
    let (body, header_digest) = raw_manifest(&registry, "policies/default", "v1").await;
    assert_eq!(sha256(&body), digest);
    assert_eq!(header_digest, digest);
    let manifest: serde_json::Value = serde_json::from_slice(&body).expect("manifest JSON");
    assert_eq!(manifest["schemaVersion"], 2, "{manifest}");
    assert_eq!(manifest["mediaType"], OCI_MANIFEST, "{manifest}");
    assert_eq!(
        manifest["config"]["mediaType"], "application/vnd.wasm.config.v0+json",
        "{manifest}"
    );
    let layers = manifest["layers"].as_array().expect("layers");
    assert_eq!(layers.len(), 1, "{manifest}");
    assert_eq!(layers[0]["mediaType"], "application/wasm", "{manifest}");
    assert_eq!(layers[0]["digest"], sha256(DEFAULT_POLICY).as_str());
    assert_eq!(layers[0]["size"], DEFAULT_POLICY.len());

    // Its config: architecture, os, layer digests and the component's world.
    let config_digest = manifest["config"]["digest"]
        .as_str()
        .expect("config digest");
    let config = raw_blob(&registry, "policies/default", config_digest).await;
    assert_eq!(sha256(&config), config_digest);
    let config: serde_json::Value = serde_json::from_slice(&config).expect("config JSON");
    assert_eq!(config["architecture"], "wasm", "{config}");
    assert_eq!(config["os"], "wasip2", "{config}");
    assert_eq!(
        config["layerDigests"],
        serde_json::json!([sha256(DEFAULT_POLICY)]),
        "{config}"
    );
    let exports = config["component"]["exports"].as_array().expect("exports");
    assert!(
        exports.iter().any(|name| name
            .as_str()
            .is_some_and(|n| n.starts_with("radapp:policy/"))),
        "{config}"
    );
    assert!(config["component"]["imports"].is_array(), "{config}");
}

#[tokio::test]
async fn a_pull_by_the_right_digest_works_and_a_wrong_one_writes_nothing() {
    let registry = Registry::start();
    let work = tempfile::tempdir().expect("temp dir");
    let pinned = cli_push_default(&registry, "policies/default:v1");
    let digest = digest_of(&pinned);

    // By digest alone, and by tag and digest.
    for reference in [
        pinned.clone(),
        registry.reference(&format!("policies/default:v1@{digest}")),
    ] {
        let out = work.path().join("by-digest.wasm");
        let output = radwasm(&[
            "policy",
            "pull",
            &reference,
            "--output",
            &path_arg(&out),
            "--insecure-registry",
            &registry.addr,
        ]);
        assert!(output.status.success(), "{reference}: {}", text(&output));
        assert_eq!(std::fs::read(&out).expect("pulled"), DEFAULT_POLICY);
        std::fs::remove_file(&out).expect("remove");
    }

    // A digest no manifest has: the registry has nothing under it.
    let wrong = format!("sha256:{}", "0".repeat(64));
    let reference = registry.reference(&format!("policies/default@{wrong}"));
    let out = work.path().join("wrong.wasm");
    let output = radwasm(&[
        "policy",
        "pull",
        &reference,
        "--output",
        &path_arg(&out),
        "--insecure-registry",
        &registry.addr,
    ]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(all.contains("not found"), "{all}");
    assert!(!out.exists(), "nothing is written: {all}");

    // Pushing to a reference that pins another digest is refused (and
    // nothing is pushed under the tag).
    let output = radwasm(&[
        "policy",
        "push",
        "default",
        &registry.reference(&format!("policies/pinned:v1@{wrong}")),
        "--insecure-registry",
        &registry.addr,
    ]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(all.contains("digest mismatch"), "{all}");
    let error = oci::pull(
        &registry.reference("policies/pinned:v1"),
        &registry.options(),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, OciError::NotFound { .. }), "{error}");
}

#[tokio::test]
async fn a_manifest_the_registry_serves_altered_is_a_digest_mismatch() {
    let registry = Registry::start();
    let work = tempfile::tempdir().expect("temp dir");
    let pinned = cli_push_default(&registry, "policies/default:v1");
    let digest = digest_of(&pinned);

    // Alter the stored manifest (same length, still JSON): the registry
    // now serves bytes that do not hash to the digest it names them by.
    let stored = registry.blob_path(&digest);
    let original = std::fs::read(&stored).expect("stored manifest");
    let text_of = String::from_utf8(original.clone()).expect("UTF-8 manifest");
    let altered = text_of.replacen("\"application/wasm\"", "\"application/wasn\"", 1);
    assert_ne!(altered, text_of);
    std::fs::write(&stored, altered).expect("alter manifest");

    for reference in [registry.reference("policies/default:v1"), pinned.clone()] {
        let error = oci::pull(&reference, &registry.options())
            .await
            .unwrap_err();
        match &error {
            OciError::DigestMismatch { expected, actual } => {
                assert_eq!(expected, &digest, "{error}");
                assert_ne!(actual, &digest, "{error}");
            }
            other => panic!("{reference}: expected DigestMismatch, got {other:?}"),
        }
        let out = work.path().join("altered.wasm");
        let output = radwasm(&[
            "policy",
            "pull",
            &reference,
            "--output",
            &path_arg(&out),
            "--insecure-registry",
            &registry.addr,
        ]);
        let all = text(&output);
        assert_eq!(output.status.code(), Some(2), "{all}");
        assert!(all.contains("digest mismatch"), "{all}");
        assert!(!out.exists(), "nothing is written: {all}");
    }
}

#[tokio::test]
async fn a_layer_the_registry_serves_altered_is_a_digest_mismatch() {
    let registry = Registry::start();
    let work = tempfile::tempdir().expect("temp dir");
    cli_push_default(&registry, "policies/default:v1");

    // Flip one byte in the middle of the stored component.
    let layer_digest = sha256(DEFAULT_POLICY);
    let stored = registry.blob_path(&layer_digest);
    let mut bytes = std::fs::read(&stored).expect("stored layer");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&stored, &bytes).expect("alter layer");

    let error = oci::pull(
        &registry.reference("policies/default:v1"),
        &registry.options(),
    )
    .await
    .unwrap_err();
    match &error {
        OciError::DigestMismatch { expected, actual } => {
            assert_eq!(expected, &layer_digest, "{error}");
            assert_eq!(actual, &sha256(&bytes), "{error}");
        }
        other => panic!("expected DigestMismatch, got {other:?}"),
    }
    let out = work.path().join("altered.wasm");
    let output = radwasm(&[
        "policy",
        "pull",
        &registry.reference("policies/default:v1"),
        "--output",
        &path_arg(&out),
        "--insecure-registry",
        &registry.addr,
    ]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(all.contains("digest mismatch"), "{all}");
    assert!(all.contains(&layer_digest), "{all}");
    assert!(!out.exists(), "nothing is written: {all}");
}

#[tokio::test]
async fn a_missing_tag_is_a_clear_not_found_error() {
    let registry = Registry::start();
    cli_push_default(&registry, "policies/default:v1");

    let reference = registry.reference("policies/default:no-such-tag");
    let error = oci::pull(&reference, &registry.options())
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::NotFound { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.starts_with(&reference), "{message}");
    assert!(message.contains("not found"), "{message}");

    // A repository nothing was pushed to.
    let work = tempfile::tempdir().expect("temp dir");
    let out = work.path().join("missing.wasm");
    let missing = registry.reference("policies/nothing-here:v1");
    let output = radwasm(&[
        "policy",
        "pull",
        &missing,
        "--output",
        &path_arg(&out),
        "--insecure-registry",
        &registry.addr,
    ]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(all.contains(&missing) && all.contains("not found"), "{all}");
    assert!(
        !all.contains("envelope") && !all.contains("OciEnvelope"),
        "{all}"
    );
    assert!(!out.exists());
}

#[tokio::test]
async fn a_stopped_registry_is_a_clear_unreachable_error() {
    let mut registry = Registry::start();
    cli_push_default(&registry, "policies/default:v1");
    registry.stop();

    let reference = registry.reference("policies/default:v1");
    let error = oci::pull(&reference, &registry.options())
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::Unreachable { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains(&reference), "{message}");
    assert!(message.contains("unreachable"), "{message}");

    let work = tempfile::tempdir().expect("temp dir");
    let out = work.path().join("unreachable.wasm");
    let output = radwasm(&[
        "policy",
        "pull",
        &reference,
        "--output",
        &path_arg(&out),
        "--insecure-registry",
        &registry.addr,
    ]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(all.contains("unreachable"), "{all}");
    assert!(!out.exists());

    let output = radwasm(&[
        "policy",
        "push",
        "default",
        &reference,
        "--insecure-registry",
        &registry.addr,
    ]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(all.contains("unreachable"), "{all}");
}

#[tokio::test]
async fn pushing_a_file_that_is_not_a_policy_is_refused_before_any_request() {
    // A listener that nobody should connect to: the refusal comes first.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let addr = listener.local_addr().expect("addr").to_string();
    let reference = format!("{addr}/policies/bad:v1");
    let work = tempfile::tempdir().expect("temp dir");

    let text_file = work.path().join("notes.wasm");
    std::fs::write(&text_file, "not WebAssembly at all\n").expect("write");
    let core_module = work.path().join("module.wasm");
    std::fs::write(&core_module, wat::parse_str("(module)").expect("wat")).expect("write");
    // A valid component, but not a policy: it exports nothing.
    let empty_component = work.path().join("component.wasm");
    std::fs::write(
        &empty_component,
        wat::parse_str("(component)").expect("wat"),
    )
    .expect("write");

    for (file, why) in [
        (&text_file, "not a WebAssembly file"),
        (&core_module, "core WebAssembly module"),
        (&empty_component, "exports nothing"),
    ] {
        let output = radwasm(&[
            "policy",
            "push",
            &path_arg(file),
            &reference,
            "--insecure-registry",
            &addr,
        ]);
        let all = text(&output);
        assert_eq!(output.status.code(), Some(2), "{all}");
        assert!(all.contains("not pushed"), "{all}");
        assert!(all.contains(why), "{all}");
    }

    // A plain-HTTP registry off loopback is warned about (and this one is
    // never reached: the file is refused first).
    let far = "registry.example.invalid:5000";
    let output = radwasm(&[
        "policy",
        "push",
        &path_arg(&text_file),
        &format!("{far}/policies/bad:v1"),
        "--insecure-registry",
        far,
    ]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(
        all.contains(&format!(
            "warning: registry {far} is reached over plain HTTP"
        )),
        "{all}"
    );
    assert!(
        !text(&radwasm(&[
            "policy",
            "push",
            &path_arg(&text_file),
            &reference,
            "--insecure-registry",
            &addr
        ]))
        .contains("warning")
    );

    // The library refuses what is not a component, too.
    let options = OciOptions {
        insecure_registries: vec![addr.clone()],
        auth: None,
        user_agent: radwasm::USER_AGENT,
    };
    let error = oci::push(&reference, b"not WebAssembly at all\n", &options)
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::NotAComponent { .. }), "{error:?}");

    match listener.accept() {
        Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
        Ok((_, peer)) => panic!("a refused push connected to the registry (from {peer})"),
        Err(error) => panic!("accept: {error}"),
    }
}

#[tokio::test]
async fn a_manifest_without_exactly_one_wasm_layer_is_refused_naming_the_media_types() {
    let registry = Registry::start();
    let client = reqwest::Client::new();
    let repository = "policies/container-image";
    // Upload blobs the plain way (POST, then PUT with the digest).
    let upload = |data: Vec<u8>| {
        let client = client.clone();
        let addr = registry.addr.clone();
        async move {
            let digest = sha256(&data);
            let started = client
                .post(format!("http://{addr}/v2/{repository}/blobs/uploads/"))
                .send()
                .await
                .expect("start upload");
            assert_eq!(started.status(), 202);
            let location = started.headers()["Location"]
                .to_str()
                .expect("location")
                .to_string();
            let location = if location.starts_with("http") {
                location
            } else {
                format!("http://{addr}{location}")
            };
            let separator = if location.contains('?') { '&' } else { '?' };
            let done = client
                .put(format!("{location}{separator}digest={digest}"))
                .header("Content-Type", "application/octet-stream")
                .body(data.clone())
                .send()
                .await
                .expect("finish upload");
            assert_eq!(done.status(), 201, "{:?}", done.text().await);
            (digest, data.len())
        }
    };
    let (config_digest, config_size) = upload(b"{}".to_vec()).await;
    let (wasm_digest, wasm_size) = upload(DEFAULT_POLICY.to_vec()).await;
    let (tar_digest, tar_size) = upload(b"a tarball, pretend".to_vec()).await;
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": config_digest, "size": config_size},
        "layers": [
            {"mediaType": "application/wasm", "digest": wasm_digest, "size": wasm_size},
            {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
             "digest": tar_digest, "size": tar_size},
        ],
    });
    let put = client
        .put(format!(
            "http://{}/v2/{repository}/manifests/two-layers",
            registry.addr
        ))
        .header("Content-Type", OCI_MANIFEST)
        .body(serde_json::to_vec(&manifest).expect("manifest"))
        .send()
        .await
        .expect("PUT manifest");
    assert_eq!(put.status(), 201, "{:?}", put.text().await);

    let reference = registry.reference(&format!("{repository}:two-layers"));
    let error = oci::pull(&reference, &registry.options())
        .await
        .unwrap_err();
    assert!(
        matches!(error, OciError::NotAWasmArtifact { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains(
            "found 2 layers: application/wasm, application/vnd.oci.image.layer.v1.tar+gzip"
        ),
        "{message}"
    );

    let work = tempfile::tempdir().expect("temp dir");
    let out = work.path().join("two-layers.wasm");
    let output = radwasm(&[
        "policy",
        "pull",
        &reference,
        "--output",
        &path_arg(&out),
        "--insecure-registry",
        &registry.addr,
    ]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(
        all.contains("application/vnd.oci.image.layer.v1.tar+gzip"),
        "{all}"
    );
    assert!(!out.exists());
}

#[tokio::test]
async fn credentials_from_flags_the_environment_and_a_dockerconfigjson() {
    let registry = Registry::start_with_auth();
    let reference = registry.reference("policies/default:v1");
    let work = tempfile::tempdir().expect("temp dir");

    // Without credentials: refused, and the message says none were given.
    let output = radwasm(&[
        "policy",
        "push",
        "default",
        &reference,
        "--insecure-registry",
        &registry.addr,
    ]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(all.contains("refused access"), "{all}");
    assert!(all.contains("no credentials were given"), "{all}");

    // Credentials from the environment.
    let output = radwasm_with(
        &[
            "policy",
            "push",
            "default",
            &reference,
            "--insecure-registry",
            &registry.addr,
        ],
        &[
            ("RADWASM_REGISTRY_USERNAME", USER),
            ("RADWASM_REGISTRY_PASSWORD", PASSWORD),
        ],
        None,
    );
    assert!(output.status.success(), "{}", text(&output));

    // --username and --password-stdin.
    let out = work.path().join("pulled.wasm");
    let output = radwasm_with(
        &[
            "policy",
            "pull",
            &reference,
            "--output",
            &path_arg(&out),
            "--insecure-registry",
            &registry.addr,
            "--username",
            USER,
            "--password-stdin",
        ],
        &[],
        Some(&format!("{PASSWORD}\n")),
    );
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(std::fs::read(&out).expect("pulled"), DEFAULT_POLICY);

    // A wrong password: refused, naming the user, never the password.
    let output = radwasm_with(
        &[
            "policy",
            "pull",
            &reference,
            "--output",
            &path_arg(&work.path().join("wrong.wasm")),
            "--insecure-registry",
            &registry.addr,
            "--username",
            USER,
            "--password-stdin",
        ],
        &[],
        Some("not-the-password"),
    );
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(all.contains("refused access"), "{all}");
    assert!(all.contains(USER), "{all}");
    assert!(!all.contains("not-the-password"), "{all}");

    // A user name without a password is a usage error.
    let output = radwasm(&[
        "policy",
        "pull",
        &reference,
        "--output",
        &path_arg(&work.path().join("half.wasm")),
        "--username",
        USER,
    ]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(all.contains("no password"), "{all}");

    // The library, with credentials read from an image-pull Secret's
    // `.dockerconfigjson`.
    let auth = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        format!("{USER}:{PASSWORD}"),
    );
    let secret = format!(
        r#"{{"auths": {{"{}": {{"auth": "{auth}"}}}}}}"#,
        registry.addr
    );
    let credentials = oci::credentials_from_dockerconfigjson(secret.as_bytes(), &registry.addr)
        .expect("valid")
        .expect("an entry for the registry");
    assert_eq!(
        credentials,
        Credentials {
            username: USER.to_string(),
            password: PASSWORD.to_string()
        }
    );
    let options = OciOptions {
        insecure_registries: vec![registry.addr.clone()],
        auth: Some(credentials),
        user_agent: radwasm::USER_AGENT,
    };
    let pulled = oci::pull(&reference, &options).await.expect("pull");
    assert_eq!(pulled.component, DEFAULT_POLICY);
    let anonymous = oci::pull(&reference, &registry.options())
        .await
        .unwrap_err();
    assert!(
        matches!(anonymous, OciError::Unauthorized { .. }),
        "{anonymous:?}"
    );
}

#[tokio::test]
async fn a_plain_http_registry_not_listed_as_insecure_says_so() {
    let registry = Registry::start();
    let reference = registry.reference("policies/default:v1");
    let error = oci::pull(&reference, &OciOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::Unreachable { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("insecure registry"), "{message}");
}

// `radwasm policy sign|verify` with the real cosign, both ways.
#[path = "oci_registry/signatures.rs"]
mod signatures;

#[path = "oci_registry/blob_signatures.rs"]
mod blob_signatures;

#[path = "oci_registry/hostile.rs"]
mod hostile;

// What a signature claims besides the digest (repository, annotations),
// with the real cosign.
#[path = "oci_registry/signature_claims.rs"]
mod signature_claims;

// cosign 3's sigstore bundles as OCI referrers, beside cosign 2's format.
#[path = "oci_registry/cosign3.rs"]
mod cosign3;

// Certificate-signed modules against a platform CA, with the real cosign.
#[path = "oci_registry/certificates.rs"]
mod certificates;
