//! Property tests of what the embedded API server parses from clients:
//! label and field selectors, JSON merge patches (RFC 7386), JSON patches
//! (RFC 6902) and strategic merge patches. The parsers are private, so every
//! property goes through HTTP against one started server, as a client would.
//!
//! - Never a panic: every request gets an answer, and no answer is a 5xx.
//! - A generated selector lists exactly the objects a plain reference
//!   implementation of the Kubernetes rules selects.
//! - A merge patch or JSON patch of a random document gives what the
//!   `json-patch` crate (the oracle) gives, or is refused where the oracle
//!   fails or the result breaks the schema.
//!
//! `cargo test` runs a few dozen cases per property (each is several HTTP
//! requests); set `PROPTEST_CASES` for a long run (docs/reliability.md).
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use radwasm_sim_apiserver::{ApiServer, ApiServerConfig, start};
use serde_json::{Value, json};

fn config(cases: u32) -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = cases;
    }
    config.failure_persistence = Some(Box::new(FileFailurePersistence::Direct(
        "tests/regressions/props.txt",
    )));
    config
}

// ----- one server for the whole test binary ------------------------------------------

struct Harness {
    runtime: tokio::runtime::Runtime,
    _server: ApiServer,
    client: kube::Client,
    next: AtomicU64,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let (server, client) = runtime.block_on(async {
            let server = start(ApiServerConfig {
                history_limit: 1_000,
                ..Default::default()
            })
            .await
            .expect("start");
            let kubeconfig =
                kube::config::Kubeconfig::from_yaml(&server.kubeconfig_yaml()).expect("yaml");
            let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .expect("config");
            let client = kube::Client::try_from(config).expect("client");
            (server, client)
        });
        let harness = Harness {
            runtime,
            _server: server,
            client,
            next: AtomicU64::new(0),
        };
        harness
            .runtime
            .block_on(install_crd(&harness.client))
            .expect("CRD");
        harness
    })
}

/// A unique name for this case's namespace or object.
fn unique(prefix: &str) -> String {
    format!("{prefix}{}", harness().next.fetch_add(1, Ordering::Relaxed))
}

/// What the server answered: a body, or a refusal (4xx) with its message.
#[derive(Debug)]
enum Answer {
    Ok(Value),
    Refused(u16, String),
}

/// One request. A 5xx, a dropped connection or a body that is not JSON is
/// an `Err`: a property failure.
async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> Result<Answer, String> {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(body)
        .map_err(|e| format!("building {method} {path}: {e}"))?;
    match client.request_text(request).await {
        Ok(text) => serde_json::from_str(&text)
            .map(Answer::Ok)
            .map_err(|e| format!("{method} {path}: the answer is not JSON ({e}): {text}")),
        Err(kube::Error::Api(status)) if status.code < 500 => {
            Ok(Answer::Refused(status.code, status.message))
        }
        Err(error) => Err(format!("{method} {path}: {error}")),
    }
}

fn call(method: &str, path: &str, content_type: &str, body: &Value) -> Result<Answer, String> {
    let h = harness();
    let bytes = if body.is_null() && method != "PATCH" {
        Vec::new()
    } else {
        serde_json::to_vec(body).expect("serialises")
    };
    h.runtime
        .block_on(send(&h.client, method, path, content_type, bytes))
}

fn must(answer: Result<Answer, String>, what: &str) -> Value {
    match answer {
        Ok(Answer::Ok(value)) => value,
        other => panic!("{what}: {other:?}"),
    }
}

/// Percent-encode a query parameter value.
fn encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

const GROUP: &str = "props.example.com";

async fn install_crd(client: &kube::Client) -> Result<(), String> {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("docs.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "docs", "singular": "doc", "kind": "Doc"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }}}
            }]
        }
    });
    match send(
        client,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "application/json",
        serde_json::to_vec(&crd).expect("json"),
    )
    .await?
    {
        Answer::Ok(_) => Ok(()),
        refused => Err(format!("{refused:?}")),
    }
}

fn new_namespace() -> String {
    let name = unique("p");
    must(
        call(
            "POST",
            "/api/v1/namespaces",
            "application/json",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        ),
        "create namespace",
    );
    name
}

fn drop_namespace(name: &str) {
    must(
        call(
            "DELETE",
            &format!("/api/v1/namespaces/{name}"),
            "application/json",
            &Value::Null,
        ),
        "delete namespace",
    );
}

