//! The policy SDK's source files, embedded for `radwasm policy new`
//! (`$OUT_DIR/policy_sdk.rs`), so a scaffold builds with nothing but the
//! binary.

use std::path::{Path, PathBuf};

/// The crates a policy depends on (`radwasm policy new` writes them into a
/// scaffold with what they depend on inside this repository; the same list
/// as `SDK_CRATES` in src/scaffold/mod.rs, which a test there checks).
const SDK_CRATES: &[&str] = &["radwasm-policy-sdk", "radwasm-policy-core"];

/// Directories of a crate that are not part of what it builds as a
/// dependency (cargo discovers them only for the crate's own tests,
/// benchmarks and examples).
const SDK_SKIPPED_DIRS: &[&str] = &["tests", "benches", "examples", "target"];

/// Write `$OUT_DIR/policy_sdk.rs`: every file of the policy SDK, laid out as
/// in this repository so that relative paths inside it (the `wit/` directory
/// the SDK's `wit_bindgen::generate!` reads as `../../wit`) still hold, for
/// `radwasm policy new` to write under a scaffold's `sdk/`:
///
/// * the crates of `SDK_CRATES` and every crate they depend on through a
///   `path` in the root `[workspace.dependencies]`: each crate's directory,
///   all of it but `SDK_SKIPPED_DIRS`;
/// * the WIT package the SDK binds to: `wit/*.wit` and `wit/deps/`, what
///   `wit_bindgen::generate!` reads from a directory;
/// * `Cargo.toml`, a workspace manifest generated here that supplies what
///   the crates' manifests inherit (`version.workspace = true`,
///   `serde.workspace = true`): the root manifest's `[workspace.package]`
///   and the `[workspace.dependencies]` entries they name.
///
/// and, as `SDK_LOCK`, the entries of the root `Cargo.lock` those crates
/// reach, for the scaffold's `Cargo.lock`: its first build uses the
/// versions this repository is built and tested with.
///
/// Files are listed by walking the directories, never by name, so a new
/// source file is embedded without anyone adding it; anything this cannot
/// carry faithfully (a manifest it cannot read, a dependency by a path of
/// its own, an explicit test target) fails the build.
pub fn embed_sdk(workspace: &Path, out_dir: &Path) {
    let root_manifest = read_text(&workspace.join("Cargo.toml"));
    let workspace_dependencies = manifest_entries(&root_manifest, "workspace.dependencies");
    let workspace_package = manifest_entries(&root_manifest, "workspace.package");
    let resolver = section_lines(&root_manifest, "workspace")
        .into_iter()
        .find(|line| line.starts_with("resolver"));

    // The crates, found by following path dependencies from SDK_CRATES.
    let mut crates: Vec<(String, String)> = Vec::new();
    let mut used_dependencies: Vec<String> = Vec::new();
    let mut queue: Vec<String> = SDK_CRATES.iter().map(|name| name.to_string()).collect();
    while let Some(name) = queue.pop() {
        if crates.iter().any(|(known, _)| *known == name) {
            continue;
        }
        let (_, value) = workspace_dependencies
            .iter()
            .find(|(key, _)| *key == name)
            .unwrap_or_else(|| {
                panic!("the SDK crate {name} is not in the root [workspace.dependencies]")
            });
        let dir = inline_string(value, "path").unwrap_or_else(|| {
            panic!("the SDK crate {name} has no path in the root [workspace.dependencies]: {value}")
        });
        let manifest_path = workspace.join(&dir).join("Cargo.toml");
        let manifest = read_text(&manifest_path);
        for (dependency, inherited) in dependencies(&manifest, &manifest_path) {
            assert!(
                inherited,
                "{}: the dependency {dependency} does not come from [workspace.dependencies]; \
                 `radwasm policy new` embeds only those (host/build/sdk.rs)",
                manifest_path.display()
            );
            let (_, value) = workspace_dependencies
                .iter()
                .find(|(key, _)| *key == dependency)
                .unwrap_or_else(|| {
                    panic!(
                        "{}: {dependency} is not in the root [workspace.dependencies]",
                        manifest_path.display()
                    )
                });
            if inline_string(value, "path").is_some() {
                queue.push(dependency.clone());
            }
            if !used_dependencies.contains(&dependency) {
                used_dependencies.push(dependency);
            }
        }
        for section in ["[[test]]", "[[bench]]", "[[example]]"] {
            assert!(
                !manifest.lines().any(|line| line.trim() == section),
                "{}: a {section} target; `radwasm policy new` embeds no tests, benches or \
                 examples (host/build/sdk.rs)",
                manifest_path.display()
            );
        }
        crates.push((name, dir));
    }
    crates.sort();
    used_dependencies.sort();

    // Every file, as (path under sdk/, file on disk).
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for (_, dir) in &crates {
        collect_files(workspace, Path::new(dir), SDK_SKIPPED_DIRS, &mut files);
    }
    let wit = Path::new("wit");
    let mut wit_files = Vec::new();
    for entry in read_dir_sorted(&workspace.join(wit)) {
        let name = entry.file_name().expect("a directory entry has a name");
        if entry.is_file() && entry.extension().is_some_and(|ext| ext == "wit") {
            wit_files.push((wit.join(name), entry.clone()));
        } else if entry.is_dir() && name == "deps" {
            collect_files(workspace, &wit.join("deps"), &[], &mut files);
        }
    }
    assert!(!wit_files.is_empty(), "no wit/*.wit to embed for the SDK");
    files.extend(
        wit_files
            .into_iter()
            .map(|(relative, path)| (slash_path(&relative), path)),
    );

    // The workspace manifest the crates inherit from.
    let mut manifest = String::from(
        "# The radwasm policy SDK, written by `radwasm policy new` as the binary was\n\
         # built with it, laid out as in the radwasm repository. The policy's\n\
         # Cargo.toml uses these crates as path dependencies; this manifest supplies\n\
         # what their manifests inherit (`workspace = true`). Generated: replace\n\
         # the whole directory rather than editing it.\n\
         [workspace]\n",
    );
    if let Some(resolver) = resolver {
        manifest.push_str(resolver);
        manifest.push('\n');
    }
    manifest.push_str("members = [");
    manifest.push_str(
        &crates
            .iter()
            .map(|(_, dir)| format!("{dir:?}"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    manifest.push_str("]\n\n[workspace.package]\n");
    for (key, value) in &workspace_package {
        manifest.push_str(&format!("{key} = {value}\n"));
    }
    manifest.push_str("\n[workspace.dependencies]\n");
    for dependency in &used_dependencies {
        let (key, value) = workspace_dependencies
            .iter()
            .find(|(key, _)| key == dependency)
            .expect("checked above");
        manifest.push_str(&format!("{key} = {value}\n"));
    }
    let sdk_dir = out_dir.join("policy-sdk");
    std::fs::create_dir_all(&sdk_dir).expect("create OUT_DIR/policy-sdk");
    let sdk_manifest = sdk_dir.join("Cargo.toml");
    std::fs::write(&sdk_manifest, manifest).expect("write OUT_DIR/policy-sdk/Cargo.toml");
    files.push(("Cargo.toml".to_string(), sdk_manifest));
    files.sort();

    let mut code = String::from(
        "// Generated by host/build/sdk.rs (`embed_sdk`): the policy SDK `radwasm policy new`\n\
         // writes under a scaffold's `sdk/`.\n\n\
         /// Every file of the SDK: its path under `sdk/` and its contents.\n\
         pub const SDK_FILES: &[(&str, &[u8])] = &[\n",
    );
    for (relative, path) in &files {
        let path = path.to_str().unwrap_or_else(|| {
            panic!(
                "{}: the path is not UTF-8, include_bytes! cannot name it",
                path.display()
            )
        });
        code.push_str(&format!("    ({relative:?}, include_bytes!({path:?})),\n"));
    }
    code.push_str(
        "];\n\n\
         /// The SDK's crates: name and directory under `sdk/`.\n\
         pub const SDK_CRATE_DIRS: &[(&str, &str)] = &[\n",
    );
    for (name, dir) in &crates {
        code.push_str(&format!("    ({name:?}, {dir:?}),\n"));
    }
    code.push_str("];\n");

    let names: Vec<&str> = crates.iter().map(|(name, _)| name.as_str()).collect();
    let lock = sdk_lock(&read_text(&workspace.join("Cargo.lock")), &names);
    let lock_path = sdk_dir.join("Cargo.lock");
    std::fs::write(&lock_path, lock).expect("write OUT_DIR/policy-sdk/Cargo.lock");
    code.push_str(&format!(
        "\n/// The entries of the repository's `Cargo.lock` the SDK's crates reach.\n\
         pub const SDK_LOCK: &str = include_str!({:?});\n",
        lock_path
            .to_str()
            .expect("OUT_DIR is UTF-8 (checked above)")
    ));
    std::fs::write(out_dir.join("policy_sdk.rs"), code).expect("write OUT_DIR/policy_sdk.rs");
}

/// The lock file `lock` cut to the packages reachable from `roots` through
/// their `dependencies` (all kinds, every platform: what the lock records),
/// in the lock's order, with its header.
fn sdk_lock(lock: &str, roots: &[&str]) -> String {
    let mut blocks = lock.split("\n[[package]]\n");
    let header = blocks.next().expect("a lock file has a header");
    let packages: Vec<(String, String, Vec<String>, &str)> = blocks
        .map(|block| {
            let field = |key: &str| {
                block
                    .lines()
                    .find_map(|line| line.strip_prefix(&format!("{key} = ")))
                    .unwrap_or_else(|| panic!("Cargo.lock: a package without {key}: {block}"))
                    .trim_matches('"')
                    .to_string()
            };
            assert!(
                !block.lines().any(|line| line.starts_with('[')),
                "Cargo.lock: host/build/sdk.rs reads only [[package]] tables: {block}"
            );
            let dependencies = block
                .split_once("dependencies = [\n")
                .map(|(_, rest)| {
                    rest.lines()
                        .take_while(|line| *line != "]")
                        .map(|line| {
                            line.trim()
                                .trim_end_matches(',')
                                .trim_matches('"')
                                .to_string()
                        })
                        .collect()
                })
                .unwrap_or_default();
            (field("name"), field("version"), dependencies, block)
        })
        .collect();
    // A dependency is "name", or "name version" when the lock holds several
    // versions of it, or "name version (source)".
    let matches = |(name, version, _, _): &(String, String, Vec<String>, &str), wanted: &str| {
        let mut words = wanted.split(' ');
        words.next() == Some(name.as_str()) && words.next().is_none_or(|v| v == version)
    };
    let mut keep = vec![false; packages.len()];
    let mut queue: Vec<String> = roots.iter().map(|root| root.to_string()).collect();
    while let Some(wanted) = queue.pop() {
        let found: Vec<usize> = (0..packages.len())
            .filter(|&index| matches(&packages[index], &wanted))
            .collect();
        assert!(
            !found.is_empty(),
            "Cargo.lock: no package {wanted:?} (run a build of the workspace to update it)"
        );
        for index in found {
            if !keep[index] {
                keep[index] = true;
                queue.extend(packages[index].2.iter().cloned());
            }
        }
    }
    let mut cut = header.to_string();
    for (package, kept) in packages.iter().zip(keep) {
        if kept {
            cut.push_str("\n[[package]]\n");
            cut.push_str(package.3);
        }
    }
    cut
}

fn read_text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("read {}: {error}", path.display()))
}

/// A directory's entries, sorted, as paths.
fn read_dir_sorted(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("read {}: {error}", dir.display()))
        .map(|entry| {
            entry
                .unwrap_or_else(|error| panic!("read {}: {error}", dir.display()))
                .path()
        })
        .collect();
    entries.sort();
    entries
}

