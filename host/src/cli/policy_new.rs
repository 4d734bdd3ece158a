//! `radwasm policy new`: the arguments, and what is said once the scaffold
//! (`crate::scaffold`) is written.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use crate::scaffold::{self, Lang, SDK_CRATES, SdkSource};

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

/// Where the SDK comes from, from the command line; a path must be a
/// radwasm checkout.
fn sdk_source(args: &NewArgs) -> anyhow::Result<SdkSource> {
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
            Ok(SdkSource::Path(absolute))
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
            Ok(SdkSource::Git {
                url: url.clone(),
                rev: args.sdk_rev.clone(),
            })
        }
        (None, None) => Ok(SdkSource::Embedded),
        (Some(_), Some(_)) => anyhow::bail!("--sdk-path and --sdk-git exclude each other"),
    }
}

pub fn run(args: &NewArgs) -> anyhow::Result<ExitCode> {
    scaffold::validate_name(&args.name)?;
    let source = sdk_source(args)?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    let written = scaffold::write(&args.name, args.lang, &source, &dir)?;
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
    for step in scaffold::next_steps(&args.name, args.lang) {
        println!("  {step}");
    }
    Ok(ExitCode::SUCCESS)
}
