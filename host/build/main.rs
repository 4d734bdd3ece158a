//! Builds the policy guests so the host can embed the default policy and its
//! tests can load the others, with no manual step.
//!
//! The guests are compiled by nested `cargo build`s into `target/guests`
//! (a separate target directory, so it never waits on the lock the outer
//! build holds). The toolchain file at the repository root pins the toolchain
//! and lists both wasm targets, so rustup installs them on first use.
//!
//! Two kinds of guest are built:
//! * most are compiled for `wasm32-unknown-unknown`, a target without WASI,
//!   and the core module is turned into a component here (`wit-component`,
//!   what `wasm-tools component new` does). Such a component imports only
//!   the contract's own interfaces (`log` if it logs), so each decision's
//!   fresh instance links nothing else: a third cheaper to instantiate than
//!   the same guest built for `wasm32-wasip2` (docs/benchmarks-decisions.md);
//! * `misbehaving-policy` is built for `wasm32-wasip2`, the target authors
//!   use by default, because it calls the clock and the random source to
//!   prove the sandbox gives them fixed answers.
//!
//! It also lists the policy SDK's source files for `radwasm policy new` to
//! embed (`sdk.rs`), so a scaffold builds with nothing but the binary, and
//! the default policy's fixture cases for `radwasm policy cases` (`cases.rs`).

mod cases;
mod sdk;

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Guest crates built without WASI and turned into components here; the
/// first is embedded as the default policy.
const CORE_GUESTS: &[&str] = &[
    "default-policy",
    "image-tag-guardrail",
    "annotation-canary",
    "team-label-layer",
    "keep-data-stores",
    "prod-owner-layer",
];
/// Guests built again with a cargo feature, into their own target
/// directory (so the two builds of one crate never overwrite each other's
/// output), under another name: `team-label-layer` with the default policy
/// linked in as its base.
const FEATURE_GUESTS: &[(&str, &str, &str)] =
    &[("team-label-layer", "linked", "team-label-linked")];
/// Guest crates built as components for `wasm32-wasip2`.
const WASI_GUESTS: &[&str] = &["misbehaving-policy"];
const CORE_TARGET: &str = "wasm32-unknown-unknown";
const WASI_TARGET: &str = "wasm32-wasip2";
const GUEST_PROFILE: &str = "guest";

fn main() {
    let manifest_dir =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir
        .parent()
        .expect("host/ sits inside the workspace")
        .to_path_buf();
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));

    // Also what `embed_sdk` reads: a file added under `guests/` or `wit/`
    // reruns this script (cargo scans a watched directory recursively).
    for watched in ["guests", "wit", "Cargo.toml", "Cargo.lock"] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace.join(watched).display()
        );
    }
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");

    let target_root = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    let guest_target_dir = target_root.join("guests");

    sdk::embed_sdk(&workspace, &out_dir);
    cases::embed_cases(&workspace, &out_dir);

    build_guests(
        &workspace,
        &guest_target_dir,
        CORE_TARGET,
        CORE_GUESTS,
        None,
    );
    build_guests(
        &workspace,
        &guest_target_dir,
        WASI_TARGET,
        WASI_GUESTS,
        None,
    );
    for (guest, feature, _) in FEATURE_GUESTS {
        let dir = guest_target_dir.join(feature);
        build_guests(&workspace, &dir, CORE_TARGET, &[guest], Some(feature));
    }

    let guest_dir = out_dir.join("guests");
    std::fs::create_dir_all(&guest_dir).expect("create OUT_DIR/guests");
    let built = |target_dir: &Path, target: &str, guest: &str| {
        target_dir
            .join(target)
            .join(GUEST_PROFILE)
            .join(format!("{}.wasm", guest.replace('-', "_")))
    };
    for guest in CORE_GUESTS {
        let from = built(&guest_target_dir, CORE_TARGET, guest);
        componentize(&from, &guest_dir.join(format!("{guest}.wasm")));
    }
    for (guest, feature, name) in FEATURE_GUESTS {
        let from = built(&guest_target_dir.join(feature), CORE_TARGET, guest);
        componentize(&from, &guest_dir.join(format!("{name}.wasm")));
    }
    for guest in WASI_GUESTS {
        let from = built(&guest_target_dir, WASI_TARGET, guest);
        let to = guest_dir.join(format!("{guest}.wasm"));
        std::fs::copy(&from, &to)
            .unwrap_or_else(|error| panic!("copy {} to {}: {error}", from.display(), to.display()));
    }
    println!("cargo:rustc-env=RADWASM_GUEST_DIR={}", guest_dir.display());
    println!(
        "cargo:rustc-env=RADWASM_DEFAULT_POLICY_WASM={}",
        guest_dir.join("default-policy.wasm").display()
    );
}

/// Turn the core module at `from` into a component at `to` (what
/// `wasm-tools component new` does).
fn componentize(from: &Path, to: &Path) {
    let module =
        std::fs::read(from).unwrap_or_else(|error| panic!("read {}: {error}", from.display()));
    let component = wit_component::ComponentEncoder::default()
        .module(&module)
        .and_then(|encoder| encoder.validate(true).encode())
        .unwrap_or_else(|error| panic!("turning {} into a component: {error:#}", from.display()));
    std::fs::write(to, component).unwrap_or_else(|error| panic!("write {}: {error}", to.display()));
}

/// rustup installs the targets a toolchain file lists only when it installs
/// the toolchain itself; if the toolchain was already there, add the wasm
/// target now so a fresh clone needs no manual step.
fn ensure_wasm_target(target: &str) {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()));
    let installed = sysroot.is_some_and(|root| root.join("lib/rustlib").join(target).exists());
    if installed {
        return;
    }
    let mut command = Command::new("rustup");
    command.args(["target", "add", target]);
    if let Some(toolchain) = env::var_os("RUSTUP_TOOLCHAIN") {
        command.arg("--toolchain").arg(toolchain);
    }
    match command.output() {
        Ok(output) if output.status.success() => {}
        Ok(output) => panic!(
            "the {target} target is missing and `rustup target add {target}` failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(error) => panic!(
            "the {target} target is missing and rustup could not be run ({error}); install the target for this toolchain"
        ),
    }
}

/// Flags for the guest build (one flag per \x1f-separated entry).
const GUEST_RUSTFLAGS: &str = "-Clink-arg=-zstack-size=65536\x1f-Ctarget-feature=+simd128";

fn build_guests(
    workspace: &Path,
    target_dir: &Path,
    target: &str,
    guests: &[&str],
    feature: Option<&str>,
) {
    ensure_wasm_target(target);
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace)
        .arg("build")
        .arg("--target")
        .arg(target)
        .arg("--profile")
        .arg(GUEST_PROFILE)
        .arg("--target-dir")
        .arg(target_dir);
    for guest in guests {
        command.arg("-p").arg(guest);
    }
    if let Some(feature) = feature {
        command.arg("--features").arg(feature);
    }
    // The outer build's settings are for the host target; none of them may
    // leak into the wasm build (clippy's wrapper, host RUSTFLAGS, jobserver).
    for variable in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
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
    // SIMD lets string scanning vectorise (wasmtime enables it by default).
    // A 64 KiB shadow stack (instead of 1 MiB) puts stack, data and the
    // start of the heap in the first pages of linear memory, which the
    // runtime keeps resident between instances (docs/policy-runtime.md).
    command.env("CARGO_ENCODED_RUSTFLAGS", GUEST_RUSTFLAGS);
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("could not run cargo to build the policy guests: {error}"));
    if !output.status.success() {
        panic!(
            "building the policy guests for {target} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
