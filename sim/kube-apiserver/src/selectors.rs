//! Label selectors (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`) and the
//! field selectors every kind supports (`metadata.name`, `metadata.namespace`).

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
    parts
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

impl Selector {
    pub fn parse(text: &str, what: &str) -> Result<Self, ApiError> {
        let bad = |part: &str| {
            ApiError::bad_request(format!(
                "unable to parse requirement: invalid {what} selector {part:?}"
            ))
        };
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
            } else if part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
            {
                Requirement::Exists(part.clone())
            } else {
                return Err(bad(&part));
            };
            requirements.push(requirement);
        }
        Ok(Self { requirements })
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
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

    /// Field selectors the server supports on every kind.
    pub fn check_fields(&self) -> Result<(), ApiError> {
        for requirement in &self.requirements {
            let key = match requirement {
                Requirement::Equals(k, _) | Requirement::NotEquals(k, _) => k,
                _ => {
                    return Err(ApiError::bad_request(
                        "field selectors support only =, == and !=",
                    ));
                }
            };
            if !matches!(key.as_str(), "metadata.name" | "metadata.namespace") {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {key}"
                )));
            }
        }
        Ok(())
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
                .check_fields()
                .is_err()
        );
    }
}
