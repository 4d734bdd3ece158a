//! `radwasm policy new --lang python|js` as an author outside this
//! repository uses it: scaffold with the real binary into a temporary
//! directory, install the build tool the scaffold pins with the language's
//! own package manager, run the scaffold's own build command, then
//! `radwasm policy check` and `radwasm policy test <wasm> cases/`.
//!
//! The tools are real and installed by the test: componentize-py into a
//! virtual environment at `target/policy-langs/venv`, npm packages through
//! the npm cache at `target/policy-langs/npm-cache` (under `CARGO_TARGET_DIR`
//! if set), both kept between runs, so only the first run downloads. If a
//! tool cannot be installed the test fails and says so: it never skips.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

use radwasm_test_support::output_text as text;
use radwasm_test_support::scaffold::{Scaffold, readme_commands, run};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// Scaffold `name` in `lang` with this build's binary, and check it carries
/// its README, WIT, `.gitignore` and six cases.
fn scaffold(name: &str, lang: &str) -> Scaffold {
    let scaffold = Scaffold::new(Path::new(env!("CARGO_BIN_EXE_radwasm")), name, lang);
    let cases = std::fs::read_dir(scaffold.dir.join("cases"))
        .expect("cases/")
        .count();
    assert_eq!(cases, 6, "{lang}: the scaffold's cases");
    scaffold
}

/// `radwasm policy check` and `test` on the built component, as the
/// README's `Check and test` section gives them.
fn check_and_test(dir: &Path, name: &str) {
    let wasm = dir.join(format!("{name}.wasm"));
    assert!(wasm.is_file(), "{} was not built", wasm.display());
    eprintln!(
        "{name}.wasm: {} bytes",
        std::fs::metadata(&wasm).expect("stat").len()
    );
    let readme = std::fs::read_to_string(dir.join("README.md")).expect("README.md");
    let commands = readme_commands(&readme, "Check and test");
    assert_eq!(
        commands,
        [
            format!("radwasm policy check {name}.wasm"),
            format!("radwasm policy test {name}.wasm cases/"),
        ]
    );
    for (command, expected) in commands.iter().zip([
        format!("policy:      {name}@0.1.0"),
        "6 passed, 0 failed".to_string(),
    ]) {
        let output = run(
            Command::new(env!("CARGO_BIN_EXE_radwasm"))
                .current_dir(dir)
                .args(command.split_whitespace().skip(1)),
            command,
        );
        let all = text(&output);
        assert!(all.contains(&expected), "{command}: {all}");
        if command.contains(" check ") {
            assert!(all.contains("world radapp:policy/layer@0.6.0"), "{all}");
            assert!(all.contains("layers on:   default@"), "{all}");
        }
    }
}

/// `text` with every run of whitespace made one space, as prose reads.
fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The version a manifest line `prefix<version>` pins.
fn pinned<'a>(manifest: &'a str, prefix: &str) -> &'a str {
    manifest
        .lines()
        .find_map(|line| line.trim().strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} in\n{manifest}"))
        .trim_matches(|c| c == '"' || c == ',')
}

