//! Facts the documentation states that the repository can check.
//!
//! The pages checked are `README.md` and every `.md` file under `docs/`
//! (and, for links and paths, `CHANGELOG.md` too). Text inside fenced code
//! blocks is left alone, except where a rule says otherwise.
//!
//! 1. **The contract version.** `wit/policy.wit`'s `package` line names the
//!    current contract, `radapp:policy@X.Y.Z`. Every mention of the package
//!    with a version in README.md and docs/ — `radapp:policy@A.B.C`, or an
//!    interface or world of it, `radapp:policy/log@A.B.C` — must name that
//!    version, fenced code included (example output and imports are copied
//!    from a build against the current contract). A mention of another
//!    version is allowed only on a line about older versions: a line that
//!    says "older", or one that also names the current version (a list of
//!    the versions the host loads, an error message naming both). A version
//!    written as `A.B (current` or `A.B.C (current` must be the current one
//!    too. So bumping the WIT without the docs fails here.
//! 2. **Links.** Every relative markdown link, `[text](target)`, points at a
//!    file or folder that exists (relative to the page), and a `#fragment`
//!    at a heading of the page it names (as GitHub makes heading anchors).
//! 3. **Paths.** Every `docs/NAME.md` a page names, and every path in
//!    backticks from the repository root under `host/`, `guests/`, `sim/`,
//!    `wit/`, `deploy/` or `docs/`, exists. Paths with placeholders (`<`,
//!    `*`, `…`, `{`) are not checked; `tests/…` and `fuzz/…` are left out,
//!    since pages name those relative to a crate as often as to the root.
//! 4. **The reading list.** Every page under `docs/` is named in README.md,
//!    whose "Where to read next" table is where a reader starts.
//! 5. **Maps of the code.** The map of parts in `docs/architecture.md` (the
//!    fenced block under "Parts") names paths that exist: a line's first
//!    word, from the repository root, or under `host/` for an indented
//!    line. The crate map in `host/src/lib.rs` links every module the crate
//!    declares.
//! 6. **The reconcile path's names.** The glossary in `docs/architecture.md`
//!    names the functions of the reconcile path, each in backticks followed
//!    by its file in backticks; each file defines that function, and no two
//!    of those files define a function called `run`, so the names say what
//!    each one runs.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ is in the repository")
        .to_path_buf()
}

/// README.md and every `.md` under docs/, as paths relative to the
/// repository, sorted.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                out.push(
                    path.strip_prefix(root)
                        .expect("under the root")
                        .to_path_buf(),
                );
            }
        }
    }
    let root = repository();
    let mut pages = vec![PathBuf::from("README.md")];
    walk(&root.join("docs"), &root, &mut pages);
    pages.sort();
    pages
}

fn read(relative: &Path) -> String {
    let path = repository().join(relative);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lines of a page outside fenced code blocks, with their numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            lines.push((index + 1, line));
        }
    }
    lines
}

/// The version of `wit/policy.wit`'s `package radapp:policy@X.Y.Z;` line.
fn current_contract() -> String {
    let wit = read(Path::new("wit/policy.wit"));
    let line = wit
        .lines()
        .find(|line| line.trim_start().starts_with("package radapp:policy@"))
        .expect("wit/policy.wit has a `package radapp:policy@X.Y.Z;` line");
    let version = line
        .trim()
        .trim_start_matches("package radapp:policy@")
        .trim_end_matches(';')
        .to_string();
    assert_eq!(
        version.split('.').count(),
        3,
        "wit/policy.wit: not a X.Y.Z version: {line:?}"
    );
    version
}

