//! `radwasm manifest generate` (also `radwasm bicep generate-kubernetes-manifest`):
//! turn a Bicep file or a compiled ARM template into a `DeploymentTemplate`
//! manifest in the shape Radius's CLI writes (`spec.parameters` a map of
//! text, `spec.providerConfig` JSON text), after checking the parameters
//! against the ones the template declares.
//!
//! The text is laid out as Radius's CLI lays it out: its JSON is Go's
//! `json.MarshalIndent` (keys sorted, two spaces, `<`, `>`, `&` escaped),
//! written by [`crate::go_text`], and its YAML is written by serde_yaml,
//! whose emitter is libyaml, of which Go's `yaml.v3` is a port (keys in
//! `yaml.v3`'s order, see [`render_manifest`]). `docs/manifest.md` lists the
//! few values the two YAML writers quote differently.

use std::cmp::Ordering;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::Context;
use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::Value;

use crate::go_text;
use crate::radius::parameters::text_as_declared_type;

#[derive(Debug, Subcommand)]
pub enum ManifestCommand {
    /// Write a DeploymentTemplate manifest for a Bicep file or a compiled
    /// ARM template, after checking its parameters.
    Generate(GenerateArgs),
}

/// `radwasm bicep ...`: the same command under the name Radius's CLI uses.
#[derive(Debug, Subcommand)]
pub enum BicepCommand {
    /// The same as `radwasm manifest generate`.
    GenerateKubernetesManifest(GenerateArgs),
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// The template: a `.bicep` file (compiled with `bicep build` from PATH)
    /// or a compiled ARM template (`.json`).
    pub file: PathBuf,
    /// A parameter: `@FILE.json` (ARM parameter file), `@FILE.bicepparam`,
    /// `NAME=VALUE`, or `NAME=@FILE` (the value is the JSON in FILE).
    /// Repeatable; a later value for the same parameter wins.
    #[arg(long = "parameters", short = 'p', value_name = "PARAMETER")]
    pub parameters: Vec<String>,
    /// Write the manifest to this file (`.yaml` or `.yml`) instead of stdout.
    #[arg(
        long,
        short = 'o',
        visible_alias = "destination-file",
        visible_short_alias = 'd'
    )]
    pub outfile: Option<PathBuf>,
    /// `metadata.name` of the DeploymentTemplate [default: the file's name,
    /// for example `app.bicep`].
    #[arg(long)]
    pub name: Option<String>,
    /// `metadata.namespace` of the DeploymentTemplate (left out by default).
    #[arg(long)]
    pub namespace: Option<String>,
    /// Radius resource group to deploy into: the scope becomes
    /// `/planes/radius/local/resourceGroups/GROUP`.
    #[arg(long, short = 'g', conflicts_with = "scope")]
    pub group: Option<String>,
    /// The Radius scope itself: `/planes/radius/PLANE/resourceGroups/GROUP`.
    #[arg(long)]
    pub scope: Option<String>,
    /// Radius environment (name in the scope's group, or full id): the value
    /// of the template's `environment` parameter when it declares one and no
    /// value is given. A full id also supplies the scope when there is no
    /// `--group` or `--scope`.
    #[arg(long, short = 'e')]
    pub environment: Option<String>,
    /// Scope for Azure resources (provider `az`, type `AzureResourceManager`).
    #[arg(long)]
    pub azure_scope: Option<String>,
    /// Scope for AWS resources (provider `aws`, type `AWS`).
    #[arg(long)]
    pub aws_scope: Option<String>,
}

pub fn run_manifest(command: ManifestCommand) -> anyhow::Result<ExitCode> {
    match command {
        ManifestCommand::Generate(args) => generate(&args),
    }
}

pub fn run_bicep(command: BicepCommand) -> anyhow::Result<ExitCode> {
    match command {
        BicepCommand::GenerateKubernetesManifest(args) => generate(&args),
    }
}

