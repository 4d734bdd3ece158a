//! `radwasm policy push|pull`: policy components in OCI registries, validated
//! with the same runtime as `policy check` before they are pushed and before
//! a pulled one is written.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use crate::policy::source::oci::{self, Credentials, OciError, OciOptions};
use crate::policy::{Limits, LoadedPolicy, embedded};

/// Environment variable with the registry user name (or `--username`).
pub const USERNAME_ENV: &str = "RADWASM_REGISTRY_USERNAME";
/// Environment variable with the registry password (or `--password-stdin`).
pub const PASSWORD_ENV: &str = "RADWASM_REGISTRY_PASSWORD";

#[derive(Debug, Args)]
pub struct PushArgs {
    /// Path to a policy component (`.wasm`), or `default` for the embedded default policy.
    pub wasm: String,
    /// Where to push: `REGISTRY/REPOSITORY[:TAG]` (tag `latest` if none).
    pub reference: String,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

#[derive(Debug, Args)]
pub struct PullArgs {
    /// What to pull: `REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]`.
    pub reference: String,
    /// Write the component to this file (only once it is verified and
    /// valid). No short form: `-o` is `--observation` in the `policy`
    /// commands.
    #[arg(long, value_name = "FILE")]
    pub output: PathBuf,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// How to reach the registry.
#[derive(Debug, Args)]
pub struct RegistryArgs {
    /// A registry (`HOST:PORT`, as in the reference) to reach over plain
    /// HTTP instead of HTTPS. Repeatable.
    #[arg(long = "insecure-registry", value_name = "HOST:PORT")]
    pub insecure_registries: Vec<String>,
    /// Registry user name.
    #[arg(long, env = USERNAME_ENV)]
    pub username: Option<String>,
    /// Read the registry password from standard input (else from
    /// RADWASM_REGISTRY_PASSWORD).
    #[arg(long)]
    pub password_stdin: bool,
}

impl RegistryArgs {
    /// The options for the registry client; credentials from the flags or
    /// the environment, both halves required.
    pub(super) fn options(&self) -> anyhow::Result<OciOptions> {
        let non_empty = |value: Option<String>| value.filter(|v| !v.is_empty());
        let username = non_empty(self.username.clone());
        let password = if self.password_stdin {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("reading the password from standard input")?;
            let password = text.trim_end_matches(['\r', '\n']).to_string();
            anyhow::ensure!(
                !password.is_empty(),
                "--password-stdin: standard input is empty"
            );
            Some(password)
        } else {
            non_empty(std::env::var(PASSWORD_ENV).ok())
        };
        let auth = match (username, password) {
            (Some(username), Some(password)) => Some(Credentials { username, password }),
            (None, None) => None,
            (Some(_), None) => anyhow::bail!(
                "a registry user name was given but no password: use --password-stdin or \
                 {PASSWORD_ENV}"
            ),
            (None, Some(_)) => anyhow::bail!(
                "a registry password was given but no user name: use --username or {USERNAME_ENV}"
            ),
        };
        for warning in oci::insecure_registry_warnings(&self.insecure_registries) {
            eprintln!("warning: {warning}");
        }
        Ok(OciOptions {
            insecure_registries: self.insecure_registries.clone(),
            auth,
            user_agent: crate::USER_AGENT,
        })
    }
}

/// `radwasm policy push <wasm> <oci-ref>`.
pub fn push(args: PushArgs) -> anyhow::Result<ExitCode> {
    let options = args.registry.options()?;
    let fetched = embedded::source(&args.wasm).fetch_local()?;
    let (source, bytes) = (fetched.source_name, fetched.bytes);
    // The very bytes that are pushed, loaded as `policy check` loads them.
    let loaded = validate(&source, &bytes).context("not pushed: it is not a valid policy")?;
    let pushed = runtime()?
        .block_on(oci::push(&args.reference, &bytes, &options))
        .map_err(|error| with_reference(error, &args.reference))
        .with_context(|| format!("{source}: not pushed"))?;
    eprintln!(
        "pushed {} ({} bytes, component sha256:{}) to {}: manifest digest {}",
        loaded.display_name(),
        bytes.len(),
        loaded.digest(),
        args.reference,
        pushed.digest
    );
    println!("{}", pushed.reference);
    Ok(ExitCode::SUCCESS)
}

/// `radwasm policy pull <oci-ref> --output <file>`.
pub fn pull(args: PullArgs) -> anyhow::Result<ExitCode> {
    let options = args.registry.options()?;
    let pulled = runtime()?
        .block_on(oci::pull(&args.reference, &options))
        .map_err(|error| with_reference(error, &args.reference))
        .with_context(|| format!("{}: not written", args.output.display()))?;
    let loaded = validate(&pulled.reference, &pulled.component).with_context(|| {
        format!(
            "{}: not written: the pulled component is not a valid policy",
            args.output.display()
        )
    })?;
    write_atomically(&args.output, &pulled.component)?;
    println!("digest:  {}", pulled.digest);
    println!("policy:  {}", loaded.display_name());
    println!(
        "wrote:   {} ({} bytes)",
        args.output.display(),
        pulled.component.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// Every registry error names the reference but a digest mismatch, which
/// names the two digests: add the reference to that one.
pub(super) fn with_reference(error: OciError, reference: &str) -> anyhow::Error {
    match error {
        OciError::DigestMismatch { .. } => anyhow::Error::new(error).context(reference.to_string()),
        other => anyhow::Error::new(other),
    }
}

fn validate(source: &str, bytes: &[u8]) -> anyhow::Result<LoadedPolicy> {
    let engine = crate::policy::engine(Limits::default())?;
    Ok(engine.load_bytes(source, bytes)?)
}

pub(super) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Write through a temporary file in the same directory and rename it, so a
/// failure never leaves a partial component behind.
fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let cannot = || format!("{}: cannot write the file", path.display());
    let name = path
        .file_name()
        .with_context(|| format!("{}: not a file name", path.display()))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".{}.tmp", std::process::id()));
    let temp = path.with_file_name(temp_name);
    let written = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written.with_context(cannot)
}
