//! The namespaces' metadata, watched once for the whole process (metadata
//! only, into one cache): their labels select policies
//! (`namespaceSelector`), and their labels and annotations are part of every
//! observation (contract 0.6, `namespace-meta`). A change to a namespace's
//! labels or annotations may change a decision, so it reconciles the objects
//! in that namespace again; a change to its labels also makes selection look
//! again.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use radwasm_policy_model as model;

use super::Context;
use crate::crd::{DeploymentResource, DeploymentTemplate};

/// The cache of every namespace's metadata.
pub type Store = reflector::Store<PartialObjectMeta<Namespace>>;

/// What a policy is shown of `namespace`: its labels and annotations as
/// cached; empty for a cluster-scoped object (no namespace), a namespace not
/// in the cache (not yet seen, or deleted) or no cache at all.
pub fn meta(store: Option<&Store>, namespace: &str) -> model::NamespaceMeta {
    if namespace.is_empty() {
        return model::NamespaceMeta::default();
    }
    store
        .and_then(|store| store.get(&ObjectRef::new(namespace)))
        .map(|found| model::NamespaceMeta {
            labels: found.metadata.labels.clone().unwrap_or_default(),
            annotations: found.metadata.annotations.clone().unwrap_or_default(),
        })
        .unwrap_or_default()
}

/// A namespace whose labels or annotations changed since the watch last
/// showed it.
#[derive(Debug, PartialEq, Eq)]
pub struct Changed {
    pub namespace: String,
    /// Its labels changed (selection may choose another policy), not only
    /// its annotations.
    pub labels: bool,
}

/// Tells, from the watch's events, which namespaces changed. The first
/// list changes nothing (no object is decided before it ends: selection
/// waits for it); after it, a namespace seen for the first time counts as
/// changed (an object in it may have been decided while it was unknown,
/// with empty metadata), and so does one a re-list shows changed while the
/// watch was down.
#[derive(Default)]
pub struct Changes {
    /// Hashes of each namespace's labels and annotations, as last seen.
    seen: HashMap<String, (u64, u64)>,
    listed: bool,
}

fn hash_of(map: Option<&std::collections::BTreeMap<String, String>>) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    map.hash(&mut hasher);
    hasher.finish()
}

impl Changes {
    pub fn observe(
        &mut self,
        event: &watcher::Event<PartialObjectMeta<Namespace>>,
    ) -> Option<Changed> {
        let namespace = match event {
            watcher::Event::Apply(namespace) | watcher::Event::InitApply(namespace) => namespace,
            watcher::Event::Delete(namespace) => {
                // Its objects go with it.
                self.seen.remove(&namespace.name_any());
                return None;
            }
            watcher::Event::InitDone => {
                self.listed = true;
                return None;
            }
            watcher::Event::Init => return None,
        };
        let name = namespace.name_any();
        let now = (
            hash_of(namespace.meta().labels.as_ref()),
            hash_of(namespace.meta().annotations.as_ref()),
        );
        let before = self.seen.insert(name.clone(), now);
        if !self.listed || before == Some(now) {
            return None;
        }
        Some(Changed {
            namespace: name,
            labels: before.is_none_or(|before| before.0 != now.0),
        })
    }
}