fn generate(args: &GenerateArgs) -> anyhow::Result<ExitCode> {
    // Everything is read and checked first; the manifest is written last, so
    // a mistake anywhere leaves no file behind.
    let scope = radius_scope(
        args.group.as_deref(),
        args.scope.as_deref(),
        args.environment.as_deref(),
    )?;
    let name = match &args.name {
        Some(name) => name.clone(),
        None => default_name(&args.file),
    };
    check_object_name(&name, args.name.is_none())?;
    if let Some(namespace) = &args.namespace {
        check_namespace(namespace)?;
    }
    if let Some(outfile) = &args.outfile {
        check_outfile(outfile)?;
    }

    let template = load_template(&args.file)?;
    let mut given = Vec::new();
    for arg in &args.parameters {
        let parsed = parse_parameter_arg(arg).map_err(anyhow::Error::msg)?;
        for parameter in read_parameters(parsed)? {
            merge_parameter(&mut given, parameter);
        }
    }
    if let Some(environment) = &args.environment {
        let id = environment_id(&scope, environment);
        inject_parameter(&template, &mut given, "environment", &id, "--environment");
    }
    let checked = check_parameters(&template, &given).map_err(|problems| {
        anyhow::anyhow!(
            "{}: the parameters do not fit the template:\n  - {}",
            args.file.display(),
            problems.join("\n  - ")
        )
    })?;
    for secure in &checked.secure {
        eprintln!(
            "note: parameter {secure:?} is secure, but a DeploymentTemplate holds its value \
             as plain text; keep the manifest out of version control"
        );
    }

    let manifest = Manifest {
        name,
        namespace: args.namespace.clone(),
        parameters: checked.values,
        provider_config: provider_config_text(
            &scope,
            args.azure_scope.as_deref(),
            args.aws_scope.as_deref(),
        ),
        template: go_text::to_string_indent(&template),
    };
    let yaml = render_manifest(&manifest).context("cannot write the manifest as YAML")?;
    match &args.outfile {
        Some(outfile) => {
            std::fs::write(outfile, &yaml)
                .with_context(|| format!("{}: cannot write the manifest", outfile.display()))?;
            println!(
                "DeploymentTemplate {:?} written to {}",
                manifest.name,
                outfile.display()
            );
            println!("Next: kubectl apply -f {}", outfile.display());
        }
        None => {
            print!("{yaml}");
            eprintln!(
                "Next: save this manifest to a file and run `kubectl apply -f <file>` \
                 (or pipe it into `kubectl apply -f -`)"
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

// ---------------------------------------------------------------------------
// Scope, names and the provider config

/// The Radius scope from `--group`, `--scope` or a full `--environment` id.
pub fn radius_scope(
    group: Option<&str>,
    scope: Option<&str>,
    environment: Option<&str>,
) -> anyhow::Result<String> {
    if let Some(group) = group {
        anyhow::ensure!(
            !group.is_empty() && !group.contains('/'),
            "--group {group:?}: expected the name of a Radius resource group"
        );
        return Ok(format!("/planes/radius/local/resourceGroups/{group}"));
    }
    if let Some(scope) = scope {
        return match scope_prefix(scope) {
            Some(prefix) if prefix.len() == scope.trim_end_matches('/').len() => {
                Ok(prefix.to_string())
            }
            _ => anyhow::bail!(
                "--scope {scope:?}: expected /planes/radius/PLANE/resourceGroups/GROUP"
            ),
        };
    }
    if let Some(prefix) = environment.and_then(scope_prefix) {
        return Ok(prefix.to_string());
    }
    anyhow::bail!(
        "a Radius resource group is required: pass --group (-g) GROUP, --scope \
         /planes/radius/PLANE/resourceGroups/GROUP, or --environment with a full environment id"
    )
}

/// `/planes/radius/{plane}/resourceGroups/{group}` at the start of `id`.
fn scope_prefix(id: &str) -> Option<&str> {
    let segments: Vec<&str> = id.split('/').collect();
    // ["", "planes", "radius", plane, "resourceGroups", group, ...]
    let fits = segments.len() >= 6
        && segments[0].is_empty()
        && segments[1].eq_ignore_ascii_case("planes")
        && segments[2].eq_ignore_ascii_case("radius")
        && !segments[3].is_empty()
        && segments[4].eq_ignore_ascii_case("resourceGroups")
        && !segments[5].is_empty();
    if !fits {
        return None;
    }
    let length = segments[..6].iter().map(|s| s.len()).sum::<usize>() + 5;
    Some(&id[..length])
}

/// The environment id for `--environment`: a full id as it is, a name as an
/// `Applications.Core/environments` resource in the scope.
pub fn environment_id(scope: &str, environment: &str) -> String {
    if environment.starts_with('/') {
        environment.to_string()
    } else {
        format!("{scope}/providers/Applications.Core/environments/{environment}")
    }
}

/// The default `metadata.name`: the input file's name, as Radius's CLI does.
pub fn default_name(file: &Path) -> String {
    file.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A Kubernetes object name: an RFC 1123 subdomain (lower-case letters,
/// digits, `-` and `.`, at most 253 characters, starting and ending with a
/// letter or digit).
pub fn check_object_name(name: &str, derived: bool) -> anyhow::Result<()> {
    let valid = !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if valid {
        return Ok(());
    }
    let hint = if derived {
        " (taken from the file name); choose one with --name"
    } else {
        ""
    };
    anyhow::bail!(
        "name {name:?} is not a valid Kubernetes object name{hint}: use lower-case letters, \
         digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters"
    )
}

/// A Kubernetes namespace: an RFC 1123 label.
pub fn check_namespace(namespace: &str) -> anyhow::Result<()> {
    let valid = !namespace.is_empty()
        && namespace.len() <= 63
        && namespace
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'))
        && namespace.starts_with(|c: char| c.is_ascii_alphanumeric())
        && namespace.ends_with(|c: char| c.is_ascii_alphanumeric());
    anyhow::ensure!(
        valid,
        "--namespace {namespace:?} is not a valid namespace: use lower-case letters, digits \
         and '-', starting and ending with a letter or digit, at most 63 characters"
    );
    Ok(())
}

/// The output file must be YAML by its name, as Radius's CLI requires.
fn check_outfile(outfile: &Path) -> anyhow::Result<()> {
    let extension = outfile.extension().and_then(OsStr::to_str).unwrap_or("");
    anyhow::ensure!(
        extension == "yaml" || extension == "yml",
        "--outfile {}: the manifest file must end in .yaml or .yml",
        outfile.display()
    );
    Ok(())
}

/// `spec.providerConfig` as Radius's CLI builds it: a struct whose fields
/// are written in this order, `az` and `aws` only when given.
#[derive(Serialize)]
struct ProviderConfig<'a> {
    radius: Provider<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    az: Option<Provider<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    aws: Option<Provider<'a>>,
    deployments: Provider<'a>,
}

#[derive(Serialize)]
struct Provider<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    value: ProviderScope<'a>,
}

#[derive(Serialize)]
struct ProviderScope<'a> {
    scope: &'a str,
}

impl<'a> Provider<'a> {
    fn new(kind: &'a str, scope: &'a str) -> Self {
        Self {
            kind,
            value: ProviderScope { scope },
        }
    }
}

/// `spec.providerConfig`: the Radius scope for `radius` and `deployments`,
/// and `az`/`aws` when given, as Radius's CLI writes it (Go's
/// `json.MarshalIndent`).
pub fn provider_config_text(scope: &str, azure: Option<&str>, aws: Option<&str>) -> String {
    go_text::to_string_indent(&ProviderConfig {
        radius: Provider::new("Radius", scope),
        az: azure.map(|azure| Provider::new("AzureResourceManager", azure)),
        aws: aws.map(|aws| Provider::new("AWS", aws)),
        deployments: Provider::new("Microsoft.Resources", scope),
    })
}

// ---------------------------------------------------------------------------
// The template

/// Read the template: `.json` as it is, `.bicep` compiled by `bicep build`.
fn load_template(file: &Path) -> anyhow::Result<Value> {
    let extension = file
        .extension()
        .and_then(OsStr::to_str)
        .map(str::to_ascii_lowercase);
    let (text, origin) = match extension.as_deref() {
        Some("json") => (
            std::fs::read_to_string(file)
                .with_context(|| format!("{}: cannot read the file", file.display()))?,
            "",
        ),
        Some("bicep") => (
            run_bicep_cli("build", file)?,
            " (the output of `bicep build`)",
        ),
        _ => anyhow::bail!(
            "{}: expected a .bicep file or a compiled ARM template (.json)",
            file.display()
        ),
    };
    parse_template(&text)
        .map_err(|problem| anyhow::anyhow!("{}{origin}: {problem}", file.display()))
}

/// A compiled ARM template: a JSON object whose `resources` is an object or
/// an array, and whose `parameters`, if any, is an object.
pub fn parse_template(text: &str) -> Result<Value, String> {
    let template: Value =
        serde_json::from_str(text).map_err(|error| format!("not JSON: {error}"))?;
    let Some(object) = template.as_object() else {
        return Err("not an ARM template: expected a JSON object".to_string());
    };
    if !matches!(
        object.get("resources"),
        Some(Value::Object(_) | Value::Array(_))
    ) {
        return Err("not an ARM template: it has no \"resources\" object or array".to_string());
    }
    if !matches!(object.get("parameters"), None | Some(Value::Object(_))) {
        return Err("not an ARM template: its \"parameters\" is not an object".to_string());
    }
    Ok(template)
}

/// The `bicep` executable on PATH, if there is one.
pub fn find_on_path(program: &str, path: Option<&OsStr>) -> Option<PathBuf> {
    let file_name = format!("{program}{}", std::env::consts::EXE_SUFFIX);
    std::env::split_paths(path?)
        .map(|dir| dir.join(&file_name))
        .find(|candidate| is_executable(candidate))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

/// Run `bicep <subcommand> --stdout <file>` and return what it printed.
fn run_bicep_cli(subcommand: &str, file: &Path) -> anyhow::Result<String> {
    let Some(bicep) = find_on_path("bicep", std::env::var_os("PATH").as_deref()) else {
        anyhow::bail!(
            "{}: compiling Bicep needs the Bicep CLI, and there is no `bicep` on PATH; install \
             it, or compile elsewhere (`bicep {subcommand} {}`) and pass the compiled ARM JSON \
             file instead",
            file.display(),
            file.display()
        );
    };
    let output = Command::new(&bicep)
        .arg(subcommand)
        .arg("--stdout")
        .arg(file)
        .output()
        .with_context(|| format!("cannot run {}", bicep.display()))?;
    if !output.status.success() {
        anyhow::bail!(
            "{}: `bicep {subcommand}` failed ({}):\n{}",
            file.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim_end()
        );
    }
    String::from_utf8(output.stdout)
        .with_context(|| format!("{}: `bicep {subcommand}` printed no UTF-8", file.display()))
}

// ---------------------------------------------------------------------------
// Parameters as given

/// One `--parameters` argument, in the forms `rad deploy` accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParameterArg {
    /// `@FILE`: an ARM parameter file (`.json`) or a `.bicepparam` file.
    File(PathBuf),
    /// `NAME=VALUE`: text, converted to the declared type.
    Text { name: String, value: String },
    /// `NAME=@FILE`: the value is the JSON in FILE.
    ValueFile { name: String, path: PathBuf },
}

/// Read one `--parameters` argument.
pub fn parse_parameter_arg(arg: &str) -> Result<ParameterArg, String> {
    let expected = "expected @FILE, NAME=VALUE or NAME=@FILE";
    if let Some(path) = arg.strip_prefix('@') {
        if path.is_empty() {
            return Err(format!(
                "--parameters {arg:?}: no file after '@'; {expected}"
            ));
        }
        return Ok(ParameterArg::File(PathBuf::from(path)));
    }
    let Some((name, value)) = arg.split_once('=') else {
        return Err(format!("--parameters {arg:?}: {expected}"));
    };
    if name.trim().is_empty() {
        return Err(format!(
            "--parameters {arg:?}: no parameter name before '='; {expected}"
        ));
    }
    let name = name.to_string();
    match value.strip_prefix('@') {
        Some("") => Err(format!(
            "--parameters {arg:?}: no file after '@'; {expected}"
        )),
        Some(path) => Ok(ParameterArg::ValueFile {
            name,
            path: PathBuf::from(path),
        }),
        None => Ok(ParameterArg::Text {
            name,
            value: value.to_string(),
        }),
    }
}

/// A parameter value as given, before it is checked against the template.
#[derive(Debug, Clone, PartialEq)]
pub enum GivenValue {
    /// Text from the command line (`NAME=VALUE`, `--environment`).
    Text(String),
    /// A JSON value from a parameter file or `NAME=@FILE`.
    Json(Value),
}

#[derive(Debug, Clone, PartialEq)]
pub struct GivenParameter {
    pub name: String,
    pub value: GivenValue,
    /// Where it came from, for messages: a file or the argument.
    pub source: String,
}

/// Add a parameter; it replaces an earlier one of the same name (ARM names
/// are case-insensitive).
pub fn merge_parameter(given: &mut Vec<GivenParameter>, parameter: GivenParameter) {
    given.retain(|earlier| !earlier.name.eq_ignore_ascii_case(&parameter.name));
    given.push(parameter);
}

/// Give `name` the text `value` when the template declares it and nothing
/// else did (as `rad deploy` does for `environment`).
fn inject_parameter(
    template: &Value,
    given: &mut Vec<GivenParameter>,
    name: &str,
    value: &str,
    source: &str,
) {
    let declared = declared_parameters(template)
        .iter()
        .any(|(declared, _)| declared.eq_ignore_ascii_case(name));
    let already = given.iter().any(|p| p.name.eq_ignore_ascii_case(name));
    if declared && !already {
        given.push(GivenParameter {
            name: name.to_string(),
            value: GivenValue::Text(value.to_string()),
            source: source.to_string(),
        });
    }
}

/// The parameters one `--parameters` argument gives.
fn read_parameters(arg: ParameterArg) -> anyhow::Result<Vec<GivenParameter>> {
    match arg {
        ParameterArg::Text { name, value } => Ok(vec![GivenParameter {
            source: format!("--parameters {name}={value}"),
            name,
            value: GivenValue::Text(value),
        }]),
        ParameterArg::ValueFile { name, path } => {
            let text = read_file(&path)?;
            let value = serde_json::from_str(&text).map_err(|error| {
                anyhow::anyhow!(
                    "{} (value of parameter {name:?}): not JSON: {error}; the file must hold \
                     one JSON value, for example \"text\", 3 or {{\"key\": \"value\"}}",
                    path.display()
                )
            })?;
            Ok(vec![GivenParameter {
                name,
                value: GivenValue::Json(value),
                source: path.display().to_string(),
            }])
        }
        ParameterArg::File(path) => {
            let is_bicepparam = path
                .extension()
                .is_some_and(|extension| extension.eq_ignore_ascii_case("bicepparam"));
            let entries = if is_bicepparam {
                let printed = run_bicep_cli("build-params", &path)?;
                parse_build_params_output(&printed)
            } else {
                parse_parameter_file(&read_file(&path)?)
            }
            .map_err(|problem| anyhow::anyhow!("{}: {problem}", path.display()))?;
            let source = path.display().to_string();
            Ok(entries
                .into_iter()
                .map(|(name, value)| GivenParameter {
                    name,
                    value: GivenValue::Json(value),
                    source: source.clone(),
                })
                .collect())
        }
    }
}

fn read_file(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read the file", path.display()))
}

/// The name and value of every parameter in an ARM parameter file: either
/// the deployment-parameters document (`{"$schema": ..., "parameters":
/// {...}}`) or its bare `parameters` object (`{"name": {"value": ...}}`).
pub fn parse_parameter_file(text: &str) -> Result<Vec<(String, Value)>, String> {
    let expected = "expected an ARM parameter file: {\"parameters\": {\"NAME\": {\"value\": ...}}} \
                    or {\"NAME\": {\"value\": ...}}";
    let document: Value =
        serde_json::from_str(text).map_err(|error| format!("not JSON ({error}); {expected}"))?;
    let Some(object) = document.as_object() else {
        return Err(format!("not a JSON object; {expected}"));
    };
    let is_document = object.contains_key("$schema")
        || (matches!(object.get("parameters"), Some(Value::Object(_)))
            && !is_entry(&object["parameters"])
            && object.keys().all(|key| {
                matches!(
                    key.as_str(),
                    "$schema" | "contentVersion" | "metadata" | "parameters"
                )
            }));
    let entries = if is_document {
        match object.get("parameters") {
            Some(Value::Object(entries)) => entries,
            _ => return Err(format!("no \"parameters\" object; {expected}")),
        }
    } else {
        object
    };
    entries
        .iter()
        .map(|(name, entry)| match entry.as_object() {
            Some(entry) if entry.contains_key("value") => {
                Ok((name.clone(), entry["value"].clone()))
            }
            Some(entry) if entry.contains_key("reference") => Err(format!(
                "parameter {name:?} is a Key Vault reference, which a DeploymentTemplate \
                 cannot carry; give its value instead"
            )),
            _ => Err(format!(
                "parameter {name:?} is not {{\"value\": ...}}; {expected}"
            )),
        })
        .collect()
}

/// An ARM parameter entry: `{"value": ...}` or `{"reference": ...}`.
fn is_entry(value: &Value) -> bool {
    value.as_object().is_some_and(|entry| {
        (entry.contains_key("value") || entry.contains_key("reference"))
            && entry
                .keys()
                .all(|key| matches!(key.as_str(), "value" | "reference" | "metadata"))
    })
}

/// The parameters in what `bicep build-params --stdout` prints: an object
/// whose `parametersJson` is the parameter document as text.
pub fn parse_build_params_output(printed: &str) -> Result<Vec<(String, Value)>, String> {
    let envelope: Value = serde_json::from_str(printed)
        .map_err(|error| format!("`bicep build-params` printed no JSON ({error})"))?;
    match envelope.get("parametersJson") {
        Some(Value::String(document)) => parse_parameter_file(document),
        _ => Err("`bicep build-params` printed no \"parametersJson\" text".to_string()),
    }
}

// ---------------------------------------------------------------------------
// Checking parameters against the template

/// The parameters a manifest carries, as text, and which of them are secure.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CheckedParameters {
    /// Declared name (the template's spelling) and the value as text.
    pub values: Vec<(String, String)>,
    pub secure: Vec<String>,
}

fn declared_parameters(template: &Value) -> Vec<(&String, &Value)> {
    template
        .get("parameters")
        .and_then(Value::as_object)
        .map(|declared| declared.iter().collect())
        .unwrap_or_default()
}

/// Check every given parameter against the template's declarations: known
/// name, right type, an allowed value; and that every required parameter has
/// a value. Returns the values as the manifest's text, or every problem.
pub fn check_parameters(
    template: &Value,
    given: &[GivenParameter],
) -> Result<CheckedParameters, Vec<String>> {
    let declared = declared_parameters(template);
    let mut problems = Vec::new();
    let mut checked = CheckedParameters::default();

    for parameter in given {
        let Some((name, declaration)) = declared
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(&parameter.name))
        else {
            let names: Vec<&str> = declared.iter().map(|(name, _)| name.as_str()).collect();
            let known = if names.is_empty() {
                "it declares no parameters".to_string()
            } else {
                format!("it declares {}", names.join(", "))
            };
            problems.push(format!(
                "parameter {:?} (from {}) is not declared by the template ({known})",
                parameter.name, parameter.source
            ));
            continue;
        };
        match check_value(name, declaration, parameter) {
            Ok(Some(text)) => {
                if is_secure(declaration) {
                    checked.secure.push(name.to_string());
                }
                checked.values.push((name.to_string(), text));
            }
            Ok(None) => {}
            Err(problem) => problems.push(problem),
        }
    }

    for (name, declaration) in &declared {
        let given = given.iter().any(|p| p.name.eq_ignore_ascii_case(name));
        let optional = declaration.get("defaultValue").is_some()
            || declaration.get("nullable") == Some(&Value::Bool(true));
        if !given && !optional {
            let how = if name.eq_ignore_ascii_case("environment") {
                "--environment".to_string()
            } else {
                format!("--parameters {name}=VALUE")
            };
            problems.push(format!(
                "parameter {name:?} is required (declared {} with no defaultValue) but has no \
                 value; give it with {how}",
                declared_type(declaration).unwrap_or("without a type")
            ));
        }
    }

    if problems.is_empty() {
        Ok(checked)
    } else {
        Err(problems)
    }
}

fn declared_type(declaration: &Value) -> Option<&str> {
    declaration.get("type").and_then(Value::as_str)
}

fn is_secure(declaration: &Value) -> bool {
    declared_type(declaration).is_some_and(|kind| kind.to_ascii_lowercase().starts_with("secure"))
}

/// Check one value against its declaration; the text the manifest carries,
/// or `None` for a null given to a nullable parameter (the same as none).
fn check_value(
    name: &str,
    declaration: &Value,
    parameter: &GivenParameter,
) -> Result<Option<String>, String> {
    let kind = declared_type(declaration).unwrap_or("");
    let secure = is_secure(declaration);
    // Values are shown as JSON (text in quotes), secure ones not at all.
    let shown = |value: &Value| {
        if secure {
            return "(hidden, the parameter is secure)".to_string();
        }
        let json = value.to_string();
        let mut shown: String = json.chars().take(80).collect();
        if shown.len() < json.len() {
            shown.push('…');
        }
        shown
    };
    let refuse = |value: &Value, what: &str| {
        Err(format!(
            "parameter {name:?} (from {}) is declared {kind} but its value {} is not {what}",
            parameter.source,
            shown(value)
        ))
    };
    let typed = match (&parameter.value, kind.to_ascii_lowercase().as_str()) {
        (GivenValue::Json(Value::Null), _) => {
            if declaration.get("nullable") == Some(&Value::Bool(true)) {
                return Ok(None);
            }
            return Err(format!(
                "parameter {name:?} (from {}) is null, but it is not declared nullable",
                parameter.source
            ));
        }
        // Text, converted the way the controller converts it when it deploys.
        (GivenValue::Text(text), _) => match text_as_declared_type(kind, text) {
            Ok(Some(converted)) => converted,
            Ok(None) => Value::String(text.clone()),
            Err(what) => return refuse(&Value::String(text.clone()), what),
        },
        // JSON from a file must already have the declared type.
        (GivenValue::Json(value), kind) => {
            let fits = match kind {
                "int" => value.is_i64() || value.is_u64(),
                "bool" => value.is_boolean(),
                "string" | "securestring" => value.is_string(),
                "object" | "secureobject" => value.is_object(),
                "array" => value.is_array(),
                _ => true,
            };
            if !fits {
                let what = match kind {
                    "int" => "a whole number",
                    "bool" => "true or false",
                    "string" | "securestring" => "a JSON string",
                    "object" | "secureobject" => "a JSON object",
                    _ => "a JSON array",
                };
                return refuse(value, what);
            }
            value.clone()
        }
    };

    if let Some(Value::Array(allowed)) = declaration.get("allowedValues") {
        // For an array parameter ARM checks every element against the list.
        let candidates: Vec<&Value> = match (&typed, kind.eq_ignore_ascii_case("array")) {
            (Value::Array(elements), true) => elements.iter().collect(),
            _ => vec![&typed],
        };
        if let Some(outside) = candidates.iter().find(|value| !allowed.contains(value)) {
            let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
            return Err(format!(
                "parameter {name:?} (from {}): value {} is not one of the allowed values {}",
                parameter.source,
                shown(outside),
                list.join(", ")
            ));
        }
    }

    Ok(Some(match (&parameter.value, typed) {
        (GivenValue::Text(text), _) => text.clone(),
        (GivenValue::Json(_), Value::String(text)) => text,
        (GivenValue::Json(_), other) => other.to_string(),
    }))
}

// ---------------------------------------------------------------------------
// The manifest as YAML

/// What the manifest holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub name: String,
    pub namespace: Option<String>,
    pub parameters: Vec<(String, String)>,
    pub provider_config: String,
    pub template: String,
}

