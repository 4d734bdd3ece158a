//! Create and update: names, namespaces, schemas, server-owned fields,
//! `generation` and the status subresource, as the real server applies
//! them on write.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Value, json};

use super::{ChangeType, Key, Store, finalizers, now};
use crate::error::ApiError;
use crate::kinds::Kind;
use crate::schema;

/// Every namespace carries the label `kubernetes.io/metadata.name` with its
/// name, set by the server on every write (as the real one does), so that a
/// label selector can pick namespaces by name.
fn name_label(kind: &Kind, object: &mut Value) {
    if kind.kind != "Namespace" || !kind.group.is_empty() {
        return;
    }
    let name = object
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or_default();
    if !object["metadata"]
        .get("labels")
        .is_some_and(Value::is_object)
    {
        object["metadata"]["labels"] = json!({});
    }
    object["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
}

/// What the real server's strategies fill in for built-in kinds: a
/// Secret's `type` is `Opaque` when empty, and its write-only `stringData`
/// is merged into `data` (base64) and dropped; a new Namespace is `Active`
/// with the `kubernetes` finalizer.
fn builtin_defaults(kind: &Kind, object: &mut Value, creating: bool) {
    use base64::Engine;
    if !kind.group.is_empty() {
        return;
    }
    match kind.kind.as_str() {
        "Secret" => {
            if object
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                object["type"] = json!("Opaque");
            }
            let Some(Value::Object(plain)) =
                object.as_object_mut().and_then(|o| o.remove("stringData"))
            else {
                return;
            };
            if !object.get("data").is_some_and(Value::is_object) {
                object["data"] = json!({});
            }
            for (key, value) in plain {
                let text = value.as_str().unwrap_or_default();
                object["data"][key] = json!(base64::engine::general_purpose::STANDARD.encode(text));
            }
        }
        "Namespace" if creating => {
            if object.pointer("/spec/finalizers").is_none() {
                object["spec"]["finalizers"] = json!(["kubernetes"]);
            }
            if object.pointer("/status/phase").is_none() {
                object["status"]["phase"] = json!("Active");
            }
        }
        _ => {}
    }
}

/// Most bytes a ConfigMap's or a Secret's data may hold (the real server's
/// `MaxSecretSize`).
pub const MAX_DATA_BYTES: usize = 1 << 20;

/// Refuse a ConfigMap or Secret holding more than [`MAX_DATA_BYTES`], as
/// the real server does, with its message (`[]: Too long: may not be more
/// than 1048576 bytes` for a ConfigMap, field `data` for a Secret).
fn check_size(kind: &Kind, object: &Value) -> Result<(), ApiError> {
    use base64::Engine;
    let decoded = |value: &Value| {
        value.as_str().map_or(0, |text| {
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_or(text.len(), |bytes| bytes.len())
        })
    };
    let sum = |field: &str, size: &dyn Fn(&Value) -> usize| {
        object
            .get(field)
            .and_then(Value::as_object)
            .map_or(0, |map| map.values().map(size).sum::<usize>())
    };
    let (field, total) = match (kind.group.as_str(), kind.kind.as_str()) {
        ("", "ConfigMap") => (
            "[]",
            sum("data", &|v: &Value| v.as_str().map_or(0, str::len)) + sum("binaryData", &decoded),
        ),
        ("", "Secret") => ("data", sum("data", &decoded)),
        _ => return Ok(()),
    };
    if total <= MAX_DATA_BYTES {
        return Ok(());
    }
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    Err(ApiError::invalid(
        &kind.group,
        &kind.kind,
        name,
        vec![(
            field.to_string(),
            format!("Too long: may not be more than {MAX_DATA_BYTES} bytes"),
        )],
    ))
}

impl Store {
    /// Validate and prune a custom resource against its schema.
    fn check_schema(kind: &Kind, object: &mut Value) -> Result<(), ApiError> {
        let Some(schema) = &kind.schema else {
            return Ok(());
        };
        schema::prune(schema, object, true, "", &mut Vec::new());
        schema::apply_defaults(schema, object);
        let mut problems = Vec::new();
        let mut body = object.clone();
        if let Some(map) = body.as_object_mut() {
            map.remove("metadata");
            map.remove("apiVersion");
            map.remove("kind");
        }
        schema::validate(schema, &body, "", &mut problems);
        if problems.is_empty() {
            return Ok(());
        }
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        Err(ApiError::invalid(&kind.group, &kind.kind, name, problems))
    }

