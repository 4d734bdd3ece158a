//! The policy SDK a Rust scaffold builds against: the one this binary
//! carries (the default), a radwasm checkout, or a git repository; and the
//! release profile and toolchain taken from this repository.

use std::path::PathBuf;

use super::{toml_string, wrap};

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
pub const SDK_CRATES: [(&str, &str); 2] = [
    ("radwasm-policy-sdk", "guests/policy-sdk"),
    ("radwasm-policy-core", "guests/policy-core"),
];

impl SdkSource {
    /// The `[dependencies]` lines for the SDK crates.
    pub(super) fn dependencies(&self) -> String {
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
    pub(super) fn workspace_settings(&self) -> &'static str {
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
    pub(super) fn readme_text(&self) -> String {
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

/// The policy SDK this binary carries, generated by host/build/sdk.rs:
/// `SDK_FILES` (each file's path under the scaffold's `sdk/`, and its
/// contents), `SDK_CRATE_DIRS` (each crate's name and directory) and
/// `SDK_LOCK` (the entries of this repository's `Cargo.lock` the crates
/// reach, written as the scaffold's `Cargo.lock`: its first build uses the
/// versions the SDK is built and tested with).
pub mod embedded_sdk {
    include!(concat!(env!("OUT_DIR"), "/policy_sdk.rs"));
}

/// Where the embedded SDK goes in a scaffold.
pub const EMBEDDED_SDK_DIR: &str = "sdk";

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
pub(super) const WORKSPACE_MANIFEST: &str = include_str!("../../../Cargo.toml");
/// This repository's toolchain file, copied as is.
pub(super) const TOOLCHAIN_FILE: &str = include_str!("../../../rust-toolchain.toml");

/// `key = value` lines of one `[section]` of a TOML file, in order
/// (comments and blank lines left out).
pub(super) fn section_entries<'a>(manifest: &'a str, section: &str) -> Vec<(&'a str, &'a str)> {
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