/// The manifest's YAML document, its fields in the order Radius's CLI writes
/// them (yaml.v3 sorts map keys, and these are in that order).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ManifestDocument<'a> {
    api_version: &'a str,
    kind: &'a str,
    metadata: ManifestMetadata<'a>,
    spec: ManifestSpec<'a>,
}

#[derive(Serialize)]
struct ManifestMetadata<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ManifestSpec<'a> {
    /// In the order the entries are inserted: yaml.v3's natural order.
    parameters: serde_yaml::Mapping,
    provider_config: &'a str,
    template: &'a str,
}

/// The manifest as YAML text, written by serde_yaml (whose emitter is
/// libyaml, of which Go's yaml.v3 is a port): two spaces an indent, literal
/// blocks (`|-`) for the JSON texts, quotes only where plain text would not
/// read back as the same string by YAML 1.2's rules (docs/manifest.md lists
/// the values yaml.v3 quotes and this does not). Keys are in Radius's CLI's
/// order, parameter names in yaml.v3's natural order ([`go_yaml_key_order`]).
pub fn render_manifest(manifest: &Manifest) -> serde_yaml::Result<String> {
    let mut parameters: Vec<&(String, String)> = manifest.parameters.iter().collect();
    parameters.sort_by(|a, b| go_yaml_key_order(&a.0, &b.0));
    let document = ManifestDocument {
        api_version: "radapp.io/v1alpha3",
        kind: "DeploymentTemplate",
        metadata: ManifestMetadata {
            name: &manifest.name,
            namespace: manifest.namespace.as_deref(),
        },
        spec: ManifestSpec {
            parameters: parameters
                .iter()
                .map(|(name, value)| (name.as_str().into(), value.as_str().into()))
                .collect(),
            provider_config: &manifest.provider_config,
            template: &manifest.template,
        },
    };
    let mut text = serde_yaml::to_string(&document)?;
    // serde_yaml quotes by YAML 1.2's rules; kubectl reads by YAML 1.1's,
    // where a plain `no` or `1_000` is a boolean or a number. Such values
    // get the double quotes yaml.v3 gives them, so they stay text.
    for (name, value) in parameters {
        if reads_as_non_text_in_yaml_1_1(value) {
            let key = serde_yaml::to_string(name)?;
            let plain = format!("\n    {}: {value}\n", key.trim_end());
            let quoted = format!("\n    {}: \"{value}\"\n", key.trim_end());
            text = text.replacen(&plain, &quoted, 1);
        }
    }
    Ok(text)
}

