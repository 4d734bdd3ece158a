//! The simulator over HTTP, as a Radius client sees it: resource groups,
//! deployments with the ARM async pattern, resources, and the errors.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const RECIPE_PARAMETERS: &str = r#"{
    "name": {"value": "shop"},
    "namespace": {"value": "shop-ns"},
    "registry": {"value": "ghcr.io/acme"},
    "version": {"value": "1.2"}
}"#;

fn recipe_parameters() -> Value {
    serde_json::from_str(RECIPE_PARAMETERS).expect("parameters JSON")
}

#[tokio::test]
async fn resource_groups_are_created_updated_and_read() {
    let sim = start_sim().await;
    let base = sim.base_url();
    let http = client();
    let url = format!("{base}/planes/radius/local/resourceGroups/team-a?api-version={RG_API}");

    let (status, body) = get_json(&http, &url).await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "NotFound");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("team-a")
    );

    let created = put_group(&http, &base, "team-a").await;
    assert_eq!(created.status(), 201);
    let group: Value = created.json().await.unwrap();
    assert_eq!(
        group,
        json!({
            "id": "/planes/radius/local/resourceGroups/team-a",
            "name": "team-a",
            "type": "System.Resources/resourceGroups",
            "location": "global",
            "properties": {}
        })
    );
    assert_eq!(put_group(&http, &base, "team-a").await.status(), 200);

    // Names are case-insensitive; the original casing is kept.
    let (status, body) = get_json(
        &http,
        &format!("{base}/planes/radius/local/resourcegroups/TEAM-A?api-version={RG_API}"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["name"], "team-a");

    let (status, list) = get_json(
        &http,
        &format!("{base}/planes/radius/local/resourceGroups?api-version={RG_API}"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(list["value"].as_array().unwrap().len(), 1);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_deployment_is_accepted_polled_and_lists_its_output_resources() {
    let sim = start_sim().await;
    let base = sim.base_url();
    let http = client();
    put_group(&http, &base, "shop").await;

    let response = put_deployment(
        &http,
        &base,
        "shop",
        "shop-deploy",
        &fixture("recipe.json"),
        &recipe_parameters(),
    )
    .await;
    assert_eq!(response.status(), 201);
    let status_url = header(&response, "azure-asyncoperation");
    let result_url = header(&response, "location");
    assert_eq!(header(&response, "retry-after"), "0");
    assert!(status_url.starts_with(&format!("{base}/planes/radius/local/providers/Microsoft.Resources/locations/global/operationStatuses/")), "{status_url}");
    assert!(
        status_url.ends_with("?api-version=2020-10-01"),
        "{status_url}"
    );
    assert!(result_url.contains("/operationResults/"), "{result_url}");
    let accepted: Value = response.json().await.unwrap();
    let deployment_id = "/planes/radius/local/resourceGroups/shop/providers/Microsoft.Resources/deployments/shop-deploy";
    assert_eq!(accepted["id"], deployment_id);
    assert_eq!(accepted["name"], "shop-deploy");
    assert_eq!(accepted["type"], "Microsoft.Resources/deployments");
    assert_eq!(accepted["properties"]["provisioningState"], "Accepted");

    // While running: the result URL says 202, the deployment is not done.
    let early = http.get(&result_url).send().await.unwrap();
    assert_eq!(early.status(), 202);
    assert!(early.headers().contains_key("retry-after"));
    let (_, running) = get_json(&http, &deployment_url(&base, "shop", "shop-deploy")).await;
    assert_eq!(running["properties"]["provisioningState"], "Running");
    assert!(running["properties"].get("outputResources").is_none());
    let in_progress: Value = http
        .get(&status_url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(in_progress["status"], "InProgress");
    assert!(in_progress.get("endTime").is_none());

    let done = poll_status(&http, &status_url).await;
    assert_eq!(done["status"], "Succeeded");
    assert!(done["startTime"].is_string() && done["endTime"].is_string());
    assert!(done.get("error").is_none());

    let env = "/planes/radius/local/resourceGroups/shop/providers/Applications.Core/environments/shop-env";
    let app = "/planes/radius/local/resourceGroups/shop/providers/Applications.Core/applications/shop-app";
    let recipe = "/planes/radius/local/resourceGroups/shop/providers/Applications.Datastores/redisCaches/shop-recipe";
    let expected = json!([{"id": env}, {"id": app}, {"id": recipe}]);

    let final_result = http.get(&result_url).send().await.unwrap();
    assert_eq!(final_result.status(), 200);
    let final_body: Value = final_result.json().await.unwrap();
    assert_eq!(final_body["properties"]["outputResources"], expected);

    let (status, deployment) = get_json(&http, &deployment_url(&base, "shop", "shop-deploy")).await;
    assert_eq!(status, 200);
    assert_eq!(deployment["properties"]["provisioningState"], "Succeeded");
    assert_eq!(deployment["properties"]["outputResources"], expected);

    let (status, stored) = get_json(&http, &resource_url(&base, recipe)).await;
    assert_eq!(status, 200);
    assert_eq!(stored["id"], recipe);
    assert_eq!(stored["name"], "shop-recipe");
    assert_eq!(stored["type"], "Applications.Datastores/redisCaches");
    assert_eq!(stored["properties"]["application"], app);
    assert_eq!(stored["properties"]["environment"], env);
    assert_eq!(stored["properties"]["provisioningState"], "Succeeded");

    let stats = sim.stats();
    assert_eq!(stats.deployment_puts, 1);
    assert_eq!(stats.deployment_puts_for("shop-deploy"), 1);
    assert_eq!(stats.resources, 3);
    assert_eq!(stats.deployments_succeeded, 1);
    assert_eq!(sim.resource_ids(), vec![app, env, recipe]);
    sim.shutdown().await;
}

#[tokio::test]
async fn redeploying_is_incremental_and_updates_bodies() {
    let sim = start_with(Duration::ZERO, Duration::ZERO).await;
    let base = sim.base_url();
    let http = client();
    put_group(&http, &base, "rg").await;
    for (name, fixture_name) in [
        ("d", "deploymenttemplate-outputresources-1.json"),
        ("d", "deploymenttemplate-outputresources-2.json"),
        ("u", "deploymenttemplate-update-1.json"),
        ("u", "deploymenttemplate-update-2.json"),
    ] {
        let response =
            put_deployment(&http, &base, "rg", name, &fixture(fixture_name), &json!({})).await;
        assert_eq!(response.status(), 201, "{fixture_name}");
        let done = poll_status(&http, &header(&response, "azure-asyncoperation")).await;
        assert_eq!(done["status"], "Succeeded", "{fixture_name}");
    }
    // The second template no longer lists the container, but Incremental
    // mode leaves it in place; the deployment lists only what it deployed.
    let (_, second) = get_json(&http, &deployment_url(&base, "rg", "d")).await;
    assert_eq!(
        second["properties"]["outputResources"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let container = "/planes/radius/local/resourceGroups/rg/providers/Applications.Core/containers/output-resources-container";
    assert_eq!(
        get_json(&http, &resource_url(&base, container)).await.0,
        200
    );

    let env = "/planes/radius/local/resourceGroups/rg/providers/Applications.Core/environments/deploymenttemplate-update-env";
    let (_, body) = get_json(&http, &resource_url(&base, env)).await;
    assert_eq!(body["properties"]["compute"]["namespace"], "notdefault");
    assert_eq!(sim.stats().deployment_puts_for("d"), 2);
    assert_eq!(sim.stats().deployment_puts, 4);
    sim.shutdown().await;
}

#[tokio::test]
async fn resources_are_read_and_deleted_case_insensitively() {
    let sim = start_sim().await;
    let base = sim.base_url();
    let http = client();
    put_group(&http, &base, "rg").await;
    let response = put_deployment(
        &http,
        &base,
        "rg",
        "env",
        &fixture("deploymenttemplate-withresources.json"),
        &json!({}),
    )
    .await;
    poll_status(&http, &header(&response, "azure-asyncoperation")).await;
    let id = "/planes/radius/local/resourceGroups/rg/providers/Applications.Core/environments/deploymenttemplate-withresources-env";

    let (status, body) = get_json(&http, &resource_url(&base, &id.to_uppercase())).await;
    assert_eq!(status, 200);
    assert_eq!(body["id"], id, "original casing is kept");
    assert_eq!(body["properties"]["compute"]["namespace"], "default");

    let deleted = http
        .delete(resource_url(&base, &id.to_lowercase()))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 202);
    let status_url = header(&deleted, "azure-asyncoperation");
    assert!(
        status_url.contains(
            "/planes/radius/local/providers/Applications.Core/locations/global/operationStatuses/"
        ),
        "{status_url}"
    );
    let result_url = header(&deleted, "location");
    header(&deleted, "retry-after");

    let (status, deleting) = get_json(&http, &resource_url(&base, id)).await;
    assert_eq!(status, 200);
    assert_eq!(deleting["properties"]["provisioningState"], "Deleting");
    // A second DELETE while deleting answers with the same operation.
    let again = http.delete(resource_url(&base, id)).send().await.unwrap();
    assert_eq!(again.status(), 202);
    assert_eq!(header(&again, "azure-asyncoperation"), status_url);

    assert_eq!(poll_status(&http, &status_url).await["status"], "Succeeded");
    assert_eq!(http.get(&result_url).send().await.unwrap().status(), 204);
    let (status, gone) = get_json(&http, &resource_url(&base, id)).await;
    assert_eq!(status, 404);
    assert_eq!(gone["error"]["code"], "NotFound");
    assert_eq!(
        http.delete(resource_url(&base, id))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );

    let stats = sim.stats();
    assert_eq!(stats.deletes, 3);
    assert_eq!(stats.deletes_for(id), 3);
    assert_eq!(stats.resources, 0);
    assert!(sim.resource_ids().is_empty());
    sim.shutdown().await;
}

#[tokio::test]
async fn a_zero_delete_duration_deletes_at_once() {
    let sim = start_with(Duration::ZERO, Duration::ZERO).await;
    let base = sim.base_url();
    let http = client();
    put_group(&http, &base, "rg").await;
    let id = "/planes/radius/local/resourceGroups/rg/providers/Applications.Core/environments/e";
    let put = http
        .put(resource_url(&base, id))
        .json(&json!({"location": "global", "properties": {"compute": {"kind": "kubernetes"}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);
    assert_eq!(
        http.delete(resource_url(&base, id))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        http.delete(resource_url(&base, id))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn an_unknown_resource_group_is_404() {
    let sim = start_sim().await;
    let base = sim.base_url();
    let http = client();
    let response = put_deployment(
        &http,
        &base,
        "nowhere",
        "d",
        &fixture("deploymenttemplate-withresources.json"),
        &json!({}),
    )
    .await;
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "ResourceGroupNotFound");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nowhere")
    );

    let id =
        "/planes/radius/local/resourceGroups/nowhere/providers/Applications.Core/environments/e";
    assert_eq!(get_json(&http, &resource_url(&base, id)).await.0, 404);
    assert_eq!(
        http.delete(resource_url(&base, id))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    let (status, body) = get_json(&http, &deployment_url(&base, "nowhere", "d")).await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "DeploymentNotFound");
    sim.shutdown().await;
}

async fn rejected(http: &reqwest::Client, base: &str, body: String) -> (u16, String, String) {
    let response = http
        .put(deployment_url(base, "rg", "bad"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    (
        status,
        body["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

#[tokio::test]
async fn invalid_deployments_are_400_and_name_the_problem() {
    let sim = start_sim().await;
    let base = sim.base_url();
    let http = client();
    put_group(&http, &base, "rg").await;
    let template = |properties: Value| json!({"resources": {"c": {"import": "Radius", "type": "Applications.Core/containers@2023-10-01-preview", "properties": properties}}});

    let (status, code, message) = rejected(&http, &base, "{not json".into()).await;
    assert_eq!(
        (status, code.as_str()),
        (400, "InvalidRequestContent"),
        "{message}"
    );

    let (status, code, message) = rejected(
        &http,
        &base,
        json!({"properties": {"template": "nope", "mode": "Incremental"}}).to_string(),
    )
    .await;
    assert_eq!((status, code.as_str()), (400, "InvalidTemplate"));
    assert!(message.contains("template"), "{message}");

    let (status, code, message) = rejected(
        &http,
        &base,
        deployment_body(
            &template(json!({"name": "c", "properties": {"x": "[listSecrets('a', 'b')]"}})),
            &json!({}),
        )
        .to_string(),
    )
    .await;
    assert_eq!((status, code.as_str()), (400, "InvalidTemplate"));
    assert!(message.contains("listSecrets"), "{message}");

    let (status, code, message) = rejected(
        &http,
        &base,
        deployment_body(&fixture("env.json"), &json!({"name": {"value": "x"}})).to_string(),
    )
    .await;
    assert_eq!((status, code.as_str()), (400, "InvalidTemplate"));
    assert!(message.contains("'namespace'"), "{message}");

    let (status, code, message) = rejected(
        &http,
        &base,
        deployment_body(
            &fixture("env.json"),
            &json!({"name": "x", "namespace": "y"}),
        )
        .to_string(),
    )
    .await;
    assert_eq!((status, code.as_str()), (400, "InvalidRequestContent"));
    assert!(message.contains("'name'"), "{message}");

    let (status, code, message) = rejected(
        &http,
        &base,
        deployment_body(&template(json!({"name": "c"})), &json!([])).to_string(),
    )
    .await;
    assert_eq!((status, code.as_str()), (400, "InvalidRequestContent"));
    assert!(message.contains("parameters"), "{message}");

    // No api-version at all.
    let response = http
        .get(format!("{base}/planes/radius/local/resourceGroups/rg"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "MissingApiVersionParameter");

    assert_eq!(sim.stats().deployment_puts, 6);
    assert_eq!(sim.stats().resources, 0);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_running_deployment_cannot_be_replaced_but_can_be_canceled() {
    let sim = start_with(Duration::from_secs(30), Duration::ZERO).await;
    let base = sim.base_url();
    let http = client();
    put_group(&http, &base, "rg").await;
    let template = fixture("deploymenttemplate-withresources.json");
    let first = put_deployment(&http, &base, "rg", "slow", &template, &json!({})).await;
    assert_eq!(first.status(), 201);
    let status_url = header(&first, "azure-asyncoperation");

    let second = put_deployment(&http, &base, "rg", "slow", &template, &json!({})).await;
    assert_eq!(second.status(), 409);
    let body: Value = second.json().await.unwrap();
    assert_eq!(body["error"]["code"], "DeploymentActive");

    let cancel = http
        .post(format!(
            "{base}/planes/radius/local/resourceGroups/rg/providers/Microsoft.Resources/deployments/slow/cancel?api-version={DEPLOY_API}"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(cancel.status(), 204);
    assert_eq!(poll_status(&http, &status_url).await["status"], "Canceled");
    let (_, deployment) = get_json(&http, &deployment_url(&base, "rg", "slow")).await;
    assert_eq!(deployment["properties"]["provisioningState"], "Canceled");
    assert_eq!(sim.stats().resources, 0);
    sim.shutdown().await;
}

#[tokio::test]
async fn existing_resources_must_exist_when_the_deployment_runs() {
    let sim = start_with(Duration::ZERO, Duration::ZERO).await;
    let base = sim.base_url();
    let http = client();
    put_group(&http, &base, "rg").await;
    let template = json!({
        "languageVersion": "2.0",
        "imports": {"Radius": {"provider": "Radius", "version": "latest"}},
        "resources": {
            "env": {"existing": true, "import": "Radius", "type": "Applications.Core/environments@2023-10-01-preview", "properties": {"name": "shared"}},
            "app": {"import": "Radius", "type": "Applications.Core/applications@2023-10-01-preview",
                    "properties": {"name": "app", "properties": {"environment": "[reference('env').id]", "ns": "[reference('env').properties.compute.namespace]"}}}
        }
    });
    // Without the environment, reference().properties cannot be resolved
    // from the declaration and the deployment is rejected...
    let response = put_deployment(&http, &base, "rg", "app", &template, &json!({})).await;
    assert_eq!(response.status(), 400);

    // ...and a template that only needs the id fails when it runs.
    let mut id_only = template.clone();
    id_only["resources"]["app"]["properties"]["properties"]
        .as_object_mut()
        .unwrap()
        .remove("ns");
    let response = put_deployment(&http, &base, "rg", "app", &id_only, &json!({})).await;
    assert_eq!(response.status(), 201);
    let failed = poll_status(&http, &header(&response, "azure-asyncoperation")).await;
    assert_eq!(failed["status"], "Failed");
    assert_eq!(failed["error"]["code"], "DeploymentFailed");
    assert_eq!(failed["error"]["details"][0]["code"], "NotFound");

    let env =
        "/planes/radius/local/resourceGroups/rg/providers/Applications.Core/environments/shared";
    let put = http
        .put(resource_url(&base, env))
        .json(&json!({"properties": {"compute": {"kind": "kubernetes", "namespace": "shared-ns"}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);
    let response = put_deployment(&http, &base, "rg", "app", &template, &json!({})).await;
    assert_eq!(response.status(), 201);
    let done = poll_status(&http, &header(&response, "azure-asyncoperation")).await;
    assert_eq!(done["status"], "Succeeded");
    let (_, deployment) = get_json(&http, &deployment_url(&base, "rg", "app")).await;
    let app = "/planes/radius/local/resourceGroups/rg/providers/Applications.Core/applications/app";
    assert_eq!(
        deployment["properties"]["outputResources"],
        json!([{"id": app}])
    );
    let (_, body) = get_json(&http, &resource_url(&base, app)).await;
    assert_eq!(body["properties"]["environment"], env);
    assert_eq!(body["properties"]["ns"], "shared-ns");
    sim.shutdown().await;
}

#[tokio::test]
async fn provider_config_scope_and_the_aggregated_path_are_honoured() {
    let sim = start_with(Duration::ZERO, Duration::ZERO).await;
    let base = sim.base_url();
    let http = client();
    put_group(&http, &base, "deploys").await;
    put_group(&http, &base, "apps").await;
    let aggregated = format!("{base}/apis/api.ucp.dev/v1alpha3");
    let response = http
        .put(deployment_url(&aggregated, "deploys", "d"))
        .json(&json!({"properties": {
            "template": fixture("deploymenttemplate-withresources.json"),
            "parameters": {},
            "providerConfig": {"radius": {"type": "Radius", "value": {"scope": "/planes/radius/local/resourceGroups/apps"}}},
            "mode": "Incremental"
        }}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let status_url = header(&response, "azure-asyncoperation");
    assert!(
        status_url.starts_with(&format!("{aggregated}/planes/")),
        "{status_url}"
    );
    poll_status(&http, &status_url).await;
    assert_eq!(
        sim.resource_ids(),
        vec![
            "/planes/radius/local/resourceGroups/apps/providers/Applications.Core/environments/deploymenttemplate-withresources-env"
        ]
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn admin_endpoints_report_and_reset() {
    let sim = start_sim().await;
    let base = sim.base_url();
    let http = client();
    put_group(&http, &base, "rg").await;
    let (status, health) = get_json(&http, &format!("{base}/_sim/health")).await;
    assert_eq!((status, health), (200, json!({"status": "ok"})));

    let patched = http
        .post(format!("{base}/_sim/faults"))
        .json(&json!({"deploy_ms": 0, "latency_ms": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(patched.status(), 200);
    let settings: Value = patched.json().await.unwrap();
    assert_eq!(settings["deploy_ms"], 0);
    assert_eq!(settings["latency_ms"], 1);
    assert_eq!(settings["delete_ms"], 80);

    let typo = http
        .post(format!("{base}/_sim/faults"))
        .json(&json!({"latncy_ms": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(typo.status(), 400);

    let response = put_deployment(
        &http,
        &base,
        "rg",
        "d",
        &fixture("deploymenttemplate-withresources.json"),
        &json!({}),
    )
    .await;
    // deploy_ms 0: the operation is already over at the first poll.
    let status: Value = http
        .get(header(&response, "azure-asyncoperation"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["status"], "Succeeded");

    let (_, stats) = get_json(&http, &format!("{base}/_sim/stats")).await;
    assert_eq!(stats["deployment_puts"], 1);
    assert_eq!(stats["deployment_puts_by_name"]["d"], 1);
    assert_eq!(stats["resources"], 1);
    let (_, resources) = get_json(&http, &format!("{base}/_sim/resources")).await;
    assert_eq!(resources["value"].as_array().unwrap().len(), 1);

    let reset = http
        .post(format!("{base}/_sim/reset"))
        .send()
        .await
        .unwrap();
    assert_eq!(reset.status(), 200);
    let (_, stats) = get_json(&http, &format!("{base}/_sim/stats")).await;
    assert_eq!(stats["deployment_puts"], 0);
    assert_eq!(stats["resources"], 0);
    let (_, settings) = get_json(&http, &format!("{base}/_sim/faults")).await;
    assert_eq!(settings["deploy_ms"], 150);
    assert_eq!(settings["latency_ms"], 0);
    sim.shutdown().await;
}

#[tokio::test]
async fn shutdown_stops_listening() {
    let sim = start_sim().await;
    let base = sim.base_url();
    let http = client();
    assert_eq!(get_json(&http, &format!("{base}/_sim/health")).await.0, 200);
    sim.shutdown().await;
    let fresh = client();
    assert!(
        fresh
            .get(format!("{base}/_sim/health"))
            .send()
            .await
            .is_err()
    );
}
