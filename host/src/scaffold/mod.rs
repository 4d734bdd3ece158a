//! Policy scaffolds (what `radwasm policy new` writes; the command line is
//! `cli/policy_new.rs`): a policy layer that builds on its own, out of this
//! repository, into a component `radwasm policy check|test` accept,
//! in Rust (the default: one command, `cargo build --release`), Python
//! (componentize-py) or JavaScript (jco with its QuickJS backend). Every
//! language gets the same sample rule, the one of `guests/team-label-layer`,
//! and that layer's fixture cases.
//!
//! A Python or JavaScript scaffold carries the contract's WIT (`wit/`, as
//! `radwasm policy wit` writes it) and pins its build tool's version in the
//! language's own manifest (`requirements.txt`, `package.json`).
//!
//! The files are templates embedded in the binary (`templates/`), with the
//! crate name and the SDK's source substituted. The toolchain file and the
//! release profile are taken from this repository's own `rust-toolchain.toml`
//! and guest profile (root `Cargo.toml`) when the binary is built, so a
//! scaffold is built exactly as the policies shipped with radwasm are.
//!
//! The SDK is not on crates.io: the binary carries it. host/build/sdk.rs lists
//! the SDK crates' files and the WIT they bind to (`policy_sdk.rs` in
//! `OUT_DIR`), and by default `policy new` writes them under the scaffold's
//! `sdk/`, with the entries of this repository's `Cargo.lock` they reach, so
//! the scaffold builds with nothing but the binary and the Rust toolchain,
//! offline when cargo's cache holds the dependencies. [`SdkSource::Path`] (a
//! checkout, `--sdk-path`) or [`SdkSource::Git`] (`--sdk-git`, `--sdk-rev`)
//! take the SDK from elsewhere instead.

use std::path::Path;

use anyhow::Context;

mod sdk;

use sdk::TOOLCHAIN_FILE;
pub use sdk::{
    EMBEDDED_SDK_DIR, SDK_CRATES, SdkSource, embedded_sdk, embedded_sdk_files, release_profile,
};

/// The languages `policy new` scaffolds a layer in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// A crate over the Rust SDK (`Layer`, `export_layer!`).
    Rust,
    /// componentize-py.
    Python,
    /// jco, QuickJS backend, no WASI.
    Js,
}

impl Lang {
    /// The language's name, for people.
    pub fn label(self) -> &'static str {
        match self {
            Self::Rust => "Rust",
            Self::Python => "Python",
            Self::Js => "JavaScript",
        }
    }
}

/// `text`'s paragraphs (separated by a blank line) filled to `width`
/// columns, words never split.
fn wrap(text: &str, width: usize) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            let mut lines: Vec<String> = Vec::new();
            for word in paragraph.split_whitespace() {
                match lines.last_mut() {
                    Some(line) if line.len() + 1 + word.len() <= width => {
                        line.push(' ');
                        line.push_str(word);
                    }
                    _ => lines.push(word.to_string()),
                }
            }
            lines.join("\n")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            c if c.is_control() => quoted.push_str(&format!("\\u{:04X}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// Rust keywords (all editions, reserved ones included): cargo refuses them
/// as crate names.
const KEYWORDS: &[&str] = &[
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "crate",
    "do", "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl",
    "in", "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref",
    "return", "self", "static", "struct", "super", "trait", "true", "try", "type", "typeof",
    "unsafe", "unsized", "use", "virtual", "where", "while", "yield",
];

/// Names a policy crate cannot take: Rust's own libraries, the crates it
/// depends on, names Windows reserves for devices.
const RESERVED: &[&str] = &[
    "std",
    "core",
    "alloc",
    "proc_macro",
    "test",
    "radwasm_policy_sdk",
    "radwasm_policy_core",
    "radwasm_policy_model",
    "wit_bindgen",
    "serde",
    "serde_json",
    "con",
    "prn",
    "aux",
    "nul",
    "com1",
    "lpt1",
];

/// Longest name accepted (crates.io's limit).
const MAX_NAME_LEN: usize = 64;

/// Check that `name` is a usable crate name in kebab-case (`_` is accepted
/// too): lowercase ASCII letters, digits and single separators, starting with
/// a letter and ending with a letter or digit; not a keyword or a reserved
/// name.
pub fn validate_name(name: &str) -> anyhow::Result<()> {
    let problem = if name.is_empty() {
        Some("it is empty".to_string())
    } else if name.len() > MAX_NAME_LEN {
        Some(format!("it is longer than {MAX_NAME_LEN} characters"))
    } else if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '_'))
    {
        Some(format!(
            "{c:?} is not allowed (use lowercase letters, digits and -)"
        ))
    } else if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        Some("it must start with a letter".to_string())
    } else if name.ends_with(['-', '_']) {
        Some("it must end with a letter or a digit".to_string())
    } else if name.contains("--")
        || name.contains("__")
        || name.contains("-_")
        || name.contains("_-")
    {
        Some("separators must not follow each other".to_string())
    } else {
        let lib = lib_name(name);
        if KEYWORDS.contains(&lib.as_str()) {
            Some("it is a Rust keyword".to_string())
        } else if RESERVED.contains(&lib.as_str()) {
            Some(
                "that name is taken (a Rust library, a dependency, or a reserved file name)"
                    .to_string(),
            )
        } else {
            None
        }
    };
    match problem {
        None => Ok(()),
        Some(problem) => anyhow::bail!(
            "{name:?} is not a valid policy name: {problem}; use a crate name in kebab-case such as `team-label-guardrail`"
        ),
    }
}

