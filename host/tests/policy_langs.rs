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

use radwasm_test_support::{output_text as text, repository as repo};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

/// Where the installed tools are cached between runs.
fn tools_dir() -> PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"))
        .join("policy-langs");
    std::fs::create_dir_all(&dir).expect("create target/policy-langs");
    dir
}

/// Run `command`, timing it; fail with `what` and its output unless it
/// succeeds.
fn run(command: &mut Command, what: &str) -> Output {
    let started = Instant::now();
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start {command:?}: {e}"));
    eprintln!("{what}: {:.1} s", started.elapsed().as_secs_f64());
    assert!(
        output.status.success(),
        "{what} failed ({command:?}):\n{}",
        text(&output)
    );
    output
}

/// Scaffold `name` in `lang` into a fresh temporary directory outside the
/// repository; the directory's guard and the scaffold's path.
fn scaffold(name: &str, lang: &str) -> (tempfile::TempDir, PathBuf) {
    let work = tempfile::tempdir().expect("temporary directory");
    let dir = work.path().join(name);
    let repo = repo().canonicalize().expect("repo");
    assert!(
        !dir.starts_with(&repo),
        "the scaffold must be outside the repository"
    );
    let output = run(
        Command::new(env!("CARGO_BIN_EXE_radwasm")).args([
            "policy",
            "new",
            name,
            "--lang",
            lang,
            "--dir",
            &dir.display().to_string(),
        ]),
        &format!("radwasm policy new --lang {lang}"),
    );
    for file in ["README.md", "wit/policy.wit", ".gitignore"] {
        assert!(
            dir.join(file).is_file(),
            "{file} missing: {}",
            text(&output)
        );
    }
    let cases = std::fs::read_dir(dir.join("cases"))
        .expect("cases/")
        .count();
    assert_eq!(cases, 6, "{}", text(&output));
    (work, dir)
}

/// The lines of the first fenced block after the heading `## {heading}`
/// of a README.
fn readme_commands(readme: &str, heading: &str) -> Vec<String> {
    let section = readme
        .split(&format!("\n## {heading}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("no `## {heading}` in the README:\n{readme}"));
    let block = section
        .split("```")
        .nth(1)
        .unwrap_or_else(|| panic!("no code block under `## {heading}`"));
    block
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(str::to_string)
        .collect()
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
            assert!(all.contains("world radapp:policy/layer@0.4.0"), "{all}");
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
    let (_work, dir) = scaffold(name, "python");
    let requirements = std::fs::read_to_string(dir.join("requirements.txt")).expect("requirements");
    let version = pinned(&requirements, "componentize-py==");
    let readme = std::fs::read_to_string(dir.join("README.md")).expect("README.md");
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
    let venv = tools_dir().join("venv");
    if !venv.join("bin/pip").is_file() {
        run(
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
            "python3 -m venv (is Python 3 with venv installed?)",
        );
    }
    run(
        Command::new(venv.join("bin/pip"))
            .current_dir(&dir)
            .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
            .arg("requirements.txt"),
        &format!("pip install componentize-py=={version} (from requirements.txt)"),
    );
    let mut words = build[2].split_whitespace();
    let tool = words.next().expect("the build command");
    run(
        Command::new(venv.join("bin").join(tool))
            .current_dir(&dir)
            .args(words),
        "the README's build command (componentize-py)",
    );
    check_and_test(&dir, name);
    eprintln!(
        "the Python scaffold test took {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn a_js_layer_is_scaffolded_built_with_jco_checked_and_tested() {
    let started = Instant::now();
    let name = "team-js";
    let (_work, dir) = scaffold(name, "js");
    let manifest = std::fs::read_to_string(dir.join("package.json")).expect("package.json");
    let jco = pinned(&manifest, "\"@bytecodealliance/jco\": ");
    let qjs = pinned(&manifest, "\"componentize-qjs\": ");
    for version in [jco, qjs] {
        assert!(
            version.chars().all(|c| c.is_ascii_digit() || c == '.'),
            "{version} is not an exact version"
        );
    }
    let readme = std::fs::read_to_string(dir.join("README.md")).expect("README.md");
    let prose = words(&readme);
    assert!(
        prose.contains(&format!("jco {jco}")) && prose.contains(&format!("componentize-qjs {qjs}")),
        "the README names other versions than package.json's ({jco}, {qjs})"
    );
    let build = readme_commands(&readme, "Build");
    assert_eq!(build, ["npm install", "npm run build"], "{readme}");

    // The README's steps, with npm's cache in target/ (offline when it
    // already holds every package).
    let cache = tools_dir().join("npm-cache");
    run(
        Command::new("npm")
            .current_dir(&dir)
            .args(["install", "--no-audit", "--no-fund", "--prefer-offline"])
            .arg("--cache")
            .arg(&cache),
        &format!("npm install (jco {jco}, componentize-qjs {qjs}; is Node.js with npm installed?)"),
    );
    run(
        Command::new("npm")
            .current_dir(&dir)
            .args(["run", "build"])
            .arg("--cache")
            .arg(&cache),
        "npm run build (jco componentize)",
    );
    check_and_test(&dir, name);
    eprintln!(
        "the JavaScript scaffold test took {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
