//! Label selectors (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`) and field
//! selectors: `metadata.name` and `metadata.namespace` on every kind, plus
//! the kind-specific fields the real server indexes ([`fields_of`]).

use serde_json::Value;

use crate::error::ApiError;

#[derive(Debug, Clone)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

impl Requirement {
    /// The label or field the requirement is about.
    fn key(&self) -> &String {
        match self {
            Requirement::Equals(key, _)
            | Requirement::NotEquals(key, _)
            | Requirement::In(key, _)
            | Requirement::NotIn(key, _)
            | Requirement::Exists(key)
            | Requirement::NotExists(key) => key,
        }
    }

    /// The values it names (none for an existence check).
    fn values(&self) -> &[String] {
        match self {
            Requirement::Equals(_, value) | Requirement::NotEquals(_, value) => {
                std::slice::from_ref(value)
            }
            Requirement::In(_, values) | Requirement::NotIn(_, values) => values,
            Requirement::Exists(_) | Requirement::NotExists(_) => &[],
        }
    }
}

/// A parsed label or field selector; empty matches everything.
#[derive(Debug, Clone, Default)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

/// Split on commas that are not inside parentheses.
fn split_top(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0;
    let mut current = String::new();
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    trimmed(parts)
}

/// Split a field selector on commas not escaped with `\`, as the real
/// server does (`fields.ParseSelector`: values may hold `\,`).
fn split_fields(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut escaped = false;
    for c in text.chars() {
        if c == ',' && !escaped {
            parts.push(std::mem::take(&mut current));
            continue;
        }
        escaped = c == '\\' && !escaped;
        current.push(c);
    }
    parts.push(current);
    trimmed(parts)
}

fn trimmed(parts: Vec<String>) -> Vec<String> {
    parts
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// A label name, or the name part of a label key: at most 63 characters,
/// alphanumerics, `-`, `_` and `.`, starting and ending alphanumeric.
fn is_label_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=63).contains(&bytes.len())
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A label key: a name, with an optional DNS subdomain prefix and `/`.
fn is_label_key(key: &str) -> bool {
    match key.split_once('/') {
        None => is_label_name(key),
        Some((prefix, name)) => {
            is_label_name(name)
                && prefix.len() <= 253
                && prefix.split('.').all(|label| {
                    let bytes = label.as_bytes();
                    !bytes.is_empty()
                        && bytes[0].is_ascii_alphanumeric()
                        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
                        && bytes
                            .iter()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
                })
        }
    }
}

/// A label value: empty, or a label name.
fn is_label_value(value: &str) -> bool {
    value.is_empty() || is_label_name(value)
}

/// A field selector key: a field path.
fn is_field_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

/// `text` with `\`, `,` and `=` escaped, as a field selector value is
/// written.
fn escape_field_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A field selector value as written, unescaped; `None` for an unescaped
/// `=` or `,` or an unknown escape (the real server refuses both).
fn unescape_field_value(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                c @ ('\\' | ',' | '=') => out.push(c),
                _ => return None,
            },
            ',' | '=' => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

impl Selector {
    /// Parse a label selector (`what` is `label`) or a field selector (any
    /// other `what`). Keys and values follow the real server's rules (label
    /// keys and values as Kubernetes defines them; field values with `\`
    /// escapes), so that every requirement has exactly one reading and
    /// [`Selector::canonical`] says the same selector again.
    pub fn parse(text: &str, what: &str) -> Result<Self, ApiError> {
        if what == "label" {
            Self::parse_labels(text)
        } else {
            Self::parse_fields(text, what)
        }
    }

    fn bad(what: &str, part: &str) -> ApiError {
        ApiError::bad_request(format!(
            "unable to parse requirement: invalid {what} selector {part:?}"
        ))
    }

    fn parse_labels(text: &str) -> Result<Self, ApiError> {
        let bad = |part: &str| Self::bad("label", part);
        let mut requirements = Vec::new();
        for part in split_top(text) {
            let set = |rest: &str| -> Option<Vec<String>> {
                let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
                Some(
                    inner
                        .split(',')
                        .map(|v| v.trim().to_string())
                        .filter(|v| !v.is_empty())
                        .collect(),
                )
            };
            let requirement = if let Some((key, value)) = part.split_once("!=") {
                Requirement::NotEquals(key.trim().into(), value.trim().into())
            } else if let Some((key, value)) = part.split_once("==") {
                Requirement::Equals(key.trim().into(), value.trim().into())
            } else if let Some((key, value)) = part.split_once('=') {
                Requirement::Equals(key.trim().into(), value.trim().into())
            } else if let Some((key, rest)) = part.split_once(" notin ") {
                Requirement::NotIn(key.trim().into(), set(rest).ok_or_else(|| bad(&part))?)
            } else if let Some((key, rest)) = part.split_once(" in ") {
                Requirement::In(key.trim().into(), set(rest).ok_or_else(|| bad(&part))?)
            } else if let Some(key) = part.strip_prefix('!') {
                Requirement::NotExists(key.trim().into())
            } else {
                Requirement::Exists(part.clone())
            };
            let (key, values) = (requirement.key(), requirement.values());
            if !is_label_key(key) {
                return Err(ApiError::bad_request(format!(
                    "unable to parse requirement: invalid label key {key:?}: a valid label key is a name of at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric, with an optional DNS subdomain prefix and '/'"
                )));
            }
            if let Some(value) = values.iter().find(|value| !is_label_value(value)) {
                return Err(ApiError::bad_request(format!(
                    "unable to parse requirement: invalid label value {value:?}: a valid label value is empty or at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
                )));
            }
            requirements.push(requirement);
        }
        Ok(Self { requirements })
    }

