//! The kinds the store serves: the built-in ones, and those that custom
//! resource definitions register and take away.

use serde_json::{Value, json};

use super::{Key, Store, now};
use crate::error::ApiError;
use crate::kinds::{self, Kind};

impl Store {
    pub fn kinds(&self) -> &[Kind] {
        &self.kinds
    }

    /// The kind served at `group`/`plural` (any version).
    pub fn kind(&self, group: &str, plural: &str) -> Option<&Kind> {
        self.kinds
            .iter()
            .find(|k| k.group == group && k.plural == plural)
    }

    pub fn kind_version(&self, group: &str, version: &str, plural: &str) -> Option<&Kind> {
        self.kinds
            .iter()
            .find(|k| k.group == group && k.version == version && k.plural == plural)
    }

    pub(super) fn register_crd(&mut self, crd: &mut Value) -> Result<(), ApiError> {
        let name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let defined = kinds::from_crd(crd).map_err(|problems| {
            ApiError::invalid(
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                &name,
                problems,
            )
        })?;
        if let Some(first) = defined.first() {
            let (group, plural) = (first.group.clone(), first.plural.clone());
            self.kinds
                .retain(|k| !(k.group == group && k.plural == plural));
        }
        let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
        self.kinds.extend(defined);
        crd["status"] = json!({
            "acceptedNames": names,
            "storedVersions": crd.pointer("/spec/versions").and_then(Value::as_array).map(|v| v.iter()
                .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                .filter_map(|v| v.get("name").cloned()).collect::<Vec<_>>()).unwrap_or_default(),
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now()},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now()},
            ],
        });
        Ok(())
    }

    pub(super) fn unregister_crd(&mut self, crd: &Value) {
        let group = crd
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let plural = crd
            .pointer("/spec/names/plural")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        self.kinds
            .retain(|k| !(k.custom && k.group == group && k.plural == plural));
        let doomed: Vec<Key> = self
            .objects
            .keys()
            .filter(|k| k.group == group && k.plural == plural)
            .cloned()
            .collect();
        for key in doomed {
            self.remove(key, None);
        }
    }
}
