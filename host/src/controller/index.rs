//! Secondary indexes of the watch caches, kept from the watches' own events,
//! so that a decision looks up the few objects it needs instead of scanning
//! a whole cache:
//!
//! - [`owners`]: each template's `DeploymentResource`s, by the uid of their
//!   controller owner. (The scan made every template decision cost O(all
//!   resources), and a fleet of N templates O(N²): at 10,000 templates it was
//!   the controller's largest cost.)
//! - [`dependents`]: the templates that name a template in
//!   `radapp.io/depends-on`, by namespace and name, to wake them when it
//!   changes. (The scan ran over every template on every template event.)
//!
//! An index is updated after its watch cache, from the same events, so an
//! object it names is in the cache (a deleted one is gone from both, the
//! cache first). After a relist it is swapped whole, as the cache is.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::Mutex;

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use crate::crd::{DeploymentResource, DeploymentTemplate};

/// Objects of kind `K` by the keys `keys_of` gives each.
pub struct Index<K: kube::Resource<DynamicType = ()>> {
    keys_of: fn(&K) -> Vec<String>,
    state: Mutex<State<K>>,
}

struct State<K: kube::Resource<DynamicType = ()>> {
    objects: HashMap<String, HashSet<ObjectRef<K>>>,
    keys: HashMap<ObjectRef<K>, Vec<String>>,
    /// Filled between `Init` and `InitDone` of a relist.
    relisted: Option<Vec<(ObjectRef<K>, Vec<String>)>>,
    /// A first list has been taken in.
    listed: bool,
}

impl<K: kube::Resource<DynamicType = ()>> State<K>
where
    ObjectRef<K>: Hash + Eq,
{
    fn remove(&mut self, object: &ObjectRef<K>) {
        for key in self.keys.remove(object).unwrap_or_default() {
            if let Some(objects) = self.objects.get_mut(&key) {
                objects.remove(object);
                if objects.is_empty() {
                    self.objects.remove(&key);
                }
            }
        }
    }

    fn insert(&mut self, object: ObjectRef<K>, keys: Vec<String>) {
        if keys.is_empty() {
            return;
        }
        for key in &keys {
            self.objects
                .entry(key.clone())
                .or_default()
                .insert(object.clone());
        }
        self.keys.insert(object, keys);
    }
}

/// `DeploymentResource`s by the uid of their controller owner.
pub fn owners() -> Index<DeploymentResource> {
    Index::new(|resource| {
        resource
            .owner_references()
            .iter()
            .find(|owner| owner.controller == Some(true))
            .map(|owner| vec![owner.uid.clone()])
            .unwrap_or_default()
    })
}

/// `DeploymentTemplate`s by `{namespace}/{name}` of each template they name
/// in `radapp.io/depends-on`.
pub fn dependents() -> Index<DeploymentTemplate> {
    Index::new(|template| {
        let namespace = template.namespace().unwrap_or_default();
        radwasm_policy_model::annotations::depends_on(template.annotations())
            .into_iter()
            .map(|name| format!("{namespace}/{name}"))
            .collect()
    })
}

