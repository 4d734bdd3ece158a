//! Protobuf request bodies over HTTP, as client-go's typed clients send
//! them: an update (PUT) of a Lease, a status write, an events.k8s.io
//! Event, DeleteOptions with preconditions; and the bodies and `Accept`
//! headers the server must refuse, each with a Status naming what is
//! wrong, the server serving on afterwards.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace};
use k8s_pb::api::coordination::v1 as coordination;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::events::v1 as events;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use prost::Message;
use radwasm_sim_apiserver::{ApiServer, ApiServerConfig, start};
use serde_json::{Value, json};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// What client-go's typed clients send as `Accept`.
const CLIENT_GO_ACCEPT: &str = "application/vnd.kubernetes.protobuf,application/json";

async fn server() -> (ApiServer, Client) {
    let server = start(ApiServerConfig::default()).await.expect("start");
    let config = kube::Config::new(server.base_url().parse().expect("url"));
    (server, Client::try_from(config).expect("client"))
}

/// The body client-go sends: magic, then the envelope around `message`.
fn protobuf(api_version: &str, kind: &str, message: &impl Message) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(message.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut bytes = b"k8s\0".to_vec();
    bytes.extend(unknown.encode_to_vec());
    bytes
}

/// Send `body` as protobuf; the answer's JSON, or the refusal's Status.
async fn send(
    client: &Client,
    method: &str,
    path: &str,
    body: Vec<u8>,
) -> Result<Value, kube::core::Status> {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", PROTOBUF)
        .header("accept", CLIENT_GO_ACCEPT)
        .body(body)
        .expect("request");
    match client.request_text(request).await {
        Ok(text) => Ok(serde_json::from_str(&text).expect("a JSON answer")),
        Err(kube::Error::Api(status)) => Err(*status),
        Err(other) => panic!("{method} {path}: {other:?}"),
    }
}

fn metadata(name: &str, namespace: &str, resource_version: &str) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        resource_version: Some(resource_version.into()),
        ..Default::default()
    })
}

#[tokio::test]
async fn a_lease_is_updated_with_protobuf_and_a_stale_version_conflicts() {
    let (server, client) = server().await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let created = leases
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "leader"}, "spec": {}}))
                .expect("lease"),
        )
        .await
        .expect("create");
    let version = created.resource_version().expect("resourceVersion");
    let lease = |holder: &str, version: &str| coordination::Lease {
        metadata: metadata("leader", "default", version),
        spec: Some(coordination::LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(meta::MicroTime {
                seconds: Some(1_767_225_600),
                nanos: Some(250_000_000),
            }),
            ..Default::default()
        }),
    };
    let path = "/apis/coordination.k8s.io/v1/namespaces/default/leases/leader";
    let updated = send(
        &client,
        "PUT",
        path,
        protobuf("coordination.k8s.io/v1", "Lease", &lease("pod-a", &version)),
    )
    .await
    .expect("update");
    assert_eq!(updated["spec"]["holderIdentity"], "pod-a");
    assert_eq!(updated["spec"]["renewTime"], "2026-01-01T00:00:00.250000Z");
    let read = leases.get("leader").await.expect("get");
    assert_eq!(
        read.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("pod-a")
    );
    let stale = send(
        &client,
        "PUT",
        path,
        protobuf("coordination.k8s.io/v1", "Lease", &lease("pod-b", &version)),
    )
    .await
    .expect_err("a stale resourceVersion");
    assert_eq!((stale.code, stale.reason.as_str()), (409, "Conflict"));
    server.shutdown().await;
}

#[tokio::test]
async fn a_status_write_and_an_events_api_event_go_through_the_usual_rules() {
    let (server, client) = server().await;
    // Writes to a namespace's status change only status.
    let namespace = core::Namespace {
        metadata: Some(meta::ObjectMeta {
            name: Some("default".into()),
            labels: BTreeMap::from([("ignored".into(), "yes".into())]),
            ..Default::default()
        }),
        spec: None,
        status: Some(core::NamespaceStatus {
            phase: Some("Active".into()),
            conditions: Vec::new(),
        }),
    };
    send(
        &client,
        "PUT",
        "/api/v1/namespaces/default/status",
        protobuf("v1", "Namespace", &namespace),
    )
    .await
    .expect("status write");
    let read = Api::<Namespace>::all(client.clone())
        .get("default")
        .await
        .expect("get");
    assert_eq!(
        read.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Active")
    );
    assert!(
        !read.labels().contains_key("ignored"),
        "{:?}",
        read.labels()
    );

    // An events.k8s.io Event is stored in core form, as a JSON one is.
    let event = events::Event {
        metadata: metadata("demo.1", "default", ""),
        event_time: Some(meta::MicroTime {
            seconds: Some(1_767_225_600),
            nanos: Some(0),
        }),
        reporting_controller: Some("radwasm.io/controller".into()),
        reporting_instance: Some("radwasm-0".into()),
        action: Some("Deploy".into()),
        reason: Some("Deploying".into()),
        regarding: Some(core::ObjectReference {
            kind: Some("ConfigMap".into()),
            name: Some("demo".into()),
            ..Default::default()
        }),
        note: Some("started".into()),
        r#type: Some("Normal".into()),
        ..Default::default()
    };
    send(
        &client,
        "POST",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        protobuf("events.k8s.io/v1", "Event", &event),
    )
    .await
    .expect("create event");
    let core_event = Api::<Event>::namespaced(client.clone(), "default")
        .get("demo.1")
        .await
        .expect("the core/v1 form");
    assert_eq!(core_event.message.as_deref(), Some("started"));
    assert_eq!(core_event.involved_object.name.as_deref(), Some("demo"));
    server.shutdown().await;
}

