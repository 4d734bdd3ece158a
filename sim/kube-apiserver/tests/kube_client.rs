//! Conformance against the real kube-rs client: CRUD, the status
//! subresource, generation, finalizers, owner GC, optimistic concurrency,
//! paging, selectors, and a watcher that survives dropped watches and 410s.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use radwasm_sim_apiserver::{ApiServer, ApiServerConfig, start};
use serde_json::json;

async fn server() -> (ApiServer, Client) {
    let server = start(ApiServerConfig::default()).await.expect("start");
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&server.kubeconfig_yaml()).expect("yaml");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config");
    (server, Client::try_from(config).expect("client"))
}

fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["size"], "properties": {
                        "size": {"type": "integer"}, "color": {"type": "string"}}},
                    "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
                }}}
            }]
        }
    }))
    .expect("crd")
}

async fn widgets(client: &Client) -> Api<DynamicObject> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &widget_crd())
        .await
        .expect("create crd");
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    Api::namespaced_with(client.clone(), "default", &resource)
}

fn widget(name: &str, size: i64) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name}, "spec": {"size": size}}))
    .expect("widget")
}

#[tokio::test]
async fn configmaps_round_trip_with_resource_versions_and_conflicts() {
    let (server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("settings".into());
    cm.data = Some([("a".to_string(), "1".to_string())].into());
    let created = api
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");
    assert!(created.uid().is_some() && created.creation_timestamp().is_some());
    let duplicate = api
        .create(&PostParams::default(), &cm)
        .await
        .expect_err("duplicate");
    assert!(
        matches!(duplicate, kube::Error::Api(ref e) if e.code == 409 && e.reason == "AlreadyExists"),
        "{duplicate:?}"
    );

    let mut changed = created.clone();
    changed.data = Some([("a".to_string(), "2".to_string())].into());
    let updated = api
        .replace("settings", &PostParams::default(), &changed)
        .await
        .expect("update");
    assert!(
        updated.resource_version().unwrap().parse::<u64>().unwrap()
            > created.resource_version().unwrap().parse::<u64>().unwrap()
    );
    // A write based on the stale version is refused.
    let stale = api
        .replace("settings", &PostParams::default(), &changed)
        .await
        .expect_err("stale");
    assert!(
        matches!(stale, kube::Error::Api(ref e) if e.code == 409 && e.reason == "Conflict"),
        "{stale:?}"
    );

    api.delete("settings", &DeleteParams::default())
        .await
        .expect("delete");
    let missing = api.get("settings").await.expect_err("gone");
    assert!(
        matches!(missing, kube::Error::Api(ref e) if e.code == 404),
        "{missing:?}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn custom_resources_have_status_generation_validation_and_pruning() {
    let (server, client) = server().await;
    let api = widgets(&client).await;
    let mut object = widget("w1", 3);
    object.data["spec"]["unknown"] = json!("pruned");
    object.data["status"] = json!({"phase": "ignored on create"});
    let created = api
        .create(&PostParams::default(), &object)
        .await
        .expect("create");
    assert_eq!(created.metadata.generation, Some(1));
    assert!(
        created.data["spec"].get("unknown").is_none(),
        "unknown fields are pruned"
    );
    assert!(
        created.data.get("status").is_none(),
        "status is ignored on create"
    );

    let invalid = api
        .create(&PostParams::default(), &widget("w2", 1))
        .await
        .map(|_| ());
    assert!(invalid.is_ok());
    let mut bad = widget("w3", 1);
    bad.data["spec"] = json!({"size": "big"});
    let error = api
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("invalid");
    assert!(
        matches!(error, kube::Error::Api(ref e) if e.code == 422 && e.message.contains("spec.size")),
        "{error:?}"
    );

    // Status writes change only status and not generation.
    let status = api
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}, "spec": {"size": 99}})),
        )
        .await
        .expect("status");
    assert_eq!(status.data["status"]["phase"], "Ready");
    assert_eq!(status.data["spec"]["size"], 3);
    assert_eq!(status.metadata.generation, Some(1));
    // Main-resource writes ignore status; spec changes move generation.
    let spec = api
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 4}, "status": {"phase": "Hacked"}})),
        )
        .await
        .expect("spec");
    assert_eq!(spec.metadata.generation, Some(2));
    assert_eq!(spec.data["status"]["phase"], "Ready");
    let labels = api
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .expect("labels");
    assert_eq!(
        labels.metadata.generation,
        Some(2),
        "metadata changes do not move generation"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn finalizers_hold_deletion_and_owners_collect_dependents() {
    let (server, client) = server().await;
    let api = widgets(&client).await;
    let mut owner = widget("owner", 1);
    owner.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    let owner = api
        .create(&PostParams::default(), &owner)
        .await
        .expect("owner");
    let mut child = widget("child", 1);
    child.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "example.com/v1".into(),
            kind: "Widget".into(),
            name: "owner".into(),
            uid: owner.uid().expect("uid"),
            controller: Some(true),
            block_owner_deletion: Some(true),
        },
    ]);
    api.create(&PostParams::default(), &child)
        .await
        .expect("child");

    api.delete("owner", &DeleteParams::default())
        .await
        .expect("delete");
    let marked = api.get("owner").await.expect("still there");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(
        api.get("child").await.is_ok(),
        "the owner still exists, so its dependent stays"
    );
    let adding = api
        .patch(
            "owner",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold", "x/new"]}})),
        )
        .await
        .expect_err("no new finalizers while deleting");
    assert!(
        matches!(adding, kube::Error::Api(ref e) if e.code == 422),
        "{adding:?}"
    );

    api.patch(
        "owner",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release");
    assert!(api.get_opt("owner").await.expect("get").is_none());
    assert!(
        api.get_opt("child").await.expect("get").is_none(),
        "background GC removed the dependent"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn lists_page_consistently_and_filter_by_label_and_field() {
    let (server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    for i in 0..25 {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(format!("cm-{i:02}"));
        cm.metadata.labels = Some(
            [(
                "parity".to_string(),
                if i % 2 == 0 { "even" } else { "odd" }.to_string(),
            )]
            .into(),
        );
        api.create(&PostParams::default(), &cm)
            .await
            .expect("create");
    }
    let first = api
        .list(&ListParams::default().limit(10))
        .await
        .expect("page 1");
    assert_eq!(first.items.len(), 10);
    let token = first.metadata.continue_.clone().expect("continue");
    // A change between pages does not show up in the paged snapshot.
    api.delete("cm-24", &DeleteParams::default())
        .await
        .expect("delete");
    let mut names: Vec<String> = first.items.iter().map(|c| c.name_any()).collect();
    let mut next = Some(token);
    while let Some(token) = next {
        let page = api
            .list(&ListParams::default().limit(10).continue_token(&token))
            .await
            .expect("page");
        names.extend(page.items.iter().map(|c| c.name_any()));
        next = page.metadata.continue_.clone();
    }
    assert_eq!(names.len(), 25);
    assert!(names.contains(&"cm-24".to_string()));

    let even = api
        .list(&ListParams::default().labels("parity=even"))
        .await
        .expect("labels");
    assert_eq!(even.items.len(), 12, "cm-24 is gone now");
    let one = api
        .list(&ListParams::default().fields("metadata.name=cm-03"))
        .await
        .expect("fields");
    assert_eq!(one.items.len(), 1);
    server.shutdown().await;
}

#[tokio::test]
async fn many_writers_to_one_object_get_exactly_one_winner() {
    let (server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("contended".into());
    let base = api
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");
    let mut tasks = Vec::new();
    for i in 0..16 {
        let api = api.clone();
        let mut mine = base.clone();
        mine.data = Some([("writer".to_string(), i.to_string())].into());
        tasks.push(tokio::spawn(async move {
            api.replace("contended", &PostParams::default(), &mine)
                .await
                .is_ok()
        }));
    }
    let mut winners = 0;
    for task in tasks {
        if task.await.expect("join") {
            winners += 1;
        }
    }
    assert_eq!(winners, 1);
    server.shutdown().await;
}

#[tokio::test]
async fn a_watcher_survives_dropped_watches_and_expired_history() {
    let (server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let faults = server.faults();
    let stream = watcher(api.clone(), watcher::Config::default()).default_backoff();
    let store = std::sync::Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
    let seen = store.clone();
    let follower = tokio::spawn(async move {
        let mut events = stream.boxed();
        while let Ok(Some(event)) = events.try_next().await {
            let mut names = seen.lock().expect("lock");
            match event {
                watcher::Event::Apply(cm) | watcher::Event::InitApply(cm) => {
                    names.insert(cm.name_any());
                }
                watcher::Event::Delete(cm) => {
                    names.remove(&cm.name_any());
                }
                watcher::Event::Init => names.clear(),
                watcher::Event::InitDone => {}
            }
        }
    });
    let make = |name: &str| {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm
    };
    api.create(&PostParams::default(), &make("a"))
        .await
        .expect("a");
    tokio::time::sleep(Duration::from_millis(300)).await;
    faults.drop_watches();
    api.create(&PostParams::default(), &make("b"))
        .await
        .expect("b");
    faults.expire_history();
    faults.drop_watches();
    api.create(&PostParams::default(), &make("c"))
        .await
        .expect("c");
    api.delete("a", &DeleteParams::default())
        .await
        .expect("delete a");

    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let names: Vec<String> = store.lock().expect("lock").iter().cloned().collect();
        if names == ["b", "c"] {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "watcher state {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    follower.abort();
    server.shutdown().await;
}

#[tokio::test]
async fn a_lagging_watch_delivers_changes_late_while_reads_see_them_at_once() {
    let (server, client) = server().await;
    // Switched on over HTTP, as a person or another test tool would.
    let lag = Duration::from_millis(400);
    let request = http::Request::post("/_sim/faults")
        .body(serde_json::to_vec(&json!({"watchLagMs": 400})).expect("body"))
        .expect("request");
    let answer: serde_json::Value = client.request(request).await.expect("POST /_sim/faults");
    assert_eq!(answer["watchLagMs"], 400, "{answer}");
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel();
    let watched = api.clone();
    let follower = tokio::spawn(async move {
        let mut events = watcher(watched, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Ok(Some(cm)) = events.try_next().await {
            let _ = seen_tx.send((cm.name_any(), tokio::time::Instant::now()));
        }
    });
    // The watch's initial list is not delayed; wait for the stream to be
    // established before changing anything.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("late".into());
    let created_at = tokio::time::Instant::now();
    let created = api
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");
    // A read sees the new object at once.
    let read = api.get("late").await.expect("get");
    assert_eq!(read.resource_version(), created.resource_version());
    let (name, seen_at) = tokio::time::timeout(Duration::from_secs(15), seen_rx.recv())
        .await
        .expect("the watch delivers the change")
        .expect("follower running");
    assert_eq!(name, "late");
    assert!(
        seen_at.duration_since(created_at) >= lag,
        "delivered {:?} after the change, before the lag of {lag:?}",
        seen_at.duration_since(created_at)
    );
    follower.abort();
    server.shutdown().await;
}

fn owned_by(name: &str, owner: &DynamicObject) -> DynamicObject {
    let mut child = widget(name, 1);
    child.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "example.com/v1".into(),
            kind: "Widget".into(),
            name: owner.name_any(),
            uid: owner.uid().expect("uid"),
            controller: Some(true),
            block_owner_deletion: Some(true),
        },
    ]);
    child
}

#[tokio::test]
async fn foreground_deletion_waits_for_dependents_and_deletecollection_honours_selectors() {
    let (server, client) = server().await;
    let api = widgets(&client).await;
    let owner = api
        .create(&PostParams::default(), &widget("owner", 1))
        .await
        .expect("owner");
    let mut held = owned_by("held-child", &owner);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &held)
        .await
        .expect("child");

    api.delete("owner", &DeleteParams::foreground())
        .await
        .expect("delete");
    let owner_now = api
        .get("owner")
        .await
        .expect("owner waits for its dependents");
    assert!(owner_now.metadata.deletion_timestamp.is_some());
    assert!(
        owner_now
            .finalizers()
            .contains(&"foregroundDeletion".to_string()),
        "{:?}",
        owner_now.finalizers()
    );
    let child_now = api.get("held-child").await.expect("held by its finalizer");
    assert!(
        child_now.metadata.deletion_timestamp.is_some(),
        "GC deleted the dependent"
    );

    api.patch(
        "held-child",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release child");
    assert!(api.get_opt("held-child").await.expect("get").is_none());
    assert!(
        api.get_opt("owner").await.expect("get").is_none(),
        "the owner goes once its last dependent is gone"
    );

    for (name, team) in [("a", "red"), ("b", "red"), ("c", "blue")] {
        let mut w = widget(name, 1);
        w.metadata.labels = Some([("team".to_string(), team.to_string())].into());
        api.create(&PostParams::default(), &w)
            .await
            .expect("create");
    }
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("team=red"),
    )
    .await
    .expect("deletecollection");
    let left: Vec<String> = api
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .iter()
        .map(|w| w.name_any())
        .collect();
    assert_eq!(left, ["c"]);
    server.shutdown().await;
}

#[tokio::test]
async fn watches_send_bookmarks_end_at_their_timeout_and_answer_410_for_expired_versions() {
    let (server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("one".into());
    let created = api
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");
    let rv = created.resource_version().expect("rv");

    let params = kube::api::WatchParams::default().timeout(2);
    let events: Vec<_> = tokio::time::timeout(
        Duration::from_secs(30),
        api.watch(&params, "0")
            .await
            .expect("watch")
            .collect::<Vec<_>>(),
    )
    .await
    .expect("the watch ends at its timeoutSeconds");
    let events: Vec<_> = events.into_iter().map(|e| e.expect("event")).collect();
    assert!(
        matches!(events.first(), Some(kube::api::WatchEvent::Added(cm)) if cm.name_any() == "one"),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, kube::api::WatchEvent::Bookmark(b) if !b.metadata.resource_version.is_empty())),
        "{events:?}"
    );

    // History is forgotten after one more change: `rv` is now too old.
    let mut two = ConfigMap::default();
    two.metadata.name = Some("two".into());
    api.create(&PostParams::default(), &two)
        .await
        .expect("create");
    server.faults().expire_history();
    let mut stale = api.watch(&params, &rv).await.expect("watch").boxed();
    let first = tokio::time::timeout(Duration::from_secs(30), stale.next())
        .await
        .expect("an answer")
        .expect("one event")
        .expect("decoded");
    assert!(
        matches!(first, kube::api::WatchEvent::Error(ref e) if e.code == 410 && e.reason == "Expired"),
        "{first:?}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn server_side_apply_needs_a_field_manager_and_merges_into_the_object() {
    let (server, client) = server().await;
    let api = widgets(&client).await;
    let applied = api
        .patch(
            "w1",
            &PatchParams::apply("tester"),
            &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w1"}, "spec": {"size": 1}})),
        )
        .await
        .expect("apply creates");
    assert_eq!(applied.data["spec"]["size"], 1);
    let applied = api
        .patch(
            "w1",
            &PatchParams::apply("tester"),
            &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w1"}, "spec": {"color": "red"}})),
        )
        .await
        .expect("apply merges");
    assert_eq!(applied.data["spec"]["size"], 1);
    assert_eq!(applied.data["spec"]["color"], "red");
    assert_eq!(applied.metadata.generation, Some(2));

    let request = http::Request::patch("/apis/example.com/v1/namespaces/default/widgets/w1")
        .header("content-type", "application/apply-patch+yaml")
        .body(b"{\"spec\": {\"size\": 2}}".to_vec())
        .expect("request");
    let error = client
        .request::<DynamicObject>(request)
        .await
        .expect_err("no fieldManager");
    assert!(
        matches!(error, kube::Error::Api(ref e) if e.code == 422 && e.message.contains("fieldManager")),
        "{error:?}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn leases_and_recorded_events_are_served_like_the_real_server() {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};

    let (server, client) = server().await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let mut lease = Lease::default();
    lease.metadata.name = Some("radwasm-leader".into());
    lease.spec = Some(k8s_openapi::api::coordination::v1::LeaseSpec {
        holder_identity: Some("pod-a".into()),
        lease_duration_seconds: Some(15),
        ..Default::default()
    });
    let created = leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("lease");
    let mut taken = created.clone();
    taken.spec.as_mut().expect("spec").holder_identity = Some("pod-b".into());
    leases
        .replace("radwasm-leader", &PostParams::default(), &taken)
        .await
        .expect("take over");
    let stale = leases
        .replace("radwasm-leader", &PostParams::default(), &created)
        .await
        .expect_err("a second candidate with the old version loses");
    assert!(
        matches!(stale, kube::Error::Api(ref e) if e.code == 409),
        "{stale:?}"
    );

    // kube-rs's Recorder writes events.k8s.io/v1; kubectl reads core/v1.
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("subject".into());
    let subject = Api::<ConfigMap>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &cm)
        .await
        .expect("cm");
    let recorder = Recorder::new(client.clone(), Reporter::from("radwasm"));
    recorder
        .publish(
            &Event {
                type_: EventType::Warning,
                reason: "DeployFailed".into(),
                note: Some("Radius said no".into()),
                action: "Deploy".into(),
                secondary: None,
            },
            &kube::Resource::object_ref(&subject, &()),
        )
        .await
        .expect("publish");
    let core: Api<CoreEvent> = Api::namespaced(client, "default");
    let events = core.list(&ListParams::default()).await.expect("events");
    assert_eq!(events.items.len(), 1);
    let event = &events.items[0];
    assert_eq!(event.message.as_deref(), Some("Radius said no"));
    assert_eq!(event.involved_object.name.as_deref(), Some("subject"));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    server.shutdown().await;
}

#[tokio::test]
async fn errors_are_status_objects_shaped_like_the_real_servers() {
    let (server, client) = server().await;
    let request = http::Request::get("/api/v1/namespaces/default/configmaps/missing")
        .body(Vec::new())
        .expect("request");
    let error = client.request::<ConfigMap>(request).await.expect_err("404");
    let kube::Error::Api(status) = error else {
        panic!("{error:?}");
    };
    assert_eq!(status.code, 404);
    assert_eq!(status.reason, "NotFound");
    assert_eq!(status.message, "configmaps \"missing\" not found");
    server.shutdown().await;
}

/// The names on every page of one list, following `continue` tokens.
async fn all_pages<K>(api: &Api<K>, params: &ListParams) -> Vec<String>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug + kube::Resource,
{
    let first = api.list(params).await.expect("first page");
    let mut names: Vec<String> = first.items.iter().map(|o| o.name_any()).collect();
    let mut token = first.metadata.continue_.clone();
    while let Some(next) = token.take().filter(|t| !t.is_empty()) {
        let page = api
            .list(&params.clone().continue_token(&next))
            .await
            .expect("next page");
        names.extend(page.items.iter().map(|o| o.name_any()));
        token = page.metadata.continue_.clone();
    }
    names
}

fn assert_exactly(names: &[String], expected: &[String], what: &str) {
    let unique: std::collections::BTreeSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "{what}: duplicates in {names:?}");
    let mut sorted = names.to_vec();
    sorted.sort();
    let mut wanted = expected.to_vec();
    wanted.sort();
    assert_eq!(sorted, wanted, "{what}");
}

fn labelled_configmap(name: &str, namespace: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.namespace = Some(namespace.into());
    cm.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    cm
}

/// Two paged lists of different kinds that start at the same
/// resourceVersion each get their own items, and a continue token only
/// continues the list it came from.
#[tokio::test]
async fn paged_lists_of_two_kinds_at_one_resource_version_keep_their_own_items() {
    let (server, client) = server().await;
    let widgets = widgets(&client).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut cm_names = Vec::new();
    let mut widget_names = Vec::new();
    for i in 0..35 {
        let name = format!("cm-{i:02}");
        configmaps
            .create(
                &PostParams::default(),
                &labelled_configmap(&name, "default", &[]),
            )
            .await
            .expect("configmap");
        cm_names.push(name);
        let name = format!("w-{i:02}");
        widgets
            .create(&PostParams::default(), &widget(&name, i))
            .await
            .expect("widget");
        widget_names.push(name);
    }

    // Both first pages are taken with nothing written in between: the same
    // resourceVersion. Then the pages are fetched interleaved.
    let page = ListParams::default().limit(10);
    let cm_first = configmaps.list(&page).await.expect("configmaps page 1");
    let widget_first = widgets.list(&page).await.expect("widgets page 1");
    assert_eq!(
        cm_first.metadata.resource_version, widget_first.metadata.resource_version,
        "both lists start at one resourceVersion"
    );
    assert_eq!(cm_first.metadata.remaining_item_count, Some(25));
    assert_eq!(widget_first.metadata.remaining_item_count, Some(25));
    let mut cms: Vec<String> = cm_first.items.iter().map(|o| o.name_any()).collect();
    let mut ws: Vec<String> = widget_first.items.iter().map(|o| o.name_any()).collect();
    let cm_token = cm_first.metadata.continue_.clone().expect("continue");
    let widget_token = widget_first.metadata.continue_.clone().expect("continue");

    // A token continues only its own list: 400, as for any invalid token.
    for (error, what) in [
        (
            widgets
                .list(&page.clone().continue_token(&cm_token))
                .await
                .expect_err("a configmaps token on widgets"),
            "configmaps token on widgets",
        ),
        (
            configmaps
                .list(&page.clone().continue_token(&widget_token))
                .await
                .expect_err("a widgets token on configmaps"),
            "widgets token on configmaps",
        ),
    ] {
        assert!(
            matches!(error, kube::Error::Api(ref e) if e.code == 400 && e.reason == "BadRequest"
                && e.message.starts_with("invalid continue token: continue key is not valid")),
            "{what}: {error:?}"
        );
    }

    // A continue token already fixes the resourceVersion, as on the real server.
    let request = http::Request::get(format!(
        "/api/v1/namespaces/default/configmaps?limit=10&resourceVersion=1&continue={cm_token}"
    ))
    .body(Vec::new())
    .expect("request");
    let error = client
        .request::<kube::core::ObjectList<ConfigMap>>(request)
        .await
        .expect_err("resourceVersion with continue");
    assert!(
        matches!(error, kube::Error::Api(ref e) if e.code == 400
            && e.message == "specifying resource version is not allowed when using continue"),
        "{error:?}"
    );

    let mut cm_next = Some(cm_token);
    let mut widget_next = Some(widget_token);
    while cm_next.is_some() || widget_next.is_some() {
        if let Some(token) = cm_next.take() {
            let list = configmaps
                .list(&page.clone().continue_token(&token))
                .await
                .expect("configmaps page");
            cms.extend(list.items.iter().map(|o| o.name_any()));
            cm_next = list.metadata.continue_.filter(|t| !t.is_empty());
        }
        if let Some(token) = widget_next.take() {
            let list = widgets
                .list(&page.clone().continue_token(&token))
                .await
                .expect("widgets page");
            assert!(
                list.items
                    .iter()
                    .all(|o| o.types.as_ref().is_some_and(|t| t.kind == "Widget")),
                "{list:?}"
            );
            ws.extend(list.items.iter().map(|o| o.name_any()));
            widget_next = list.metadata.continue_.filter(|t| !t.is_empty());
        }
    }
    assert_exactly(&cms, &cm_names, "paged configmaps");
    assert_exactly(&ws, &widget_names, "paged widgets");

    // A snapshot that is no longer kept: 410 Expired, as for a compacted one.
    let first = configmaps.list(&page).await.expect("page 1");
    let token = first.metadata.continue_.expect("continue");
    server.faults().expire_history();
    let expired = configmaps
        .list(&page.clone().continue_token(&token))
        .await
        .expect_err("expired");
    assert!(
        matches!(expired, kube::Error::Api(ref e) if e.code == 410 && e.reason == "Expired"),
        "{expired:?}"
    );
    server.shutdown().await;
}

/// Lists of one kind that differ in namespace or selectors, started at one
/// resourceVersion, page independently; a token is refused by a list with
/// another namespace or selector.
#[tokio::test]
async fn paged_lists_by_namespace_and_selector_at_one_resource_version_stay_apart() {
    use k8s_openapi::api::core::v1::Namespace;
    let (server, client) = server().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in ["team-a", "team-b"] {
        let mut ns = Namespace::default();
        ns.metadata.name = Some(name.into());
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .expect("namespace");
    }
    let mut everything = Vec::new();
    let mut team_a = Vec::new();
    let mut team_a_even = Vec::new();
    for namespace in ["default", "team-a", "team-b"] {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        for i in 0..15 {
            let name = format!("{namespace}-{i:02}");
            let parity = if i % 2 == 0 { "even" } else { "odd" };
            api.create(
                &PostParams::default(),
                &labelled_configmap(&name, namespace, &[("parity", parity), ("app", "demo")]),
            )
            .await
            .expect("configmap");
            everything.push(name.clone());
            if namespace == "team-a" {
                team_a.push(name.clone());
                if parity == "even" {
                    team_a_even.push(name);
                }
            }
        }
    }
    let all: Api<ConfigMap> = Api::all(client.clone());
    let in_a: Api<ConfigMap> = Api::namespaced(client.clone(), "team-a");
    let page = ListParams::default().limit(4);
    let even = page.clone().labels("parity=even,app=demo");

    // Every first page at one resourceVersion, before any is continued.
    let firsts = [
        all.list(&page).await.expect("all"),
        in_a.list(&page).await.expect("team-a"),
        in_a.list(&even).await.expect("team-a even"),
    ];
    let rv = firsts[0].metadata.resource_version.clone();
    assert!(firsts.iter().all(|l| l.metadata.resource_version == rv));
    // As on the real server: a count only for lists without selectors.
    assert_eq!(firsts[0].metadata.remaining_item_count, Some(41));
    assert_eq!(firsts[1].metadata.remaining_item_count, Some(11));
    assert_eq!(firsts[2].metadata.remaining_item_count, None);
    let tokens: Vec<String> = firsts
        .iter()
        .map(|l| l.metadata.continue_.clone().expect("continue"))
        .collect();

    for (result, what) in [
        (
            all.list(&page.clone().continue_token(&tokens[1])).await,
            "a team-a token on the all-namespaces list",
        ),
        (
            in_a.list(&page.clone().continue_token(&tokens[0])).await,
            "an all-namespaces token on the team-a list",
        ),
        (
            in_a.list(&page.clone().continue_token(&tokens[2])).await,
            "a label-selected token without the selector",
        ),
        (
            in_a.list(&even.clone().continue_token(&tokens[1])).await,
            "an unselected token with a selector",
        ),
        (
            in_a.list(&page.clone().labels("parity=odd").continue_token(&tokens[2]))
                .await,
            "a token with another selector",
        ),
        (
            all.list(
                &page
                    .clone()
                    .fields("metadata.namespace=team-a")
                    .continue_token(&tokens[0]),
            )
            .await,
            "a token with an added field selector",
        ),
    ] {
        let error = result.expect_err(what);
        assert!(
            matches!(error, kube::Error::Api(ref e) if e.code == 400
                && e.message.starts_with("invalid continue token: continue key is not valid")),
            "{what}: {error:?}"
        );
    }

    // The same selector written another way is the same list.
    let reordered = page.clone().labels("app==demo, parity=even");
    let second = in_a
        .list(&reordered.clone().continue_token(&tokens[2]))
        .await
        .expect("an equivalent selector continues the list");
    assert_eq!(second.items.len(), 4);

    // Each list, paged to the end, is complete and its own.
    let names = all_pages(&all, &page).await;
    assert_exactly(&names, &everything, "all namespaces");
    let names = all_pages(&in_a, &page).await;
    assert_exactly(&names, &team_a, "team-a");
    let names = all_pages(&in_a, &even).await;
    assert_exactly(&names, &team_a_even, "team-a, parity=even");
    let names = all_pages(&all, &page.clone().fields("metadata.namespace=team-b")).await;
    assert_exactly(
        &names,
        &everything
            .iter()
            .filter(|n| n.starts_with("team-b-"))
            .cloned()
            .collect::<Vec<_>>(),
        "metadata.namespace=team-b",
    );

    // The pages fetched above were taken at `rv` too (nothing was written
    // since): continuing the first tokens now still gives their own lists.
    let mut rest: Vec<String> = firsts[2].items.iter().map(|o| o.name_any()).collect();
    let mut token = Some(tokens[2].clone());
    while let Some(next) = token.take() {
        let list = in_a
            .list(&even.clone().continue_token(&next))
            .await
            .expect("page");
        rest.extend(list.items.iter().map(|o| o.name_any()));
        token = list.metadata.continue_.filter(|t| !t.is_empty());
    }
    assert_exactly(&rest, &team_a_even, "team-a, parity=even, continued late");
    server.shutdown().await;
}

/// kube-rs watchers whose initial lists are paged, started together over
/// two kinds (as a controller starts after a restart), each see exactly
/// their own objects.
#[tokio::test]
async fn watchers_with_paged_initial_lists_over_two_kinds_see_their_own_objects() {
    let (server, client) = server().await;
    let widgets = widgets(&client).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut cm_names = Vec::new();
    let mut widget_names = Vec::new();
    for i in 0..40 {
        let name = format!("cm-{i:02}");
        configmaps
            .create(
                &PostParams::default(),
                &labelled_configmap(&name, "default", &[]),
            )
            .await
            .expect("configmap");
        cm_names.push(name);
        let name = format!("w-{i:02}");
        widgets
            .create(&PostParams::default(), &widget(&name, i))
            .await
            .expect("widget");
        widget_names.push(name);
    }

    /// The names of the initial list, once the watcher says it is done.
    async fn initial<K>(api: Api<K>) -> Vec<String>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    {
        let config = watcher::Config::default().page_size(7);
        let mut events = watcher(api, config).boxed();
        let mut names = Vec::new();
        loop {
            match events.try_next().await.expect("watch event") {
                Some(watcher::Event::Init) => names.clear(),
                Some(watcher::Event::InitApply(object)) => names.push(object.name_any()),
                Some(watcher::Event::InitDone) => return names,
                Some(other) => panic!("before the initial list is done: {other:?}"),
                None => panic!("the watch ended"),
            }
        }
    }
    let (cms, ws) = tokio::time::timeout(
        Duration::from_secs(60),
        futures::future::join(initial(configmaps.clone()), initial(widgets.clone())),
    )
    .await
    .expect("both initial lists finish");
    assert_exactly(&cms, &cm_names, "configmap watcher");
    assert_exactly(&ws, &widget_names, "widget watcher");
    server.shutdown().await;
}
