//! `--require-signatures` covers every module source, not only registries:
//! a ConfigMap module loads only with its blob signature (`cosign
//! sign-blob`'s format) under the module's key + `.sig`, the `--policy` file
//! only with `<file>.sig` and `--policy-verify-keys`, and a layer that must
//! be verified decides only over a verified base.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use p256::ecdsa::SigningKey;
use radwasm::policy::trust::blob;
use serde_json::json;

use crate::harness::{System, metric_sum};
use crate::policies::{
    create_policy, delete_policies, guest, labelled, module_from, put_module, wait_policy,
};
use crate::realkube::eventually;
use crate::trust::{public_pem, refusal_evented_and_counted};
use crate::trust_fixture::{TrustedKeys, signing_key};

/// Add the blob signature of `bytes` by `key` under `policy.wasm.sig` of
/// the scenario's module ConfigMap `name` (as `kubectl create configmap
/// --from-file=policy.wasm.sig` puts the text cosign writes).
async fn add_signature(system: &System, name: &str, bytes: &[u8], key: &SigningKey) {
    let api: Api<ConfigMap> = Api::namespaced(system.client.clone(), system.policy_namespace());
    let name = format!("{}-{name}", system.namespace);
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"policy.wasm.sig": blob::sign_blob(bytes, key)}})),
    )
    .await
    .unwrap_or_else(|e| panic!("add policy.wasm.sig to ConfigMap {name}: {e}"));
}

