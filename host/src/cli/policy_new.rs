//! `radwasm policy new`: scaffold a policy layer that builds on its own, out
//! of this repository, into a component `radwasm policy check|test` accept,
//! in Rust (the default: one command, `cargo build --release`), Python
//! (componentize-py) or JavaScript (jco with its QuickJS backend). Every
//! language gets the same sample rule, the one of `guests/team-label-layer`,
//! and that layer's fixture cases.
//!
//! A Python or JavaScript scaffold carries the contract's WIT (`wit/`, as
//! `radwasm policy wit` writes it) and pins its build tool's version in the
//! language's own manifest (`requirements.txt`, `package.json`).
//!
//! The files are templates embedded in the binary (`scaffold/`), with the
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
//! offline when cargo's cache holds the dependencies. `--sdk-path` (a checkout) or `--sdk-git` (a git
//! URL, optionally `--sdk-rev`) take the SDK from elsewhere instead.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

#[derive(Debug, Args)]
pub struct NewArgs {
    /// The policy's name, in kebab-case (`team-label-guardrail`). In Rust
    /// the component is built as `<name with _ for ->.wasm`, in Python and
    /// JavaScript as `<name>.wasm`.
    pub name: String,
    /// The language to write the layer in.
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    pub lang: Lang,
    /// Directory to create (default `./<name>`); if it exists it must be empty.
    #[arg(long, value_name = "PATH")]
    pub dir: Option<PathBuf>,
    /// Instead of the SDK this binary carries: a checkout of the radwasm
    /// repository, whose `guests/` are used as path dependencies, and whose
    /// `Cargo.lock` is copied so the build uses the dependency versions the
    /// SDK is tested with.
    #[arg(long, value_name = "PATH", conflicts_with = "sdk_git")]
    pub sdk_path: Option<PathBuf>,
    /// Instead of the SDK this binary carries: the git URL of the radwasm
    /// repository, from which cargo fetches the SDK.
    #[arg(long, value_name = "URL")]
    pub sdk_git: Option<String>,
    /// With `--sdk-git`: the commit (or tag) to build against; without it,
    /// the repository's default branch.
    #[arg(long, value_name = "REV", requires = "sdk_git")]
    pub sdk_rev: Option<String>,
}

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
    fn label(self) -> &'static str {
        match self {
            Self::Rust => "Rust",
            Self::Python => "Python",
            Self::Js => "JavaScript",
        }
    }
}

/// Where the scaffold's Cargo.toml takes the SDK from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SdkSource {
    /// The SDK this binary carries, written into the scaffold's `sdk/`
    /// (the default).
    Embedded,
    /// A radwasm checkout (absolute path).
    Path(PathBuf),
    /// A git repository, at a revision or its default branch.
    Git { url: String, rev: Option<String> },
}

/// The SDK crates a policy depends on, and their directories in a checkout.
const SDK_CRATES: [(&str, &str); 2] = [
    ("radwasm-policy-sdk", "guests/policy-sdk"),
    ("radwasm-policy-core", "guests/policy-core"),
];

impl SdkSource {
    /// From the command line; a path must be a radwasm checkout.
    pub fn from_args(args: &NewArgs) -> anyhow::Result<Self> {
        match (&args.sdk_path, &args.sdk_git) {
            (Some(path), None) => {
                let absolute = std::fs::canonicalize(path)
                    .with_context(|| format!("--sdk-path {}: no such directory", path.display()))?;
                for (name, dir) in SDK_CRATES {
                    anyhow::ensure!(
                        absolute.join(dir).join("Cargo.toml").is_file(),
                        "--sdk-path {}: not a checkout of the radwasm repository (no {dir}/Cargo.toml, the crate {name})",
                        path.display()
                    );
                }
                Ok(Self::Path(absolute))
            }
            (None, Some(url)) => {
                anyhow::ensure!(
                    !url.is_empty() && !url.chars().any(char::is_whitespace),
                    "--sdk-git {url:?}: not a git URL"
                );
                if let Some(rev) = &args.sdk_rev {
                    anyhow::ensure!(
                        !rev.is_empty() && !rev.chars().any(char::is_whitespace),
                        "--sdk-rev {rev:?}: not a git revision"
                    );
                }
                Ok(Self::Git {
                    url: url.clone(),
                    rev: args.sdk_rev.clone(),
                })
            }
            (None, None) => Ok(Self::Embedded),
            (Some(_), Some(_)) => anyhow::bail!("--sdk-path and --sdk-git exclude each other"),
        }
    }

