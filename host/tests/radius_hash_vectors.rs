//! The Radius status-hash vectors in `tests/radius-hash/vectors.json` are
//! exactly what Go's `encoding/json` and hash packages make of their specs:
//! this test runs the Go program that wrote them and compares. (The unit
//! tests of `radwasm::controller::radius_hash` check radwasm's own
//! computation against the same file.) Go is needed anyway for the tests on
//! the real API server.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

use std::path::Path;
use std::process::Command;

#[test]
fn the_committed_vectors_are_what_go_computes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/radius-hash");
    let out = Command::new("go")
        .args(["run", "."])
        .current_dir(&dir)
        // No download: the program uses the standard library only.
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=mod")
        .env("CGO_ENABLED", "0")
        .output()
        .unwrap_or_else(|e| panic!("`go run` in {}: {e} (is Go installed?)", dir.display()));
    assert!(
        out.status.success(),
        "go run failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let committed = std::fs::read_to_string(dir.join("vectors.json")).expect("vectors.json");
    let computed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("Go's output");
    let committed: serde_json::Value = serde_json::from_str(&committed).expect("committed");
    assert_eq!(
        computed, committed,
        "tests/radius-hash/vectors.json is stale: regenerate it with `go run . > vectors.json` there"
    );
}