impl<K> Index<K>
where
    K: kube::Resource<DynamicType = ()> + Clone,
    ObjectRef<K>: Hash + Eq,
{
    pub fn new(keys_of: fn(&K) -> Vec<String>) -> Self {
        Self {
            keys_of,
            state: Mutex::new(State {
                objects: HashMap::new(),
                keys: HashMap::new(),
                relisted: None,
                listed: false,
            }),
        }
    }

    /// Take in one event of the watch.
    pub fn observe(&self, event: &watcher::Event<K>) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        match event {
            watcher::Event::Apply(object) => {
                let reference = ObjectRef::from_obj(object);
                state.remove(&reference);
                state.insert(reference, (self.keys_of)(object));
            }
            watcher::Event::Delete(object) => state.remove(&ObjectRef::from_obj(object)),
            watcher::Event::Init => state.relisted = Some(Vec::new()),
            watcher::Event::InitApply(object) => {
                let keys = (self.keys_of)(object);
                state
                    .relisted
                    .get_or_insert_with(Vec::new)
                    .push((ObjectRef::from_obj(object), keys));
            }
            watcher::Event::InitDone => {
                let relisted = state.relisted.take().unwrap_or_default();
                state.objects.clear();
                state.keys.clear();
                for (object, keys) in relisted {
                    state.insert(object, keys);
                }
                state.listed = true;
            }
        }
    }

    /// Whether a first list has been taken in (before that, lookups miss
    /// objects that exist).
    pub fn is_listed(&self) -> bool {
        self.state.lock().is_ok_and(|state| state.listed)
    }

    /// The objects under `key`, by name.
    pub fn get(&self, key: &str) -> Vec<ObjectRef<K>> {
        let Ok(state) = self.state.lock() else {
            return Vec::new();
        };
        let mut objects: Vec<ObjectRef<K>> = state
            .objects
            .get(key)
            .map(|objects| objects.iter().cloned().collect())
            .unwrap_or_default();
        objects.sort_by(|a, b| a.name.cmp(&b.name));
        objects
    }

    /// How many objects the index holds.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.state.lock().map_or(0, |state| state.keys.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;

    /// A resource named `name` controlled by the template with uid `owner`.
    fn resource(name: &str, owner: Option<&str>) -> DeploymentResource {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let mut resource = DeploymentResource::new(
            name,
            crate::crd::DeploymentResourceSpec {
                id: format!("/planes/radius/local/resourceGroups/g/providers/A.B/c/{name}"),
                provider_config: None,
            },
        );
        resource.meta_mut().namespace = Some("ns".into());
        resource.meta_mut().owner_references = owner.map(|uid| {
            vec![OwnerReference {
                api_version: "radapp.io/v1alpha3".into(),
                kind: "DeploymentTemplate".into(),
                name: "t".into(),
                uid: uid.into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]
        });
        resource
    }

    fn names<K: kube::Resource<DynamicType = ()> + Clone>(
        index: &Index<K>,
        uid: &str,
    ) -> Vec<String> {
        index.get(uid).into_iter().map(|c| c.name).collect()
    }

    #[test]
    fn children_follow_the_watch() {
        let index = owners();
        assert!(!index.is_listed());
        index.observe(&watcher::Event::Init);
        index.observe(&watcher::Event::InitApply(resource("b", Some("u1"))));
        index.observe(&watcher::Event::InitApply(resource("a", Some("u1"))));
        index.observe(&watcher::Event::InitApply(resource("free", None)));
        index.observe(&watcher::Event::InitDone);
        assert!(index.is_listed());
        assert_eq!(names(&index, "u1"), ["a", "b"]);
        assert_eq!(index.len(), 2);

        index.observe(&watcher::Event::Apply(resource("c", Some("u2"))));
        // A new controller owner moves the child.
        index.observe(&watcher::Event::Apply(resource("a", Some("u2"))));
        index.observe(&watcher::Event::Delete(resource("b", Some("u1"))));
        assert!(names(&index, "u1").is_empty());
        assert_eq!(names(&index, "u2"), ["a", "c"]);
        // Losing its owner reference takes it out.
        index.observe(&watcher::Event::Apply(resource("c", None)));
        assert_eq!(names(&index, "u2"), ["a"]);
    }

    #[test]
    fn dependents_are_found_by_the_template_they_name() {
        let template = |name: &str, namespace: &str, depends_on: &str| {
            let mut template = DeploymentTemplate::new(name, Default::default());
            template.meta_mut().namespace = Some(namespace.into());
            template.meta_mut().annotations =
                Some([("radapp.io/depends-on".to_string(), depends_on.to_string())].into());
            template
        };
        let index = dependents();
        index.observe(&watcher::Event::Init);
        index.observe(&watcher::Event::InitApply(template(
            "web",
            "a",
            "db, cache",
        )));
        index.observe(&watcher::Event::InitApply(template("api", "a", "db")));
        index.observe(&watcher::Event::InitApply(template("other", "b", "db")));
        index.observe(&watcher::Event::InitDone);
        assert_eq!(names(&index, "a/db"), ["api", "web"]);
        assert_eq!(names(&index, "a/cache"), ["web"]);
        assert_eq!(names(&index, "b/db"), ["other"]);
        // An edited annotation moves the template.
        index.observe(&watcher::Event::Apply(template("web", "a", "cache")));
        assert_eq!(names(&index, "a/db"), ["api"]);
        index.observe(&watcher::Event::Apply(template("api", "a", "")));
        assert!(names(&index, "a/db").is_empty());
        assert_eq!(index.len(), 2);
    }

    #[test]
    fn a_relist_replaces_the_index_whole() {
        let index = owners();
        index.observe(&watcher::Event::Init);
        index.observe(&watcher::Event::InitApply(resource("gone", Some("u1"))));
        index.observe(&watcher::Event::InitDone);
        // The relist does not show `gone` (deleted while the watch was down).
        index.observe(&watcher::Event::Init);
        index.observe(&watcher::Event::InitApply(resource("new", Some("u1"))));
        // Until the relist is done, the old view stands.
        assert_eq!(names(&index, "u1"), ["gone"]);
        index.observe(&watcher::Event::InitDone);
        assert_eq!(names(&index, "u1"), ["new"]);
        assert_eq!(index.len(), 1);
    }
}