async fn wait_verification_metric(system: &System, label: &str, result: &str) {
    let prefix = format!(
        "radwasm_policy_verifications_total{{reconcile_policy=\"{label}\",result=\"{result}\"}}"
    );
    eventually(&prefix, Duration::from_secs(30), || async {
        Ok((metric_sum(&system.metrics().await, &prefix) >= 1.0).then_some(()))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configmap_module_is_refused_unsigned_and_loads_once_its_signature_is_added() {
    let system = System::start(&["--require-signatures"]).await;
    let trusted = signing_key(21);
    let stranger = signing_key(22);
    let trust = TrustedKeys::cosign_pub(&system, "cm", &trusted).await;
    let (select, keys) = (&trust.select, &trust.keys);
    let guardrail = guest("image-tag-guardrail");
    put_module(&system, "guardrail", guardrail.clone()).await;

    // Without spec.verify, a ConfigMap module is refused as a registry's is.
    let unverified = create_policy(
        &system,
        "cm-unverified",
        json!({"module": module_from(&system, "guardrail"),
               "objectSelector": {"matchLabels": {"policy": "nothing"}}}),
    )
    .await;
    wait_policy(&system, &unverified, "False", "SignatureRequired").await;

    // With spec.verify and no policy.wasm.sig beside the module: unsigned.
    let policy = create_policy(
        &system,
        "cm-signed",
        json!({"module": module_from(&system, "guardrail"),
               "verify": trust.verify(&system),
               "objectSelector": {"matchLabels": {"policy": select}}}),
    )
    .await;
    let refused = wait_policy(&system, &policy, "False", "SignatureMissing").await;
    let message = refused
        .status
        .and_then(|s| s.last_error)
        .unwrap_or_default();
    assert!(message.contains("key policy.wasm.sig"), "{message}");
    refusal_evented_and_counted(&system, &policy, "SignatureMissing").await;
    // Nothing decides for the objects selecting it, and nothing reaches Radius.
    system
        .create(&labelled("unsigned", &[("policy", select)]))
        .await;
    let failed = system.wait_phase("unsigned", "Failed").await;
    assert!(
        format!("{:?}", failed.status).contains("PolicyNotReady"),
        "{:?}",
        failed.status
    );

    // Signed by a key that is not trusted: refused.
    add_signature(&system, "guardrail", &guardrail, &stranger).await;
    wait_policy(&system, &policy, "False", "SignatureUntrusted").await;
    wait_verification_metric(&system, &policy, "SignatureUntrusted").await;

    // Signed by the trusted key: the ConfigMap's change wakes the policy.
    add_signature(&system, "guardrail", &guardrail, &trusted).await;
    let loaded = wait_policy(&system, &policy, "True", "Loaded").await;
    let verified = loaded
        .status
        .and_then(|s| s.verified)
        .expect("status.verified");
    assert!(
        verified.reference.starts_with("ConfigMap ")
            && verified
                .reference
                .ends_with(&format!("@sha256:{}", radwasm::policy::digest(&guardrail))),
        "{}",
        verified.reference
    );
    assert!(
        verified.key.contains("cosign.pub (sha256:"),
        "{}",
        verified.key
    );
    wait_verification_metric(&system, &policy, "Verified").await;
    system
        .create(&labelled("signed", &[("policy", select)]))
        .await;
    let decided = system.wait_phase("signed", "Failed").await;
    assert_eq!(
        decided.status.and_then(|s| s.policy).map(|p| p.name),
        Some("image-tag-guardrail".to_string()),
        "the verified guardrail decides"
    );
    assert_eq!(system.radius().stats().deployment_puts, 0);

    delete_policies(&system, &[&policy, &unverified]).await;
    let api: Api<ConfigMap> = Api::namespaced(system.client.clone(), system.policy_namespace());
    let _ = api.delete(keys, &DeleteParams::default()).await;
    system.shutdown().await;
}

/// A signed layer over a base anyone with ConfigMap write access could
/// change is refused (`BaseUnverified`, naming the base); once the base is
/// verified too, the layer loads over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_layer_over_an_unsigned_configmap_base_is_refused() {
    let system = System::start(&[]).await;
    let trusted = signing_key(23);
    let trust = TrustedKeys::cosign_pub(&system, "layer", &trusted).await;
    let verify = trust.verify(&system);
    let default = guest("default-policy");
    put_module(&system, "base", default.clone()).await;
    let base = create_policy(
        &system,
        "platform",
        json!({"module": module_from(&system, "base"),
               "objectSelector": {"matchLabels": {"nothing": "matches-this"}}}),
    )
    .await;
    wait_policy(&system, &base, "True", "Loaded").await;

    let layer_bytes = guest("team-label-layer");
    put_module(&system, "layer", layer_bytes.clone()).await;
    add_signature(&system, "layer", &layer_bytes, &trusted).await;
    let layer = create_policy(
        &system,
        "team-label",
        json!({"module": module_from(&system, "layer"), "verify": verify, "base": base}),
    )
    .await;
    let refused = wait_policy(&system, &layer, "False", "BaseUnverified").await;
    let message = refused
        .status
        .and_then(|s| s.last_error)
        .unwrap_or_default();
    assert!(
        message.contains(&format!("its base, ReconcilePolicy {base},")),
        "{message}"
    );
    wait_verification_metric(&system, &layer, "BaseUnverified").await;
    system
        .create(&labelled("app", &[("team", "payments")]))
        .await;
    let failed = system.wait_phase("app", "Failed").await;
    assert!(
        format!("{:?}", failed.status).contains("PolicyNotReady"),
        "{:?}",
        failed.status
    );
    assert_eq!(system.radius().stats().deployment_puts, 0);

    // The base signed and verified: the layer is retried and loads over it.
    add_signature(&system, "base", &default, &trusted).await;
    crate::policies::policies(&system.client)
        .patch(
            &base,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"verify": verify}})),
        )
        .await
        .expect("add spec.verify to the base");
    eventually("the base verified", Duration::from_secs(60), || async {
        let base = crate::policies::policies(&system.client).get(&base).await?;
        Ok(base.status.and_then(|s| s.verified).map(|_| ()))
    })
    .await;
    wait_policy(&system, &layer, "True", "Loaded").await;
    system.wait_phase("app", "Ready").await;

    delete_policies(&system, &[&layer, &base]).await;
    let api: Api<ConfigMap> = Api::namespaced(system.client.clone(), system.policy_namespace());
    let _ = api.delete(&trust.keys, &DeleteParams::default()).await;
    system.shutdown().await;
}