    pub fn create(
        &mut self,
        kind: &Kind,
        namespace: &str,
        mut object: Value,
    ) -> Result<Arc<Value>, ApiError> {
        if !object.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be a JSON object",
            ));
        }
        if !object.get("metadata").is_some_and(Value::is_object) {
            object["metadata"] = json!({});
        }
        let name = name_or_generate(&mut object);
        check_name(kind, &name)?;
        if kind.namespaced {
            self.check_namespace_open(kind, namespace, &name)?;
            object["metadata"]["namespace"] = json!(namespace);
        } else if let Some(map) = object["metadata"].as_object_mut() {
            map.remove("namespace");
        }
        let key = Self::key(kind, namespace, &name);
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(&kind.group, &kind.plural, &name));
        }
        object["apiVersion"] = json!(kind.api_version());
        object["kind"] = json!(kind.kind);
        if kind.status_subresource
            && kind.custom
            && let Some(map) = object.as_object_mut()
        {
            map.remove("status");
        }
        if kind.custom {
            Self::check_schema(kind, &mut object)?;
        }
        builtin_defaults(kind, &mut object, true);
        check_size(kind, &object)?;
        let metadata = object["metadata"]
            .as_object_mut()
            .expect("metadata is an object");
        metadata.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        metadata.insert("creationTimestamp".into(), json!(now()));
        metadata.remove("deletionTimestamp");
        metadata.remove("resourceVersion");
        if kind.custom || kind.kind == "CustomResourceDefinition" {
            metadata.insert("generation".into(), json!(1));
        }
        if kind.kind == "CustomResourceDefinition" {
            self.register_crd(&mut object)?;
        }
        name_label(kind, &mut object);
        Ok(self.commit(key, ChangeType::Added, object, None))
    }

    /// A namespaced object `name` of `kind` may be created in `namespace`:
    /// one is given, it exists and it is not being terminated.
    fn check_namespace_open(
        &self,
        kind: &Kind,
        namespace: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        if namespace.is_empty() {
            return Err(ApiError::bad_request(
                "the namespace of the object must be given",
            ));
        }
        let ns_key = Key {
            group: String::new(),
            plural: "namespaces".into(),
            namespace: String::new(),
            name: namespace.into(),
        };
        match self.objects.get(&ns_key) {
            None => Err(ApiError::not_found("", "namespaces", namespace)),
            Some(ns) if ns.pointer("/metadata/deletionTimestamp").is_some() => Err(ApiError::new(
                403,
                "Forbidden",
                format!(
                    "{} \"{name}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
                    kind.plural
                ),
            )),
            Some(_) => Ok(()),
        }
    }

    /// Replace an object (PUT), or its status (`status_only`).
    pub fn update(
        &mut self,
        kind: &Kind,
        namespace: &str,
        name: &str,
        candidate: Value,
        status_only: bool,
    ) -> Result<Arc<Value>, ApiError> {
        let key = Self::key(kind, namespace, name);
        let current = self.existing(kind, &key, name)?;
        if !candidate.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be a JSON object",
            ));
        }
        check_replaces(kind, name, &current, &candidate)?;
        let mut next = if status_only {
            with_status_of(&current, &candidate)
        } else {
            replacement(kind, name, &current, candidate)?
        };
        if kind.custom {
            Self::check_schema(kind, &mut next)?;
        }
        builtin_defaults(kind, &mut next, false);
        check_size(kind, &next)?;
        name_label(kind, &mut next);
        next["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
        if next == *current {
            return Ok(current); // a no-op write changes nothing, not even the rv
        }
        if kind.custom && spec_of(&next) != spec_of(&current) {
            let generation = current
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            next["metadata"]["generation"] = json!(generation + 1);
        }
        if kind.kind == "CustomResourceDefinition" && !status_only {
            self.register_crd(&mut next)?;
        }
        if next.pointer("/metadata/deletionTimestamp").is_some() && finalizers(&next).is_empty() {
            self.remove(key, Some(current));
            self.collect_garbage();
            return Ok(self.get_deleted_view(next));
        }
        Ok(self.commit(key, ChangeType::Modified, next, Some(current)))
    }

    fn get_deleted_view(&self, mut object: Value) -> Arc<Value> {
        object["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        Arc::new(object)
    }
}

/// The object's `metadata.name`; if empty, one made of its `generateName`
/// and five random letters, written into the object.
fn name_or_generate(object: &mut Value) -> String {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !name.is_empty() {
        return name;
    }
    let Some(prefix) = object
        .pointer("/metadata/generateName")
        .and_then(Value::as_str)
    else {
        return name;
    };
    let suffix: String = (0..5)
        .map(|_| (b'a' + rand::random_range(0..26u8)) as char)
        .collect();
    let name = format!("{prefix}{suffix}");
    object["metadata"]["name"] = json!(name);
    name
}