/// Watch the namespaces' metadata into a new cache, handed to `ctx`; the
/// stream it returns drives the watch and gives the templates to reconcile
/// again because their namespace changed (the resources in it are woken
/// through `ctx.wake_resource`). Only metadata is transferred and cached.
pub fn watch(
    ctx: Arc<Context>,
    templates: reflector::Store<DeploymentTemplate>,
    resources: reflector::Store<DeploymentResource>,
) -> impl futures::Stream<Item = ObjectRef<DeploymentTemplate>> + Send + 'static {
    let (store, writer) = reflector::store();
    ctx.set_namespaces(store);
    let mut changes = Changes::default();
    // An `Api` of `PartialObjectMeta` lists and watches metadata only
    // (kube's metadata watcher).
    watcher(
        Api::<PartialObjectMeta<Namespace>>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .modify(super::cached::slim)
    .reflect(writer)
    .filter_map(move |event| {
        futures::future::ready(match event {
            Ok(event) => changes.observe(&event),
            // Retried with backoff; until the first list ends no object is
            // decided (selection waits for it), so say why (RBAC: list and
            // watch on namespaces).
            Err(error) => {
                tracing::warn!(%error, "namespace watch");
                None
            }
        })
    })
    .flat_map(move |changed| {
        if changed.labels {
            ctx.policies.poke();
        }
        let within = |namespace: Option<String>| namespace.as_deref() == Some(&*changed.namespace);
        let mut woken_resources = 0;
        for resource in resources.state() {
            if within(resource.namespace()) {
                ctx.wake_resource(ObjectRef::from_obj(&*resource));
                woken_resources += 1;
            }
        }
        let woken: Vec<ObjectRef<DeploymentTemplate>> = templates
            .state()
            .iter()
            .filter(|template| within(template.namespace()))
            .map(|template| ObjectRef::from_obj(&**template))
            .collect();
        if !woken.is_empty() || woken_resources > 0 {
            tracing::info!(
                namespace = changed.namespace,
                templates = woken.len(),
                resources = woken_resources,
                "the namespace's labels or annotations changed; reconciling its objects again"
            );
        }
        futures::stream::iter(woken)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn namespace(
        name: &str,
        labels: &[(&str, &str)],
        annotations: &[(&str, &str)],
    ) -> PartialObjectMeta<Namespace> {
        let pairs = |pairs: &[(&str, &str)]| {
            (!pairs.is_empty()).then(|| {
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            })
        };
        let mut namespace = PartialObjectMeta::<Namespace>::default();
        namespace.metadata.name = Some(name.into());
        namespace.metadata.labels = pairs(labels);
        namespace.metadata.annotations = pairs(annotations);
        namespace
    }

    #[test]
    fn a_namespace_changes_when_its_labels_or_annotations_do_after_the_first_list() {
        let mut changes = Changes::default();
        let mut observe = |event| changes.observe(&event);
        let prod = namespace("shop", &[("env", "prod")], &[]);
        assert_eq!(observe(watcher::Event::Init), None);
        assert_eq!(observe(watcher::Event::InitApply(prod.clone())), None);
        assert_eq!(observe(watcher::Event::InitDone), None);
        // The same metadata again (a resync, another field): nothing.
        assert_eq!(observe(watcher::Event::Apply(prod.clone())), None);
        let dev = namespace("shop", &[("env", "dev")], &[]);
        assert_eq!(
            observe(watcher::Event::Apply(dev.clone())),
            Some(Changed {
                namespace: "shop".into(),
                labels: true
            })
        );
        let owned = namespace("shop", &[("env", "dev")], &[("owner", "team-a")]);
        assert_eq!(
            observe(watcher::Event::Apply(owned.clone())),
            Some(Changed {
                namespace: "shop".into(),
                labels: false
            })
        );
        // Changed while the watch was down: the re-list shows it.
        assert_eq!(observe(watcher::Event::Init), None);
        assert_eq!(
            observe(watcher::Event::InitApply(namespace(
                "shop",
                &[("env", "prod")],
                &[("owner", "team-a")]
            ))),
            Some(Changed {
                namespace: "shop".into(),
                labels: true
            })
        );
        assert_eq!(observe(watcher::Event::InitDone), None);
        // A namespace first seen after the first list is new metadata.
        assert_eq!(
            observe(watcher::Event::Apply(namespace("new", &[], &[]))),
            Some(Changed {
                namespace: "new".into(),
                labels: true
            })
        );
        assert_eq!(observe(watcher::Event::Delete(owned)), None);
    }

    #[test]
    fn a_policy_is_shown_the_cached_metadata_or_nothing() {
        let (store, mut writer) = reflector::store();
        writer.apply_watcher_event(&watcher::Event::Apply(namespace(
            "shop",
            &[("env", "prod")],
            &[("owner", "team-a")],
        )));
        let shown = meta(Some(&store), "shop");
        assert_eq!(shown.labels.get("env").map(String::as_str), Some("prod"));
        assert_eq!(
            shown.annotations.get("owner").map(String::as_str),
            Some("team-a")
        );
        assert_eq!(
            meta(Some(&store), "elsewhere"),
            model::NamespaceMeta::default()
        );
        assert_eq!(meta(Some(&store), ""), model::NamespaceMeta::default());
        assert_eq!(meta(None, "shop"), model::NamespaceMeta::default());
    }
}