/// True for plain text YAML 1.1 reads as a boolean or a number but YAML 1.2
/// (and so serde_yaml) as text: `y`, `yes`, `n`, `no`, `on`, `off` in their
/// three spellings, and numbers written with `_`.
fn reads_as_non_text_in_yaml_1_1(value: &str) -> bool {
    const BOOLEANS: [&str; 16] = [
        "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off",
        "OFF",
    ];
    if BOOLEANS.contains(&value) {
        return true;
    }
    // YAML 1.1's integers and floats may hold `_` anywhere after the sign.
    let unsigned = value.strip_prefix(['-', '+']).unwrap_or(value);
    let all = |text: &str, allowed: fn(char) -> bool| !text.is_empty() && text.chars().all(allowed);
    let number = if let Some(hex) = unsigned.strip_prefix("0x") {
        all(hex, |c| c.is_ascii_hexdigit() || c == '_')
    } else if let Some(binary) = unsigned.strip_prefix("0b") {
        all(binary, |c| matches!(c, '0' | '1' | '_'))
    } else {
        let mantissa = match unsigned.split_once(['e', 'E']) {
            Some((mantissa, exponent)) => {
                let exponent = exponent.strip_prefix(['-', '+']).unwrap_or(exponent);
                if !all(exponent, |c| c.is_ascii_digit()) {
                    return false;
                }
                mantissa
            }
            None => unsigned,
        };
        mantissa.starts_with(|c: char| c.is_ascii_digit() || c == '.')
            && mantissa.chars().any(|c| c.is_ascii_digit())
            && all(mantissa, |c| c.is_ascii_digit() || matches!(c, '_' | '.'))
    };
    value.contains('_') && number
}