// ----- label selectors ------------------------------------------------------------------

const KEYS: &[&str] = &["app", "tier", "env", "example.com/team", "a-b_c.d"];
const VALUES: &[&str] = &["web", "db", "", "x.y", "v1", "A", "a-b_c"];

#[derive(Debug, Clone)]
enum Requirement {
    Equals(&'static str, &'static str, bool),
    NotEquals(&'static str, &'static str),
    In(&'static str, Vec<&'static str>),
    NotIn(&'static str, Vec<&'static str>),
    Exists(&'static str),
    NotExists(&'static str),
}

fn key() -> impl Strategy<Value = &'static str> {
    prop::sample::select(KEYS)
}

fn value() -> impl Strategy<Value = &'static str> {
    prop::sample::select(VALUES)
}

fn requirement() -> impl Strategy<Value = Requirement> {
    let set = || {
        vec(
            value().prop_filter("set values are not empty", |v| !v.is_empty()),
            1..4,
        )
    };
    prop_oneof![
        (key(), value(), any::<bool>())
            .prop_map(|(k, v, double)| Requirement::Equals(k, v, double)),
        (key(), value()).prop_map(|(k, v)| Requirement::NotEquals(k, v)),
        (key(), set()).prop_map(|(k, vs)| Requirement::In(k, vs)),
        (key(), set()).prop_map(|(k, vs)| Requirement::NotIn(k, vs)),
        key().prop_map(Requirement::Exists),
        key().prop_map(Requirement::NotExists),
    ]
}

/// The selector text, with optional spaces where the syntax allows them.
fn render(requirements: &[Requirement], spaced: &[bool]) -> String {
    let gap = |at: usize| {
        if spaced.get(at % spaced.len().max(1)) == Some(&true) {
            " "
        } else {
            ""
        }
    };
    requirements
        .iter()
        .enumerate()
        .map(|(at, requirement)| match requirement {
            Requirement::Equals(k, v, double) => {
                format!(
                    "{k}{}{}{}{v}",
                    gap(at),
                    if *double { "==" } else { "=" },
                    gap(at + 1)
                )
            }
            Requirement::NotEquals(k, v) => format!("{k}{}!={}{v}", gap(at), gap(at + 1)),
            Requirement::In(k, vs) => format!("{k} in ({})", vs.join(&format!(",{}", gap(at)))),
            Requirement::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
            Requirement::Exists(k) => k.to_string(),
            Requirement::NotExists(k) => format!("!{}{k}", gap(at)),
        })
        .collect::<Vec<_>>()
        .join(&format!(",{}", gap(7)))
}

/// The Kubernetes rules: `!=` and `notin` also match objects without the
/// label; `=`, `in` and existence need it.
fn selects(requirements: &[Requirement], labels: &BTreeMap<&str, &str>) -> bool {
    requirements.iter().all(|requirement| match requirement {
        Requirement::Equals(k, v, _) => labels.get(k) == Some(v),
        Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
        Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
        Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
        Requirement::Exists(k) => labels.contains_key(k),
        Requirement::NotExists(k) => !labels.contains_key(k),
    })
}

/// Hostile selector text: random tokens of the grammar and anything else.
fn hostile_selector() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => vec(
            prop_oneof![
                4 => prop::sample::select(vec![
                    "app", "=", "==", "!=", "!", " in ", " notin ", "(", ")", ",", " ", "web",
                    "example.com/", "in", "notin", "()", "(,)", "=(", "~", "\u{0}", "é", "%",
                    "metadata.name", "metadata.namespace", "status.phase", "spec.x", "..", ".",
                ])
                .prop_map(str::to_string),
                1 => "\\PC{1,4}",
            ],
            0..12,
        )
        .prop_map(|tokens| tokens.concat()),
        1 => any::<String>(),
        1 => (1usize..3000).prop_map(|n| "(".repeat(n)),
        1 => (1usize..3000).prop_map(|n| format!("a in ({})", ",".repeat(n))),
    ]
}

fn object_labels() -> impl Strategy<Value = BTreeMap<&'static str, &'static str>> {
    btree_map(key(), value(), 0..4)
}