/// The library's name (`-` becomes `_`): also the `.wasm` file's stem.
pub fn lib_name(name: &str) -> String {
    name.replace('-', "_")
}

/// Identifiers the sample `src/lib.rs` imports; the policy type must differ.
const SAMPLE_IMPORTS: &[&str] = &[
    "Layer",
    "Description",
    "PolicyError",
    "TemplateObservation",
    "TemplatePlan",
];

/// The policy type's name: the crate name in UpperCamelCase.
fn type_name(name: &str) -> String {
    let camel: String = name
        .split(['-', '_'])
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect();
    if SAMPLE_IMPORTS.contains(&camel.as_str()) {
        format!("{camel}Rules")
    } else {
        camel
    }
}

/// One file of a scaffold: its path in the crate and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaffoldFile {
    pub path: &'static str,
    pub text: String,
}

/// The scaffold's files for `name`, with the SDK from `source`.
pub fn render(name: &str, source: &SdkSource) -> Vec<ScaffoldFile> {
    let lib = lib_name(name);
    let type_name = type_name(name);
    let dependencies = source.dependencies();
    let release_profile = release_profile();
    let sdk_source = source.readme_text();
    let workspace_settings = source.workspace_settings();
    let wasm = wasm_path(name, Lang::Rust);
    let fill = |template: &str| {
        template
            .replace("{{crate_name}}", name)
            .replace("{{wasm}}", &wasm)
            .replace("{{lib_name}}", &lib)
            .replace("{{type_name}}", &type_name)
            .replace("{{sdk_dependencies}}", &dependencies)
            .replace("{{release_profile}}", &release_profile)
            .replace("{{sdk_source}}", &sdk_source)
            .replace("{{workspace_settings}}", workspace_settings)
    };
    let files: [(&'static str, &str); 6] = [
        ("Cargo.toml", include_str!("templates/Cargo.toml.tmpl")),
        ("rust-toolchain.toml", TOOLCHAIN_FILE),
        (
            ".cargo/config.toml",
            include_str!("templates/config.toml.tmpl"),
        ),
        (".gitignore", include_str!("templates/gitignore.tmpl")),
        ("src/lib.rs", include_str!("templates/lib.rs.tmpl")),
        ("README.md", include_str!("templates/README.md.tmpl")),
    ];
    files
        .into_iter()
        .chain(SAMPLES)
        .chain(CASES)
        .map(|(path, template)| ScaffoldFile {
            path,
            text: fill(template),
        })
        .collect()
}

/// The fixture cases of every scaffold: those of `guests/team-label-layer`,
/// the Rust layer with the same rule, whose messages every language's
/// sample satisfies (the refusal case matches the code `MissingTeamLabel`
/// and "no `team` label").
const CASES: [(&str, &str); 6] = [
    (
        "cases/01-template-without-team-label-is-refused.json",
        include_str!(
            "../../../guests/team-label-layer/cases/01-template-without-team-label-is-refused.json"
        ),
    ),
    (
        "cases/02-template-with-team-label-deploys-like-the-default.json",
        include_str!(
            "../../../guests/team-label-layer/cases/02-template-with-team-label-deploys-like-the-default.json"
        ),
    ),
    (
        "cases/03-deletion-of-a-labelled-template-removes-its-finalizer.json",
        include_str!(
            "../../../guests/team-label-layer/cases/03-deletion-of-a-labelled-template-removes-its-finalizer.json"
        ),
    ),
    (
        "cases/03a-deletion-of-an-unlabelled-template-is-not-refused.json",
        include_str!(
            "../../../guests/team-label-layer/cases/03a-deletion-of-an-unlabelled-template-is-not-refused.json"
        ),
    ),
    (
        "cases/04-adding-the-label-deploys-a-refused-template.json",
        include_str!(
            "../../../guests/team-label-layer/cases/04-adding-the-label-deploys-a-refused-template.json"
        ),
    ),
    (
        "cases/05-a-deployment-resource-is-decided-by-the-base.json",
        include_str!(
            "../../../guests/team-label-layer/cases/05-a-deployment-resource-is-decided-by-the-base.json"
        ),
    ),
];

/// The sample `DeploymentTemplate`s of every scaffold: the template of the
/// cases, which deploys through Radius, with and without the `team` label
/// (`{{wasm}}` is the built component, in the comments saying how to run
/// them with `radwasm dev`).
const SAMPLES: [(&str, &str); 2] = [
    (
        "sample/app.yaml",
        include_str!("templates/sample/app.yaml.tmpl"),
    ),
    (
        "sample/app-without-team.yaml",
        include_str!("templates/sample/app-without-team.yaml.tmpl"),
    ),
];

/// Where the build of a scaffold in `lang` writes the component, from its
/// directory.
pub fn wasm_path(name: &str, lang: Lang) -> String {
    match lang {
        Lang::Rust => format!("target/wasm32-wasip2/release/{}.wasm", lib_name(name)),
        Lang::Python | Lang::Js => format!("{name}.wasm"),
    }
}

/// The contract's current WIT, where a Python or JavaScript scaffold keeps
/// it (the file `radwasm policy wit` writes as `policy.wit`).
const SCAFFOLD_WIT: (&str, &str) = ("wit/policy.wit", crate::policy::wit::CURRENT);

/// The files of a scaffold in `lang` other than Rust, for `name`.
pub fn render_other(name: &str, lang: Lang) -> Vec<ScaffoldFile> {
    let files: Vec<(&'static str, &str)> = match lang {
        Lang::Rust => unreachable!("a Rust scaffold is rendered by `render`"),
        Lang::Python => vec![
            ("app.py", include_str!("templates/python/app.py.tmpl")),
            (
                "requirements.txt",
                include_str!("templates/python/requirements.txt.tmpl"),
            ),
            ("README.md", include_str!("templates/python/README.md.tmpl")),
            (
                ".gitignore",
                include_str!("templates/python/gitignore.tmpl"),
            ),
        ],
        Lang::Js => vec![
            ("app.js", include_str!("templates/js/app.js.tmpl")),
            (
                "package.json",
                include_str!("templates/js/package.json.tmpl"),
            ),
            ("README.md", include_str!("templates/js/README.md.tmpl")),
            (".gitignore", include_str!("templates/js/gitignore.tmpl")),
        ],
    };
    let wasm = wasm_path(name, lang);
    files
        .into_iter()
        .chain(SAMPLES)
        .map(|(path, template)| ScaffoldFile {
            path,
            text: template
                .replace("{{crate_name}}", name)
                .replace("{{wasm}}", &wasm),
        })
        .chain(
            std::iter::once(SCAFFOLD_WIT).map(|(path, text)| ScaffoldFile {
                path,
                text: text.to_string(),
            }),
        )
        .chain(CASES.into_iter().map(|(path, text)| ScaffoldFile {
            path,
            text: text.to_string(),
        }))
        .collect()
}

/// The commands that build, check and test a scaffold in `lang`, run in
/// its directory (the README's, in its sections `Build` and `Check and
/// test`).
pub fn next_steps(name: &str, lang: Lang) -> Vec<String> {
    let wasm = wasm_path(name, lang);
    let build: &[&str] = match lang {
        Lang::Rust => &["cargo build --release"],
        Lang::Python => &[
            "python3 -m venv .venv && . .venv/bin/activate",
            "pip install -r requirements.txt",
        ],
        Lang::Js => &["npm install", "npm run build"],
    };
    let mut steps: Vec<String> = build.iter().map(|s| s.to_string()).collect();
    if lang == Lang::Python {
        steps.push(format!(
            "componentize-py -d wit -w layer componentize --stub-wasi app -o {wasm}"
        ));
    }
    steps.push(format!("radwasm policy check {wasm}"));
    steps.push(format!("radwasm policy test {wasm} cases/"));
    steps
}

/// Refuse a path that is a file, or a directory with anything in it.
fn ensure_empty_or_absent(dir: &Path) -> anyhow::Result<()> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            anyhow::ensure!(
                entries.next().is_none(),
                "{} is not empty; refusing to write a policy crate into it (give a new or empty directory with --dir)",
                dir.display()
            );
            Ok(())
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(_) if dir.exists() => anyhow::bail!(
            "{} exists and is not a directory; refusing to overwrite it",
            dir.display()
        ),
        Err(error) => Err(error).with_context(|| format!("{}: cannot read it", dir.display())),
    }
}

