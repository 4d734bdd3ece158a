//! The Kubernetes objects sources read — a module's ConfigMap, a registry's
//! pull Secret, the ConfigMaps of trusted keys — reached through
//! [`ClusterReader`], which the embedding program implements with its own
//! client: this crate has no Kubernetes dependency.

use std::collections::BTreeMap;

use futures::future::BoxFuture;

use super::{
    BlobSignature, MAX_CONFIG_MAP_COMPONENT_BYTES, MAX_SIGNATURE_BYTES, SourceError,
    SourceErrorKind, unavailable,
};
use crate::trust::blob;

/// Reads ConfigMaps and Secrets for [`super::Fetcher`].
///
/// An error is the message of why the object could not be read (forbidden,
/// unreachable, …); a missing object is `Ok(None)`.
pub trait ClusterReader: Send + Sync {
    /// The ConfigMap `namespace/name`.
    fn config_map<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<ConfigMapData>, String>>;

    /// The `data` of the Secret `namespace/name`, decoded.
    fn secret_data<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<SecretData>, String>>;
}

/// A Secret's `data`, decoded: key to bytes.
pub type SecretData = BTreeMap<String, Vec<u8>>;

/// What a ConfigMap holds: its `binaryData` (decoded) and its `data`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigMapData {
    pub binary_data: BTreeMap<String, Vec<u8>>,
    pub data: BTreeMap<String, String>,
}

/// The key `<key>.sig` of the module's ConfigMap, in `binaryData` or `data`.
pub(super) fn config_map_signature(
    config_map: &ConfigMapData,
    namespace: &str,
    name: &str,
    key: &str,
) -> BlobSignature {
    let signature_key = blob::signature_name(key);
    let bytes = config_map
        .binary_data
        .get(&signature_key)
        .cloned()
        .or_else(|| {
            config_map
                .data
                .get(&signature_key)
                .map(|text| text.clone().into_bytes())
        })
        .map(|mut bytes| {
            bytes.truncate(MAX_SIGNATURE_BYTES as usize);
            bytes
        });
    BlobSignature {
        name: format!("ConfigMap {namespace}/{name} key {signature_key}"),
        bytes,
    }
}

/// `binaryData[key]` of `config_map`, at most [`MAX_CONFIG_MAP_COMPONENT_BYTES`].
pub(super) fn config_map_component(
    mut config_map: ConfigMapData,
    key: &str,
    what: &str,
) -> Result<Vec<u8>, SourceError> {
    if let Some(bytes) = config_map.binary_data.remove(key) {
        let size = bytes.len() as u64;
        if size > MAX_CONFIG_MAP_COMPONENT_BYTES {
            return Err(SourceError {
                kind: SourceErrorKind::TooLarge,
                what: what.to_string(),
                detail: format!(
                    "the component is {size} bytes, more than the 1 MiB a ConfigMap holds; \
                     serve a larger one from an OCI registry (spec.module.oci, pushed with \
                     `radwasm policy push`) or a URL (spec.module.url)"
                ),
            });
        }
        return Ok(bytes);
    }
    if config_map.data.contains_key(key) {
        return Err(unavailable(
            what,
            "the key is in data, not binaryData; a component is binary (kubectl create \
             configmap --from-file puts it in binaryData)",
        ));
    }
    Err(unavailable(what, "no such key in binaryData"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_map(binary: &[(&str, Vec<u8>)], data: &[&str]) -> ConfigMapData {
        ConfigMapData {
            binary_data: binary
                .iter()
                .map(|(key, bytes)| (key.to_string(), bytes.clone()))
                .collect(),
            data: data
                .iter()
                .map(|key| (key.to_string(), String::new()))
                .collect(),
        }
    }

    #[test]
    fn a_configmap_component_over_1_mib_is_refused_naming_oci_and_url() {
        let what = "ConfigMap radwasm-system/p key policy.wasm";
        let limit = usize::try_from(MAX_CONFIG_MAP_COMPONENT_BYTES).expect("fits");
        let fits = config_map(&[("policy.wasm", vec![0; limit])], &[]);
        assert_eq!(
            config_map_component(fits, "policy.wasm", what)
                .expect("1 MiB fits")
                .len(),
            limit
        );

        let big = config_map(&[("policy.wasm", vec![0; limit + 1])], &[]);
        let error = config_map_component(big, "policy.wasm", what).unwrap_err();
        assert_eq!(error.kind, SourceErrorKind::TooLarge);
        assert_eq!(
            error.to_string(),
            "ConfigMap radwasm-system/p key policy.wasm: the component is 1048577 bytes, more \
             than the 1 MiB a ConfigMap holds; serve a larger one from an OCI registry \
             (spec.module.oci, pushed with `radwasm policy push`) or a URL (spec.module.url)"
        );
    }

    #[test]
    fn a_configmap_key_must_be_in_binary_data() {
        let what = "ConfigMap ns/p key k";
        let in_data = config_map(&[], &["k"]);
        let error = config_map_component(in_data, "k", what).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("the key is in data, not binaryData"),
            "{error}"
        );
        let missing = config_map(&[("other", vec![1])], &[]);
        let error = config_map_component(missing, "k", what).unwrap_err();
        assert_eq!(
            error.to_string(),
            "ConfigMap ns/p key k: no such key in binaryData"
        );
    }
}