proptest! {
    #![proptest_config(config(48))]

    /// Generated selectors list exactly the objects the reference selects;
    /// field selectors on the name do too.
    #[test]
    fn label_selectors_select_what_the_rules_say(
        objects in vec(object_labels(), 1..7),
        selectors in vec((vec(requirement(), 1..4), vec(any::<bool>(), 1..6)), 1..5),
        pick in any::<prop::sample::Index>(),
    ) {
        let namespace = new_namespace();
        for (n, labels) in objects.iter().enumerate() {
            must(call("POST", &format!("/api/v1/namespaces/{namespace}/configmaps"), "application/json",
                &json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("o{n}"), "labels": labels}})), "create");
        }
        let list = |query: String| -> Result<Vec<String>, TestCaseError> {
            let path = format!("/api/v1/namespaces/{namespace}/configmaps?{query}");
            match call("GET", &path, "application/json", &Value::Null) {
                Ok(Answer::Ok(body)) => {
                    let mut names: Vec<String> = body["items"].as_array().into_iter().flatten()
                        .filter_map(|item| item.pointer("/metadata/name")?.as_str().map(str::to_string))
                        .collect();
                    names.sort();
                    Ok(names)
                }
                other => Err(TestCaseError::fail(format!("GET {path}: {other:?}"))),
            }
        };
        for (requirements, spaced) in &selectors {
            let text = render(requirements, spaced);
            let mut expected: Vec<String> = objects.iter().enumerate()
                .filter(|(_, labels)| selects(requirements, labels))
                .map(|(n, _)| format!("o{n}"))
                .collect();
            expected.sort();
            prop_assert_eq!(list(format!("labelSelector={}", encode(&text)))?, expected, "selector {:?}", text);
        }
        let chosen = format!("o{}", pick.index(objects.len()));
        prop_assert_eq!(list(format!("fieldSelector={}", encode(&format!("metadata.name={chosen}"))))?, vec![chosen.clone()]);
        let others = list(format!("fieldSelector={}", encode(&format!("metadata.name!={chosen}"))))?;
        prop_assert_eq!(others.len(), objects.len() - 1);
        prop_assert!(!others.contains(&chosen));
        drop_namespace(&namespace);
    }

    /// Any selector text, as a label or field selector, on a list or a
    /// watch: an answer (200 or a 4xx), never a 5xx or a dropped connection.
    #[test]
    fn hostile_selectors_never_break_the_server(text in hostile_selector(), field in any::<bool>()) {
        let parameter = if field { "fieldSelector" } else { "labelSelector" };
        for path in [
            format!("/api/v1/namespaces/default/configmaps?{parameter}={}", encode(&text)),
            format!("/api/v1/events?{parameter}={}", encode(&text)),
            format!("/apis/{GROUP}/v1/docs?{parameter}={}&limit=1", encode(&text)),
        ] {
            match call("GET", &path, "application/json", &Value::Null) {
                Ok(Answer::Ok(_)) | Ok(Answer::Refused(400, _)) => {}
                other => prop_assert!(false, "GET {}: {:?}", path, other),
            }
        }
    }
}

// ----- patches ----------------------------------------------------------------------------

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-5i64..5).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        // Any finite float: each must come back as it was sent
        // (`regression_floats_keep_their_value`).
        any::<f64>().prop_filter_map("a finite float", |f| {
            serde_json::Number::from_f64(f).map(Value::Number)
        }),
        "[a-z]{0,4}".prop_map(Value::String),
        any::<String>().prop_map(Value::String),
    ]
}

/// Object keys: a few shared names (so patches hit the document), JSON
/// pointer escapes, patch directives, anything.
fn json_key() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::sample::select(vec!["a", "b", "c", "list", "0", "-", "~", "/", "~0", "~1", "a/b", ""])
            .prop_map(str::to_string),
        1 => prop::sample::select(vec!["$patch", "$retainKeys", "$setElementOrder/a", "$deleteFromPrimitiveList/list"])
            .prop_map(str::to_string),
        1 => "\\PC{0,5}",
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(5, 48, 5, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..5).prop_map(Value::Array),
            btree_map(json_key(), inner, 0..5)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// A document as a client would create it: an object, without nulls.
fn document() -> impl Strategy<Value = Value> {
    btree_map(json_key(), json_value(), 0..6).prop_map(|map| {
        let mut value = Value::Object(map.into_iter().collect());
        strip_nulls(&mut value);
        value
    })
}

fn strip_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