#[test]
fn a_python_layer_is_scaffolded_built_with_componentize_py_checked_and_tested() {
    let started = Instant::now();
    let name = "team-py";
    let scaffold = scaffold(name, "python");
    let requirements =
        std::fs::read_to_string(scaffold.dir.join("requirements.txt")).expect("requirements");
    let version = pinned(&requirements, "componentize-py==");
    let readme = scaffold.readme();
    assert!(
        words(&readme).contains(&format!("componentize-py {version}")),
        "the README names another version than requirements.txt's {version}"
    );
    let build = readme_commands(&readme, "Build");
    assert_eq!(
        build,
        [
            "python3 -m venv .venv && . .venv/bin/activate".to_string(),
            "pip install -r requirements.txt".to_string(),
            format!("componentize-py -d wit -w layer componentize --stub-wasi app -o {name}.wasm"),
        ],
        "{readme}"
    );
    // The README's steps, with the virtual environment cached in target/.
    scaffold.build_python();
    check_and_test(&scaffold.dir, name);
    eprintln!(
        "the Python scaffold test took {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn a_js_layer_is_scaffolded_built_with_jco_checked_and_tested() {
    let started = Instant::now();
    let name = "team-js";
    let scaffold = scaffold(name, "js");
    let dir = &scaffold.dir;
    let manifest = std::fs::read_to_string(dir.join("package.json")).expect("package.json");
    let jco = pinned(&manifest, "\"@bytecodealliance/jco\": ");
    let qjs = pinned(&manifest, "\"componentize-qjs\": ");
    for version in [jco, qjs] {
        assert!(
            version.chars().all(|c| c.is_ascii_digit() || c == '.'),
            "{version} is not an exact version"
        );
    }
    let readme = scaffold.readme();
    let prose = words(&readme);
    assert!(
        prose.contains(&format!("jco {jco}")) && prose.contains(&format!("componentize-qjs {qjs}")),
        "the README names other versions than package.json's ({jco}, {qjs})"
    );
    let build = readme_commands(&readme, "Build");
    assert_eq!(build, ["npm install", "npm run build"], "{readme}");

    // The README's steps, with npm's cache in target/.
    scaffold.build_js();
    check_and_test(dir, name);
    eprintln!(
        "the JavaScript scaffold test took {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// A rule exactly as `docs/layers.md` shows it for `lang` in the section
/// headed `heading`: the first code block of that language in it.
fn rule_from_the_guide(heading: &str, lang: &str) -> String {
    let guide =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/layers.md"))
            .expect("docs/layers.md");
    let section = &guide[guide.find(heading).expect("the section")..];
    let fence = format!("```{lang}\n");
    let start = section.find(&fence).expect("the code block") + fence.len();
    let end = start + section[start..].find("```").expect("its end");
    section[start..end].to_string()
}

/// A rule of the guide and the cases its Rust guest passes.
struct GuideRule {
    /// The heading of its section in `docs/layers.md`.
    heading: &'static str,
    /// The guest under `guests/` whose cases it must pass.
    guest: &'static str,
    /// How many they are.
    cases: usize,
}

const KEEP_DATA_STORES: GuideRule = GuideRule {
    heading: "## Keeping a child",
    guest: "keep-data-stores",
    cases: 4,
};

const PROD_OWNER: GuideRule = GuideRule {
    heading: "## A rule on the namespace",
    guest: "prod-owner-layer",
    cases: 5,
};

/// Scaffold a layer in `lang`, put the guide's `rule` in place of the
/// sample template rule (from `start` up to `end` in `file`), build it
/// with the scaffold's own command, and run the cases of the rule's Rust
/// guest with `radwasm policy test`.
fn guide_rule_passes_its_cases(
    rule: GuideRule,
    lang: &str,
    fence: &str,
    file: &str,
    start: &str,
    end: &str,
) {
    let name = format!("{}-{lang}", rule.guest);
    let scaffold = scaffold(&name, lang);
    let path = scaffold.dir.join(file);
    let source = std::fs::read_to_string(&path).expect("the scaffold's source");
    let from = source.find(start).expect("the sample template rule");
    let to = source.find(end).expect("the resource rule");
    let guest = rule.guest;
    let expected = format!("{} passed, 0 failed", rule.cases);
    let rule = rule_from_the_guide(rule.heading, fence);
    assert!(
        rule.lines().count() <= 20,
        "the rule is {} lines",
        rule.lines().count()
    );
    std::fs::write(
        &path,
        format!("{}{rule}\n{}", &source[..from], &source[to..]),
    )
    .expect("write the rule");
    let cases = scaffold.dir.join("cases");
    std::fs::remove_dir_all(&cases).expect("drop the sample cases");
    std::fs::create_dir(&cases).expect("cases/");
    let ours = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../guests")
        .join(guest)
        .join("cases");
    for entry in std::fs::read_dir(&ours).expect("the layer's cases") {
        let entry = entry.expect("a case");
        std::fs::copy(entry.path(), cases.join(entry.file_name())).expect("copy a case");
    }
    match lang {
        "python" => scaffold.build_python(),
        _ => scaffold.build_js(),
    };
    let command = format!("radwasm policy test {name}.wasm cases/");
    let output = run(
        Command::new(env!("CARGO_BIN_EXE_radwasm"))
            .current_dir(&scaffold.dir)
            .args(command.split_whitespace().skip(1)),
        &command,
    );
    let all = text(&output);
    assert!(all.contains(&expected), "{command}: {all}");
}

#[test]
fn the_guides_data_store_rule_in_python_passes_its_cases() {
    guide_rule_passes_its_cases(
        KEEP_DATA_STORES,
        "python",
        "python",
        "app.py",
        "class TemplateLayer",
        "class ResourceLayer",
    );
}

#[test]
fn the_guides_data_store_rule_in_javascript_passes_its_cases() {
    guide_rule_passes_its_cases(
        KEEP_DATA_STORES,
        "js",
        "js",
        "app.js",
        "export const templateLayer",
        "export const resourceLayer",
    );
}

#[test]
fn the_guides_namespace_rule_in_python_passes_its_cases() {
    guide_rule_passes_its_cases(
        PROD_OWNER,
        "python",
        "python",
        "app.py",
        "class TemplateLayer",
        "class ResourceLayer",
    );
}

#[test]
fn the_guides_namespace_rule_in_javascript_passes_its_cases() {
    guide_rule_passes_its_cases(
        PROD_OWNER,
        "js",
        "js",
        "app.js",
        "export const templateLayer",
        "export const resourceLayer",
    );
}