/// Every file under `workspace/relative`, recursively, but the top-level
/// directories named in `skipped`, as (`/`-separated path relative to
/// `workspace`, file on disk).
fn collect_files(
    workspace: &Path,
    relative: &Path,
    skipped: &[&str],
    files: &mut Vec<(String, PathBuf)>,
) {
    for entry in read_dir_sorted(&workspace.join(relative)) {
        let name = entry.file_name().expect("a directory entry has a name");
        let inner = relative.join(name);
        if entry.is_dir() {
            if !skipped.iter().any(|skip| name == *skip) {
                collect_files(workspace, &inner, &[], files);
            }
        } else {
            files.push((slash_path(&inner), entry));
        }
    }
}

fn slash_path(path: &Path) -> String {
    path.components()
        .map(|component| component.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// `key = value` entries of one `[section]` of a manifest, one per line as
/// this repository writes them (comments and blank lines left out). A value
/// that does not end on its line (a multi-line array) fails the build rather
/// than being read wrong.
fn manifest_entries(manifest: &str, section: &str) -> Vec<(String, String)> {
    let mut entries = Vec::new();
    for line in section_lines(manifest, section) {
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("[{section}]: cannot read the line {line:?}"));
        let value = value.trim();
        let balanced =
            |open: char, close: char| value.matches(open).count() == value.matches(close).count();
        assert!(
            balanced('[', ']') && balanced('{', '}'),
            "[{section}]: host/build/sdk.rs reads one entry per line, not {line:?}"
        );
        entries.push((key.trim().to_string(), value.to_string()));
    }
    entries
}

/// The lines of one `[section]` of a manifest, trimmed, without comments
/// and blank lines.
fn section_lines<'a>(manifest: &'a str, section: &str) -> Vec<&'a str> {
    let header = format!("[{section}]");
    let mut inside = false;
    let mut lines = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == header;
        } else if inside && !line.is_empty() && !line.starts_with('#') {
            lines.push(line);
        }
    }
    lines
}