fn create_doc(namespace: &str, spec: &Value) -> Result<Value, TestCaseError> {
    let name = unique("d");
    let path = format!("/apis/{GROUP}/v1/namespaces/{namespace}/docs");
    match call(
        "POST",
        &path,
        "application/json",
        &json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Doc", "metadata": {"name": name}, "spec": spec}),
    ) {
        Ok(Answer::Ok(created)) => Ok(created),
        other => Err(TestCaseError::fail(format!("POST {path}: {other:?}"))),
    }
}

fn doc_path(namespace: &str, created: &Value) -> String {
    format!(
        "/apis/{GROUP}/v1/namespaces/{namespace}/docs/{}",
        created["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// Pointers into a document: the ones it has, and ones it does not.
fn pointers(value: &Value, prefix: &str, out: &mut Vec<String>) {
    out.push(prefix.to_string());
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let escaped = key.replace('~', "~0").replace('/', "~1");
                pointers(child, &format!("{prefix}/{escaped}"), out);
            }
        }
        Value::Array(items) => {
            for (at, child) in items.iter().enumerate() {
                pointers(child, &format!("{prefix}/{at}"), out);
            }
            out.push(format!("{prefix}/-"));
            out.push(format!("{prefix}/{}", items.len() + 1));
        }
        _ => {}
    }
}

#[derive(Debug, Clone)]
struct OperationPlan {
    op: &'static str,
    path: prop::sample::Index,
    from: prop::sample::Index,
    value: Value,
    extra: Option<&'static str>,
}

fn operation_plan() -> impl Strategy<Value = OperationPlan> {
    (
        prop::sample::select(vec![
            "add", "remove", "replace", "move", "copy", "test", "bogus",
        ]),
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
        json_value(),
        proptest::option::weighted(
            0.15,
            prop::sample::select(vec![
                "",
                "/",
                "/spec/~2",
                "spec",
                "/spec/a/~",
                "/metadata/name",
                "/spec/00",
                "/spec/-1",
            ]),
        ),
    )
        .prop_map(|(op, path, from, value, extra)| OperationPlan {
            op,
            path,
            from,
            value,
            extra,
        })
}

/// Turn plans into RFC 6902 operations on `document`'s own pointers (under
/// `/spec`), with a few pointers that are not there or not valid.
fn operations(document: &Value, plans: &[OperationPlan]) -> Value {
    let mut known = Vec::new();
    pointers(&document["spec"], "/spec", &mut known);
    known.push("/spec/missing".to_string());
    known.push("/spec/missing/deeper".to_string());
    Value::Array(
        plans
            .iter()
            .map(|plan| {
                let path = plan
                    .extra
                    .map(str::to_string)
                    .unwrap_or_else(|| plan.path.get(&known).clone());
                let from = plan.from.get(&known).clone();
                match plan.op {
                    "add" | "replace" | "test" => {
                        json!({"op": plan.op, "path": path, "value": plan.value})
                    }
                    "remove" => json!({"op": "remove", "path": path}),
                    // Including a move of a value over one of its ancestors,
                    // which `json_patch::patch` cannot undo if a later
                    // operation fails (`regression_json_patch_whose_undo_fails`).
                    "move" | "copy" => json!({"op": plan.op, "from": from, "path": path}),
                    _ => json!({"op": plan.op, "path": path}),
                }
            })
            .collect(),
    )
}

