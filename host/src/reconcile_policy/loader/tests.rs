use super::candidate::{check_spec, run_cases};
use super::*;
use crate::policy::embedded;
use serde_json::json;

fn spec(value: serde_json::Value) -> ReconcilePolicySpec {
    serde_json::from_value(value).expect("spec")
}

fn refusal(value: serde_json::Value) -> String {
    match check_spec(&spec(value), "radwasm-system") {
        Ok(_) => "accepted".to_string(),
        Err(message) => message,
    }
}

#[test]
fn a_spec_names_exactly_one_module_source_with_the_digests_it_needs() {
    let digest = format!("sha256:{}", "a".repeat(64));
    for (value, expected) in [
        (
            json!({"module": {}}),
            "exactly one of builtin, configMap, oci and url; it names none",
        ),
        (
            json!({"module": {"builtin": "default", "url": "https://x/p.wasm"}}),
            "it names builtin, url",
        ),
        (
            json!({"module": {"url": "http://example.com/p.wasm", "sha256": "a".repeat(64)}}),
            "must be https",
        ),
        (
            json!({"module": {"url": "https://example.com/p.wasm"}}),
            "needs spec.module.sha256",
        ),
        (
            json!({"module": {"oci": "registry.example/p:v1"}}),
            "needs a digest",
        ),
        (
            json!({"module": {"oci": "registry.example/p@sha256:abc"}}),
            "is not sha256: followed by 64 hex digits",
        ),
        (
            json!({"module": {"oci": format!("registry.example/p@{digest}"), "digest": format!("sha256:{}", "b".repeat(64))}}),
            "but spec.module.digest says",
        ),
        (
            json!({"module": {"configMap": {"namespace": "team-a", "name": "p", "key": "k"}}}),
            "reads policy ConfigMaps in \"radwasm-system\" only",
        ),
        (
            json!({"module": {"builtin": "default"}, "cases": {"configMap": {"namespace": "team-a", "name": "c"}}}),
            "spec.cases.configMap.namespace",
        ),
        (
            json!({"module": {"builtin": "default"}, "verify": {"configMap": {"namespace": "radwasm-system", "name": "keys"}}}),
            "it needs spec.module.oci or spec.module.configMap",
        ),
        (
            json!({"module": {"oci": "registry.example/p:v1"}, "verify": {"configMap": {"namespace": "team-a", "name": "keys"}}}),
            "spec.verify.configMap must name a ConfigMap in \"radwasm-system\"",
        ),
        (
            json!({"module": {"configMap": {"namespace": "radwasm-system", "name": "p", "key": "policy.wasm"}},
                   "verify": {"configMap": {"namespace": "radwasm-system", "name": "keys"}, "annotations": {"version": "1.4"}}}),
            "a ConfigMap module's blob signature carries none",
        ),
        (
            json!({"module": {"builtin": "default", "sha256": "xyz"}}),
            "must be 64 hex digits",
        ),
        (
            json!({"module": {"builtin": "default"}, "objectSelector": {"matchExpressions": [{"key": "a", "operator": "Sideways"}]}}),
            "spec.objectSelector",
        ),
    ] {
        let got = refusal(value.clone());
        assert!(got.contains(expected), "{value}: {got}");
    }
    for value in [
        json!({"module": {"builtin": "default"}}),
        json!({"module": {"url": "http://127.0.0.1:8000/p.wasm", "sha256": "a".repeat(64)}}),
        json!({"module": {"oci": format!("registry.example/p@{digest}")}}),
        json!({"module": {"oci": "registry.example/p:v1", "digest": digest}}),
        // A bare tag is followed only with its digests verified.
        json!({"module": {"oci": "registry.example/p:v1"}, "verify": {"configMap": {"namespace": "radwasm-system", "name": "keys"}}}),
        json!({"module": {"configMap": {"namespace": "radwasm-system", "name": "p", "key": "k"}}}),
        // A ConfigMap module is verified by its blob signature (key k.sig).
        json!({"module": {"configMap": {"namespace": "radwasm-system", "name": "p", "key": "k"}}, "verify": {"configMap": {"namespace": "radwasm-system", "name": "keys"}}}),
    ] {
        assert_eq!(refusal(value.clone()), "accepted", "{value}");
    }
}