    fn parse_fields(text: &str, what: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for part in split_fields(text) {
            // The first operator from the left, as the real server splits
            // (`a=b!=c` is `a` equal to `b!=c`, which it then refuses for
            // the unescaped `=`).
            let operator = part.char_indices().find_map(|(at, _)| {
                let rest = &part[at..];
                ["!=", "==", "="]
                    .into_iter()
                    .find(|op| rest.starts_with(op))
                    .map(|op| (at, op))
            });
            let requirement = match operator {
                Some((at, op)) => {
                    let key = part[..at].trim().to_string();
                    let value = unescape_field_value(part[at + op.len()..].trim())
                        .ok_or_else(|| Self::bad(what, &part))?;
                    if op == "!=" {
                        Requirement::NotEquals(key, value)
                    } else {
                        Requirement::Equals(key, value)
                    }
                }
                // Set-based requirements parse, for `check_fields` to
                // refuse by name.
                None => match part.split_once(' ') {
                    Some((key, _)) if part.contains(" in ") || part.contains(" notin ") => {
                        Requirement::In(key.trim().into(), Vec::new())
                    }
                    _ => match part.strip_prefix('!') {
                        Some(key) => Requirement::NotExists(key.trim().into()),
                        None => Requirement::Exists(part.clone()),
                    },
                },
            };
            if !is_field_key(requirement.key()) {
                return Err(Self::bad(what, &part));
            }
            requirements.push(requirement);
        }
        Ok(Self { requirements })
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// One spelling for every way of writing the same selector (`==` as
    /// `=`, no spaces, set values and requirements sorted), so that two
    /// requests for the same list can be recognised as such.
    pub fn canonical(&self) -> String {
        let set = |values: &[String]| {
            let mut values = values.to_vec();
            values.sort();
            values.dedup();
            values.join(",")
        };
        // Label values hold none of `\\`, `,` and `=`; field values are
        // written escaped.
        let mut parts: Vec<String> = self
            .requirements
            .iter()
            .map(|requirement| match requirement {
                Requirement::Equals(key, v) => format!("{key}={}", escape_field_value(v)),
                Requirement::NotEquals(key, v) => format!("{key}!={}", escape_field_value(v)),
                Requirement::In(key, values) => format!("{key} in ({})", set(values)),
                Requirement::NotIn(key, values) => format!("{key} notin ({})", set(values)),
                Requirement::Exists(key) => key.clone(),
                Requirement::NotExists(key) => format!("!{key}"),
            })
            .collect();
        parts.sort();
        parts.dedup();
        parts.join(",")
    }

    /// Match against a lookup of keys to values.
    fn matches_with(&self, lookup: impl Fn(&str) -> Option<String>) -> bool {
        self.requirements
            .iter()
            .all(|requirement| match requirement {
                Requirement::Equals(key, value) => lookup(key).as_deref() == Some(value.as_str()),
                Requirement::NotEquals(key, value) => {
                    lookup(key).as_deref() != Some(value.as_str())
                }
                Requirement::In(key, values) => lookup(key).is_some_and(|v| values.contains(&v)),
                Requirement::NotIn(key, values) => lookup(key).is_none_or(|v| !values.contains(&v)),
                Requirement::Exists(key) => lookup(key).is_some(),
                Requirement::NotExists(key) => lookup(key).is_none(),
            })
    }

    pub fn matches_labels(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        self.matches_with(|key| {
            labels
                .and_then(|l| l.get(key))
                .and_then(Value::as_str)
                .map(str::to_string)
        })
    }

    pub fn matches_fields(&self, object: &Value) -> bool {
        self.matches_with(|key| {
            let pointer = format!("/{}", key.replace('.', "/"));
            object.pointer(&pointer).map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
        })
    }

    /// Check that every key is a supported field of `plural` (in `group`),
    /// and rewrite keys to where the stored object keeps them.
    pub fn check_fields(mut self, group: &str, plural: &str) -> Result<Self, ApiError> {
        let supported = fields_of(group, plural);
        for requirement in &mut self.requirements {
            let key = match requirement {
                Requirement::Equals(k, _) | Requirement::NotEquals(k, _) => k,
                _ => {
                    return Err(ApiError::bad_request(
                        "field selectors support only =, == and !=",
                    ));
                }
            };
            let stored = match key.as_str() {
                "metadata.name" | "metadata.namespace" => key.clone(),
                other => match supported.iter().find(|(name, _)| *name == other) {
                    Some((_, stored)) => (*stored).to_string(),
                    None => {
                        return Err(ApiError::bad_request(format!(
                            "field label not supported: {key}"
                        )));
                    }
                },
            };
            *key = stored;
        }
        Ok(self)
    }
}

/// Kind-specific field selectors, as the real server registers them:
/// (selector key, where the stored object keeps it). `events.k8s.io/v1`
/// Events are stored in core/v1 form, hence the renames; `kubectl describe`
/// lists an object's Events with `involvedObject.*`.
pub fn fields_of(group: &str, plural: &str) -> &'static [(&'static str, &'static str)] {
    match (group, plural) {
        ("", "events") => &[
            ("involvedObject.kind", "involvedObject.kind"),
            ("involvedObject.namespace", "involvedObject.namespace"),
            ("involvedObject.name", "involvedObject.name"),
            ("involvedObject.uid", "involvedObject.uid"),
            ("involvedObject.apiVersion", "involvedObject.apiVersion"),
            (
                "involvedObject.resourceVersion",
                "involvedObject.resourceVersion",
            ),
            ("involvedObject.fieldPath", "involvedObject.fieldPath"),
            ("reason", "reason"),
            ("reportingComponent", "reportingComponent"),
            ("source", "source.component"),
            ("type", "type"),
        ],
        ("events.k8s.io", "events") => &[
            ("regarding.kind", "involvedObject.kind"),
            ("regarding.namespace", "involvedObject.namespace"),
            ("regarding.name", "involvedObject.name"),
            ("regarding.uid", "involvedObject.uid"),
            ("regarding.apiVersion", "involvedObject.apiVersion"),
            (
                "regarding.resourceVersion",
                "involvedObject.resourceVersion",
            ),
            ("regarding.fieldPath", "involvedObject.fieldPath"),
            ("reason", "reason"),
            ("reportingController", "reportingComponent"),
            ("type", "type"),
        ],
        ("", "namespaces") => &[("status.phase", "status.phase")],
        ("", "secrets") => &[("type", "type")],
        _ => &[],
    }
}