/// What the server must do with a patched document, given the oracle's
/// result: keep a spec that is an object or absent, refuse anything else.
fn check_patched(
    answer: Result<Answer, String>,
    expected: Option<Value>,
    what: &str,
) -> Result<(), TestCaseError> {
    let answer = answer.map_err(TestCaseError::fail)?;
    let acceptable = |spec: &Value| spec.is_object() || spec.is_null();
    match (answer, expected) {
        (Answer::Ok(object), Some(expected)) if acceptable(&expected) => {
            let spec = object.get("spec").cloned().unwrap_or(Value::Null);
            prop_assert_eq!(spec, expected, "{}", what);
        }
        (Answer::Refused(code, message), Some(expected)) if !acceptable(&expected) => {
            prop_assert!(
                code == 422 || code == 400,
                "{}: refused with {}: {}",
                what,
                code,
                message
            );
        }
        (Answer::Refused(code, message), None) => {
            prop_assert!(
                code == 422 || code == 400,
                "{}: refused with {}: {}",
                what,
                code,
                message
            );
        }
        (answer, expected) => {
            prop_assert!(
                false,
                "{}: server {:?}, oracle {:?}",
                what,
                answer,
                expected
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(48))]

    /// A JSON merge patch of the spec gives what `json_patch::merge` gives.
    #[test]
    fn merge_patches_agree_with_the_oracle(spec in document(), patch in json_value()) {
        let namespace = "default";
        let created = create_doc(namespace, &spec)?;
        let path = doc_path(namespace, &created);
        let mut expected = json!({"spec": created["spec"].clone()});
        json_patch::merge(&mut expected, &json!({"spec": patch}));
        let expected = expected.get("spec").cloned().unwrap_or(Value::Null);
        let answer = call("PATCH", &path, "application/merge-patch+json", &json!({"spec": patch}));
        check_patched(answer, Some(expected), &format!("merge {patch} into {spec}"))?;
        // A merge patch that is not an object is refused.
        if !patch.is_object() {
            let answer = call("PATCH", &path, "application/merge-patch+json", &patch);
            prop_assert!(matches!(answer, Ok(Answer::Refused(400, _))), "{:?}", answer);
        }
        must(call("DELETE", &path, "application/json", &Value::Null), "delete");
    }

    /// A JSON patch (operations on the spec's own paths, and some that are
    /// not there) gives what `json_patch::patch` gives, or is refused where
    /// it fails.
    #[test]
    fn json_patches_agree_with_the_oracle(spec in document(), plans in vec(operation_plan(), 1..5)) {
        let namespace = "default";
        let created = create_doc(namespace, &spec)?;
        let path = doc_path(namespace, &created);
        let operations = operations(&created, &plans);
        // `patch_unsafe` on a copy dropped on error: `patch` would try to
        // undo a failed patch, and panics on moves it cannot undo.
        let mut expected = created.clone();
        let oracle = serde_json::from_value::<json_patch::Patch>(operations.clone())
            .ok()
            .and_then(|patch| json_patch::patch_unsafe(&mut expected, &patch).ok())
            .map(|()| expected.get("spec").cloned().unwrap_or(Value::Null));
        // Operations that touch metadata may be refused by the server's own
        // rules even where the oracle applies them: only check for crashes.
        let touches_metadata = operations.to_string().contains("/metadata") || plans.iter().any(|p| matches!(p.extra, Some("") | Some("/")));
        let answer = call("PATCH", &path, "application/json-patch+json", &operations);
        if touches_metadata {
            prop_assert!(answer.is_ok(), "{:?}", answer);
        } else {
            check_patched(answer, oracle, &format!("patch {operations} on {spec}"))?;
        }
        let _ = call("DELETE", &path, "application/json", &Value::Null);
    }

    /// Strategic merge patches, with every directive and merged list, on a
    /// built-in kind: an answer, never a 5xx; without directives or merged
    /// lists it is a merge patch.
    #[test]
    fn strategic_merge_patches_never_break_the_server(
        data in btree_map("[a-z]{1,3}", "[a-z]{0,3}", 0..4),
        patch in json_value(),
        finalizers in vec(prop::sample::select(vec!["a", "b", "c"]), 0..3),
        owners in vec((prop::sample::select(vec!["1", "2", "3"]), any::<bool>()), 0..3),
        shape in 0u8..4,
    ) {
        let name = unique("s");
        let path = format!("/api/v1/namespaces/default/configmaps/{name}");
        must(call("POST", "/api/v1/namespaces/default/configmaps", "application/json",
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "finalizers": finalizers}, "data": data})), "create");
        let owner_items: Vec<Value> = owners.iter().map(|(uid, delete)| {
            let mut item = json!({"uid": uid, "apiVersion": "v1", "kind": "ConfigMap", "name": "x"});
            if *delete { item["$patch"] = json!("delete"); }
            item
        }).collect();
        let body = match shape {
            0 => json!({"data": patch}),
            1 => json!({"metadata": {"finalizers": patch, "$deleteFromPrimitiveList/finalizers": ["a"], "$setElementOrder/finalizers": ["b"]}}),
            2 => json!({"metadata": {"ownerReferences": owner_items, "labels": patch}, "$retainKeys": ["metadata", "data"]}),
            _ => patch.clone(),
        };
        let answer = call("PATCH", &path, "application/strategic-merge-patch+json", &body);
        prop_assert!(answer.is_ok(), "{}: {:?}", body, answer);
        // `data` patched with string values and nulls only: a merge patch.
        if let Value::Object(map) = &patch
            && shape == 0
            && map.iter().all(|(k, v)| !k.starts_with('$') && (v.is_string() || v.is_null()))
            && let Ok(Answer::Ok(object)) = &answer
        {
            let mut expected = json!({"data": data});
            json_patch::merge(&mut expected, &json!({"data": patch}));
            let got = object.get("data").cloned().unwrap_or_else(|| json!({}));
            let want = expected.get("data").cloned().unwrap_or_else(|| json!({}));
            prop_assert_eq!(got, want);
        }
        // Gone already if the patch named owners that do not exist (the
        // garbage collector deletes it, as on a cluster).
        let cleared = call("PATCH", &path, "application/merge-patch+json", &json!({"metadata": {"finalizers": null}}));
        prop_assert!(matches!(cleared, Ok(Answer::Ok(_)) | Ok(Answer::Refused(404, _))), "{:?}", cleared);
        let _ = call("DELETE", &path, "application/json", &Value::Null);
    }

    /// Patch bodies that are not JSON, or not the right shape, on every
    /// patch type: refused, never a 5xx.
    #[test]
    fn malformed_patch_bodies_are_refused(
        body in prop_oneof![any::<String>(), "[\\[\\]{}\":,a-z0-9 ]{0,30}", (1usize..5000).prop_map(|n| "[".repeat(n))],
        media in prop::sample::select(vec![
            "application/merge-patch+json", "application/json-patch+json",
            "application/strategic-merge-patch+json", "application/apply-patch+yaml", "text/plain", "",
        ]),
    ) {
        let h = harness();
        let answer = h.runtime.block_on(send(
            &h.client,
            "PATCH",
            "/api/v1/namespaces/default/configmaps/kube-root-absent",
            media,
            body.into_bytes(),
        ));
        prop_assert!(answer.is_ok(), "{:?}", answer);
    }
}

