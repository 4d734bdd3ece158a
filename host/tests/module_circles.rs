//! No module of `host/src`, nor of any crate under `sim/` or `crates/`,
//! depends on another in a circle.
//!
//! The policy runtime became crates of its own (`crates/`), and the
//! controllers may follow; a crate cannot be cut out of a circle, so the
//! layers must stay acyclic, and this test keeps them so. It reads each crate's source with
//! `syn` (nothing is compiled or run): the module tree from `mod x;`
//! (`x.rs` or `x/mod.rs`, `#[path]` honoured), and every path into the
//! crate a file names — `use crate::…`, `use super::…`, `use self::…`, a
//! `crate::a::b` or `super::f` in code, and the same inside macro arguments.
//! A path leads to the deepest module it names; a name a module imports
//! with `use` is followed to where it comes from, so `super::Candidate`
//! that a parent `mod.rs` brings in from a sibling counts as a use of that
//! sibling.
//!
//! **The granularity: siblings.** Each folder's `mod.rs` and each child
//! file or child folder are modules, and an edge between two files is
//! lifted to the two *siblings* that contain them under their nearest
//! common ancestor: `controller/execute/apply.rs` naming
//! `controller/produced.rs` is the edge `controller::execute ->
//! controller::produced`, and `reconcile_policy/loader/trust.rs` naming
//! `loader/candidate.rs` is `loader::trust -> loader::candidate`. A file
//! naming its own ancestor (`super::…` into the `mod.rs` above it) or its
//! own descendant (`mod.rs` re-exporting a child) is containment, not an
//! edge: a folder is one unit to everything outside it, and a folder is
//! what moves into a crate of its own. So a circle is between siblings —
//! files or whole folders — that could not be separated: two files in one
//! folder, or two folders (say `policy` and `controller`) whose files name
//! each other in both directions. Test modules count like any other code:
//! they are compiled with the crate and would be cut with it.
//!
//! A circle fails the test with each cycle and, for every edge of it, the
//! `file:line` and text of each `use` or path that makes the edge.
//!
//! [`NOT_YET_BROKEN`] names the circles still there, each by its exact set
//! of modules: one that takes in another module, loses one or disappears
//! fails the test too, so the list only gets shorter, and a circle among
//! any other modules fails at once. (A new `use` between two modules
//! already in one of those sets does not show until the set is broken.)
#![allow(
    clippy::too_many_lines,
    reason = "a test or benchmark scenario reads top to bottom as one story"
)]

#[path = "module_circles/graph.rs"]
mod graph;

use std::path::{Path, PathBuf};

use graph::{Crate, report};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

/// Circles not broken yet: (crate, its modules, sorted). Each fails the
/// test as soon as it changes, so breaking one means removing it here.
/// None is left; a circle found from now on fails the test at once.
const NOT_YET_BROKEN: &[(&str, &[&str])] = &[];

/// The circles of the crate rooted at `root` that are not in
/// [`NOT_YET_BROKEN`], as the report the test prints (empty when there are
/// none), and the entries of that list for this crate it did find.
fn circles_of(name: &str, root: &Path, shown_from: &Path) -> (String, Vec<Vec<String>>) {
    let krate = Crate::read(root, shown_from).unwrap_or_else(|e| panic!("{name}: {e}"));
    let (known, new): (Vec<_>, Vec<_>) = krate.circles().into_iter().partition(|circle| {
        NOT_YET_BROKEN
            .iter()
            .any(|(krate, members)| *krate == name && circle.members == *members)
    });
    (
        report(name, &new),
        known.into_iter().map(|c| c.members).collect(),
    )
}

/// Fails with `found` (new circles) or with the entries of
/// [`NOT_YET_BROKEN`] for `crates` that are no longer found as they are.
fn check(crates: &[&str], found: &str, known: &[Vec<String>]) {
    assert!(
        found.is_empty(),
        "module circles (a circle keeps its modules from being separated; move \
         what both sides use to one of them or to a module both use):\n{found}"
    );
    let stale: Vec<String> = NOT_YET_BROKEN
        .iter()
        .filter(|(krate, members)| crates.contains(krate) && !known.iter().any(|k| k == members))
        .map(|(krate, members)| format!("{krate}: {}", members.join(", ")))
        .collect();
    assert!(
        stale.is_empty(),
        "circles in NOT_YET_BROKEN that are gone or changed (remove them, or \
         name the circle as it is now):\n{}",
        stale.join("\n")
    );
}

#[test]
fn host_src_has_no_module_circles() {
    let repo = repository();
    let (found, known) = circles_of("host", &repo.join("host/src/lib.rs"), &repo);
    check(&["host"], &found, &known);
}

#[test]
fn sim_crates_have_no_module_circles() {
    crates_under_have_no_module_circles("sim");
}