/// `candidate` may replace `current` (the object `name`): it names the same
/// object, and its resource version, if any, is the stored one.
fn check_replaces(
    kind: &Kind,
    name: &str,
    current: &Value,
    candidate: &Value,
) -> Result<(), ApiError> {
    if let Some(given) = candidate.pointer("/metadata/name").and_then(Value::as_str)
        && given != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({given}) does not match the name on the URL ({name})"
        )));
    }
    if let Some(given) = candidate
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        && !given.is_empty()
        && Some(given)
            != current
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
    {
        return Err(ApiError::conflict(&kind.group, &kind.plural, name));
    }
    Ok(())
}

/// `current` with the status of `candidate` (none if it has none): a write
/// to the status subresource.
fn with_status_of(current: &Value, candidate: &Value) -> Value {
    let mut next = current.clone();
    match candidate.get("status") {
        Some(status) => next["status"] = status.clone(),
        None => {
            if let Some(map) = next.as_object_mut() {
                map.remove("status");
            }
        }
    }
    next
}

/// `candidate` as it replaces `current` (the object `name`): the metadata
/// fields the server owns, and the status when it is a subresource, are
/// kept from `current`. No finalizer may be added once deletion started.
fn replacement(
    kind: &Kind,
    name: &str,
    current: &Value,
    mut candidate: Value,
) -> Result<Value, ApiError> {
    let old_meta = &current["metadata"];
    if !candidate.get("metadata").is_some_and(Value::is_object) {
        candidate["metadata"] = json!({});
    }
    // Fields the server owns are kept from the stored object.
    for field in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "namespace",
        "name",
    ] {
        match old_meta.get(field) {
            Some(value) => candidate["metadata"][field] = value.clone(),
            None => {
                if let Some(map) = candidate["metadata"].as_object_mut() {
                    map.remove(field);
                }
            }
        }
    }
    if kind.status_subresource {
        match current.get("status") {
            Some(status) => candidate["status"] = status.clone(),
            None => {
                if let Some(map) = candidate.as_object_mut() {
                    map.remove("status");
                }
            }
        }
    }
    candidate["apiVersion"] = json!(kind.api_version());
    candidate["kind"] = json!(kind.kind);
    if current.pointer("/metadata/deletionTimestamp").is_some() {
        let before: HashSet<&str> = finalizers(current).into_iter().collect();
        if let Some(added) = finalizers(&candidate)
            .into_iter()
            .find(|f| !before.contains(f))
        {
            return Err(ApiError::invalid(
                &kind.group,
                &kind.kind,
                name,
                vec![(
                    "metadata.finalizers".into(),
                    format!(
                        "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers [\"{added}\"]"
                    ),
                )],
            ));
        }
    }
    Ok(candidate)
}

/// The object minus metadata and status: what `generation` tracks.
fn spec_of(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(map) = copy.as_object_mut() {
        map.remove("metadata");
        map.remove("status");
    }
    copy
}

fn check_name(kind: &Kind, name: &str) -> Result<(), ApiError> {
    let valid = !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if valid {
        return Ok(());
    }
    let message = if name.is_empty() {
        "Required value: name or generateName is required".to_string()
    } else {
        format!(
            "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        )
    };
    Err(ApiError::invalid(
        &kind.group,
        &kind.kind,
        name,
        vec![("metadata.name".into(), message)],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core(kind: &str) -> Kind {
        crate::kinds::builtins()
            .into_iter()
            .find(|k| k.group.is_empty() && k.kind == kind)
            .expect("a built-in kind")
    }

    #[test]
    fn a_secret_gets_type_opaque_and_its_string_data_merged_into_data() {
        let mut secret = json!({"metadata": {"name": "s"}, "data": {"a": "YQ=="},
            "stringData": {"b": "b ü", "a": "A"}});
        builtin_defaults(&core("Secret"), &mut secret, true);
        assert_eq!(
            secret,
            json!({"metadata": {"name": "s"}, "type": "Opaque",
                "data": {"a": "QQ==", "b": "YiDDvA=="}})
        );
        let mut typed = json!({"type": "kubernetes.io/dockerconfigjson"});
        builtin_defaults(&core("Secret"), &mut typed, false);
        assert_eq!(typed["type"], "kubernetes.io/dockerconfigjson");
    }

    #[test]
    fn a_new_namespace_is_active_with_the_kubernetes_finalizer() {
        let mut namespace = json!({"metadata": {"name": "n"}});
        builtin_defaults(&core("Namespace"), &mut namespace, true);
        assert_eq!(namespace["status"]["phase"], "Active");
        assert_eq!(namespace["spec"]["finalizers"], json!(["kubernetes"]));
        let mut replaced = json!({"metadata": {"name": "n"}});
        builtin_defaults(&core("Namespace"), &mut replaced, false);
        assert!(
            replaced.get("status").is_none(),
            "only a create defaults it"
        );
    }
}