/// A merge patch of `{"spec": null}` removes the spec; of a string, is
/// refused by the schema: the two edges of `check_patched`.
#[test]
fn merge_patch_edges() {
    let created = create_doc("default", &json!({"a": 1})).expect("create");
    let path = doc_path("default", &created);
    let removed = must(
        call(
            "PATCH",
            &path,
            "application/merge-patch+json",
            &json!({"spec": null}),
        ),
        "remove spec",
    );
    assert!(removed.get("spec").is_none(), "{removed}");
    let refused = call(
        "PATCH",
        &path,
        "application/merge-patch+json",
        &json!({"spec": "x"}),
    );
    assert!(
        matches!(refused, Ok(Answer::Refused(422, _))),
        "{refused:?}"
    );
}

/// serde_json's default float parser is not correctly rounded: a stored
/// float changed in its last digit (the real server, in Go, keeps it). The
/// crate now enables serde_json's `float_roundtrip`. Found by
/// `merge_patches_agree_with_the_oracle`. Checked on the text the server
/// sends, read with the standard library's (correctly rounded) parser, so
/// that the test's use of serde_json plays no part.
#[test]
fn regression_floats_keep_their_value() {
    let written = "8.559329880594096e49";
    let name = unique("f");
    let body = format!(
        r#"{{"apiVersion":"{GROUP}/v1","kind":"Doc","metadata":{{"name":"{name}"}},"spec":{{"x":{written}}}}}"#
    );
    let h = harness();
    let text = h.runtime.block_on(async {
        let request = http::Request::builder()
            .method("POST")
            .uri(format!("/apis/{GROUP}/v1/namespaces/default/docs"))
            .header("content-type", "application/json")
            .body(body.into_bytes())
            .expect("request");
        h.client.request_text(request).await.expect("created")
    });
    // The number as sent back (`8.559329880594096e+49`, as Go writes it too).
    let sent_back = text
        .split_once(r#""spec":{"x":"#)
        .and_then(|(_, rest)| rest.split_once('}'))
        .map(|(number, _)| number)
        .unwrap_or_default();
    assert_eq!(
        sent_back.parse::<f64>().ok(),
        written.parse::<f64>().ok(),
        "{text}"
    );
}

/// A JSON patch whose undo fails (a `move` of a child over its parent, then
/// an operation that fails) panicked inside the `json-patch` crate's `patch`
/// (`unreachable!`), with the store lock held: the lock was poisoned and
/// every later request failed. Found by `json_patches_agree_with_the_oracle`
/// (the oracle panicked on it). The server now applies `patch_unsafe` to its
/// copy of the document, dropped on error, and recovers a poisoned lock. On
/// a server of its own, to see that the next request is answered.
#[test]
fn regression_json_patch_whose_undo_fails() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let server = start(ApiServerConfig::default()).await.expect("start");
        let kubeconfig =
            kube::config::Kubeconfig::from_yaml(&server.kubeconfig_yaml()).expect("yaml");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("config");
        let client = kube::Client::try_from(config).expect("client");
        let create = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c"}, "data": {"a": "x"}});
        let created = send(
            &client,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            serde_json::to_vec(&create).expect("json"),
        )
        .await;
        assert!(matches!(created, Ok(Answer::Ok(_))), "{created:?}");
        let operations = json!([
            {"op": "move", "from": "/data/a", "path": "/data"},
            {"op": "add", "path": "/data/a", "value": "y"}
        ]);
        let patched = send(
            &client,
            "PATCH",
            "/api/v1/namespaces/default/configmaps/c",
            "application/json-patch+json",
            serde_json::to_vec(&operations).expect("json"),
        )
        .await;
        let after = send(
            &client,
            "GET",
            "/api/v1/namespaces/default/configmaps/c",
            "application/json",
            Vec::new(),
        )
        .await;
        assert!(
            matches!(patched, Ok(Answer::Refused(422, _)))
                && matches!(&after, Ok(Answer::Ok(object)) if object["data"] == json!({"a": "x"})),
            "patch: {patched:?}; a GET after it: {after:?}"
        );
        server.shutdown().await;
    });
}

