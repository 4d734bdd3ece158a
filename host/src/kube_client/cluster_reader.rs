//! The ConfigMaps and Secrets policy sources read, through the host's
//! Kubernetes client: `radwasm-policy-fetch` has no client of its own.

use futures::FutureExt as _;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use radwasm_policy_fetch::source::SecretData;
use radwasm_policy_fetch::{ClusterReader, ConfigMapData};
use serde::de::DeserializeOwned;

use super::describe_kube_error;

/// [`ClusterReader`] on a Kubernetes client.
#[derive(Clone)]
pub struct KubeReader(pub kube::Client);

impl KubeReader {
    /// The object `namespace/name`, `None` if there is none.
    async fn get<K>(&self, namespace: &str, name: &str) -> Result<Option<K>, String>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        Api::<K>::namespaced(self.0.clone(), namespace)
            .get_opt(name)
            .await
            .map_err(|error| describe_kube_error(&error))
    }
}

impl ClusterReader for KubeReader {
    fn config_map<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<ConfigMapData>, String>> {
        async move {
            let found: Option<ConfigMap> = self.get(namespace, name).await?;
            Ok(found.map(|config_map| ConfigMapData {
                binary_data: config_map
                    .binary_data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(key, bytes)| (key, bytes.0))
                    .collect(),
                data: config_map.data.unwrap_or_default(),
            }))
        }
        .boxed()
    }

    fn secret_data<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<SecretData>, String>> {
        async move {
            let found: Option<Secret> = self.get(namespace, name).await?;
            Ok(found.map(|secret| {
                secret
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(key, bytes)| (key, bytes.0))
                    .collect()
            }))
        }
        .boxed()
    }
}