    /// The `[dependencies]` lines for the SDK crates.
    fn dependencies(&self) -> String {
        SDK_CRATES
            .iter()
            .map(|(name, dir)| match self {
                Self::Embedded => format!(
                    "{name} = {{ path = {} }}\n",
                    toml_string(&format!("{EMBEDDED_SDK_DIR}/{dir}"))
                ),
                Self::Path(root) => format!(
                    "{name} = {{ path = {} }}\n",
                    toml_string(&root.join(dir).display().to_string())
                ),
                Self::Git { url, rev: None } => {
                    format!("{name} = {{ git = {} }}\n", toml_string(url))
                }
                Self::Git {
                    url,
                    rev: Some(rev),
                } => format!(
                    "{name} = {{ git = {}, rev = {} }}\n",
                    toml_string(url),
                    toml_string(rev)
                ),
            })
            .collect::<String>()
            .trim_end()
            .to_string()
    }

    /// What the scaffold's `[workspace]` table says besides being a root.
    fn workspace_settings(&self) -> &'static str {
        match self {
            Self::Embedded => {
                "\n# sdk/ is a workspace of its own (its crates inherit from sdk/Cargo.toml):\n\
                 # used through path dependencies, never a member of this one.\n\
                 exclude = [\"sdk\"]"
            }
            Self::Path(_) | Self::Git { .. } => "",
        }
    }

    /// The README's paragraph on where the SDK comes from.
    fn readme_text(&self) -> String {
        match self {
            Self::Embedded => wrap(
                &format!(
                    "`sdk/` holds the policy SDK exactly as the `radwasm` binary that created \
                     this crate (version {version}) was built with it: the crates {crates}, and \
                     the contract's WIT files they bind to. `Cargo.toml` uses it through path \
                     dependencies. `Cargo.lock` started as the entries of radwasm's own lock \
                     file that the SDK reaches, so the build uses the dependency versions the \
                     SDK is built and tested with, needs no radwasm checkout, and needs no \
                     network for crates already in cargo's cache (`cargo build --release \
                     --offline`).\n\n\
                     Keep `sdk/` under version control with the policy, and leave it as \
                     written (it is generated). To build against the SDK of another radwasm \
                     release, replace `sdk/` with the one that release's `radwasm policy new` \
                     writes. Build against the contract of the controller that will run the \
                     policy: a policy built against a newer contract is refused when it is \
                     loaded.",
                    crates = embedded_crate_names(),
                    version = env!("CARGO_PKG_VERSION"),
                ),
                76,
            ),
            Self::Path(root) => format!(
                "`Cargo.toml` uses the SDK crates from the radwasm checkout at `{}`\n\
                 (`radwasm policy new --sdk-path`); if the checkout moves, change their\n\
                 paths. `Cargo.lock` started as a copy of the checkout's, so the build\n\
                 uses the dependency versions the SDK is tested with (and needs no\n\
                 download for crates already in cargo's cache).",
                root.display()
            ),
            Self::Git {
                url,
                rev: Some(rev),
            } => format!(
                "`Cargo.toml` fetches the SDK crates from `{url}` at revision `{rev}`\n\
                 (`radwasm policy new --sdk-git --sdk-rev`). Change `rev` to move to\n\
                 another version of the SDK; use the one matching the radwasm controller\n\
                 that will run the policy."
            ),
            Self::Git { url, rev: None } => format!(
                "`Cargo.toml` fetches the SDK crates from `{url}`, its default branch\n\
                 (`radwasm policy new --sdk-git`); `Cargo.lock` records the commit the\n\
                 first build used. Pin a commit with `rev = \"…\"` on both dependencies to\n\
                 choose the version deliberately (the one matching the radwasm controller\n\
                 that will run the policy)."
            ),
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

/// The policy SDK this binary carries, generated by host/build/sdk.rs:
/// `SDK_FILES` (each file's path under the scaffold's `sdk/`, and its
/// contents), `SDK_CRATE_DIRS` (each crate's name and directory) and
/// `SDK_LOCK` (the entries of this repository's `Cargo.lock` the crates
/// reach, written as the scaffold's `Cargo.lock`: its first build uses the
/// versions the SDK is built and tested with).
mod embedded_sdk {
    include!(concat!(env!("OUT_DIR"), "/policy_sdk.rs"));
}

/// Where the embedded SDK goes in a scaffold.
const EMBEDDED_SDK_DIR: &str = "sdk";

/// The embedded SDK's crate names, for people: "`a`, `b` and `c`".
fn embedded_crate_names() -> String {
    let names: Vec<String> = embedded_sdk::SDK_CRATE_DIRS
        .iter()
        .map(|(name, _)| format!("`{name}`"))
        .collect();
    match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The embedded SDK's files, as paths in the scaffold and contents.
pub fn embedded_sdk_files() -> impl Iterator<Item = (String, &'static [u8])> {
    embedded_sdk::SDK_FILES
        .iter()
        .map(|(path, contents)| (format!("{EMBEDDED_SDK_DIR}/{path}"), *contents))
}

/// This repository's workspace manifest, for its guest profile.
const WORKSPACE_MANIFEST: &str = include_str!("../../../Cargo.toml");
/// This repository's toolchain file, copied as is.
const TOOLCHAIN_FILE: &str = include_str!("../../../rust-toolchain.toml");

/// `key = value` lines of one `[section]` of a TOML file, in order
/// (comments and blank lines left out).
fn section_entries<'a>(manifest: &'a str, section: &str) -> Vec<(&'a str, &'a str)> {
    let header = format!("[{section}]");
    let mut inside = false;
    let mut entries = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == header;
        } else if inside
            && !line.starts_with('#')
            && let Some((key, value)) = line.split_once('=')
        {
            entries.push((key.trim(), value.trim()));
        }
    }
    entries
}

