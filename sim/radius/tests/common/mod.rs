//! Helpers shared by the simulator's integration tests: start a simulator on
//! loopback, talk to it with a plain reqwest client, load fixtures.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use radwasm_sim_radius::{RadiusSim, SimConfig};
use serde_json::{Value, json};

pub const RG_API: &str = "2023-10-01-preview";
pub const DEPLOY_API: &str = "2020-10-01";

/// A simulator with fast operations (deploy 150 ms, delete 80 ms).
pub async fn start_sim() -> RadiusSim {
    start_with(Duration::from_millis(150), Duration::from_millis(80)).await
}

pub async fn start_with(deploy: Duration, delete: Duration) -> RadiusSim {
    radwasm_sim_radius::start(SimConfig {
        deploy_duration: deploy,
        delete_duration: delete,
        retry_after_secs: 0,
        ..SimConfig::default()
    })
    .await
    .expect("simulator starts on 127.0.0.1:0")
}

/// A client that never uses a proxy and gives up quickly.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("reqwest client")
}

pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/arm-templates")
}

pub fn fixture(name: &str) -> Value {
    let path = fixtures_dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading fixture {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing fixture {name}: {e}"))
}

pub fn scope(rg: &str) -> String {
    format!("/planes/radius/local/resourceGroups/{rg}")
}

pub fn deployment_url(base: &str, rg: &str, name: &str) -> String {
    format!(
        "{base}{}/providers/Microsoft.Resources/deployments/{name}?api-version={DEPLOY_API}",
        scope(rg)
    )
}

pub fn resource_url(base: &str, id: &str) -> String {
    format!("{base}{id}?api-version={RG_API}")
}

pub async fn put_group(client: &reqwest::Client, base: &str, rg: &str) -> reqwest::Response {
    client
        .put(format!("{base}{}?api-version={RG_API}", scope(rg)))
        .json(&json!({"location": "global", "properties": {}}))
        .send()
        .await
        .expect("PUT resource group")
}

pub fn deployment_body(template: &Value, parameters: &Value) -> Value {
    json!({"properties": {
        "template": template,
        "parameters": parameters,
        "providerconfig": {
            "deployments": {"type": "Microsoft.Resources", "value": {"scope": "/planes/radius/local/resourceGroups/ignored"}}
        },
        "mode": "Incremental",
    }})
}

pub async fn put_deployment(
    client: &reqwest::Client,
    base: &str,
    rg: &str,
    name: &str,
    template: &Value,
    parameters: &Value,
) -> reqwest::Response {
    client
        .put(deployment_url(base, rg, name))
        .json(&deployment_body(template, parameters))
        .send()
        .await
        .expect("PUT deployment")
}

pub fn header(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get(name)
        .unwrap_or_else(|| panic!("missing header {name}"))
        .to_str()
        .expect("ASCII header")
        .to_string()
}

/// GET the operation status URL until it is terminal; returns its body.
pub async fn poll_status(client: &reqwest::Client, url: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let response = client.get(url).send().await.expect("GET operation status");
        assert_eq!(response.status(), 200, "operation status {url}");
        let body: Value = response.json().await.expect("status JSON");
        let status = body["status"].as_str().expect("status field").to_string();
        if status != "InProgress" {
            return body;
        }
        assert!(Instant::now() < deadline, "operation {url} did not finish");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn get_json(client: &reqwest::Client, url: &str) -> (u16, Value) {
    let response = client.get(url).send().await.expect("GET");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).expect("JSON body")
    };
    (status, body)
}

/// The compiled Bicep modules in `sim/radius/tests/fixtures/modules`.
pub fn module_fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/modules")
}

pub fn module_fixture(name: &str) -> Value {
    let path = module_fixtures_dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading fixture {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing fixture {name}: {e}"))
}
