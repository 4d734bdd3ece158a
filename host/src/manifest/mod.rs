//! Generating a `DeploymentTemplate` manifest: [`GenerateOptions`] and
//! [`generate`], which turn a Bicep file or a compiled ARM template into a
//! manifest in the shape Radius's CLI writes (`spec.parameters` a map of
//! text, `spec.providerConfig` JSON text), after checking the parameters
//! against the ones the template declares. `radwasm manifest generate` (and
//! `radwasm bicep generate-kubernetes-manifest`) parses its arguments into
//! [`GenerateOptions`] and calls [`generate`].
//!
//! The text is laid out as Radius's CLI lays it out: its JSON is Go's
//! `json.MarshalIndent` (keys sorted, two spaces, `<`, `>`, `&` escaped),
//! written by [`crate::go_text`], and its YAML is written by serde_yaml,
//! whose emitter is libyaml, of which Go's `yaml.v3` is a port (keys in
//! `yaml.v3`'s order, see [`render::render_manifest`]). `docs/manifest.md`
//! lists the few values the two YAML writers quote differently.
//!
//! The steps, one module each: [`scope`] (the Radius scope, names and
//! `spec.providerConfig`), [`template`] (reading or compiling the template),
//! [`parameters`] (the parameters as given), [`check`] (checking them
//! against the template) and [`render`] (the manifest as YAML).

use std::path::PathBuf;

use anyhow::Context;

use crate::go_text;

pub mod check;
pub mod parameters;
pub mod render;
pub mod scope;
pub mod template;

use check::check_parameters;
use parameters::{inject_parameter, merge_parameter, parse_parameter_arg, read_parameters};
use render::{Manifest, render_manifest};
use scope::{
    check_namespace, check_object_name, check_outfile, default_name, environment_id,
    provider_config_text, radius_scope,
};
use template::load_template;

/// What to generate: the template, its parameters and where the manifest
/// goes. Each field is the command-line flag of the same name.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    /// The template: a `.bicep` file (compiled with `bicep build` from PATH)
    /// or a compiled ARM template (`.json`).
    pub file: PathBuf,
    /// `--parameters` arguments: `@FILE.json`, `@FILE.bicepparam`,
    /// `NAME=VALUE` or `NAME=@FILE`; a later value for the same parameter
    /// wins.
    pub parameters: Vec<String>,
    /// Write the manifest to this file (`.yaml` or `.yml`) instead of stdout.
    pub outfile: Option<PathBuf>,
    /// `metadata.name` [default: the file's name].
    pub name: Option<String>,
    /// `metadata.namespace` (left out when `None`).
    pub namespace: Option<String>,
    /// Radius resource group: the scope `/planes/radius/local/resourceGroups/GROUP`.
    pub group: Option<String>,
    /// The Radius scope itself: `/planes/radius/PLANE/resourceGroups/GROUP`.
    pub scope: Option<String>,
    /// Radius environment (name in the scope's group, or full id): the value
    /// of the template's `environment` parameter when it declares one and no
    /// value is given; a full id also supplies the scope.
    pub environment: Option<String>,
    /// Scope for Azure resources (provider `az`).
    pub azure_scope: Option<String>,
    /// Scope for AWS resources (provider `aws`).
    pub aws_scope: Option<String>,
}

/// Check everything, then write the manifest to `options.outfile` (and say
/// so, with the next step, on stdout) or to stdout (the next step on
/// stderr). Notes about secure parameters go to stderr.
pub fn generate(options: &GenerateOptions) -> anyhow::Result<()> {
    // Everything is read and checked first; the manifest is written last, so
    // a mistake anywhere leaves no file behind.
    let scope = radius_scope(
        options.group.as_deref(),
        options.scope.as_deref(),
        options.environment.as_deref(),
    )?;
    let name = match &options.name {
        Some(name) => name.clone(),
        None => default_name(&options.file),
    };
    check_object_name(&name, options.name.is_none())?;
    if let Some(namespace) = &options.namespace {
        check_namespace(namespace)?;
    }
    if let Some(outfile) = &options.outfile {
        check_outfile(outfile)?;
    }

    let template = load_template(&options.file)?;
    let mut given = Vec::new();
    for arg in &options.parameters {
        let parsed = parse_parameter_arg(arg).map_err(anyhow::Error::msg)?;
        for parameter in read_parameters(parsed)? {
            merge_parameter(&mut given, parameter);
        }
    }
    if let Some(environment) = &options.environment {
        let id = environment_id(&scope, environment);
        inject_parameter(&template, &mut given, "environment", &id, "--environment");
    }
    let checked = check_parameters(&template, &given).map_err(|problems| {
        anyhow::anyhow!(
            "{}: the parameters do not fit the template:\n  - {}",
            options.file.display(),
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
        namespace: options.namespace.clone(),
        parameters: checked.values,
        provider_config: provider_config_text(
            &scope,
            options.azure_scope.as_deref(),
            options.aws_scope.as_deref(),
        ),
        template: go_text::to_string_indent(&template),
    };
    let yaml = render_manifest(&manifest).context("cannot write the manifest as YAML")?;
    match &options.outfile {
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
    Ok(())
}