/// Reading, while checking what else could panic with the store locked: a
/// dry-run create, update or server-side apply served its body back as an
/// object, and panicked on one that is not (a string, an array, a number).
#[test]
fn regression_dry_runs_of_a_body_that_is_not_an_object() {
    let created = create_doc("default", &json!({"a": 1})).expect("create");
    let path = doc_path("default", &created);
    let collection = format!("/apis/{GROUP}/v1/namespaces/default/docs");
    let absent = format!("{collection}/{}", unique("absent"));
    for body in [json!("x"), json!([1]), json!(2)] {
        for (method, at, media) in [
            ("POST", collection.as_str(), "application/json"),
            ("PUT", path.as_str(), "application/json"),
            ("PATCH", absent.as_str(), "application/apply-patch+yaml"),
        ] {
            let answer = call(
                method,
                &format!("{at}?dryRun=All&fieldManager=props"),
                media,
                &body,
            );
            assert!(
                matches!(answer, Ok(Answer::Refused(400, _))),
                "{method} {at} {body}: {answer:?}"
            );
        }
    }
    must(
        call("GET", &path, "application/json", &Value::Null),
        "a GET after them",
    );
}

/// Reading, likewise: the OpenAPI document of a CRD whose schema's
/// `properties` is not an object (the real server refuses such a CRD; this
/// one stores it) indexed into it and panicked.
#[test]
fn regression_openapi_of_a_schema_whose_properties_is_not_an_object() {
    let group = format!("{}.example.com", unique("g"));
    must(
        call(
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            "application/json",
            &json!({
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("odds.{group}")},
                "spec": {
                    "group": group,
                    "scope": "Namespaced",
                    "names": {"plural": "odds", "singular": "odd", "kind": "Odd"},
                    "versions": [{
                        "name": "v1", "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object", "properties": "x"}}
                    }]
                }
            }),
        ),
        "create the CRD",
    );
    must(
        call(
            "GET",
            &format!("/openapi/v3/apis/{group}/v1"),
            "application/json",
            &Value::Null,
        ),
        "its OpenAPI document",
    );
}

