//! `limit`/`continue` paging. A continue token names the list it belongs to
//! (the resource as addressed, the namespace or all namespaces, both
//! selectors), the resourceVersion of the snapshot its pages come from, and
//! the position in that snapshot. The snapshot itself is kept by the store
//! under the same list and resourceVersion, so two lists that start at one
//! resourceVersion never share pages, and a token presented to any other
//! list is refused with 400 instead of continuing it.

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::error::ApiError;

/// What defines one list. Two requests with equal scopes at one
/// resourceVersion see the same items.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ListScope {
    pub group: String,
    pub version: String,
    /// The resource (plural), as the client addressed it.
    pub resource: String,
    /// `None`: all namespaces (and cluster-scoped resources).
    pub namespace: Option<String>,
    /// The selectors in canonical form (see `Selector::canonical`), so that
    /// `a=b,c=d` and `c==d, a=b` are one list.
    #[serde(rename = "labelSelector")]
    pub labels: String,
    #[serde(rename = "fieldSelector")]
    pub fields: String,
}

impl ListScope {
    /// For messages: `example.com/v1 widgets in namespace default with labelSelector "a=b"`.
    fn describe(&self) -> String {
        let mut text = if self.group.is_empty() {
            format!("{} {}", self.version, self.resource)
        } else {
            format!("{}/{} {}", self.group, self.version, self.resource)
        };
        match &self.namespace {
            Some(namespace) => text.push_str(&format!(" in namespace {namespace}")),
            None => text.push_str(" in all namespaces"),
        }
        if !self.labels.is_empty() {
            text.push_str(&format!(" with labelSelector {:?}", self.labels));
        }
        if !self.fields.is_empty() {
            text.push_str(&format!(" with fieldSelector {:?}", self.fields));
        }
        text
    }
}

/// The version tag the real server writes into its tokens.
const TOKEN_VERSION: &str = "meta.k8s.io/v1";

/// A decoded continue token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContinueToken {
    #[serde(rename = "v")]
    pub version: String,
    /// The resourceVersion of the snapshot the pages come from.
    pub rv: u64,
    /// Index in the snapshot of the next page's first item.
    pub start: usize,
    /// The list the token continues.
    pub list: ListScope,
}

fn invalid(detail: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!(
        "invalid continue token: continue key is not valid: {detail}"
    ))
}

impl ContinueToken {
    pub fn new(list: ListScope, rv: u64, start: usize) -> Self {
        Self {
            version: TOKEN_VERSION.into(),
            rv,
            start,
            list,
        }
    }

    pub fn encode(&self) -> String {
        let json = serde_json::to_string(self).expect("a token serialises");
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    }

    /// Decode `text` and check that it continues `list`: any token that
    /// does not is refused with 400 BadRequest, in the real server's words.
    pub fn decode_for(text: &str, list: &ListScope) -> Result<Self, ApiError> {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text)
            .map_err(invalid)?;
        let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(invalid)?;
        match value.get("v").and_then(serde_json::Value::as_str) {
            Some(TOKEN_VERSION) => {}
            other => {
                return Err(invalid(format!(
                    "server does not recognize this encoded version {}",
                    other.unwrap_or("")
                )));
            }
        }
        if value
            .get("rv")
            .and_then(serde_json::Value::as_u64)
            .is_none_or(|rv| rv == 0)
        {
            return Err(invalid(
                "incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
            ));
        }
        if value.get("start").is_none() {
            return Err(invalid("encoded start key empty (version meta.k8s.io/v1)"));
        }
        let token: Self = serde_json::from_value(value).map_err(invalid)?;
        if token.list != *list {
            return Err(invalid(format!(
                "it continues the list of {}, not of {}",
                token.list.describe(),
                list.describe()
            )));
        }
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(resource: &str, namespace: Option<&str>, labels: &str) -> ListScope {
        ListScope {
            group: "example.com".into(),
            version: "v1".into(),
            resource: resource.into(),
            namespace: namespace.map(str::to_string),
            labels: labels.into(),
            fields: String::new(),
        }
    }

    #[test]
    fn a_token_continues_only_its_own_list() {
        let widgets = scope("widgets", Some("default"), "");
        let token = ContinueToken::new(widgets.clone(), 42, 10).encode();
        assert_eq!(
            ContinueToken::decode_for(&token, &widgets).ok(),
            Some(ContinueToken::new(widgets, 42, 10))
        );
        for other in [
            scope("gadgets", Some("default"), ""),
            scope("widgets", None, ""),
            scope("widgets", Some("other"), ""),
            scope("widgets", Some("default"), "app=web"),
            ListScope {
                version: "v2".into(),
                ..scope("widgets", Some("default"), "")
            },
        ] {
            let error = ContinueToken::decode_for(&token, &other).expect_err("refused");
            assert_eq!((error.code, error.reason), (400, "BadRequest"));
            assert!(
                error.message.starts_with(
                    "invalid continue token: continue key is not valid: it continues the list of example.com/v1 widgets in namespace default, not of"
                ),
                "{}",
                error.message
            );
        }
    }

    #[test]
    fn malformed_tokens_get_the_real_servers_messages() {
        let list = scope("widgets", None, "");
        let encode =
            |json: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json.as_bytes());
        for (token, message) in [
            ("not base64!".to_string(), "continue key is not valid: "),
            (
                encode("[1]"),
                "server does not recognize this encoded version",
            ),
            (
                encode(r#"{"v":"meta.k8s.io/v1","start":1}"#),
                "incorrect encoded start resourceVersion",
            ),
            (
                encode(r#"{"v":"meta.k8s.io/v1","rv":5}"#),
                "encoded start key empty",
            ),
            // The old form, bound to a resourceVersion alone.
            (
                encode(r#"{"rv":5,"start":10}"#),
                "server does not recognize this encoded version",
            ),
        ] {
            let error = ContinueToken::decode_for(&token, &list).expect_err(&token);
            assert_eq!(error.code, 400, "{token}");
            assert!(
                error.message.starts_with("invalid continue token: ")
                    && error.message.contains(message),
                "{token}: {}",
                error.message
            );
        }
    }
}