/// The string value of `key` in an inline table (`{ path = "x", ... }`).
fn inline_string(value: &str, key: &str) -> Option<String> {
    let inner = value.trim().strip_prefix('{')?.strip_suffix('}')?;
    inner.split(',').find_map(|field| {
        let (name, text) = field.split_once('=')?;
        (name.trim() == key).then(|| text.trim().trim_matches('"').to_string())
    })
}

/// The dependencies a crate's manifest declares, in every dependency table
/// (`[dependencies]`, `[dev-dependencies]`, `[build-dependencies]`,
/// `[target.'…'.dependencies]`, and `[dependencies.NAME]` tables), each
/// with whether it is inherited from the workspace (`workspace = true`).
fn dependencies(manifest: &str, path: &Path) -> Vec<(String, bool)> {
    let is_table = |name: &str| {
        let last = name.rsplit('.').next().unwrap_or(name);
        matches!(
            last,
            "dependencies" | "dev-dependencies" | "build-dependencies"
        )
    };
    let mut found = Vec::new();
    let mut section = String::new();
    for line in manifest.lines() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[') {
            section = header.trim_end_matches(']').trim().to_string();
            // `[dependencies.NAME]`: its `workspace = true` line says how.
            if let Some((table, name)) = section.rsplit_once('.')
                && is_table(table)
            {
                found.push((name.trim_matches('"').to_string(), false));
            }
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            // The rest of a multi-line value; one in a dependency table
            // could hide a dependency.
            assert!(
                !is_table(&section),
                "{}: host/build/sdk.rs reads one dependency per line, not {line:?}",
                path.display()
            );
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        if is_table(&section) {
            let (name, inherited) = match key.strip_suffix(".workspace") {
                Some(name) => (name, value == "true"),
                None => (
                    key,
                    inline_string(value, "workspace").is_some_and(|v| v == "true"),
                ),
            };
            found.push((name.trim_matches('"').to_string(), inherited));
        } else if let Some((table, _)) = section.rsplit_once('.')
            && is_table(table)
            && key == "workspace"
            && value == "true"
            && let Some(last) = found.last_mut()
        {
            last.1 = true;
        }
    }
    found
}
