//! `radwasm policy new` as a policy author outside this repository uses it:
//! scaffold a crate with the real binary, build it with cargo in its own
//! directory with the one documented command, and check and test the
//! component it produces with `radwasm policy check|test`.
//!
//! Two ways: with the SDK the binary carries (no flag: the scaffold gets its
//! own copy under `sdk/`, and nothing of this repository is used), and with
//! `--sdk-path` (a checkout).
//!
//! The builds run offline: the scaffold's `Cargo.lock` is this repository's
//! (embedded in the binary, or copied by `--sdk-path`), so every crate it
//! needs is the one this repository's own build already downloaded. Their
//! target directory is `target/scaffold-test` (under `CARGO_TARGET_DIR` if
//! set), kept between runs, so only the first run compiles the SDK's
//! dependencies.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

use radwasm_test_support::scaffold::readme_commands;
use radwasm_test_support::{output_text as text, repository as repo};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

fn radwasm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_radwasm"))
        .args(args)
        .output()
        .expect("run radwasm")
}

fn scaffold_target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"))
        .join("scaffold-test")
}

/// `cargo` as the user runs it, in `dir`: nothing of the outer build (the
/// toolchain it chose, its flags, its target directory, clippy's wrapper)
/// may leak in; the scaffold's own toolchain file and config decide.
/// Build the scaffold in `dir` with cargo `args` as a user would (offline),
/// saying how long it took; `what` names the command in a failure.
fn build_offline(dir: &Path, args: &[&str], target_dir: &Path, what: &str) {
    let started = Instant::now();
    let build = user_cargo(dir)
        .args(args)
        .env("CARGO_TARGET_DIR", target_dir)
        .output()
        .expect("run cargo");
    eprintln!(
        "building the scaffold ({what}) took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        build.status.success(),
        "{what} in the scaffold failed:\n{}",
        text(&build)
    );
}

fn user_cargo(dir: &Path) -> Command {
    let mut command = Command::new("cargo");
    command.current_dir(dir);
    for variable in [
        "RUSTUP_TOOLCHAIN",
        "RUSTC",
        "RUSTDOC",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET_DIR",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_LLVM_COV",
        "LLVM_PROFILE_FILE",
    ] {
        command.env_remove(variable);
    }
    command
}

/// `(name, version)` of every package in a `Cargo.lock`.
fn locked_packages(lock: &str) -> Vec<(String, String)> {
    lock.split("[[package]]")
        .skip(1)
        .map(|package| {
            let field = |key: &str| {
                package
                    .lines()
                    .find_map(|line| line.strip_prefix(&format!("{key} = ")))
                    .unwrap_or_else(|| panic!("a package without {key}: {package}"))
                    .trim_matches('"')
                    .to_string()
            };
            (field("name"), field("version"))
        })
        .collect()
}