/// Write a file of the scaffold, creating its directory.
fn write_file(path: &Path, contents: &[u8]) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("{}: cannot create the directory", parent.display()))?;
    }
    std::fs::write(path, contents)
        .with_context(|| format!("{}: cannot write the file", path.display()))
}

/// Write the scaffold of the layer `name` in `lang` into `dir` (new, or
/// empty), with the SDK from `source` for a Rust layer; what was written,
/// for people (a path each, the embedded SDK as one line).
pub fn write(
    name: &str,
    lang: Lang,
    source: &SdkSource,
    dir: &Path,
) -> anyhow::Result<Vec<String>> {
    validate_name(name)?;
    anyhow::ensure!(
        lang == Lang::Rust || *source == SdkSource::Embedded,
        "--sdk-path and --sdk-git choose where a Rust layer takes the SDK from; a {} layer needs no SDK",
        lang.label()
    );
    ensure_empty_or_absent(dir)?;
    let files = match lang {
        Lang::Rust => render(name, source),
        lang => render_other(name, lang),
    };
    for file in &files {
        write_file(&dir.join(file.path), file.text.as_bytes())?;
    }
    let mut written: Vec<String> = files.iter().map(|file| file.path.to_string()).collect();
    match source {
        SdkSource::Embedded if lang != Lang::Rust => {}
        SdkSource::Embedded => {
            let mut count = 0;
            for (path, contents) in embedded_sdk_files() {
                write_file(&dir.join(path), contents)?;
                count += 1;
            }
            write_file(&dir.join("Cargo.lock"), embedded_sdk::SDK_LOCK.as_bytes())?;
            written.push("Cargo.lock".to_string());
            let crates: Vec<&str> = embedded_sdk::SDK_CRATE_DIRS
                .iter()
                .map(|(name, _)| *name)
                .collect();
            written.push(format!(
                "{EMBEDDED_SDK_DIR}/ (the policy SDK of radwasm {}: {}, the WIT they bind to; {count} files)",
                env!("CARGO_PKG_VERSION"),
                crates.join(", ")
            ));
        }
        SdkSource::Path(root) => {
            let lock = root.join("Cargo.lock");
            if lock.is_file() {
                std::fs::copy(&lock, dir.join("Cargo.lock"))
                    .with_context(|| format!("copy {} into {}", lock.display(), dir.display()))?;
                written.push("Cargo.lock".to_string());
            }
        }
        SdkSource::Git { .. } => {}
    }
    Ok(written)
}

#[cfg(test)]
mod tests;