/// The settings of the workspace's `guest` profile with what it inherits
/// from `release` resolved, as `key = value` lines for a `[profile.release]`.
pub fn release_profile() -> String {
    let mut settings: Vec<(&str, &str)> = section_entries(WORKSPACE_MANIFEST, "profile.release");
    for (key, value) in section_entries(WORKSPACE_MANIFEST, "profile.guest") {
        if key == "inherits" {
            continue;
        }
        match settings.iter_mut().find(|(k, _)| *k == key) {
            Some(setting) => setting.1 = value,
            None => settings.push((key, value)),
        }
    }
    settings
        .iter()
        .map(|(key, value)| format!("{key} = {value}"))
        .collect::<Vec<_>>()
        .join("\n")
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
    let fill = |template: &str| {
        template
            .replace("{{crate_name}}", name)
            .replace("{{lib_name}}", &lib)
            .replace("{{type_name}}", &type_name)
            .replace("{{sdk_dependencies}}", &dependencies)
            .replace("{{release_profile}}", &release_profile)
            .replace("{{sdk_source}}", &sdk_source)
            .replace("{{workspace_settings}}", workspace_settings)
    };
    let files: [(&'static str, &str); 6] = [
        ("Cargo.toml", include_str!("scaffold/Cargo.toml.tmpl")),
        ("rust-toolchain.toml", TOOLCHAIN_FILE),
        (
            ".cargo/config.toml",
            include_str!("scaffold/config.toml.tmpl"),
        ),
        (".gitignore", include_str!("scaffold/gitignore.tmpl")),
        ("src/lib.rs", include_str!("scaffold/lib.rs.tmpl")),
        ("README.md", include_str!("scaffold/README.md.tmpl")),
    ];
    files
        .into_iter()
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

/// The contract's current WIT, where a Python or JavaScript scaffold keeps
/// it (the file `radwasm policy wit` writes as `policy.wit`).
const SCAFFOLD_WIT: (&str, &str) = ("wit/policy.wit", crate::policy::wit::CURRENT);

/// The files of a scaffold in `lang` other than Rust, for `name`.
pub fn render_other(name: &str, lang: Lang) -> Vec<ScaffoldFile> {
    let files: Vec<(&'static str, &str)> = match lang {
        Lang::Rust => unreachable!("a Rust scaffold is rendered by `render`"),
        Lang::Python => vec![
            ("app.py", include_str!("scaffold/python/app.py.tmpl")),
            (
                "requirements.txt",
                include_str!("scaffold/python/requirements.txt.tmpl"),
            ),
            ("README.md", include_str!("scaffold/python/README.md.tmpl")),
            (".gitignore", include_str!("scaffold/python/gitignore.tmpl")),
        ],
        Lang::Js => vec![
            ("app.js", include_str!("scaffold/js/app.js.tmpl")),
            (
                "package.json",
                include_str!("scaffold/js/package.json.tmpl"),
            ),
            ("README.md", include_str!("scaffold/js/README.md.tmpl")),
            (".gitignore", include_str!("scaffold/js/gitignore.tmpl")),
        ],
    };
    files
        .into_iter()
        .map(|(path, template)| ScaffoldFile {
            path,
            text: template.replace("{{crate_name}}", name),
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
fn next_steps(name: &str, lang: Lang) -> Vec<String> {
    let (build, wasm): (&[&str], String) = match lang {
        Lang::Rust => (
            &["cargo build --release"],
            format!("target/wasm32-wasip2/release/{}.wasm", lib_name(name)),
        ),
        Lang::Python => (
            &[
                "python3 -m venv .venv && . .venv/bin/activate",
                "pip install -r requirements.txt",
            ],
            format!("{name}.wasm"),
        ),
        Lang::Js => (&["npm install", "npm run build"], format!("{name}.wasm")),
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

pub fn run(args: &NewArgs) -> anyhow::Result<ExitCode> {
    validate_name(&args.name)?;
    let source = SdkSource::from_args(args)?;
    anyhow::ensure!(
        args.lang == Lang::Rust || source == SdkSource::Embedded,
        "--sdk-path and --sdk-git choose where a Rust layer takes the SDK from; a {} layer needs no SDK",
        args.lang.label()
    );
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    ensure_empty_or_absent(&dir)?;
    let files = match args.lang {
        Lang::Rust => render(&args.name, &source),
        lang => render_other(&args.name, lang),
    };
    for file in &files {
        write_file(&dir.join(file.path), file.text.as_bytes())?;
    }
    let mut written: Vec<String> = files.iter().map(|file| file.path.to_string()).collect();
    match &source {
        SdkSource::Embedded if args.lang != Lang::Rust => {}
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
    println!(
        "created the {} policy layer {} in {}:",
        args.lang.label(),
        args.name,
        dir.display()
    );
    for path in written {
        println!("  {path}");
    }
    println!();
    println!("build, check and test it:");
    println!("  cd {}", dir.display());
    for step in next_steps(&args.name, args.lang) {
        println!("  {step}");
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kebab_case_crate_names_are_accepted() {
        for name in [
            "my-policy",
            "team-label-guardrail",
            "p",
            "guard2",
            "snake_case_too",
        ] {
            validate_name(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn names_that_are_not_crate_names_are_refused_with_the_reason() {
        for (name, reason) in [
            ("", "empty"),
            ("My-Policy", "'M' is not allowed"),
            ("my policy", "' ' is not allowed"),
            ("../escape", "'.' is not allowed"),
            ("2fast", "start with a letter"),
            ("-x", "start with a letter"),
            ("trailing-", "end with a letter"),
            ("double--dash", "separators"),
            ("fn", "keyword"),
            ("async", "keyword"),
            ("self", "keyword"),
            ("std", "taken"),
            ("radwasm-policy-sdk", "taken"),
            ("con", "taken"),
            (&"x".repeat(65), "longer than 64"),
        ] {
            let error = validate_name(name).expect_err(name).to_string();
            assert!(error.contains(reason), "{name}: {error}");
        }
    }

    #[test]
    fn wrap_fills_paragraphs_without_splitting_words() {
        assert_eq!(
            wrap("aa bb  cc\ndd eeeeeeee\n\nff", 8),
            "aa bb cc\ndd\neeeeeeee\n\nff"
        );
    }

    #[test]
    fn the_policy_type_is_the_name_in_camel_case_and_never_shadows_an_import() {
        assert_eq!(type_name("team-label-guardrail"), "TeamLabelGuardrail");
        assert_eq!(type_name("a_b2-c"), "AB2C");
        assert_eq!(type_name("layer"), "LayerRules");
        assert_eq!(type_name("policy-error"), "PolicyErrorRules");
    }

    #[test]
    fn the_release_profile_is_the_guest_profile_with_inheritance_resolved() {
        let profile = release_profile();
        let guest = section_entries(WORKSPACE_MANIFEST, "profile.guest");
        assert!(
            !guest.is_empty(),
            "the root Cargo.toml has no [profile.guest]"
        );
        for (key, value) in guest {
            if key != "inherits" {
                assert!(
                    profile
                        .lines()
                        .any(|line| line == format!("{key} = {value}")),
                    "{key} = {value} missing from\n{profile}"
                );
            }
        }
        assert!(!profile.contains("inherits"), "{profile}");
        // What guests need whatever the root says about release.
        for needed in ["lto = true", "codegen-units = 1", "panic = \"abort\""] {
            assert!(profile.lines().any(|l| l == needed), "{needed}: {profile}");
        }
        let debug: Vec<&str> = profile
            .lines()
            .filter(|l| l.starts_with("debug "))
            .collect();
        assert!(debug.len() <= 1, "{profile}");
    }

    #[test]
    fn the_scaffold_uses_the_rustflags_host_build_rs_builds_guests_with() {
        let build_rs = include_str!("../../build/main.rs");
        let flags = build_rs
            .lines()
            .find_map(|line| line.strip_prefix("const GUEST_RUSTFLAGS: &str = "))
            .expect("GUEST_RUSTFLAGS in host/build/main.rs")
            .trim_end_matches(';')
            .trim_matches('"')
            .split("\\x1f")
            .map(|flag| format!("{flag:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        let config = include_str!("scaffold/config.toml.tmpl");
        assert!(
            config.contains(&format!("rustflags = [{flags}]")),
            "scaffold/config.toml.tmpl's rustflags differ from host/build/main.rs's GUEST_RUSTFLAGS ({flags})"
        );
    }

    #[test]
    fn every_placeholder_is_filled_and_paths_are_toml_strings() {
        let sources = [
            SdkSource::Path(PathBuf::from("/checkouts/rad \"wasm\"\\x")),
            SdkSource::Embedded,
            SdkSource::Git {
                url: "https://git.example.com/radwasm.git".into(),
                rev: Some("0123abc".into()),
            },
            SdkSource::Git {
                url: "https://git.example.com/radwasm.git".into(),
                rev: None,
            },
        ];
        for source in &sources {
            let files = render("team-guard", source);
            for file in &files {
                assert!(!file.text.contains("{{"), "{}: {}", file.path, file.text);
            }
            let manifest = &files.iter().find(|f| f.path == "Cargo.toml").unwrap().text;
            assert!(manifest.contains("name = \"team-guard\""), "{manifest}");
            assert!(manifest.contains("crate-type = [\"cdylib\"]"), "{manifest}");
            assert!(manifest.contains("\n[workspace]\n"), "{manifest}");
            let lib = &files.iter().find(|f| f.path == "src/lib.rs").unwrap().text;
            assert!(lib.contains("struct TeamGuard;"), "{lib}");
            assert!(lib.contains("export_layer!(TeamGuard)"), "{lib}");
            let readme = &files.iter().find(|f| f.path == "README.md").unwrap().text;
            assert!(readme.contains("release/team_guard.wasm"), "{readme}");
        }
        let manifest = &render("p", &sources[0])[0].text;
        assert!(
            manifest.contains(
                r#"radwasm-policy-sdk = { path = "/checkouts/rad \"wasm\"\\x/guests/policy-sdk" }"#
            ),
            "{manifest}"
        );
        let manifest = &render("p", &sources[2])[0].text;
        assert!(
            manifest.contains(
                r#"radwasm-policy-core = { git = "https://git.example.com/radwasm.git", rev = "0123abc" }"#
            ),
            "{manifest}"
        );
        assert!(!manifest.contains("exclude"), "{manifest}");
        let manifest = &render("p", &sources[1])[0].text;
        for (name, dir) in SDK_CRATES {
            assert!(
                manifest.contains(&format!("{name} = {{ path = \"sdk/{dir}\" }}")),
                "{manifest}"
            );
        }
        assert!(
            manifest.contains("\n[workspace]\n#") && manifest.contains("\nexclude = [\"sdk\"]\n"),
            "{manifest}"
        );
    }

    /// The repository's root, where the embedded SDK comes from.
    fn repository() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("host/ sits inside the repository")
            .to_path_buf()
    }

    fn embedded(path: &str) -> Option<&'static [u8]> {
        embedded_sdk::SDK_FILES
            .iter()
            .find(|(embedded, _)| *embedded == path)
            .map(|(_, contents)| *contents)
    }

    /// Every file under `dir` (relative to the repository), but the
    /// directories of a crate's own tests, benchmarks and examples.
    fn files_on_disk(dir: &str) -> Vec<String> {
        fn walk(root: &Path, relative: &str, found: &mut Vec<String>) {
            for entry in std::fs::read_dir(root.join(relative)).expect("read the directory") {
                let entry = entry.expect("directory entry");
                let name = entry.file_name().to_string_lossy().into_owned();
                let inner = format!("{relative}/{name}");
                if entry.file_type().expect("file type").is_dir() {
                    walk(root, &inner, found);
                } else {
                    found.push(inner);
                }
            }
        }
        let root = repository();
        let mut found = Vec::new();
        for entry in std::fs::read_dir(root.join(dir)).expect("read the crate") {
            let entry = entry.expect("directory entry");
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().expect("file type").is_dir() {
                if !["tests", "benches", "examples", "target"].contains(&name.as_str()) {
                    walk(&root, &format!("{dir}/{name}"), &mut found);
                }
            } else {
                found.push(format!("{dir}/{name}"));
            }
        }
        found
    }

    #[test]
    fn the_embedded_sdk_is_every_source_file_of_its_crates_as_in_the_repository() {
        let crate_dirs: Vec<&str> = embedded_sdk::SDK_CRATE_DIRS
            .iter()
            .map(|(_, dir)| *dir)
            .collect();
        for (name, dir) in SDK_CRATES {
            assert!(crate_dirs.contains(&dir), "{name} ({dir}) is not embedded");
        }
        let root = repository();
        for dir in &crate_dirs {
            let files = files_on_disk(dir);
            assert!(
                files.iter().any(|f| f.ends_with("/src/lib.rs")),
                "{dir}: {files:?}"
            );
            for file in files {
                let on_disk = std::fs::read(root.join(&file)).expect("read");
                let contents = embedded(&file).unwrap_or_else(|| {
                    panic!("{file} is not embedded: host/build/sdk.rs misses it")
                });
                assert!(contents == on_disk, "{file}: embedded as it is not on disk");
            }
        }
        // And nothing else: every embedded file but the generated manifest
        // is a file of the repository.
        for (path, contents) in embedded_sdk::SDK_FILES {
            if *path == "Cargo.toml" {
                continue;
            }
            let on_disk = std::fs::read(root.join(path))
                .unwrap_or_else(|e| panic!("{path} is embedded but not in the repository: {e}"));
            assert!(*contents == on_disk, "{path}");
            assert!(
                !path.contains("/tests/") && !path.contains("/target/"),
                "{path} is embedded"
            );
        }
    }

    #[test]
    fn the_embedded_sdk_holds_the_wit_its_bindings_read() {
        // The directory given to `wit_bindgen::generate!`, relative to the
        // SDK crate, must resolve inside the embedded layout to a directory
        // holding every `*.wit` the repository has there.
        let lib = std::str::from_utf8(embedded("guests/policy-sdk/src/lib.rs").expect("lib.rs"))
            .expect("UTF-8");
        let generate = lib
            .split("wit_bindgen::generate!")
            .nth(1)
            .expect("the SDK calls wit_bindgen::generate!");
        let wit_path = generate
            .split_once("path:")
            .and_then(|(_, rest)| rest.split('"').nth(1))
            .expect("generate! names its WIT path");
        let mut parts: Vec<&str> = "guests/policy-sdk".split('/').collect();
        for part in wit_path.split('/') {
            match part {
                ".." => {
                    parts.pop().expect("inside the SDK's layout");
                }
                "." | "" => {}
                part => parts.push(part),
            }
        }
        let wit_dir = parts.join("/");
        assert_eq!(wit_dir, "wit", "the SDK binds to another directory");
        let mut wits = 0;
        for entry in std::fs::read_dir(repository().join(&wit_dir)).expect("wit/") {
            let entry = entry.expect("entry");
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".wit") {
                let path = format!("{wit_dir}/{name}");
                let contents = embedded(&path).unwrap_or_else(|| panic!("{path} is not embedded"));
                assert!(
                    contents == std::fs::read(entry.path()).expect("read"),
                    "{path}"
                );
                wits += 1;
            }
        }
        assert!(wits > 0);
    }

    #[test]
    fn the_embedded_sdk_manifest_supplies_everything_its_crates_inherit() {
        let manifest =
            std::str::from_utf8(embedded("Cargo.toml").expect("sdk/Cargo.toml")).expect("UTF-8");
        let package = section_entries(manifest, "workspace.package");
        for key in ["version", "edition", "rust-version"] {
            let root = section_entries(WORKSPACE_MANIFEST, "workspace.package");
            let value = root.iter().find(|(k, _)| *k == key).expect(key).1;
            assert!(package.contains(&(key, value)), "{key}: {manifest}");
        }
        let dependencies = section_entries(manifest, "workspace.dependencies");
        let crate_dirs: Vec<&str> = embedded_sdk::SDK_CRATE_DIRS
            .iter()
            .map(|(_, dir)| *dir)
            .collect();
        for (name, dir) in embedded_sdk::SDK_CRATE_DIRS {
            assert!(
                manifest.contains(&format!("\"{dir}\"")),
                "{dir} is not a member: {manifest}"
            );
            let crate_manifest = std::str::from_utf8(
                embedded(&format!("{dir}/Cargo.toml")).expect("the crate's Cargo.toml"),
            )
            .expect("UTF-8");
            for line in crate_manifest.lines() {
                let Some((key, _)) = line.split_once('=') else {
                    continue;
                };
                let key = key.trim();
                let inherited = match key.strip_suffix(".workspace") {
                    Some(key) => key,
                    None if line.contains("workspace = true") => key,
                    None => continue,
                };
                let supplied = package.iter().any(|(k, _)| *k == inherited)
                    || dependencies.iter().any(|(k, _)| *k == inherited);
                assert!(
                    supplied,
                    "{name}: {inherited} is not supplied by\n{manifest}"
                );
            }
        }
        // Path dependencies point at embedded crates only.
        for (name, value) in dependencies {
            if let Some((_, path)) = value.split_once("path = \"") {
                let path = path.split('"').next().expect("quoted");
                assert!(crate_dirs.contains(&path), "{name} = {value}");
            }
        }
        assert!(
            !manifest.contains("[profile"),
            "profiles belong to the policy's manifest"
        );
    }

    #[test]
    fn the_embedded_lock_is_the_repositorys_cut_to_what_the_sdk_reaches() {
        let blocks: Vec<&str> = embedded_sdk::SDK_LOCK
            .split("\n[[package]]\n")
            .skip(1)
            .collect();
        let repository_lock =
            std::fs::read_to_string(repository().join("Cargo.lock")).expect("Cargo.lock");
        let field = |block: &str, key: &str| -> String {
            block
                .lines()
                .find_map(|line| line.strip_prefix(&format!("{key} = ")))
                .unwrap_or_else(|| panic!("no {key} in {block}"))
                .trim_matches('"')
                .to_string()
        };
        let packages: Vec<(String, String)> = blocks
            .iter()
            .map(|block| (field(block, "name"), field(block, "version")))
            .collect();
        for block in &blocks {
            assert!(
                repository_lock.contains(&format!("[[package]]\n{block}")),
                "not the repository's entry: {block}"
            );
            // Every dependency ("name" or "name version") is there too.
            if let Some((_, list)) = block.split_once("dependencies = [\n") {
                for dependency in list.lines().take_while(|line| *line != "]") {
                    let dependency = dependency.trim().trim_end_matches(',').trim_matches('"');
                    let mut words = dependency.split(' ');
                    let name = words.next().expect("a name");
                    let version = words.next();
                    assert!(
                        packages
                            .iter()
                            .any(|(n, v)| n == name && version.is_none_or(|version| version == v)),
                        "{dependency} is missing from the embedded lock"
                    );
                }
            }
        }
        for (name, _) in embedded_sdk::SDK_CRATE_DIRS {
            assert!(packages.iter().any(|(n, _)| n == name), "{name}");
        }
        for host_only in ["radwasm", "wasmtime", "kube"] {
            assert!(
                !packages.iter().any(|(n, _)| n == host_only),
                "{host_only} is in the SDK's lock"
            );
        }
    }

    #[test]
    fn python_and_js_scaffolds_carry_the_current_wit_the_cases_and_their_name() {
        assert_eq!(crate::policy::wit::FILES[0].0, "policy.wit");
        for lang in [Lang::Python, Lang::Js] {
            let files = render_other("team-guard", lang);
            for file in &files {
                assert!(!file.text.contains("{{"), "{}: {}", file.path, file.text);
            }
            let wit = files.iter().find(|f| f.path == "wit/policy.wit").unwrap();
            assert!(wit.text.contains("world layer {"), "{lang:?}");
            assert_eq!(
                files
                    .iter()
                    .filter(|f| f.path.starts_with("cases/"))
                    .count(),
                CASES.len()
            );
            let readme = &files.iter().find(|f| f.path == "README.md").unwrap().text;
            assert!(readme.contains("team-guard.wasm cases/"), "{readme}");
            for step in next_steps("team-guard", lang) {
                if !step.starts_with("npm run") {
                    assert!(readme.contains(&step), "{step}: {readme}");
                }
            }
        }
    }

    #[test]
    fn the_toolchain_file_is_the_repositorys() {
        let files = render("p", &SdkSource::Path(PathBuf::from("/x")));
        let toolchain = &files
            .iter()
            .find(|f| f.path == "rust-toolchain.toml")
            .unwrap()
            .text;
        assert!(toolchain.contains("wasm32-wasip2"), "{toolchain}");
        assert!(toolchain.contains("channel = "), "{toolchain}");
    }
}
