//! What an operator reads: the controller's JSON log lines carry plain
//! values (never Rust's `Debug` text such as `Some("…")` or `None`), and a
//! controller that finds no Radius where it looks says where it looked and
//! how to point it elsewhere, in its log and in the template's status.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::harness::{System, app_template};

/// Every string value in `value` (recursively), with the path to it.
fn strings<'a>(path: String, value: &'a serde_json::Value, out: &mut Vec<(String, &'a str)>) {
    match value {
        serde_json::Value::String(text) => out.push((path, text)),
        serde_json::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                strings(format!("{path}[{i}]"), item, out);
            }
        }
        serde_json::Value::Object(map) => {
            for (key, item) in map {
                strings(format!("{path}.{key}"), item, out);
            }
        }
        _ => {}
    }
}

/// What in a logged value is Rust's `Debug` text rather than the value.
fn debug_text(value: &str) -> Option<&'static str> {
    if value.contains("Some(") {
        Some("Some(")
    } else if value == "None" || value.contains("None,") || value.ends_with("(None)") {
        Some("None")
    } else if value.len() >= 2 && value.starts_with('"') && value.ends_with('"') {
        Some("a quoted string")
    } else {
        None
    }
}

#[test]
fn debug_text_is_told_from_plain_values() {
    assert_eq!(debug_text("Some(\"/var/cache/radwasm\")"), Some("Some("));
    assert_eq!(debug_text("None"), Some("None"));
    assert_eq!(debug_text("\"radwasm-0\""), Some("a quoted string"));
    assert_eq!(debug_text("/var/cache/radwasm"), None);
    assert_eq!(debug_text("parameter \"image\" is required"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_plain_values_through_startup_leadership_and_a_reconcile() {
    // A compile cache of its own, so the policy is compiled (and the
    // cache directory logged) rather than loaded ready-made.
    let cache = tempfile::tempdir().expect("a compile cache directory");
    let cache = cache.path().to_str().expect("a UTF-8 path").to_string();
    let system = System::start(&[
        "--compile-cache",
        &cache,
        "--log-format",
        "json",
        "--leader-elect",
        "--leader-election-lease-duration",
        "4s",
    ])
    .await;
    system.wait_for_log("became the leader").await;
    system.ready_app().await;
    // One more process, standing by while the first leads: it logs who
    // holds the Lease.
    let mut standby = system.spawn_controller_as(Some("standby-0"), &[]);
    system.wait_for_log("waiting for the leader lease").await;
    let _ = standby.kill();
    let _ = standby.wait();

    let logs = system.all_logs();
    let mut lines = 0;
    let mut problems = Vec::new();
    for line in logs.lines().filter(|l| !l.trim().is_empty()) {
        let parsed: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {line}"));
        lines += 1;
        let mut values = Vec::new();
        strings(String::new(), &parsed, &mut values);
        for (path, value) in values {
            if let Some(what) = debug_text(value) {
                problems.push(format!("{path} = {value:?} ({what}) in {line}"));
            }
        }
    }
    for logged in [
        "policy compiled",
        "became the leader",
        "waiting for the leader lease",
        "metrics and probes",
    ] {
        assert!(logs.contains(logged), "nothing logged {logged:?}");
    }
    // The probes answer before the policy compiles (a startup probe never
    // meets a closed port while it does).
    let first = |text: &str| logs.find(text).unwrap_or(usize::MAX);
    assert!(
        first("metrics and probes") < first("policy compiled"),
        "the probe server started after the policy compiled"
    );
    // The cache directory as a plain path, not `Some("…")`.
    assert!(
        logs.lines()
            .any(|l| l.contains("policy compiled") && l.contains(&format!("\"cache\":\"{cache}\""))),
        "the compile cache is not logged as a path"
    );
    // The standby names the holder by its identity, not `Some(…)`.
    assert!(
        logs.lines()
            .any(|l| l.contains("waiting for the leader lease") && l.contains("\"holder\":\"")),
        "the standby does not name the holder"
    );
    assert!(lines > 10, "only {lines} log lines");
    // Lines logged inside a reconcile carry its span's fields.
    assert!(
        logs.lines()
            .any(|l| l.contains("\"name\":\"reconcile\"") && l.contains("\"object\":\"")),
        "no line from inside a reconcile"
    );
    assert!(
        problems.is_empty(),
        "log fields with Rust Debug text:\n{}",
        problems.join("\n")
    );
    system.shutdown().await;
}

/// `radwasm run` as in a cluster: no `--radius-url`, so Radius is looked
/// for behind the API server's aggregated path, where nothing serves it.
fn run_without_radius_url(system: &System) -> Child {
    let log = std::fs::File::create(system.dir.path().join("controller-aggregated.log"))
        .expect("log file");
    Command::new(env!("CARGO_BIN_EXE_radwasm"))
        .arg("run")
        .arg("--kubeconfig")
        .arg(&system.kubeconfig)
        .args(["--metrics-address", "127.0.0.1:0"])
        .args(["--namespace", &system.namespace])
        .args(["--policy-namespace", system.policy_namespace()])
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start radwasm run")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_radius_behind_the_aggregated_path_the_controller_says_where_it_looked() {
    let mut system = System::start(&[]).await;
    system.kill_controller();
    let mut controller = run_without_radius_url(&system);
    // Said once at startup, before any template asks.
    system
        .wait_for_log("Radius does not answer as expected")
        .await;
    let logs = system.all_logs();
    assert!(
        logs.contains("/apis/api.ucp.dev/v1alpha3")
            && logs.contains("--radius-url (chart value radius.url)"),
        "{logs}"
    );

    system.create(&app_template("app")).await;
    system
        .wait_template("app", "a failure naming the endpoint", |t| {
            t.and_then(|t| t.status.as_ref())
                .and_then(|s| s.message.as_deref())
                .is_some_and(|m| m.contains("No Radius API is registered at"))
        })
        .await;
    let template = system.templates().get("app").await.expect("template");
    let message = template
        .status
        .and_then(|s| s.message)
        .expect("a status message");
    assert!(
        message.contains("/apis/api.ucp.dev/v1alpha3 answered 404 to PUT resource group"),
        "{message}"
    );
    assert!(message.contains("chart value radius.url"), "{message}");
    // One line, with no escaped line break from the answer's body.
    assert!(
        !message.contains('\n') && !message.contains("\\n"),
        "{message:?}"
    );
    // Nothing reached the simulator: it is not where the controller looks.
    assert_eq!(system.radius().stats().deployment_puts, 0);
    let _ = controller.kill();
    let _ = controller.wait();
    tokio::time::sleep(Duration::from_millis(50)).await;
    system.shutdown().await;
}