/// Wait (at most 60 s) for `child` to exit; its status.
fn wait_exit(child: &mut std::process::Child) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the controller did not exit within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The `--policy` file under `--require-signatures`: unsigned, or without
/// keys to check it with, the controller does not start and says which
/// file and what is missing; signed, it starts and decides with it; a hot
/// reload of an unsigned replacement is refused and the signed one keeps
/// deciding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_file_must_be_signed_to_start_and_to_be_replaced() {
    let mut system = System::start(&[]).await;
    system.stop_controller();
    let trusted = signing_key(24);
    let dir = system.dir.path().to_path_buf();
    let keys = dir.join("keys");
    std::fs::create_dir(&keys).expect("keys dir");
    std::fs::write(keys.join("cosign.pub"), public_pem(&trusted)).expect("write key");
    let policy = dir.join("policy.wasm");
    let guardrail = guest("image-tag-guardrail");
    std::fs::write(&policy, &guardrail).expect("write policy");
    let path = policy.display().to_string();
    let keys_arg = keys.display().to_string();

    // No keys to check it with.
    let mut child = system.spawn_controller_as(None, &["--policy", &path, "--require-signatures"]);
    assert!(!wait_exit(&mut child).success());
    let logs = system.all_logs();
    assert!(
        logs.contains(&format!(
            "--policy {path}: the controller runs with --require-signatures"
        )) && logs.contains("--policy-verify-keys"),
        "{logs}"
    );

    // Keys, but no policy.wasm.sig.
    let mut child = system.spawn_controller_as(
        None,
        &[
            "--policy",
            &path,
            "--require-signatures",
            "--policy-verify-keys",
            &keys_arg,
        ],
    );
    assert!(!wait_exit(&mut child).success());
    let logs = system.all_logs();
    assert!(
        logs.contains(&format!("{path} is not signed: no {path}.sig beside it")),
        "{logs}"
    );

    // Signed: it starts, and the guardrail decides.
    std::fs::write(
        dir.join("policy.wasm.sig"),
        blob::sign_blob(&guardrail, &trusted),
    )
    .expect("write signature");
    let mut child = system.spawn_controller_as(
        None,
        &[
            "--policy",
            &path,
            "--require-signatures",
            "--policy-verify-keys",
            &keys_arg,
            "--policy-reload-interval",
            "200ms",
        ],
    );
    system.wait_for_log("policy file signature verified").await;
    wait_verification_metric(&system, "--policy", "Verified").await;
    system.create(&labelled("first", &[])).await;
    let decided = system.wait_phase("first", "Failed").await;
    assert_eq!(
        decided.status.and_then(|s| s.policy).map(|p| p.name),
        Some("image-tag-guardrail".to_string())
    );

    // An unsigned replacement (the old signature is of other bytes): refused
    // once, counted, and the guardrail keeps deciding.
    std::fs::write(&policy, guest("default-policy")).expect("replace the policy");
    system
        .wait_for_log("new policy refused; keeping the current one")
        .await;
    wait_verification_metric(&system, "--policy", "SignatureUntrusted").await;
    system.create(&labelled("second", &[])).await;
    let decided = system.wait_phase("second", "Failed").await;
    assert_eq!(
        decided.status.and_then(|s| s.policy).map(|p| p.name),
        Some("image-tag-guardrail".to_string()),
        "the signed policy keeps deciding"
    );
    assert_eq!(system.radius().stats().deployment_puts, 0);
    assert!(matches!(child.try_wait(), Ok(None)), "still running");
    let _ = child.kill();
    let _ = child.wait();
    system.shutdown().await;
}

/// The chart's values for signatures: `requireSignatures` and
/// `policyVerifyKeys` become the flags (the keys ConfigMap mounted where
/// the flag points), and `policyWasmSignature` the `policy.wasm.sig` key
/// beside `policy.wasm`, mounted beside the file as `<file>.sig`.
#[test]
fn the_charts_signature_values_become_flags_keys_and_the_signature_beside_the_policy() {
    let signature = "MEUCIQDTwdpj+Js/+gMbynMpGP0NYPXhQLAwIU3LyrlWKcuPtgIgSVrMtTEZ++jz6c7cLK1G1Toz8IRDDGzvECFuanRpUt8=";
    let chart = crate::helm::objects(&crate::helm::rendered(&[
        "--set",
        "policy=configmap",
        "--set",
        "requireSignatures=true",
        "--set",
        "policyVerifyKeys=radwasm-policy-keys",
        "--set",
        &format!("policyWasmSignature={signature}"),
    ]));
    let deployment = &chart[&("Deployment".to_string(), "radwasm".to_string())];
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_sequence()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    for expected in [
        "--policy=/etc/radwasm/policy/policy.wasm",
        "--require-signatures",
        "--policy-verify-keys=/etc/radwasm/policy-keys",
    ] {
        assert!(args.contains(&expected), "{expected} in {args:?}");
    }
    let mounted = container["volumeMounts"]
        .as_sequence()
        .expect("mounts")
        .iter()
        .any(|m| m["name"] == "policy-keys" && m["mountPath"] == "/etc/radwasm/policy-keys");
    assert!(mounted, "{:?}", container["volumeMounts"]);
    let volume = pod["volumes"]
        .as_sequence()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == "policy-keys")
        .expect("the keys volume");
    assert_eq!(volume["configMap"]["name"], "radwasm-policy-keys");
    let config_map = &chart[&("ConfigMap".to_string(), "radwasm-policy".to_string())];
    assert_eq!(config_map["data"]["policy.wasm.sig"], signature);
    // The flags are ones the controller accepts.
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_radwasm"))
        .args(["run", "--help"])
        .output()
        .expect("radwasm run --help");
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in ["--require-signatures", "--policy-verify-keys"] {
        assert!(help.contains(flag), "radwasm run does not know {flag}");
    }
    // By default the chart asks for none of it.
    let default = crate::helm::objects(&crate::helm::rendered(&[]));
    let text = serde_yaml::to_string(&default).expect("YAML");
    assert!(
        !text.contains("--require-signatures") && !text.contains("policy-keys"),
        "{text}"
    );
}