/// The versions `radapp:policy` is named with on a line: after
/// `radapp:policy@` or `radapp:policy/<interface>@`.
fn contract_mentions(line: &str) -> Vec<String> {
    const PACKAGE: &str = "radapp:policy";
    let mut versions = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find(PACKAGE) {
        rest = &rest[at + PACKAGE.len()..];
        let after = if let Some(after) = rest.strip_prefix('@') {
            after
        } else if let Some(after) = rest.strip_prefix('/') {
            // An interface or world name, then `@`.
            let name_end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .unwrap_or(after.len());
            match after[name_end..].strip_prefix('@') {
                Some(after) => after,
                None => continue,
            }
        } else {
            continue;
        };
        let version = version_at_start(after);
        if !version.is_empty() {
            versions.push(version);
        }
    }
    versions
}

/// The `1.2.3` (or `1.2`) a text starts with, or "".
fn version_at_start(text: &str) -> String {
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    text[..end].trim_end_matches('.').to_string()
}

/// Versions written as `A.B (current` or `A.B.C (current`.
fn versions_called_current(line: &str) -> Vec<String> {
    let mut versions = Vec::new();
    let mut searched = 0;
    while let Some(at) = line[searched..].find(" (current") {
        let end = searched + at;
        let before = &line[..end];
        let start = before
            .rfind(|c: char| !(c.is_ascii_digit() || c == '.'))
            .map_or(0, |i| i + 1);
        let version = before[start..].trim_matches('.');
        if version.contains('.') {
            versions.push(version.to_string());
        }
        searched = end + 1;
    }
    versions
}