/// Found by the `selectors` fuzz target (input kept in
/// `fuzz/regressions/selectors/`): a selector could have two readings.
/// `a==b==c` was read as `a` equal to `b==c`, and its canonical form (which
/// binds continue tokens to their list) as `a=b` equal to `c`, so two
/// different lists shared one canonical form. Label keys and values now
/// follow the Kubernetes rules, and field selectors split at the first
/// operator and refuse an unescaped `=` in a value, as the real server does
/// (`\,`, `\=` and `\\` escape them).
#[test]
fn regression_fuzz_selectors_with_two_readings() {
    use radwasm_sim_apiserver::fuzzing::Selector;

    let found = "metadata.nstat\u{fffd}s.am==status.sppappsease==statstua";
    for (text, what) in [
        (found, "label"),
        (found, "field"),
        ("app==web==x", "label"),
        ("metadata.name==a==b", "field"),
        ("metadata.name=a!=b", "field"),
        ("x! = z", "label"),
        ("x! = z", "field"),
        ("app=web server", "label"),
        ("Example.com/app=web", "label"),
        ("metadata.name=a\\b", "field"),
    ] {
        let error = Selector::parse(text, what).expect_err(text);
        assert_eq!(error.code, 400, "{text}: {error:?}");
    }
    let object =
        json!({"metadata": {"name": "a,b=c\\", "labels": {"example.com/team": "a-b_c.d"}}});
    for (text, what) in [
        ("metadata.name=a\\,b\\=c\\\\", "field"),
        ("example.com/team==a-b_c.d,!x", "label"),
        ("example.com/team in (a-b_c.d, e)", "label"),
    ] {
        let selector = Selector::parse(text, what).expect(text);
        let again = Selector::parse(&selector.canonical(), what).expect("canonical");
        assert_eq!(again.canonical(), selector.canonical());
        let selects = |s: &Selector| match what {
            "field" => s.matches_fields(&object),
            _ => s.matches_labels(&object),
        };
        assert!(selects(&selector) && selects(&again), "{text}");
    }
    for (parameter, text) in [
        ("labelSelector", "app==web==x"),
        ("fieldSelector", "metadata.name==a==b"),
    ] {
        let path = format!(
            "/api/v1/namespaces/default/configmaps?{parameter}={}&limit=1",
            encode(text)
        );
        let answer = call("GET", &path, "application/json", &Value::Null);
        assert!(
            matches!(answer, Ok(Answer::Refused(400, _))),
            "{path}: {answer:?}"
        );
    }
}

/// Reading, while writing the `patch_bodies` fuzz target (which reproduces
/// it: input kept in `fuzz/regressions/patch_bodies/`): a JSON patch of forty
/// `copy`s of a list into itself, 1.4 kB, asks for 2^40 elements, and the
/// server ran out of memory. The copies of one patch may now add at most
/// 3 MiB and a patch may hold at most 10,000 operations, the real server's
/// limits.
#[test]
fn regression_fuzz_json_patch_copies_are_bounded() {
    let created = create_doc("default", &json!({"a": [1]})).expect("create");
    let path = doc_path("default", &created);
    let copies = vec![json!({"op": "copy", "from": "/spec/a", "path": "/spec/a/-"}); 40];
    let answer = call(
        "PATCH",
        &path,
        "application/json-patch+json",
        &json!(copies),
    );
    assert!(
        matches!(&answer, Ok(Answer::Refused(422, message)) if message.contains("copies")),
        "{answer:?}"
    );
    // A few copies are fine.
    let few = vec![json!({"op": "copy", "from": "/spec/a", "path": "/spec/a/-"}); 3];
    let patched = must(
        call("PATCH", &path, "application/json-patch+json", &json!(few)),
        "three copies",
    );
    assert_eq!(
        patched["spec"]["a"],
        json!([1, [1], [1, [1]], [1, [1], [1, [1]]]])
    );
    let many = vec![json!({"op": "test", "path": "/spec/a/0", "value": 1}); 10_001];
    let answer = call("PATCH", &path, "application/json-patch+json", &json!(many));
    assert!(matches!(answer, Ok(Answer::Refused(413, _))), "{answer:?}");
    // The index in an error is the failing operation's.
    let failing = json!([
        {"op": "test", "path": "/spec/a/0", "value": 1},
        {"op": "remove", "path": "/spec/missing"}
    ]);
    let answer = call("PATCH", &path, "application/json-patch+json", &failing);
    assert!(
        matches!(&answer, Ok(Answer::Refused(422, message)) if message.contains("operation '/1'")),
        "{answer:?}"
    );
    must(
        call("GET", &path, "application/json", &Value::Null),
        "a GET after them",
    );
}