#[test]
fn policy_runtime_crates_have_no_module_circles() {
    crates_under_have_no_module_circles("crates");
}

/// Checks every crate in a folder of the repository (`sim`, `crates`).
fn crates_under_have_no_module_circles(folder: &str) {
    let repo = repository();
    let mut crates: Vec<PathBuf> = std::fs::read_dir(repo.join(folder))
        .unwrap_or_else(|error| panic!("reading {folder}/: {error}"))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|dir| dir.join("Cargo.toml").exists())
        .collect();
    crates.sort();
    assert!(!crates.is_empty(), "no crate found under {folder}/");
    let mut names = Vec::new();
    let mut found = String::new();
    let mut known = Vec::new();
    for dir in &crates {
        let name = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        for root in ["src/lib.rs", "src/main.rs"] {
            if dir.join(root).exists() {
                let (new, old) = circles_of(&name, &dir.join(root), &repo);
                found += &new;
                known.extend(old);
            }
        }
        names.push(name);
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    check(&names, &found, &known);
}

/// Writes a small crate (path, contents) into a temporary folder and
/// returns the check's report on it.
fn report_on(files: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().expect("a temporary folder");
    for (path, text) in files {
        let file = dir.path().join(path);
        std::fs::create_dir_all(file.parent().expect("a parent")).expect("creating a folder");
        std::fs::write(&file, text).expect("writing a file");
    }
    circles_of("sample", &dir.path().join("src/lib.rs"), dir.path()).0
}

#[test]
fn a_circle_between_sibling_files_is_reported_with_its_use_lines() {
    let found = report_on(&[
        ("src/lib.rs", "mod kinds;\nmod table;\n"),
        (
            "src/kinds.rs",
            "use crate::table::Row;\npub fn kind() -> Row { Row }\n",
        ),
        (
            "src/table.rs",
            "pub struct Row;\n\nfn f() {\n    let _ = crate::kinds::kind();\n}\n",
        ),
    ]);
    assert!(
        found.contains("sample: module circle kinds -> table -> kinds"),
        "{found}"
    );
    assert!(
        found.contains("src/kinds.rs:1: use crate::table::Row;"),
        "{found}"
    );
    assert!(
        found.contains("src/table.rs:4: let _ = crate::kinds::kind();"),
        "{found}"
    );
}

#[test]
fn a_circle_between_folders_and_through_a_parents_import_is_reported() {
    // execute/apply.rs names produced.rs; produced.rs names a function
    // execute/mod.rs defines: execute <-> produced. loader/trust.rs names
    // `super::Candidate`, which loader/mod.rs imports from candidate.rs,
    // and candidate.rs names trust.rs inside a macro: trust <-> candidate.
    let found = report_on(&[
        ("src/lib.rs", "pub mod controller;\npub mod loader;\n"),
        (
            "src/controller/mod.rs",
            "pub mod execute;\npub mod produced;\n",
        ),
        (
            "src/controller/execute/mod.rs",
            "mod apply;\npub fn label() -> String { String::new() }\n",
        ),
        (
            "src/controller/execute/apply.rs",
            "use super::super::produced::mark;\n",
        ),
        (
            "src/controller/produced.rs",
            "pub fn mark() {}\nfn g() { crate::controller::execute::label(); }\n",
        ),
        (
            "src/loader/mod.rs",
            "mod candidate;\nmod trust;\nuse candidate::Candidate;\n",
        ),
        (
            "src/loader/candidate.rs",
            "pub struct Candidate;\nfn h() { println!(\"{}\", super::trust::check()); }\n",
        ),
        (
            "src/loader/trust.rs",
            "pub fn check() -> u8 { 0 }\nfn k(_: super::Candidate) {}\n",
        ),
    ]);
    assert!(
        found.contains(
            "module circle controller::execute -> controller::produced -> controller::execute"
        ),
        "{found}"
    );
    assert!(
        found.contains("src/controller/execute/apply.rs:1: use super::super::produced::mark;"),
        "{found}"
    );
    assert!(
        found.contains("module circle loader::candidate -> loader::trust -> loader::candidate"),
        "{found}"
    );
    assert!(
        found.contains("src/loader/trust.rs:2: fn k(_: super::Candidate) {}"),
        "{found}"
    );
}

#[test]
fn a_child_using_its_parent_and_one_way_edges_are_no_circle() {
    let found = report_on(&[
        ("src/lib.rs", "mod a;\nmod b;\npub struct Root;\n"),
        (
            "src/a/mod.rs",
            "mod inner;\npub use inner::Thing;\nuse crate::b::B;\n",
        ),
        (
            "src/a/inner.rs",
            "pub struct Thing;\nuse super::super::Root;\nuse super::*;\n",
        ),
        ("src/b.rs", "pub struct B;\nuse crate::Root;\n"),
    ]);
    assert_eq!(found, "");
}