#[test]
fn the_docs_name_the_contract_version_of_wit_policy_wit() {
    let current = current_contract();
    let current_minor = current
        .rsplit_once('.')
        .map_or("", |(minor, _)| minor)
        .to_string();
    let mut wrong = Vec::new();
    let mut seen_current = 0;
    for page in pages() {
        let text = read(&page);
        for (index, line) in text.lines().enumerate() {
            let mentions = contract_mentions(line);
            seen_current += mentions.iter().filter(|v| **v == current).count();
            let about_older = line.to_lowercase().contains("older") || mentions.contains(&current);
            for version in &mentions {
                if *version != current && !about_older {
                    wrong.push(format!(
                        "{}:{}: radapp:policy@{version}, but wit/policy.wit is @{current}: {}",
                        page.display(),
                        index + 1,
                        line.trim()
                    ));
                }
            }
            for version in versions_called_current(line) {
                if version != current && version != current_minor {
                    wrong.push(format!(
                        "{}:{}: {version} called current, but wit/policy.wit is @{current}: {}",
                        page.display(),
                        index + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "pages that name another contract version as current (a line about older \
         versions says \"older\" or names the current one too):\n{}",
        wrong.join("\n")
    );
    assert!(
        seen_current > 0,
        "no page names radapp:policy@{current}: the rule checks nothing"
    );
}

/// GitHub's anchor for a heading: lowercase, punctuation other than `-`
/// and `_` dropped, spaces made `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a page's headings, `-1`, `-2`… added to repeated ones.
fn anchors(text: &str) -> Vec<String> {
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut anchors = Vec::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let count = counts.entry(base.clone()).or_insert(0);
        anchors.push(if *count == 0 {
            base.clone()
        } else {
            format!("{base}-{count}")
        });
        *count += 1;
    }
    anchors
}

/// The targets of the markdown links on a line: `[text](target)`.
fn link_targets(line: &str) -> Vec<&str> {
    let mut targets = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        if let Some(end) = rest.find(')') {
            targets.push(rest[..end].trim());
            rest = &rest[end + 1..];
        }
    }
    targets
}

fn pages_with_changelog() -> Vec<PathBuf> {
    let mut pages = pages();
    pages.push(PathBuf::from("CHANGELOG.md"));
    pages
}

#[test]
fn relative_links_point_at_files_and_headings_that_exist() {
    let root = repository();
    let mut broken = Vec::new();
    for page in pages_with_changelog() {
        let text = read(&page);
        let dir = page.parent().unwrap_or(Path::new(""));
        for (number, line) in prose_lines(&text) {
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (path, fragment) = match target.split_once('#') {
                    Some((path, fragment)) => (path, Some(fragment)),
                    None => (target, None),
                };
                let linked = if path.is_empty() {
                    page.clone()
                } else {
                    dir.join(path)
                };
                let full = root.join(&linked);
                if !full.exists() {
                    broken.push(format!(
                        "{}:{number}: ({target}): {} does not exist",
                        page.display(),
                        linked.display()
                    ));
                    continue;
                }
                if let Some(fragment) = fragment {
                    let Ok(linked_text) = fs::read_to_string(&full) else {
                        broken.push(format!(
                            "{}:{number}: ({target}): a #fragment into what is not a page",
                            page.display()
                        ));
                        continue;
                    };
                    if !anchors(&linked_text).iter().any(|a| a == fragment) {
                        broken.push(format!(
                            "{}:{number}: ({target}): {} has no heading #{fragment}",
                            page.display(),
                            linked.display()
                        ));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The `docs/NAME.md` paths a line names, anywhere in it.
fn docs_pages_named(line: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut searched = 0;
    while let Some(at) = line[searched..].find("docs/") {
        let start = searched + at;
        // Not the tail of a longer path (`../docs/`, `xdocs/`).
        let preceded = line[..start]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '/' || c == '.');
        let rest = &line[start + "docs/".len()..];
        let end = rest
            .find(|c: char| {
                !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '/' || c == '.')
            })
            .unwrap_or(rest.len());
        let name = rest[..end].trim_end_matches('.');
        if !preceded && name.ends_with(".md") {
            names.push(format!("docs/{name}"));
        }
        searched = start + "docs/".len();
    }
    names
}

/// Paths in backticks from the repository root under the folders whose
/// paths pages always write from the root.
fn rooted_paths_named(line: &str) -> Vec<String> {
    const ROOTS: [&str; 6] = ["host/", "guests/", "sim/", "wit/", "deploy/", "docs/"];
    line.split('`')
        .skip(1)
        .step_by(2)
        .map(|code| code.trim_end_matches([':', ',', ';', '.', ')']))
        .filter(|code| ROOTS.iter().any(|root| code.starts_with(root)))
        .filter(|code| !code.contains(|c: char| c.is_whitespace() || "<>*…{}$".contains(c)))
        .map(|code| code.split(['#', ':']).next().unwrap_or(code).to_string())
        .collect()
}

#[test]
fn the_paths_pages_name_exist() {
    let root = repository();
    let mut missing = Vec::new();
    for page in pages_with_changelog() {
        let text = read(&page);
        for (number, line) in prose_lines(&text) {
            let mut named = docs_pages_named(line);
            named.extend(rooted_paths_named(line));
            for path in named {
                if !root.join(&path).exists() {
                    missing.push(format!("{}:{number}: {path}", page.display()));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "paths named that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_page_under_docs_is_in_the_readmes_reading_list() {
    let readme = read(Path::new("README.md"));
    let unlisted: Vec<String> = pages()
        .into_iter()
        .filter(|page| page.starts_with("docs"))
        .map(|page| page.display().to_string().replace('\\', "/"))
        .filter(|page| !readme.contains(&format!("`{page}`")))
        .collect();
    assert!(
        unlisted.is_empty(),
        "pages README.md's \"Where to read next\" does not list: {unlisted:?}"
    );
}

#[test]
fn the_rules_read_what_they_should() {
    assert_eq!(
        contract_mentions("`radapp:policy@0.6.0`, `radapp:policy/log@0.5.0`; radapp:policy/types"),
        ["0.6.0", "0.5.0"]
    );
    assert_eq!(
        versions_called_current("guests built against 0.6 (current, `wit/`"),
        ["0.6"]
    );
    assert_eq!(
        slug(
            "`radwasm policy push <wasm> <oci-ref>` and `radwasm policy pull <oci-ref> [--output <file>]`"
        ),
        "radwasm-policy-push-wasm-oci-ref-and-radwasm-policy-pull-oci-ref---output-file"
    );
    assert_eq!(anchors("# A\n```\n# not\n```\n## A\n"), ["a", "a-1"]);
    assert_eq!(
        link_targets("see [a](b.md#c) and [d](../e/)."),
        ["b.md#c", "../e/"]
    );
    assert_eq!(
        docs_pages_named("`docs/a-b.md`, ../docs/x.md and docs/c.md."),
        ["docs/a-b.md", "docs/c.md"]
    );
    assert_eq!(
        rooted_paths_named("`host/src/lib.rs`, `host/src/<x>.rs`, `tests/a.rs`, `wit/v0.4/`."),
        ["host/src/lib.rs", "wit/v0.4/"]
    );
}

#[test]
fn the_maps_of_the_code_name_what_exists() {
    let root = repository();
    let architecture = read(Path::new("docs/architecture.md"));
    let parts = architecture
        .split_once("\n## Parts\n")
        .and_then(|(_, rest)| rest.split("```").nth(1))
        .expect("docs/architecture.md has a fenced map under \"## Parts\"");
    let mut missing = Vec::new();
    let mut named = 0;
    for line in parts.lines().skip(1) {
        let indent = line.len() - line.trim_start().len();
        // Continuation lines are indented past the path column.
        if line.trim().is_empty() || indent > 2 {
            continue;
        }
        let word = line.split_whitespace().next().unwrap_or("");
        let word = word.trim_end_matches(',');
        let path = if indent == 2 {
            format!("host/{word}")
        } else {
            word.to_string()
        };
        named += 1;
        if !root.join(&path).exists() {
            missing.push(path);
        }
    }
    assert!(named >= 20, "read only {named} paths from the map of parts");
    assert!(
        missing.is_empty(),
        "docs/architecture.md's map of parts names paths that do not exist: {missing:?}"
    );

    let lib = read(Path::new("host/src/lib.rs"));
    let map: String = lib
        .lines()
        .filter(|line| line.starts_with("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    let unmapped: Vec<&str> = lib
        .lines()
        .filter_map(|line| line.strip_prefix("pub mod "))
        .map(|rest| rest.trim_end_matches(';'))
        .filter(|module| !map.contains(&format!("[`{module}`]")))
        .collect();
    assert!(
        unmapped.is_empty(),
        "host/src/lib.rs's crate map does not name the modules {unmapped:?}"
    );
}

#[test]
fn the_glossary_names_the_functions_of_the_reconcile_path_as_the_code_does() {
    let architecture = read(Path::new("docs/architecture.md"));
    let glossary = architecture
        .split_once("\n## Glossary\n")
        .map(|(_, rest)| rest.split("\n## ").next().unwrap_or(rest))
        .expect("docs/architecture.md has a \"Glossary\" section");
    let path = glossary
        .split("\n\n")
        .find(|paragraph| paragraph.starts_with("The reconcile path"))
        .expect("the glossary has a paragraph on the reconcile path");
    let quoted: Vec<&str> = path.split('`').skip(1).step_by(2).collect();
    let mut named = Vec::new();
    for pair in quoted.windows(2) {
        if pair[1].starts_with("host/") && pair[1].ends_with(".rs") {
            let function = pair[0].rsplit("::").next().unwrap_or(pair[0]);
            named.push((function.to_string(), pair[1].to_string()));
        }
    }
    assert!(named.len() >= 5, "read only {named:?}");
    let mut wrong = Vec::new();
    let mut runs = Vec::new();
    for (function, file) in &named {
        let code = read(Path::new(file));
        let defines = |name: &str| {
            [format!("fn {name}("), format!("fn {name}<")]
                .iter()
                .any(|signature| code.contains(signature.as_str()))
        };
        if !defines(function) {
            wrong.push(format!("{file} defines no `fn {function}`"));
        }
        if defines("run") && !runs.contains(file) {
            runs.push(file.clone());
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(
        runs.len() <= 1,
        "more than one file on the reconcile path defines a `run`: {runs:?}"
    );
}
