//! A policy scaffolded by `radwasm policy new --lang …` and built as its
//! author would: into a temporary directory outside the repository, with
//! the build tool the scaffold pins installed by the language's own package
//! manager, and the README's own build command.
//!
//! The tools are cached between runs under `target/policy-langs` (under
//! `CARGO_TARGET_DIR` if set): componentize-py in a virtual environment at
//! `venv/`, npm packages through the npm cache at `npm-cache/`. Only the
//! first run downloads. A tool that cannot be installed fails the caller
//! and says so: nothing here skips.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use crate::{output_text, repository};

/// A scaffold in a temporary directory, removed when this is dropped.
pub struct Scaffold {
    /// The policy's name, and its component's file stem.
    pub name: String,
    /// The scaffold's directory.
    pub dir: PathBuf,
    _work: tempfile::TempDir,
}

impl Scaffold {
    /// `radwasm policy new <name> --lang <lang>` with `binary`, into a
    /// fresh temporary directory outside the repository.
    pub fn new(binary: &Path, name: &str, lang: &str) -> Self {
        let work = tempfile::tempdir().expect("temporary directory");
        let dir = work.path().join(name);
        let repo = repository();
        assert!(
            !dir.starts_with(&repo),
            "the scaffold must be outside the repository"
        );
        let output = run(
            Command::new(binary)
                .args(["policy", "new", name, "--lang", lang, "--dir"])
                .arg(&dir),
            &format!("radwasm policy new --lang {lang}"),
        );
        for file in ["README.md", "wit/policy.wit", ".gitignore"] {
            assert!(
                dir.join(file).is_file(),
                "{file} missing: {}",
                output_text(&output)
            );
        }
        Scaffold {
            name: name.to_string(),
            dir,
            _work: work,
        }
    }

    /// The scaffold's README.
    pub fn readme(&self) -> String {
        std::fs::read_to_string(self.dir.join("README.md")).expect("README.md")
    }

    /// The component the build wrote, `<name>.wasm`.
    pub fn wasm(&self) -> PathBuf {
        self.dir.join(format!("{}.wasm", self.name))
    }

    /// Build a Python scaffold with the steps of its README's `Build`
    /// section, the virtual environment cached in `target/`; the
    /// component's bytes.
    pub fn build_python(&self) -> Vec<u8> {
        let build = readme_commands(&self.readme(), "Build");
        assert_eq!(
            build[..2],
            [
                "python3 -m venv .venv && . .venv/bin/activate".to_string(),
                "pip install -r requirements.txt".to_string(),
            ],
            "the README's build steps changed"
        );
        let venv = tools_dir().join("venv");
        if !venv.join("bin/pip").is_file() {
            run(
                Command::new("python3").args(["-m", "venv"]).arg(&venv),
                "python3 -m venv (is Python 3 with venv installed?)",
            );
        }
        run(
            Command::new(venv.join("bin/pip"))
                .current_dir(&self.dir)
                .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
                .arg("requirements.txt"),
            "pip install -r requirements.txt (componentize-py)",
        );
        let mut words = build[2].split_whitespace();
        let tool = words.next().expect("the build command");
        run(
            Command::new(venv.join("bin").join(tool))
                .current_dir(&self.dir)
                .args(words),
            "the README's build command (componentize-py)",
        );
        std::fs::read(self.wasm()).unwrap_or_else(|e| panic!("{}: {e}", self.wasm().display()))
    }

    /// Build a JavaScript scaffold with the steps of its README's `Build`
    /// section (`npm install`, `npm run build`), npm's cache in `target/`
    /// (offline when it already holds every package); the component's
    /// bytes.
    pub fn build_js(&self) -> Vec<u8> {
        let build = readme_commands(&self.readme(), "Build");
        assert_eq!(
            build,
            ["npm install", "npm run build"],
            "the README's build steps changed"
        );
        let cache = tools_dir().join("npm-cache");
        run(
            Command::new("npm")
                .current_dir(&self.dir)
                .args(["install", "--no-audit", "--no-fund", "--prefer-offline"])
                .arg("--cache")
                .arg(&cache),
            "npm install (is Node.js with npm installed?)",
        );
        run(
            Command::new("npm")
                .current_dir(&self.dir)
                .args(["run", "build"])
                .arg("--cache")
                .arg(&cache),
            "npm run build (jco componentize)",
        );
        std::fs::read(self.wasm()).unwrap_or_else(|e| panic!("{}: {e}", self.wasm().display()))
    }
}

/// Where the installed tools are cached between runs.
fn tools_dir() -> PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repository().join("target"))
        .join("policy-langs");
    std::fs::create_dir_all(&dir).expect("create target/policy-langs");
    dir
}

/// Run `command`, timing it; fail with `what` and its output unless it
/// succeeds.
pub fn run(command: &mut Command, what: &str) -> Output {
    let started = Instant::now();
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start {command:?}: {e}"));
    eprintln!("{what}: {:.1} s", started.elapsed().as_secs_f64());
    assert!(
        output.status.success(),
        "{what} failed ({command:?}):\n{}",
        output_text(&output)
    );
    output
}

/// The lines of the first fenced block after the heading `## {heading}`
/// of a README.
pub fn readme_commands(readme: &str, heading: &str) -> Vec<String> {
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
