//! Least privilege, verified on the real API server: the controller, run as
//! a ServiceAccount bound to exactly the rules of `deploy/rbac.yaml`, uses
//! every permission those rules grant, is refused as soon as any one rule is
//! taken away, and cannot read Secrets or write anything outside its kinds.
//!
//! What the controller did is read from kube-apiserver's audit log (every
//! request of a ServiceAccount, see [`crate::realkube::AUDIT_LOG`]), not from
//! its own logs. Each test binds its own ServiceAccounts in
//! `radwasm-system` to copies of the committed rules, so the tests and the
//! scenarios sharing the cluster never see each other's requests.
//!
//! Not exercised here: the `api.ucp.dev` rule. The controller reaches Radius
//! through that aggregated API only when it runs without `--radius-url`,
//! and this cluster has no Radius APIService behind it; the scenario
//! `without_radius_url_the_controller_uses_the_aggregated_path_with_cluster_credentials`
//! covers the path on the embedded server.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde::Deserialize;

use crate::harness::{Backend, System, app_template, fixture};
use crate::realkube::{CONTROLLER_NAMESPACE, ClusterHandle, can, eventually, shared};

/// One permission: API group, resource (`resource/subresource` for a
/// subresource) and verb, as RBAC and the audit log name them.
type Permission = (String, String, String);

/// The aggregated Radius API: granted, but not reachable on this cluster.
const RADIUS_GROUP: &str = "api.ucp.dev";

/// The rules of `deploy/rbac.yaml` as committed.
pub(crate) struct CommittedRules {
    /// The ClusterRole's (all namespaces).
    pub(crate) cluster: Vec<PolicyRule>,
    /// The Role's (namespace `radwasm-system`).
    pub(crate) namespaced: Vec<PolicyRule>,
}

fn committed_rules() -> CommittedRules {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/rbac.yaml");
    let text = std::fs::read_to_string(&path).expect("deploy/rbac.yaml");
    let mut rules = CommittedRules {
        cluster: Vec::new(),
        namespaced: Vec::new(),
    };
    for document in serde_yaml::Deserializer::from_str(&text) {
        let value = serde_yaml::Value::deserialize(document).expect("a YAML document");
        match value["kind"].as_str() {
            Some("ClusterRole") => {
                let role: ClusterRole = serde_yaml::from_value(value).expect("ClusterRole");
                rules.cluster.extend(role.rules.unwrap_or_default());
            }
            Some("Role") => {
                let role: Role = serde_yaml::from_value(value).expect("Role");
                rules.namespaced.extend(role.rules.unwrap_or_default());
            }
            _ => {}
        }
    }
    assert!(
        !rules.cluster.is_empty() && !rules.namespaced.is_empty(),
        "deploy/rbac.yaml has a ClusterRole and a Role with rules"
    );
    rules
}

/// Every permission a rule grants.
fn permissions(rule: &PolicyRule) -> Vec<Permission> {
    let mut out = Vec::new();
    for group in rule.api_groups.iter().flatten() {
        for resource in rule.resources.iter().flatten() {
            for verb in &rule.verbs {
                out.push((group.clone(), resource.clone(), verb.clone()));
            }
        }
    }
    out
}

fn describe(rule: &PolicyRule) -> String {
    format!(
        "groups {:?}, resources {:?}, verbs {:?}",
        rule.api_groups.clone().unwrap_or_default(),
        rule.resources.clone().unwrap_or_default(),
        rule.verbs
    )
}

/// What a ServiceAccount's requests in the audit log asked for, with the
/// response code of each.
fn requests(cluster: &ClusterHandle, service_account: &str) -> Vec<(Permission, u16)> {
    let user = format!("system:serviceaccount:{CONTROLLER_NAMESPACE}:{service_account}");
    cluster
        .audit_records(&user)
        .into_iter()
        .filter_map(|record| {
            let object = record.get("objectRef")?;
            let mut resource = object.get("resource")?.as_str()?.to_string();
            if let Some(sub) = object.get("subresource").and_then(|s| s.as_str()) {
                resource = format!("{resource}/{sub}");
            }
            let group = object
                .get("apiGroup")
                .and_then(|g| g.as_str())
                .unwrap_or("")
                .to_string();
            let verb = record.get("verb")?.as_str()?.to_string();
            let code = record
                .pointer("/responseStatus/code")
                .and_then(|c| c.as_u64())
                .unwrap_or(0);
            Some(((group, resource, verb), u16::try_from(code).unwrap_or(0)))
        })
        .collect()
}

