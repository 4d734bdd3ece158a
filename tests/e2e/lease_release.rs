//! The leader Lease at shutdown, on the real API server: a leader stopped
//! with SIGTERM releases it, and one whose permission on Leases was taken
//! away first (as `helm uninstall` deletes the RBAC together with the
//! Deployment, before the pods stop) cannot, and says so with the API
//! server's reason instead of stopping quietly.

use std::time::Duration;

use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::Api;

use crate::harness::{Backend, System};
use crate::realkube::{CONTROLLER_NAMESPACE, can, eventually};

/// The ServiceAccount of this scenario, bound to the rules of deploy/rbac.yaml.
const ACCOUNT: &str = "lease-release";

async fn holder(system: &System) -> Option<String> {
    system
        .leader_lease()
        .await
        .spec
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

/// Wait until `text` has been logged `times` times by this scenario's
/// controllers.
async fn wait_logged(system: &System, text: &str, times: usize) {
    eventually(
        &format!("{text:?} logged {times} times"),
        Duration::from_secs(60),
        || async { Ok((system.all_logs().matches(text).count() >= times).then_some(())) },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_releases_its_lease_and_says_why_when_it_no_longer_may() {
    let Some((_cluster, admin, rules)) = crate::rbac::setup().await else {
        return;
    };
    crate::rbac::service_account_with(&admin, ACCOUNT, rules.cluster, rules.namespaced).await;
    let mut system = System::start_as(
        Backend::Real,
        ACCOUNT,
        &["--leader-elect", "--leader-election-lease-duration", "30s"],
        Duration::from_millis(200),
    )
    .await;

    // With its RBAC in place: released at once, the holder cleared.
    wait_logged(&system, "became the leader", 1).await;
    assert!(holder(&system).await.is_some());
    assert!(system.stop_controller().success());
    assert!(
        system.all_logs().contains("released the leader lease"),
        "{}",
        system.logs()
    );
    assert_eq!(holder(&system).await, None);

    // The next leader loses its Role's binding (Leases, in the controller's
    // namespace) before it is stopped.
    system.start_controller();
    wait_logged(&system, "became the leader", 2).await;
    let held = holder(&system).await.expect("a holder");
    Api::<RoleBinding>::namespaced(admin.clone(), CONTROLLER_NAMESPACE)
        .delete(ACCOUNT, &Default::default())
        .await
        .expect("delete the RoleBinding");
    let user = format!("system:serviceaccount:{CONTROLLER_NAMESPACE}:{ACCOUNT}");
    eventually(
        "RBAC no longer lets the controller update Leases",
        Duration::from_secs(60),
        || async {
            Ok((!can(
                &admin,
                &user,
                "update",
                "coordination.k8s.io",
                "leases",
                Some(CONTROLLER_NAMESPACE),
            )
            .await?)
                .then_some(()))
        },
    )
    .await;
    // The stop is still clean; the failed release is logged with its reason.
    assert!(system.stop_controller().success());
    let logs = system.all_logs();
    let line = logs
        .lines()
        .find(|l| l.contains("releasing the leader lease failed"))
        .unwrap_or_else(|| panic!("the failed release was not logged:\n{}", system.logs()));
    assert!(line.contains("ERROR"), "{line}");
    assert!(line.contains("403"), "{line}");
    assert!(
        line.contains("Role, RoleBinding or ServiceAccount"),
        "{line}"
    );
    // The Lease still names the stopped leader: a successor waits it out.
    assert_eq!(holder(&system).await, Some(held));
    system.shutdown().await;
}
