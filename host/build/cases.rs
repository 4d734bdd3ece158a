//! Lists the default policy's fixture cases (`guests/default-policy/cases/`)
//! for `radwasm policy cases` to embed, so a user with only the binary has
//! the examples they show: a template being deleted, a resource and its
//! owner, drift, holds, retries.

use std::fmt::Write;
use std::path::{Path, PathBuf};

/// Where the cases are, from the workspace root.
const CASES_DIR: &str = "guests/default-policy/cases";

/// Write `OUT_DIR/default_policy_cases.rs`: a constant listing every `*.json`
/// under the cases directory as (path relative to it, `/`-separated, sorted;
/// its text through `include_str!`).
pub fn embed_cases(workspace: &Path, out_dir: &Path) {
    let root = workspace.join(CASES_DIR);
    let mut files = Vec::new();
    collect(&root, &root, &mut files);
    files.sort();
    assert!(
        !files.is_empty(),
        "{}: no case files to embed",
        root.display()
    );
    let mut text = String::from(
        "/// The default policy's cases: (path under the cases directory, text).\n\
         pub const DEFAULT_POLICY_CASES: &[(&str, &str)] = &[\n",
    );
    for (relative, path) in &files {
        writeln!(
            text,
            "    ({relative:?}, include_str!({:?})),",
            path.display()
        )
        .expect("writing to a String");
    }
    text.push_str("];\n");
    std::fs::write(out_dir.join("default_policy_cases.rs"), text)
        .expect("write OUT_DIR/default_policy_cases.rs");
}

fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|error| panic!("read {}: {error}", dir.display()));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|error| panic!("read {}: {error}", dir.display()))
            .path();
        if path.is_dir() {
            collect(root, &path, files);
        } else if path.extension().is_some_and(|e| e == "json") {
            let relative = path
                .strip_prefix(root)
                .expect("under the cases directory")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            files.push((relative, path));
        }
    }
}