/// Bind a new ServiceAccount `name` in `radwasm-system` to a ClusterRole
/// and a Role of its own holding `cluster` and `namespaced` rules, and
/// wait until RBAC answers for it.
pub(crate) async fn service_account_with(
    client: &Client,
    name: &str,
    cluster: Vec<PolicyRule>,
    namespaced: Vec<PolicyRule>,
) {
    let ns = CONTROLLER_NAMESPACE;
    let apply = PatchParams::apply("radwasm-e2e-rbac").force();
    let meta =
        |namespace: Option<&str>| k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.to_string()),
            namespace: namespace.map(str::to_string),
            ..Default::default()
        };
    let subject = Subject {
        kind: "ServiceAccount".into(),
        name: name.to_string(),
        namespace: Some(ns.to_string()),
        ..Default::default()
    };
    let role_ref = |kind: &str| RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: kind.into(),
        name: name.to_string(),
    };
    let probe = cluster
        .first()
        .and_then(|r| permissions(r).into_iter().next());
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(
            &PostParams::default(),
            &ServiceAccount {
                metadata: meta(Some(ns)),
                ..Default::default()
            },
        )
        .await
        .expect("create ServiceAccount");
    let cluster_role = ClusterRole {
        metadata: meta(None),
        rules: Some(cluster),
        ..Default::default()
    };
    Api::<ClusterRole>::all(client.clone())
        .patch(name, &apply, &Patch::Apply(&cluster_role))
        .await
        .expect("ClusterRole");
    let binding = ClusterRoleBinding {
        metadata: meta(None),
        role_ref: role_ref("ClusterRole"),
        subjects: Some(vec![subject.clone()]),
    };
    Api::<ClusterRoleBinding>::all(client.clone())
        .patch(name, &apply, &Patch::Apply(&binding))
        .await
        .expect("ClusterRoleBinding");
    let role = Role {
        metadata: meta(Some(ns)),
        rules: Some(namespaced),
    };
    Api::<Role>::namespaced(client.clone(), ns)
        .patch(name, &apply, &Patch::Apply(&role))
        .await
        .expect("Role");
    let binding = RoleBinding {
        metadata: meta(Some(ns)),
        role_ref: role_ref("Role"),
        subjects: Some(vec![subject]),
    };
    Api::<RoleBinding>::namespaced(client.clone(), ns)
        .patch(name, &apply, &Patch::Apply(&binding))
        .await
        .expect("RoleBinding");
    // The authorizer's caches lag the writes a little.
    if let Some((group, resource, verb)) = probe {
        let user = format!("system:serviceaccount:{ns}:{name}");
        eventually(
            &format!("RBAC lets {user} {verb} {resource}"),
            Duration::from_secs(60),
            || {
                let (client, user, group, resource, verb) = (
                    client.clone(),
                    user.clone(),
                    group.clone(),
                    resource.clone(),
                    verb.clone(),
                );
                async move {
                    Ok(can(&client, &user, &verb, &group, &resource, None)
                        .await?
                        .then_some(()))
                }
            },
        )
        .await;
    }
}

/// The controller's whole life with one template, as the ServiceAccount
/// `service_account`, with leader election: deploy 3 resources, change the
/// spec to 2 (one `DeploymentResource` deleted), delete the template.
async fn lifecycle(service_account: &str) {
    let system = System::start_as(
        Backend::Real,
        service_account,
        &["--leader-elect", "--leader-election-lease-duration", "4s"],
        Duration::from_millis(200),
    )
    .await;
    system.wait_for_log("became the leader").await;
    // A ReconcilePolicy from a ConfigMap decides for the app.
    let policy = crate::policies::install_configmap_policy(&system).await;
    system.ready_app().await;
    let decided = system.templates().get("app").await.expect("get app");
    assert_eq!(
        decided
            .status
            .and_then(|s| s.policy)
            .and_then(|p| p.reconcile_policy),
        Some(policy.clone())
    );
    system
        .templates()
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {
                "template": fixture("deploymenttemplate-outputresources-2.json")
            }})),
        )
        .await
        .expect("change the spec");
    system.wait_phase("app", "Ready").await;
    let owned = eventually(
        "the dropped resource's DeploymentResource is deleted",
        Duration::from_secs(60),
        || async { Ok(Some(system.owned("app").await).filter(|o| o.len() == 2)) },
    )
    .await;
    assert_eq!(owned.len(), 2);
    system
        .templates()
        .delete("app", &Default::default())
        .await
        .expect("delete");
    system.wait_gone("app").await;
    assert!(system.radius().resource_ids().is_empty());
    crate::policies::delete_policies(&system, &[&policy]).await;
    let left = system
        .resources()
        .list(&ListParams::default())
        .await
        .expect("list");
    assert!(
        left.items.is_empty(),
        "{:?}",
        left.items.iter().map(|r| r.name_any()).collect::<Vec<_>>()
    );
    system.shutdown().await;
}