/// Both selectors of a list or watch request.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub labels: Selector,
    pub fields: Selector,
}

impl Filter {
    pub fn matches(&self, object: &Value) -> bool {
        self.is_everything()
            || (self.labels.matches_labels(object) && self.fields.matches_fields(object))
    }

    /// No selector at all: every object matches.
    pub fn is_everything(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors_follow_kubernetes_syntax() {
        let object = json!({"metadata": {"name": "a", "labels": {"app": "web", "tier": "front"}}});
        for (text, expected) in [
            ("app=web", true),
            ("app==web,tier=front", true),
            ("app!=web", false),
            ("tier in (front, back)", true),
            ("tier notin (front)", false),
            ("app", true),
            ("!app", false),
            ("missing", false),
        ] {
            assert_eq!(
                Selector::parse(text, "label")
                    .expect(text)
                    .matches_labels(&object),
                expected,
                "{text}"
            );
        }
        assert!(
            Selector::parse("metadata.name=a", "field")
                .expect("field")
                .matches_fields(&object)
        );
        assert!(
            Selector::parse("spec.x=1", "field")
                .expect("parses")
                .check_fields("", "configmaps")
                .is_err()
        );
    }

    #[test]
    fn one_selector_written_two_ways_has_one_canonical_form() {
        let canonical = |text: &str| Selector::parse(text, "label").expect(text).canonical();
        assert_eq!(
            canonical("tier in (back, front),app==web,!old"),
            canonical("!old, app=web, tier in (front,back)")
        );
        assert_eq!(canonical(""), "");
        assert_ne!(canonical("app=web"), canonical("app!=web"));
        assert_ne!(canonical("app=web"), canonical("app=web,tier"));
    }

    #[test]
    fn events_are_selected_by_the_object_they_are_about() {
        // Stored in core/v1 form, whichever API wrote them.
        let event = json!({"metadata": {"name": "e1", "namespace": "default"},
            "involvedObject": {"kind": "DeploymentTemplate", "name": "demo", "namespace": "default"},
            "reason": "DeploymentStarted", "type": "Normal", "source": {"component": "radwasm"}});
        let matches = |group: &str, text: &str| {
            Selector::parse(text, "field")
                .expect(text)
                .check_fields(group, "events")
                .map(|selector| selector.matches_fields(&event))
        };
        let describe = "involvedObject.name=demo,involvedObject.namespace=default,involvedObject.kind=DeploymentTemplate";
        assert_eq!(matches("", describe).ok(), Some(true));
        assert_eq!(matches("", "involvedObject.name=other").ok(), Some(false));
        assert_eq!(matches("", "source=radwasm,type=Normal").ok(), Some(true));
        assert_eq!(
            matches(
                "events.k8s.io",
                "regarding.name=demo,reason=DeploymentStarted"
            )
            .ok(),
            Some(true)
        );
        assert!(matches("events.k8s.io", "involvedObject.name=demo").is_err());
        assert!(matches("", "message=x").is_err());
    }
}