#[test]
fn with_nothing_but_the_binary_a_policy_is_scaffolded_built_checked_and_tested() {
    let started = Instant::now();
    let work = tempfile::tempdir().expect("temporary directory");
    let dir = work.path().join("demo");
    let repo = repo().canonicalize().expect("repo");
    assert!(
        !dir.starts_with(&repo),
        "the scaffold must be outside the repository"
    );
    let output = radwasm(&["policy", "new", "demo", "--dir", &dir.display().to_string()]);
    assert!(output.status.success(), "{}", text(&output));
    for file in [
        "Cargo.toml",
        "Cargo.lock",
        "rust-toolchain.toml",
        ".cargo/config.toml",
        "src/lib.rs",
        "README.md",
        "sdk/Cargo.toml",
        "sdk/guests/policy-sdk/Cargo.toml",
        "sdk/guests/policy-sdk/src/lib.rs",
        "sdk/guests/policy-core/src/lib.rs",
        "sdk/guests/policy-model/src/lib.rs",
        "sdk/wit/policy.wit",
    ] {
        assert!(
            dir.join(file).is_file(),
            "{file} missing: {}",
            text(&output)
        );
    }
    assert!(
        !dir.join("sdk/guests/policy-core/tests").exists(),
        "the SDK's own tests were written"
    );
    assert!(
        text(&output).contains("sdk/ (the policy SDK of radwasm"),
        "{}",
        text(&output)
    );
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
    assert!(
        manifest.contains(r#"radwasm-policy-sdk = { path = "sdk/guests/policy-sdk" }"#),
        "{manifest}"
    );
    // Nothing written names this repository: the scaffold stands alone.
    let repo_text = repo.display().to_string();
    for file in ["Cargo.toml", "README.md", "sdk/Cargo.toml"] {
        let written = std::fs::read_to_string(dir.join(file)).expect("read");
        assert!(!written.contains(&repo_text), "{file} names {repo_text}");
    }

    // The commands of the README it wrote: the build (offline, into the
    // shared target directory) ...
    let readme = std::fs::read_to_string(dir.join("README.md")).expect("README.md");
    let build = readme_commands(&readme, "Build");
    assert_eq!(build, ["cargo build --release"], "{readme}");
    let mut words = build[0].split_whitespace();
    assert_eq!(words.next(), Some("cargo"));
    let target_dir = scaffold_target_dir();
    let words: Vec<&str> = words.chain(["--offline"]).collect();
    build_offline(&dir, &words, &target_dir, "the README's build command");
    // ... with the SDK from the scaffold, and the dependency versions this
    // repository is built with ...
    let metadata = user_cargo(&dir)
        .args(["metadata", "--offline", "--format-version", "1"])
        .output()
        .expect("run cargo metadata");
    assert!(metadata.status.success(), "{}", text(&metadata));
    let metadata: serde_json::Value =
        serde_json::from_slice(&metadata.stdout).expect("cargo metadata JSON");
    let scaffold = dir.canonicalize().expect("scaffold");
    for package in metadata["packages"].as_array().expect("packages") {
        if package["source"].is_null() {
            let manifest = Path::new(package["manifest_path"].as_str().expect("path"));
            assert!(
                manifest.starts_with(&scaffold),
                "{} comes from outside the scaffold",
                manifest.display()
            );
        }
    }
    let repo_lock = locked_packages(
        &std::fs::read_to_string(repo.join("Cargo.lock")).expect("the repository's Cargo.lock"),
    );
    let lock = std::fs::read_to_string(dir.join("Cargo.lock")).expect("Cargo.lock");
    for package in locked_packages(&lock) {
        assert!(
            package.0 == "demo" || repo_lock.contains(&package),
            "{package:?} is not the version radwasm is built with"
        );
    }

    // ... then check and test, as written, the component in the shared
    // target directory.
    let wasm = target_dir.join("wasm32-wasip2/release/demo.wasm");
    assert!(wasm.is_file(), "{} was not built", wasm.display());
    let commands = readme_commands(&readme, "Check and test");
    assert_eq!(commands.len(), 2, "{commands:?}");
    for (command, expected) in commands
        .iter()
        .zip(["policy:      demo@0.1.0", "6 passed, 0 failed"])
    {
        let args: Vec<String> = command
            .split_whitespace()
            .skip(1) // radwasm
            .map(|arg| match arg.strip_prefix("target/") {
                Some(built) => target_dir.join(built).display().to_string(),
                None => arg.to_string(),
            })
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = Command::new(env!("CARGO_BIN_EXE_radwasm"))
            .current_dir(&dir)
            .args(&args)
            .output()
            .expect("run radwasm");
        let all = text(&output);
        assert!(output.status.success(), "{command}: {all}");
        assert!(all.contains(expected), "{command}: {all}");
    }
    // The README's other form: the same layer with the default linked in,
    // by the one edit it names; a policy now, passing the same cases.
    let readme_section = readme
        .split("### Over the default in one instance")
        .nth(1)
        .expect("the README says how to link the default");
    assert!(
        readme_section.contains("Replace `export_layer!` with `export_linked_layer!`"),
        "{readme}"
    );
    let lib = dir.join("src/lib.rs");
    let source = std::fs::read_to_string(&lib).expect("src/lib.rs");
    assert_eq!(source.matches("export_layer!").count(), 1, "{source}");
    std::fs::write(
        &lib,
        source.replace("export_layer!", "export_linked_layer!"),
    )
    .expect("edit");
    build_offline(&dir, &words, &target_dir, "the build of the linked form");
    let wasm = wasm.display().to_string();
    let check = radwasm(&["policy", "check", &wasm]);
    let all = text(&check);
    assert!(check.status.success(), "{all}");
    assert!(all.contains("world radapp:policy/policy@0.6.0"), "{all}");
    assert!(!all.contains("layers on:"), "{all}");
    let cases = dir.join("cases").display().to_string();
    let test = radwasm(&["policy", "test", &wasm, &cases]);
    assert!(test.status.success(), "{}", text(&test));
    assert!(
        text(&test).contains("6 passed, 0 failed"),
        "{}",
        text(&test)
    );
    eprintln!(
        "the embedded-SDK scaffold test took {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn a_scaffolded_policy_builds_on_its_own_and_passes_check_and_its_cases() {
    let work = tempfile::tempdir().expect("temporary directory");
    let dir = work.path().join("team-label-guardrail");
    let repo = repo();
    let output = radwasm(&[
        "policy",
        "new",
        "team-label-guardrail",
        "--dir",
        &dir.display().to_string(),
        "--sdk-path",
        &repo.display().to_string(),
    ]);
    assert!(output.status.success(), "{}", text(&output));
    for file in [
        "Cargo.toml",
        "Cargo.lock",
        "rust-toolchain.toml",
        ".cargo/config.toml",
        "src/lib.rs",
        "README.md",
    ] {
        assert!(
            dir.join(file).is_file(),
            "{file} missing: {}",
            text(&output)
        );
    }
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
    let sdk = repo.canonicalize().expect("repo").join("guests/policy-sdk");
    assert!(
        manifest.contains(&format!("path = \"{}\"", sdk.display())),
        "{manifest}"
    );

    // The one command the scaffold's README gives.
    let target_dir = scaffold_target_dir();
    build_offline(
        &dir,
        &["build", "--release", "--offline"],
        &target_dir,
        "cargo build --release --offline",
    );
    let wasm = target_dir.join("wasm32-wasip2/release/team_label_guardrail.wasm");
    assert!(wasm.is_file(), "{} was not built", wasm.display());
    let wasm = wasm.display().to_string();

    let check = radwasm(&["policy", "check", &wasm]);
    let all = text(&check);
    assert!(check.status.success(), "{all}");
    assert!(
        all.contains("policy:      team-label-guardrail@0.1.0"),
        "{all}"
    );
    assert!(all.contains("world radapp:policy/layer@0.6.0"), "{all}");
    assert!(all.contains("layers on:   default@"), "{all}");

    let cases = dir.join("cases").display().to_string();
    let test = radwasm(&["policy", "test", &wasm, &cases]);
    let all = text(&test);
    assert!(test.status.success(), "{all}");
    assert!(all.contains("6 passed, 0 failed"), "{all}");

    // The sample rule refuses an unlabelled template, naming the label.
    let case =
        std::fs::read_to_string(dir.join("cases/01-template-without-team-label-is-refused.json"))
            .expect("case 01");
    let case: serde_json::Value = serde_json::from_str(&case).expect("case 01 is JSON");
    let observation = work.path().join("observation.json");
    std::fs::write(&observation, case["observation"].to_string()).expect("write observation");
    let run = radwasm(&[
        "policy",
        "run",
        &wasm,
        "--observation",
        &observation.display().to_string(),
    ]);
    let all = text(&run);
    assert!(all.contains("MissingTeamLabel"), "{all}");
    assert!(all.contains("has no `team` label"), "{all}");
}

#[test]
fn new_refuses_a_bad_name_a_bad_sdk_source_and_a_non_empty_directory() {
    let work = tempfile::tempdir().expect("temporary directory");
    let repo = repo().display().to_string();
    let into = |name: &str| work.path().join(name).display().to_string();

    let output = radwasm(&[
        "policy",
        "new",
        "My Policy",
        "--dir",
        &into("a"),
        "--sdk-path",
        &repo,
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains("not a valid policy name"),
        "{}",
        text(&output)
    );

    let output = radwasm(&[
        "policy",
        "new",
        "fine",
        "--dir",
        &into("b"),
        "--sdk-path",
        &repo,
        "--sdk-git",
        "https://git.example.com/radwasm.git",
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("--sdk-git"), "{}", text(&output));

    let output = radwasm(&[
        "policy",
        "new",
        "fine",
        "--dir",
        &into("c"),
        "--sdk-path",
        &work.path().display().to_string(),
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains("not a checkout"),
        "{}",
        text(&output)
    );
    for dir in ["a", "b", "c"] {
        assert!(!work.path().join(dir).exists(), "{dir} was created");
    }

    let taken = work.path().join("taken");
    std::fs::create_dir(&taken).expect("mkdir");
    std::fs::write(taken.join("notes.txt"), "mine").expect("write");
    let output = radwasm(&[
        "policy",
        "new",
        "fine",
        "--dir",
        &taken.display().to_string(),
        "--sdk-path",
        &repo,
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("is not empty"), "{}", text(&output));
    let entries = std::fs::read_dir(&taken).expect("read dir").count();
    assert_eq!(entries, 1, "files were written into a non-empty directory");

    // An empty directory is fine; a git source is written as such.
    let empty = work.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let output = radwasm(&[
        "policy",
        "new",
        "fine",
        "--dir",
        &empty.display().to_string(),
        "--sdk-git",
        "https://git.example.com/radwasm.git",
        "--sdk-rev",
        "0123456789abcdef",
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let manifest = std::fs::read_to_string(empty.join("Cargo.toml")).expect("Cargo.toml");
    assert!(
        manifest.contains(
            r#"radwasm-policy-sdk = { git = "https://git.example.com/radwasm.git", rev = "0123456789abcdef" }"#
        ),
        "{manifest}"
    );
    assert!(
        !empty.join("Cargo.lock").exists(),
        "a lock file without a checkout"
    );
    assert!(
        !empty.join("sdk").exists(),
        "the embedded SDK written for a git source"
    );
}

/// `radwasm dev` (its own API server and Radius simulator on loopback) with
/// `policy`, applying `manifest`; its exit status and output.
fn dev(policy: &str, manifest: &Path, work: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_radwasm"))
        .current_dir(work)
        .env("RUST_LOG", "warn")
        .args([
            "dev",
            "--timeout",
            "60s",
            "--policy",
            policy,
            "--kubeconfig",
        ])
        .arg(work.join("dev.kubeconfig"))
        .arg(manifest)
        .output()
        .expect("run radwasm dev")
}

#[test]
fn the_scaffolds_sample_template_is_the_cases_and_deploys_through_radius() {
    let work = tempfile::tempdir().expect("temporary directory");
    let mut samples = Vec::new();
    for lang in ["rust", "python", "js"] {
        let dir = work.path().join(format!("sample-{lang}"));
        let output = radwasm(&[
            "policy",
            "new",
            "team-sample",
            "--lang",
            lang,
            "--dir",
            &dir.display().to_string(),
        ]);
        assert!(output.status.success(), "{}", text(&output));
        samples.push(dir);
    }
    let read = |dir: &Path, file: &str| {
        std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
    };
    // The same manifests in every language, but for the component's path.
    let rust = &samples[0];
    for other in &samples[1..] {
        for file in ["sample/app.yaml", "sample/app-without-team.yaml"] {
            assert_eq!(
                read(other, file).replace("team-sample.wasm", "X"),
                read(rust, file).replace("target/wasm32-wasip2/release/team_sample.wasm", "X"),
                "{file}"
            );
        }
    }

    // What the cases test is what the sample applies: the same ARM template,
    // labelled as the case that deploys and the case that is refused.
    let template_of = |manifest: &str| -> (serde_json::Value, serde_json::Value) {
        let object: serde_json::Value = serde_yaml::from_str(manifest).expect("YAML");
        let template = object["spec"]["template"].as_str().expect("a template");
        (
            serde_json::from_str(template).expect("the template is JSON"),
            object["metadata"]["labels"].clone(),
        )
    };
    let case_of = |file: &str| -> (serde_json::Value, serde_json::Value) {
        let case: serde_json::Value =
            serde_json::from_str(&read(rust, &format!("cases/{file}"))).expect("a case");
        let observed = &case["observation"]["deploymentTemplate"];
        (
            observed["spec"]["template"].clone(),
            observed["meta"]["labels"].clone(),
        )
    };
    assert_eq!(
        template_of(&read(rust, "sample/app.yaml")),
        case_of("02-template-with-team-label-deploys-like-the-default.json")
    );
    let (template, labels) = template_of(&read(rust, "sample/app-without-team.yaml"));
    let (refused, refused_labels) = case_of("01-template-without-team-label-is-refused.json");
    assert_eq!(template, refused);
    assert_eq!(labels.get("team"), None);
    assert_eq!(refused_labels.get("team"), None);

    // Applied with the layer of the same rule (guests/team-label-layer,
    // over the default): the labelled one is deployed by the simulated
    // Radius and reaches Ready ...
    let layer = Path::new(env!("RADWASM_GUEST_DIR"))
        .join("team-label-layer.wasm")
        .display()
        .to_string();
    let output = dev(&layer, &rust.join("sample/app.yaml"), work.path());
    let all = text(&output);
    assert!(output.status.success(), "{all}");
    assert!(all.contains("all 1 templates Ready"), "{all}");
    // The environment, the application and the container, counted by the
    // simulator.
    assert!(
        all.contains("radius: 1 deployment(s), 3 resource(s) now in Radius"),
        "{all}"
    );
    // ... and the unlabelled one is refused, saying why.
    let output = dev(
        &layer,
        &rust.join("sample/app-without-team.yaml"),
        work.path(),
    );
    let all = text(&output);
    assert_eq!(output.status.code(), Some(1), "{all}");
    assert!(
        all.contains("template default/app-without-team Failed")
            && all.contains("MissingTeamLabel"),
        "{all}"
    );
    assert!(
        all.contains("radius: 0 deployment(s), 0 resource(s) now in Radius"),
        "{all}"
    );
}