/// The order yaml.v3 writes map keys in: by character, but a run of digits
/// by its number (`a2` before `a10`), and a letter after a non-letter
/// unless both follow digits.
pub fn go_yaml_key_order(a: &str, b: &str) -> Ordering {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut after_digits = false;
    for i in 0..a.len().min(b.len()) {
        if a[i] == b[i] {
            after_digits = a[i].is_ascii_digit();
            continue;
        }
        let (a_letter, b_letter) = (a[i].is_alphabetic(), b[i].is_alphabetic());
        if a_letter && b_letter {
            return a[i].cmp(&b[i]);
        }
        if a_letter || b_letter {
            // After digits a letter sorts first, otherwise last.
            let a_first = if after_digits { a_letter } else { b_letter };
            return if a_first {
                Ordering::Less
            } else {
                Ordering::Greater
            };
        }
        // Two non-letters: compare the runs of digits starting here as numbers.
        let run = |s: &[char]| s[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        let value = |s: &[char], len: usize, start: u128| {
            s[i..i + len].iter().fold(start, |n, c| {
                n.wrapping_mul(10)
                    .wrapping_add(u128::from(c.to_digit(10).unwrap_or(0)))
            })
        };
        // A zero inside a number that started earlier ("10" against "1a")
        // makes both numbers count from 1, as yaml.v3 does.
        let start: u128 = if (a[i] == '0' || b[i] == '0')
            && a[..i]
                .iter()
                .rev()
                .take_while(|c| c.is_ascii_digit())
                .any(|&c| c != '0')
        {
            1
        } else {
            0
        };
        let (a_run, b_run) = (run(&a), run(&b));
        let (a_value, b_value) = (value(&a, a_run, start), value(&b, b_run, start));
        return a_value
            .cmp(&b_value)
            .then(a_run.cmp(&b_run))
            .then(a[i].cmp(&b[i]));
    }
    a.len().cmp(&b.len())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(name: &str, value: &str) -> GivenParameter {
        GivenParameter {
            name: name.to_string(),
            value: GivenValue::Text(value.to_string()),
            source: format!("--parameters {name}={value}"),
        }
    }

    fn from_file(name: &str, value: Value) -> GivenParameter {
        GivenParameter {
            name: name.to_string(),
            value: GivenValue::Json(value),
            source: "params.json".to_string(),
        }
    }

    fn template() -> Value {
        json!({
            "resources": {},
            "parameters": {
                "tag": {"type": "string", "defaultValue": "latest"},
                "replicas": {"type": "int"},
                "enabled": {"type": "bool", "defaultValue": true},
                "labels": {"type": "object", "defaultValue": {}},
                "ports": {"type": "array", "defaultValue": [], "allowedValues": [80, 443, 8080]},
                "size": {"type": "string", "defaultValue": "small", "allowedValues": ["small", "large"]},
                "password": {"type": "secureString", "defaultValue": ""},
                "note": {"type": "string", "nullable": true},
            }
        })
    }

    fn values(checked: CheckedParameters) -> Vec<(String, String)> {
        checked.values
    }

    #[test]
    fn parameter_arguments_in_every_form() {
        assert_eq!(
            parse_parameter_arg("@params.json"),
            Ok(ParameterArg::File("params.json".into()))
        );
        assert_eq!(
            parse_parameter_arg("tag=v1=x"),
            Ok(ParameterArg::Text {
                name: "tag".into(),
                value: "v1=x".into()
            })
        );
        assert_eq!(
            parse_parameter_arg("tag="),
            Ok(ParameterArg::Text {
                name: "tag".into(),
                value: String::new()
            })
        );
        assert_eq!(
            parse_parameter_arg("labels=@labels.json"),
            Ok(ParameterArg::ValueFile {
                name: "labels".into(),
                path: "labels.json".into()
            })
        );
        for bad in ["invalid-format", "=value", "@", "tag=@"] {
            let error = parse_parameter_arg(bad).expect_err(bad);
            assert!(error.contains(&format!("{bad:?}")), "{error}");
        }
    }

    #[test]
    fn later_parameters_replace_earlier_ones_whatever_their_case() {
        let mut given = Vec::new();
        merge_parameter(&mut given, text("tag", "a"));
        merge_parameter(&mut given, text("replicas", "1"));
        merge_parameter(&mut given, text("Tag", "b"));
        let names: Vec<(&str, &GivenValue)> =
            given.iter().map(|p| (p.name.as_str(), &p.value)).collect();
        assert_eq!(
            names,
            [
                ("replicas", &GivenValue::Text("1".into())),
                ("Tag", &GivenValue::Text("b".into()))
            ]
        );
    }

    #[test]
    fn parameter_files_in_both_shapes() {
        let full = r#"{"$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentParameters.json#",
                      "contentVersion": "1.0.0.0", "parameters": {"tag": {"value": "v1"}, "replicas": {"value": 3}}}"#;
        let mut entries = parse_parameter_file(full).expect("full document");
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            entries,
            [
                ("replicas".to_string(), json!(3)),
                ("tag".to_string(), json!("v1"))
            ]
        );
        let bare = r#"{"tag": {"value": "v1"}, "parameters": {"value": "p"}}"#;
        let mut entries = parse_parameter_file(bare).expect("bare object");
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            entries,
            [
                ("parameters".to_string(), json!("p")),
                ("tag".to_string(), json!("v1"))
            ]
        );
        // Without $schema, {"parameters": {...entries}} is still the document.
        let no_schema = r#"{"parameters": {"tag": {"value": "v2"}}}"#;
        assert_eq!(
            parse_parameter_file(no_schema).expect("document"),
            [("tag".to_string(), json!("v2"))]
        );
    }

    #[test]
    fn files_that_are_not_arm_parameter_files_are_refused() {
        for (text, expected) in [
            ("not json", "not JSON"),
            ("[1, 2]", "not a JSON object"),
            (
                r#"{"tag": "v1"}"#,
                "parameter \"tag\" is not {\"value\": ...}",
            ),
            (
                r#"{"$schema": "x", "contentVersion": "1.0.0.0"}"#,
                "no \"parameters\" object",
            ),
            (
                r#"{"secret": {"reference": {"keyVault": {"id": "x"}, "secretName": "s"}}}"#,
                "Key Vault reference",
            ),
        ] {
            let error = parse_parameter_file(text).expect_err(text);
            assert!(error.contains(expected), "{text}: {error}");
        }
    }

    #[test]
    fn build_params_output_is_unwrapped() {
        let printed = json!({
            "parametersJson": r#"{"$schema": "x", "contentVersion": "1.0.0.0", "parameters": {"tag": {"value": "v3"}}}"#,
            "templateJson": "{}",
        })
        .to_string();
        assert_eq!(
            parse_build_params_output(&printed).expect("parameters"),
            [("tag".to_string(), json!("v3"))]
        );
        let error = parse_build_params_output("{}").expect_err("no parametersJson");
        assert!(error.contains("parametersJson"), "{error}");
    }

    #[test]
    fn values_of_the_declared_type_become_the_manifest_text() {
        let given = [
            text("replicas", " 3"),
            text("ENABLED", "False"),
            from_file("labels", json!({"team": "a"})),
            from_file("ports", json!([80, 443])),
            text("size", "large"),
            from_file("tag", json!("v1")),
            from_file("note", Value::Null),
        ];
        let checked = check_parameters(&template(), &given).expect("fits");
        assert_eq!(
            values(checked),
            [
                ("replicas".to_string(), " 3".to_string()),
                ("enabled".to_string(), "False".to_string()),
                ("labels".to_string(), r#"{"team":"a"}"#.to_string()),
                ("ports".to_string(), "[80,443]".to_string()),
                ("size".to_string(), "large".to_string()),
                ("tag".to_string(), "v1".to_string()),
            ]
        );
        let checked = check_parameters(
            &template(),
            &[text("replicas", "1"), text("password", "s3cret")],
        )
        .expect("fits");
        assert_eq!(checked.secure, ["password"]);
    }

    #[test]
    fn every_problem_is_reported_by_name() {
        let given = [
            text("replicas", "three"),
            text("unknown", "x"),
            text("enabled", "yes"),
            from_file("tag", json!(5)),
            from_file("labels", json!([1])),
            text("ports", "[80, 22]"),
            text("size", "huge"),
            from_file("password", json!(1)),
            text("replicas", "4.5"),
        ];
        let problems = check_parameters(&template(), &given).expect_err("problems");
        let expected = [
            "parameter \"replicas\" (from --parameters replicas=three) is declared int but its value \"three\" is not a whole number",
            "parameter \"unknown\" (from --parameters unknown=x) is not declared by the template (it declares enabled, labels, note, password, ports, replicas, size, tag)",
            "parameter \"enabled\" (from --parameters enabled=yes) is declared bool but its value \"yes\" is not true or false",
            "parameter \"tag\" (from params.json) is declared string but its value 5 is not a JSON string",
            "parameter \"labels\" (from params.json) is declared object but its value [1] is not a JSON object",
            "parameter \"ports\" (from --parameters ports=[80, 22]): value 22 is not one of the allowed values 80, 443, 8080",
            "parameter \"size\" (from --parameters size=huge): value \"huge\" is not one of the allowed values \"small\", \"large\"",
            "parameter \"password\" (from params.json) is declared secureString but its value (hidden, the parameter is secure) is not a JSON string",
            "parameter \"replicas\" (from --parameters replicas=4.5) is declared int but its value \"4.5\" is not a whole number",
        ];
        assert_eq!(problems, expected);
    }

    #[test]
    fn required_parameters_need_a_value_and_null_needs_nullable() {
        let problems = check_parameters(&template(), &[]).expect_err("replicas missing");
        assert_eq!(
            problems,
            [
                "parameter \"replicas\" is required (declared int with no defaultValue) but has no value; give it with --parameters replicas=VALUE"
            ]
        );
        let problems = check_parameters(
            &template(),
            &[text("replicas", "1"), from_file("tag", Value::Null)],
        )
        .expect_err("null tag");
        assert_eq!(
            problems,
            ["parameter \"tag\" (from params.json) is null, but it is not declared nullable"]
        );
        let environment =
            json!({"resources": {}, "parameters": {"environment": {"type": "string"}}});
        let problems = check_parameters(&environment, &[]).expect_err("environment missing");
        assert!(
            problems[0].ends_with("give it with --environment"),
            "{problems:?}"
        );
    }

    #[test]
    fn environment_is_injected_only_when_declared_and_not_given() {
        let declared = json!({"resources": {}, "parameters": {"Environment": {"type": "string"}}});
        let mut given = Vec::new();
        inject_parameter(
            &json!({"resources": {}}),
            &mut given,
            "environment",
            "/e",
            "-e",
        );
        assert!(given.is_empty());
        inject_parameter(&declared, &mut given, "environment", "/e", "-e");
        assert_eq!(given[0].value, GivenValue::Text("/e".into()));
        let mut given = vec![text("environment", "/mine")];
        inject_parameter(&declared, &mut given, "environment", "/e", "-e");
        assert_eq!(given, [text("environment", "/mine")]);
    }

    #[test]
    fn scopes_from_group_scope_or_environment_id() {
        assert_eq!(
            radius_scope(Some("default"), None, None).expect("group"),
            "/planes/radius/local/resourceGroups/default"
        );
        assert_eq!(
            radius_scope(None, Some("/planes/radius/edge/resourceGroups/g1"), None).expect("scope"),
            "/planes/radius/edge/resourceGroups/g1"
        );
        let env =
            "/planes/radius/local/resourceGroups/prod/providers/Applications.Core/environments/e";
        assert_eq!(
            radius_scope(None, None, Some(env)).expect("from env"),
            "/planes/radius/local/resourceGroups/prod"
        );
        assert!(radius_scope(None, None, Some("e")).is_err());
        assert!(radius_scope(Some("a/b"), None, None).is_err());
        for bad in [
            "/planes/aws/x/resourceGroups/g",
            "/planes/radius/local",
            "/planes/radius/local/resourceGroups/g/providers/x",
        ] {
            let error = radius_scope(None, Some(bad), None)
                .expect_err(bad)
                .to_string();
            assert!(
                error.contains("/planes/radius/PLANE/resourceGroups/GROUP"),
                "{error}"
            );
        }
        assert_eq!(
            environment_id("/planes/radius/local/resourceGroups/g", "dev"),
            "/planes/radius/local/resourceGroups/g/providers/Applications.Core/environments/dev"
        );
    }

    #[test]
    fn names_and_namespaces_follow_kubernetes_rules() {
        assert_eq!(default_name(Path::new("dir/app.bicep")), "app.bicep");
        assert!(check_object_name("deploymenttemplate.bicep", true).is_ok());
        let error = check_object_name("My_App.bicep", true).expect_err("upper case");
        assert!(error.to_string().contains("--name"), "{error}");
        assert!(check_object_name("-a", false).is_err());
        assert!(check_namespace("team-a").is_ok());
        assert!(check_namespace("team.a").is_err());
    }

    #[test]
    fn provider_config_in_radius_order_and_layout() {
        let scope = "/planes/radius/local/resourceGroups/g";
        let text = provider_config_text(
            scope,
            Some("/subscriptions/s/resourceGroups/r"),
            Some("/planes/aws/aws/accounts/1/regions/us-west-2"),
        );
        let keys: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with("  \"") && line.ends_with('{'))
            .collect();
        assert_eq!(
            keys,
            [
                "  \"radius\": {",
                "  \"az\": {",
                "  \"aws\": {",
                "  \"deployments\": {"
            ]
        );
        assert!(
            text.contains("\"type\": \"AzureResourceManager\""),
            "{text}"
        );
        assert!(text.contains("\"type\": \"AWS\""), "{text}");
        assert_eq!(
            provider_config_text(scope, None, None),
            "{\n  \"radius\": {\n    \"type\": \"Radius\",\n    \"value\": {\n      \"scope\": \"/planes/radius/local/resourceGroups/g\"\n    }\n  },\n  \"deployments\": {\n    \"type\": \"Microsoft.Resources\",\n    \"value\": {\n      \"scope\": \"/planes/radius/local/resourceGroups/g\"\n    }\n  }\n}"
        );
    }

    /// How `value` is written as the value of a parameter in the manifest,
    /// up to the end of its last line (and that it reads back the same).
    fn parameter_yaml(value: &str) -> String {
        let manifest = Manifest {
            name: "app.bicep".into(),
            namespace: None,
            parameters: vec![("p".into(), value.into())],
            provider_config: "{}".into(),
            template: "{}".into(),
        };
        let yaml = render_manifest(&manifest).expect("yaml");
        let start = yaml.find("\n    p: ").expect("parameter p") + "\n    p: ".len();
        let end = yaml.find("\n  providerConfig: ").expect("providerConfig");
        let read: serde_yaml::Value = serde_yaml::from_str(&yaml).expect("reads back");
        assert_eq!(read["spec"]["parameters"]["p"].as_str(), Some(value));
        yaml[start..end].to_string()
    }

    #[test]
    fn parameter_values_in_the_styles_yaml_v3_writes_them() {
        // Each is written exactly as Radius's CLI (Go's yaml.v3) writes it;
        // docs/manifest.md lists the values serde_yaml quotes differently.
        for (value, expected) in [
            ("v1.0.0", "v1.0.0"),
            ("1.2.3", "1.2.3"),
            ("a: b", "'a: b'"),
            ("- x", "'- x'"),
            ("#x", "'#x'"),
            ("it's", "it's"),
            ("'q'", "'''q'''"),
            (" lead", "' lead'"),
            ("trail ", "'trail '"),
            ("tab\there", "\"tab\\there\""),
            ("nul\u{0}", "\"nul\\0\""),
            ("x\rb", "\"x\\rb\""),
            ("café", "café"),
            ("{\"a\":1}", "'{\"a\":1}'"),
            ("[80,443]", "'[80,443]'"),
            ("https://x/y?a=b#c", "https://x/y?a=b#c"),
            ("abc # d", "'abc # d'"),
            ("a#b", "a#b"),
            ("~x", "~x"),
            ("0b2", "0b2"),
            ("12:60", "12:60"),
            // Literal blocks, with yaml.v3's chomping and indentation hints.
            ("a\nb", "|-\n      a\n      b"),
            ("a\nb\n", "|\n      a\n      b"),
            ("a\n\nb\n\n", "|+\n      a\n\n      b\n"),
            (" a\nb", "|2-\n       a\n      b"),
            ("a \nb", "\"a \\nb\""),
            ("a\nb ", "\"a\\nb \""),
        ] {
            assert_eq!(parameter_yaml(value), expected, "{value:?}");
        }
    }

    #[test]
    fn text_that_would_read_as_another_type_is_quoted() {
        // yaml.v3 writes these in double quotes, serde_yaml in single
        // quotes: the same string either way.
        for value in [
            "3", "", "true", "False", "null", "~", "0x1F", "0o17", "08", "1e3", ".5", "+1", "-.5",
            ".nan", "-0",
        ] {
            assert_eq!(parameter_yaml(value), format!("'{value}'"), "{value:?}");
        }
    }

    #[test]
    fn values_yaml_1_1_reads_as_booleans_or_numbers_are_double_quoted() {
        // kubectl reads YAML by 1.1's rules: these must stay text, quoted as
        // yaml.v3 quotes them.
        for value in [
            "no", "Yes", "OFF", "y", "N", "1_000", "1_000.5", "-0x_1F", "0b1_0", "1_0e3",
        ] {
            assert_eq!(parameter_yaml(value), format!("\"{value}\""), "{value:?}");
        }
        for value in ["nope", "a_b", "_", "1_x", "yes please", "0x_g", "v1_2"] {
            assert!(!reads_as_non_text_in_yaml_1_1(value), "{value:?}");
        }
    }

    #[test]
    fn yaml_key_order_is_natural() {
        let mut keys = vec!["a10", "a9", "b", "B", "a_b", "aB", "a", "x1y", "x10", "x01"];
        keys.sort_by(|a, b| go_yaml_key_order(a, b));
        assert_eq!(
            keys,
            ["B", "a", "a_b", "a9", "a10", "aB", "b", "x1y", "x01", "x10"]
        );
    }

    #[test]
    fn manifest_layout() {
        let manifest = Manifest {
            name: "app.bicep".into(),
            namespace: Some("team".into()),
            parameters: vec![("tag".into(), "v1".into()), ("replicas".into(), "3".into())],
            provider_config: "{\n  \"x\": 1\n}".into(),
            template: "{}".into(),
        };
        assert_eq!(
            render_manifest(&manifest).expect("yaml"),
            "apiVersion: radapp.io/v1alpha3\nkind: DeploymentTemplate\nmetadata:\n  name: app.bicep\n  namespace: team\nspec:\n  parameters:\n    replicas: '3'\n    tag: v1\n  providerConfig: |-\n    {\n      \"x\": 1\n    }\n  template: '{}'\n"
        );
        let empty = Manifest {
            parameters: Vec::new(),
            namespace: None,
            ..manifest
        };
        let yaml = render_manifest(&empty).expect("yaml");
        assert!(
            yaml.contains("\n  name: app.bicep\nspec:\n  parameters: {}\n"),
            "{yaml}"
        );
    }

    #[test]
    fn templates_must_be_arm_json() {
        assert!(parse_template(r#"{"resources": {}}"#).is_ok());
        assert!(parse_template(r#"{"resources": []}"#).is_ok());
        for (text, expected) in [
            ("{", "not JSON"),
            ("[]", "expected a JSON object"),
            (r#"{"parameters": {}}"#, "no \"resources\""),
            (
                r#"{"resources": {}, "parameters": []}"#,
                "\"parameters\" is not an object",
            ),
        ] {
            let error = parse_template(text).expect_err(text);
            assert!(error.contains(expected), "{error}");
        }
    }

    #[test]
    fn programs_are_found_on_path_only_when_executable() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = std::env::join_paths([dir.path()]).expect("path");
        assert_eq!(find_on_path("bicep", Some(&path)), None);
        let program = dir
            .path()
            .join(format!("bicep{}", std::env::consts::EXE_SUFFIX));
        std::fs::write(&program, "#!/bin/sh\n").expect("write");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(find_on_path("bicep", Some(&path)), None);
            std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
        }
        assert_eq!(find_on_path("bicep", Some(&path)), Some(program));
        assert_eq!(find_on_path("bicep", None), None);
    }
}
