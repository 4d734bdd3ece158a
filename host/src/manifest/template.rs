//! The template: a compiled ARM template read as it is, or a Bicep file
//! compiled by the `bicep` found on PATH.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use serde_json::Value;

/// Read the template: `.json` as it is, `.bicep` compiled by `bicep build`.
pub(super) fn load_template(file: &Path) -> anyhow::Result<Value> {
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
pub(super) fn run_bicep_cli(subcommand: &str, file: &Path) -> anyhow::Result<String> {
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

/// The parameters an ARM template declares (`parameters`), by name.
pub(super) fn declared_parameters(template: &Value) -> Vec<(&String, &Value)> {
    template
        .get("parameters")
        .and_then(Value::as_object)
        .map(|declared| declared.iter().collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

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