#[tokio::test]
async fn delete_options_in_protobuf_carry_their_preconditions() {
    let (server, client) = server().await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let created = config_maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "doomed"}})).expect("cm"),
        )
        .await
        .expect("create");
    let options = |uid: &str| meta::DeleteOptions {
        preconditions: Some(meta::Preconditions {
            uid: Some(uid.into()),
            resource_version: None,
        }),
        propagation_policy: Some("Background".into()),
        ..Default::default()
    };
    let path = "/api/v1/namespaces/default/configmaps/doomed";
    let refused = send(
        &client,
        "DELETE",
        path,
        protobuf("v1", "DeleteOptions", &options("not-its-uid")),
    )
    .await
    .expect_err("a uid precondition that fails");
    assert_eq!(refused.code, 409, "{refused:?}");
    let uid = created.uid().expect("uid");
    send(
        &client,
        "DELETE",
        path,
        protobuf("meta.k8s.io/v1", "DeleteOptions", &options(&uid)),
    )
    .await
    .expect("delete");
    assert!(config_maps.get_opt("doomed").await.expect("get").is_none());
    server.shutdown().await;
}

#[tokio::test]
async fn bodies_that_do_not_decode_get_400_and_the_server_serves_on() {
    let (server, client) = server().await;
    let path = "/api/v1/namespaces/default/configmaps";
    let config_map = core::ConfigMap {
        metadata: metadata("cm", "default", ""),
        binary_data: BTreeMap::from([("policy.wasm".into(), vec![1; 100])]),
        ..Default::default()
    };
    let good = protobuf("v1", "ConfigMap", &config_map);
    let mut wrong_magic = good.clone();
    wrong_magic[0] = b'K';
    let truncated = good[..good.len() - 20].to_vec();
    let wrong_kind = protobuf("v1", "Secret", &core::Secret::default());
    for (body, says) in [
        (wrong_magic, "expected prefix [107, 56, 115, 0]"),
        (truncated, "runtime.Unknown"),
        (
            wrong_kind,
            "holds a v1 Secret, but this URL takes a v1 ConfigMap",
        ),
        (
            b"{\"kind\":\"ConfigMap\"}".to_vec(),
            "does not appear to be a protobuf message",
        ),
    ] {
        let status = send(&client, "POST", path, body).await.expect_err(says);
        assert_eq!((status.code, status.reason.as_str()), (400, "BadRequest"));
        assert!(status.message.contains(says), "{}", status.message);
    }
    let created = send(&client, "POST", path, good).await.expect("create");
    assert_eq!(created["metadata"]["name"], "cm");
    assert!(created["metadata"]["uid"].is_string());
    server.shutdown().await;
}

#[tokio::test]
async fn media_types_the_server_does_not_handle_get_the_real_servers_415_and_406() {
    let (server, client) = server().await;
    let request = |accept: &str, content_type: &str, body: Vec<u8>| {
        http::Request::builder()
            .method("POST")
            .uri("/api/v1/namespaces/default/configmaps")
            .header("accept", accept)
            .header("content-type", content_type)
            .body(body)
            .expect("request")
    };
    let cbor = request("application/json", "application/cbor", vec![0xa0]);
    let Err(kube::Error::Api(status)) = client.request_text(cbor).await else {
        panic!("CBOR accepted");
    };
    assert_eq!(
        (status.code, status.reason.as_str()),
        (415, "UnsupportedMediaType")
    );
    assert!(
        status.message.contains(
            "accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"
        ),
        "{}",
        status.message
    );
    let body = serde_json::to_vec(&json!({"metadata": {"name": "x"}})).expect("json");
    let protobuf_only = request(PROTOBUF, "application/json", body.clone());
    let Err(kube::Error::Api(status)) = client.request_text(protobuf_only).await else {
        panic!("answered a client that takes protobuf only");
    };
    assert_eq!(
        (status.code, status.reason.as_str()),
        (406, "NotAcceptable")
    );
    assert!(
        status
            .message
            .contains("only the following media types are accepted: application/json")
            && status.message.contains(PROTOBUF),
        "{}",
        status.message
    );
    // Nothing was created by the refused request; with JSON offered, it is.
    let with_json = request(CLIENT_GO_ACCEPT, "application/json", body);
    client.request_text(with_json).await.expect("created");
    // A patch is never protobuf: the patch types are named instead.
    let patch = send(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/x",
        protobuf("v1", "ConfigMap", &core::ConfigMap::default()),
    )
    .await
    .expect_err("a protobuf patch");
    assert_eq!(patch.code, 415);
    assert!(
        patch.message.contains("application/merge-patch+json"),
        "{}",
        patch.message
    );
    server.shutdown().await;
}
