use base64::Engine as _;

use super::*;

fn auth(user: &str, password: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

#[test]
fn credentials_come_from_the_auth_field() {
    let json = format!(
        r#"{{"auths": {{"registry.example.com": {{"auth": "{}"}}}}}}"#,
        auth("robot", "pa:ss")
    );
    let credentials = credentials_from_dockerconfigjson(json.as_bytes(), "registry.example.com")
        .expect("valid")
        .expect("an entry");
    assert_eq!(credentials.username, "robot");
    // Only the first colon separates: passwords may contain colons.
    assert_eq!(credentials.password, "pa:ss");
}

#[test]
fn credentials_come_from_username_and_password_fields() {
    let json = br#"{"auths": {"registry.example.com:5000": {"username": "u", "password": "p"}}}"#;
    let credentials = credentials_from_dockerconfigjson(json, "registry.example.com:5000")
        .expect("valid")
        .expect("an entry");
    assert_eq!(
        credentials,
        Credentials {
            username: "u".to_string(),
            password: "p".to_string()
        }
    );
}

#[test]
fn the_auth_field_wins_over_username_and_password() {
    let json = format!(
        r#"{{"auths": {{"r.io": {{"username": "old", "password": "old", "auth": "{}"}}}}}}"#,
        auth("new", "secret")
    );
    let credentials = credentials_from_dockerconfigjson(json.as_bytes(), "r.io")
        .expect("valid")
        .expect("an entry");
    assert_eq!(credentials.username, "new");
    assert_eq!(credentials.password, "secret");
}

#[test]
fn keys_with_a_scheme_or_path_and_docker_hub_aliases_match() {
    let json = format!(
        r#"{{"auths": {{"https://index.docker.io/v1/": {{"auth": "{}"}},
                       "http://registry.local:5000/v2/": {{"auth": "{}"}}}}}}"#,
        auth("hub", "h"),
        auth("local", "l")
    );
    let hub = credentials_from_dockerconfigjson(json.as_bytes(), "docker.io")
        .expect("valid")
        .expect("hub entry");
    assert_eq!(hub.username, "hub");
    let local = credentials_from_dockerconfigjson(json.as_bytes(), "registry.local:5000")
        .expect("valid")
        .expect("local entry");
    assert_eq!(local.username, "local");
    // Another port is another registry.
    assert!(
        credentials_from_dockerconfigjson(json.as_bytes(), "registry.local")
            .expect("valid")
            .is_none()
    );
}

#[test]
fn no_entry_for_the_registry_is_none() {
    let json = format!(
        r#"{{"auths": {{"other.io": {{"auth": "{}"}}}}}}"#,
        auth("u", "p")
    );
    assert!(
        credentials_from_dockerconfigjson(json.as_bytes(), "r.io")
            .expect("valid")
            .is_none()
    );
    assert!(
        credentials_from_dockerconfigjson(b"{}", "r.io")
            .expect("valid")
            .is_none()
    );
}