#[test]
fn every_case_must_pass_and_the_refusal_names_the_failing_ones() {
    let engine = crate::policy::engine(crate::policy::Limits {
        concurrent_decisions: 2,
        ..Default::default()
    })
    .expect("engine");
    let policy = embedded::load_default(&engine).expect("default policy");
    let case = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../guests/default-policy/cases/template/01-new-template-gets-finalizer-and-deploys.json"
    ))
    .expect("case");
    let good = ("good.json".to_string(), case.clone());
    let bad = (
        "bad.json".to_string(),
        case.replace("app-abc123", "app-zzz"),
    );
    let junk = ("junk.json".to_string(), "{".to_string());
    assert!(run_cases(&policy, std::slice::from_ref(&good)).is_ok());
    let refused = run_cases(&policy, &[good, bad, junk]).expect_err("refused");
    assert_eq!(refused.reason, "CasesFailed");
    assert!(
        refused
            .message
            .starts_with("2 of 3 cases failed: bad.json: ")
            && refused.message.contains("junk.json: not a case file"),
        "{}",
        refused.message
    );
}

#[test]
fn a_change_of_the_keys_configmap_wakes_the_policies_that_name_it() {
    let signed = spec(json!({
        "module": {"oci": "registry.example/p:stable"},
        "cases": {"configMap": {"namespace": "radwasm-system", "name": "cases"}},
        "verify": {"configMap": {"namespace": "radwasm-system", "name": "policy-keys"}},
    }));
    for name in ["policy-keys", "cases"] {
        assert!(reads_config_map(&signed, "radwasm-system", name), "{name}");
    }
    assert!(!reads_config_map(&signed, "radwasm-system", "other-keys"));
    assert!(!reads_config_map(&signed, "team-a", "policy-keys"));
    let unsigned = spec(json!({"module": {"oci": "registry.example/p@sha256:00"}}));
    assert!(!reads_config_map(
        &unsigned,
        "radwasm-system",
        "policy-keys"
    ));
}

#[test]
fn spec_verify_names_keys_or_a_certificate_and_identities_that_parse() {
    let oci = format!("registry.example/p@sha256:{}", "a".repeat(64));
    let roots = json!({"configMap": {"namespace": "radwasm-system", "name": "ca"}});
    let identity = json!({"subject": "release@platform.example", "issuer": "https://i.example"});
    let keys = json!({"namespace": "radwasm-system", "name": "keys"});
    let certificate =
        |identities: serde_json::Value| json!({"roots": roots, "identities": identities});
    for (module, verify, expected) in [
        (
            json!({"oci": oci}),
            json!({"configMap": keys, "certificate": certificate(json!([identity]))}),
            "exactly one of configMap (public keys) and certificate",
        ),
        (json!({"oci": oci}), json!({}), "exactly one of configMap"),
        (
            json!({"configMap": {"namespace": "radwasm-system", "name": "m", "key": "policy.wasm"}}),
            json!({"certificate": certificate(json!([identity]))}),
            "it needs spec.module.oci",
        ),
        (
            json!({"oci": oci}),
            json!({"certificate": certificate(json!([]))}),
            "identities is empty",
        ),
        (
            json!({"oci": oci}),
            json!({"certificate": certificate(json!([{"subject": "a", "subjectRegExp": "b", "issuer": "i"}]))}),
            "identities[0].subject and spec.verify.certificate.identities[0].subjectRegExp are both set",
        ),
        (
            json!({"oci": oci}),
            json!({"certificate": certificate(json!([{"subject": "a"}]))}),
            "one of spec.verify.certificate.identities[0].issuer and",
        ),
        (
            json!({"oci": oci}),
            json!({"certificate": certificate(json!([{"subject": "a", "issuerRegExp": "("}]))}),
            "issuerRegExp \"(\" is not a regular expression",
        ),
        (
            json!({"oci": oci}),
            json!({"certificate": {"roots": {"configMap": {"namespace": "other", "name": "ca"}}, "identities": [identity]}}),
            "spec.verify.certificate.roots.configMap must name a ConfigMap in \"radwasm-system\"",
        ),
        (
            json!({"oci": oci}),
            json!({"certificate": certificate(json!([identity, {"subjectRegExp": "^ci@", "issuerRegExp": ".*"}]))}),
            "accepted",
        ),
    ] {
        let message = refusal(json!({"module": module, "verify": verify}));
        assert!(message.contains(expected), "{verify}: {message}");
    }
}