/// Permissions that no request of the controller's names, because the API
/// server checks them on its behalf: with `OwnerReferencesPermissionEnforcement`
/// (on in this cluster, as in some distributions), an ownerReference with
/// `blockOwnerDeletion` needs `update` on the owner's `finalizers`. The
/// removal test below proves this one needed.
fn checked_by_admission(permission: &Permission) -> bool {
    permission.1.ends_with("/finalizers") && permission.2 == "update"
}

/// Grants used only on a path this lifecycle does not take, each with the
/// scenario that takes it as the controller's own ServiceAccount (under
/// `deploy/rbac.yaml`) on the real API server, where a missing grant fails.
fn used_beyond_the_lifecycle(permission: &Permission) -> bool {
    // A template is read fresh only to add to its deletion tally, which is
    // written once a policy keeps a child in Radius: the lifecycle's policy
    // keeps none; `layers::a_layer_keeps_the_data_store_of_a_deleted_template`
    // does.
    *permission
        == (
            "radapp.io".to_string(),
            "deploymenttemplates".to_string(),
            "get".to_string(),
        )
}

/// The shared real cluster, an admin client for it, and the committed
/// rules; `None` when the real control plane is to be skipped.
pub(crate) async fn setup() -> Option<(ClusterHandle, Client, CommittedRules)> {
    if crate::realkube::skip_requested() {
        return None;
    }
    let cluster = shared().await.unwrap_or_else(|e| panic!("{e:#}"));
    let client = cluster.client().await.expect("admin client");
    Some((cluster, client, committed_rules()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_uses_every_permission_deploy_rbac_grants() {
    let Some((cluster, client, rules)) = setup().await else {
        return;
    };
    let account = "rbac-full";
    service_account_with(
        &client,
        account,
        rules.cluster.clone(),
        rules.namespaced.clone(),
    )
    .await;
    lifecycle(account).await;

    let seen = requests(&cluster, account);
    let refused: Vec<_> = seen.iter().filter(|(_, code)| *code == 403).collect();
    assert!(
        refused.is_empty(),
        "the committed rules refused the controller: {refused:?}"
    );
    let used: BTreeSet<Permission> = seen.into_iter().map(|(p, _)| p).collect();
    let granted: BTreeSet<Permission> = rules
        .cluster
        .iter()
        .chain(&rules.namespaced)
        .flat_map(permissions)
        .filter(|(group, _, _)| group != RADIUS_GROUP)
        .collect();
    let unused: Vec<&Permission> = granted
        .iter()
        .filter(|p| !used.contains(*p) && !checked_by_admission(p) && !used_beyond_the_lifecycle(p))
        .collect();
    assert!(
        unused.is_empty(),
        "deploy/rbac.yaml grants what the controller never asked for in a whole lifecycle \
         (group, resource, verb): {unused:?}\nit asked for: {used:?}"
    );
    let ungranted: Vec<&Permission> = used.iter().filter(|p| !granted.contains(*p)).collect();
    assert!(
        ungranted.is_empty(),
        "asked for and not granted: {ungranted:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_any_one_rule_the_controller_is_refused() {
    let Some((_, client, rules)) = setup().await else {
        return;
    };
    // (ServiceAccount, the rule taken away, ClusterRole rules, Role rules).
    let mut variants = Vec::new();
    for (at, rule) in rules.cluster.iter().enumerate() {
        if rule.api_groups.iter().flatten().any(|g| g == RADIUS_GROUP) {
            continue;
        }
        let mut cluster_rules = rules.cluster.clone();
        cluster_rules.remove(at);
        variants.push((
            format!("rbac-no-cluster-{at}"),
            rule.clone(),
            cluster_rules,
            rules.namespaced.clone(),
        ));
    }
    for (at, rule) in rules.namespaced.iter().enumerate() {
        let mut role_rules = rules.namespaced.clone();
        role_rules.remove(at);
        variants.push((
            format!("rbac-no-role-{at}"),
            rule.clone(),
            rules.cluster.clone(),
            role_rules,
        ));
    }
    // Two at a time: each runs a controller, a simulator and a template.
    for pair in variants.chunks(2) {
        let runs = pair
            .iter()
            .map(|(account, removed, cluster_rules, role_rules)| {
                let client = client.clone();
                async move {
                    service_account_with(
                        &client,
                        account,
                        cluster_rules.clone(),
                        role_rules.clone(),
                    )
                    .await;
                    refused_for(account, removed).await;
                }
            });
        futures::future::join_all(runs).await;
    }
}

/// Run the controller as `account` (whose roles lack `removed`) with one
/// template, until the API server refuses it something `removed` grants.
async fn refused_for(account: &str, removed: &PolicyRule) {
    let system = System::start_as(
        Backend::Real,
        account,
        &["--leader-elect", "--leader-election-lease-duration", "4s"],
        Duration::from_millis(200),
    )
    .await;
    let cluster = system.cluster.as_ref().expect("the real cluster");
    system.create(&app_template("app")).await;
    // A policy to load and report on (reading ConfigMaps, writing its
    // status); it may never become Ready without the rule.
    let policy = crate::policies::create_configmap_policy(&system).await;
    let removed_permissions = permissions(removed);
    // A refusal of a permission the rule granted; for an ownerReference's
    // `blockOwnerDeletion`, the admission plugin refuses the create of the
    // DeploymentResource that carries it.
    let refused = eventually(
        &format!(
            "the API server refuses {account} (without the rule {}) something",
            describe(removed)
        ),
        Duration::from_secs(60),
        || async {
            Ok(requests(cluster, account)
                .into_iter()
                .find(|(permission, code)| {
                    *code == 403
                        && (removed_permissions.contains(permission)
                            || (removed_permissions.iter().any(checked_by_admission)
                                && permission.1 == "deploymentresources"
                                && permission.2 == "create"))
                }))
        },
    )
    .await;
    eprintln!(
        "without {}: refused {:?} ({})",
        describe(removed),
        refused.0,
        account
    );
    crate::policies::delete_policies(&system, &[&policy]).await;
    system.shutdown().await;
}

/// What the committed rules must not allow, asked of RBAC itself
/// (SubjectAccessReview) for the deployed ServiceAccount, and tried for real
/// with its token: reading Secrets anywhere, writing workloads, ConfigMaps,
/// Namespaces, RBAC or CRDs, and Leases outside its own namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_cannot_read_secrets_or_write_outside_its_kinds() {
    if crate::realkube::skip_requested() {
        return;
    }
    let cluster = shared().await.unwrap_or_else(|e| panic!("{e:#}"));
    let client = cluster.client().await.expect("admin client");
    let user = format!(
        "system:serviceaccount:{CONTROLLER_NAMESPACE}:{}",
        crate::realkube::CONTROLLER_SERVICE_ACCOUNT
    );
    let denied: [(&str, &str, &str, Option<&str>); 23] = [
        ("get", "", "secrets", None),
        ("list", "", "secrets", None),
        ("watch", "", "secrets", None),
        ("get", "", "secrets", Some(CONTROLLER_NAMESPACE)),
        ("list", "", "secrets", Some(CONTROLLER_NAMESPACE)),
        ("create", "", "configmaps", Some(CONTROLLER_NAMESPACE)),
        ("update", "", "configmaps", Some(CONTROLLER_NAMESPACE)),
        ("get", "", "configmaps", Some("default")),
        ("create", "", "pods", Some("default")),
        ("create", "", "pods/exec", Some("default")),
        ("create", "apps", "deployments", Some("default")),
        ("update", "apps", "deployments", Some(CONTROLLER_NAMESPACE)),
        ("create", "", "namespaces", None),
        ("delete", "", "namespaces", None),
        (
            "create",
            "",
            "serviceaccounts/token",
            Some(CONTROLLER_NAMESPACE),
        ),
        ("create", "rbac.authorization.k8s.io", "clusterroles", None),
        ("bind", "rbac.authorization.k8s.io", "clusterroles", None),
        (
            "escalate",
            "rbac.authorization.k8s.io",
            "roles",
            Some(CONTROLLER_NAMESPACE),
        ),
        (
            "delete",
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            None,
        ),
        // Only our two CRDs are listed and watched, by name.
        (
            "list",
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            None,
        ),
        ("update", "coordination.k8s.io", "leases", Some("default")),
        (
            "create",
            "coordination.k8s.io",
            "leases",
            Some("kube-system"),
        ),
        (
            "delete",
            "coordination.k8s.io",
            "leases",
            Some(CONTROLLER_NAMESPACE),
        ),
    ];
    let mut allowed = Vec::new();
    for (verb, group, resource, namespace) in denied {
        if can(&client, &user, verb, group, resource, namespace)
            .await
            .expect("SubjectAccessReview")
        {
            allowed.push(format!("{verb} {group}/{resource} in {namespace:?}"));
        }
    }
    assert!(allowed.is_empty(), "{user} is allowed: {allowed:?}");

    // And with the token itself: a 403 from the server, not only an answer
    // from the authorizer.
    let kubeconfig = cluster
        .kubeconfig_for_service_account(
            &client,
            CONTROLLER_NAMESPACE,
            crate::realkube::CONTROLLER_SERVICE_ACCOUNT,
            Some(&cluster.dir.join("rbac-deployed-sa.kubeconfig")),
        )
        .await
        .expect("token");
    let as_controller = crate::realkube::client_for(&kubeconfig)
        .await
        .expect("client");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(as_controller.clone(), CONTROLLER_NAMESPACE);
    match secrets.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        other => panic!("listing Secrets as the controller: {other:?}"),
    }
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(as_controller, "default");
    match configmaps.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        other => panic!("listing ConfigMaps as the controller: {other:?}"),
    }
}
