//! The manifest as YAML text, laid out as Radius's CLI (Go's `yaml.v3`)
//! lays it out.

use std::cmp::Ordering;

use serde::Serialize;

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
    use super::*;

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
}