#[test]
fn malformed_configs_and_entries_are_errors_that_say_why() {
    let not_json = credentials_from_dockerconfigjson(b"auths:", "r.io").unwrap_err();
    assert!(
        matches!(not_json, OciError::DockerConfig { .. }),
        "{not_json}"
    );

    let bad_base64 =
        credentials_from_dockerconfigjson(br#"{"auths": {"r.io": {"auth": "%%%"}}}"#, "r.io")
            .unwrap_err();
    assert!(
        bad_base64
            .to_string()
            .contains("auths.r.io.auth is not base64"),
        "{bad_base64}"
    );

    let no_colon = format!(
        r#"{{"auths": {{"r.io": {{"auth": "{}"}}}}}}"#,
        base64::engine::general_purpose::STANDARD.encode("justauser")
    );
    let no_colon = credentials_from_dockerconfigjson(no_colon.as_bytes(), "r.io").unwrap_err();
    assert!(
        no_colon.to_string().contains("USERNAME:PASSWORD"),
        "{no_colon}"
    );

    let empty = credentials_from_dockerconfigjson(
        br#"{"auths": {"r.io": {"identitytoken": "t"}}}"#,
        "r.io",
    )
    .unwrap_err();
    assert!(
        empty.to_string().contains("neither `auth` nor `username`"),
        "{empty}"
    );
}

#[test]
fn credentials_never_show_the_password_in_debug_output() {
    let credentials = Credentials {
        username: "u".to_string(),
        password: "hunter2".to_string(),
    };
    let shown = format!(
        "{:?}",
        OciOptions {
            insecure_registries: Vec::new(),
            auth: Some(credentials),
            ..OciOptions::default()
        }
    );
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");
}

#[test]
fn only_components_are_accepted_for_push() {
    let not_wasm = component_info(b"hello world, not wasm").unwrap_err();
    assert!(not_wasm.to_string().contains("magic bytes"), "{not_wasm}");
    let module = wat::parse_str("(module)").expect("module");
    let module = component_info(&module).unwrap_err();
    assert!(
        module.to_string().contains("core WebAssembly module"),
        "{module}"
    );
}

#[test]
fn a_component_lists_its_imports_and_exports() {
    let info = component_info(&a_component()).expect("a component");
    assert!(
        info.exports
            .iter()
            .any(|name| name.starts_with("radapp:policy/metadata@")),
        "{info:?}"
    );
    assert!(
        info.exports
            .iter()
            .any(|name| name.starts_with("radapp:policy/template-policy@")),
        "{info:?}"
    );
    assert!(!info.imports.is_empty(), "{info:?}");
}

#[test]
fn references_are_checked_before_any_request() {
    let invalid = parse_reference("Not A Reference").unwrap_err();
    assert!(
        matches!(invalid, OciError::InvalidReference { .. }),
        "{invalid}"
    );
    let parsed = parse_reference("127.0.0.1:5000/policies/default:v1").expect("valid");
    assert_eq!(parsed.registry(), "127.0.0.1:5000");
    assert_eq!(parsed.repository(), "policies/default");
    assert_eq!(parsed.tag(), Some("v1"));
    let sha512 = format!("r.io/p@sha512:{}", "a".repeat(128));
    let sha512 = parse_reference(&sha512).unwrap_err();
    assert!(sha512.to_string().contains("only sha256"), "{sha512}");
}

#[test]
fn a_manifest_needs_exactly_one_wasm_layer() {
    let manifest = |layers: &str| {
        format!(
            r#"{{"schemaVersion": 2, "mediaType": "{OCI_MANIFEST_MEDIA_TYPE}",
                "config": {{"mediaType": "{WASM_CONFIG_MEDIA_TYPE}", "digest": "sha256:{c}", "size": 2}},
                "layers": [{layers}]}}"#,
            c = "c".repeat(64)
        )
    };
    let layer = |media_type: &str| {
        format!(
            r#"{{"mediaType": "{media_type}", "digest": "sha256:{}", "size": 10}}"#,
            "a".repeat(64)
        )
    };
    let one = manifest(&layer(WASM_LAYER_MEDIA_TYPE));
    assert_eq!(
        component_layer("r", one.as_bytes()).expect("valid").size,
        10
    );

    let two = manifest(&format!(
        "{}, {}",
        layer(WASM_LAYER_MEDIA_TYPE),
        layer("application/vnd.oci.image.layer.v1.tar+gzip")
    ));
    let error = component_layer("r", two.as_bytes())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(
            "found 2 layers: application/wasm, application/vnd.oci.image.layer.v1.tar+gzip"
        ),
        "{error}"
    );
    let tar = manifest(&layer("application/vnd.oci.image.layer.v1.tar"));
    let error = component_layer("r", tar.as_bytes())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("found 1 layer: application/vnd.oci.image.layer.v1.tar"),
        "{error}"
    );
    let none = manifest("");
    let error = component_layer("r", none.as_bytes())
        .unwrap_err()
        .to_string();
    assert!(error.contains("no layers"), "{error}");

    let index = r#"{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []}"#;
    let error = component_layer("r", index.as_bytes())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("application/vnd.oci.image.index.v1+json"),
        "{error}"
    );

    let huge = manifest(&format!(
        r#"{{"mediaType": "{WASM_LAYER_MEDIA_TYPE}", "digest": "sha256:{}", "size": {}}}"#,
        "a".repeat(64),
        MAX_COMPONENT_BYTES + 1
    ));
    let error = component_layer("r", huge.as_bytes())
        .unwrap_err()
        .to_string();
    assert!(error.contains("limit"), "{error}");
}

#[tokio::test]
async fn a_push_to_a_reference_pinning_another_digest_is_refused_before_any_request() {
    // Nothing listens on this address; the refusal comes first.
    let reference = format!("127.0.0.1:9/policies/default@sha256:{}", "0".repeat(64));
    let options = OciOptions {
        insecure_registries: vec!["127.0.0.1:9".to_string()],
        ..OciOptions::default()
    };
    let error = push(&reference, &a_component(), &options)
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::DigestMismatch { .. }), "{error}");
}

#[test]
fn only_plain_http_registries_off_loopback_are_warned_about() {
    let registries: Vec<String> = [
        "127.0.0.1:5000",
        "localhost:5000",
        "LOCALHOST",
        "[::1]:5000",
        "127.8.9.10",
        "registry.internal:5000",
        "10.0.0.7:5000",
        "[fd00::1]:5000",
    ]
    .iter()
    .map(|r| r.to_string())
    .collect();
    let warnings = insecure_registry_warnings(&registries);
    let named: Vec<&str> = ["registry.internal:5000", "10.0.0.7:5000", "[fd00::1]:5000"].to_vec();
    assert_eq!(warnings.len(), named.len(), "{warnings:#?}");
    for (warning, registry) in warnings.iter().zip(named) {
        assert!(warning.contains(registry), "{warning}");
        assert!(warning.contains("plain HTTP"), "{warning}");
    }
}

/// A component importing the contract's types and exporting its metadata
/// and template-policy interfaces, as a policy does (empty instances: only
/// the names are read).
fn a_component() -> Vec<u8> {
    wat::parse_str(
        r#"(component
            (import "radapp:policy/types@0.6.0" (instance))
            (instance $metadata)
            (instance $template)
            (export "radapp:policy/metadata@0.6.0" (instance $metadata))
            (export "radapp:policy/template-policy@0.6.0" (instance $template))
        )"#,
    )
    .expect("a component")
}
