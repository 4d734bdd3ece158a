//! Each injected fault, as a plain HTTP client observes it.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};

async fn deploy_withresources(http: &reqwest::Client, base: &str, name: &str) -> reqwest::Response {
    put_deployment(
        http,
        base,
        "rg",
        name,
        &fixture("deploymenttemplate-withresources.json"),
        &json!({}),
    )
    .await
}

#[tokio::test]
async fn an_injected_deployment_failure_ends_the_operation_failed() {
    let sim = start_sim().await;
    let base = sim.base_url();
    let http = client();
    put_group(&http, &base, "rg").await;
    sim.faults()
        .fail_next_deployments(1, "RecipeDeploymentFailed", "the redis recipe failed");

    let response = deploy_withresources(&http, &base, "d").await;
    assert_eq!(response.status(), 201, "the PUT itself is accepted");
    let status_url = header(&response, "azure-asyncoperation");
    let result_url = header(&response, "location");
    let failed = poll_status(&http, &status_url).await;
    assert_eq!(failed["status"], "Failed");
    assert_eq!(
        failed["error"],
        json!({"code": "RecipeDeploymentFailed", "message": "the redis recipe failed"})
    );
    let (status, result) = get_json(&http, &result_url).await;
    assert_eq!(status, 200);
    assert_eq!(result["properties"]["provisioningState"], "Failed");
    assert_eq!(
        result["properties"]["error"]["code"],
        "RecipeDeploymentFailed"
    );
    let (_, deployment) = get_json(&http, &deployment_url(&base, "rg", "d")).await;
    assert_eq!(deployment["properties"]["provisioningState"], "Failed");
    assert!(deployment["properties"].get("outputResources").is_none());
    assert_eq!(sim.stats().resources, 0);

    // Only the next one failed.
    let response = deploy_withresources(&http, &base, "d").await;
    let done = poll_status(&http, &header(&response, "azure-asyncoperation")).await;
    assert_eq!(done["status"], "Succeeded");
    assert_eq!(sim.stats().faults.failed_deployments, 1);
    assert_eq!(sim.stats().deployments_failed, 1);
    sim.shutdown().await;
}

#[tokio::test]
async fn an_error_rate_answers_5xx_with_an_arm_error() {
    let sim = start_sim().await;
    let base = sim.base_url();
    let http = client();
    sim.faults().set_error_rate(1.0);
    for _ in 0..6 {
        let response = put_group(&http, &base, "rg").await;
        let status = response.status().as_u16();
        assert!(status == 500 || status == 503, "{status}");
        let body: Value = response.json().await.unwrap();
        let code = body["error"]["code"].as_str().unwrap();
        assert!(
            code == "InternalServerError" || code == "ServiceUnavailable",
            "{code}"
        );
    }
    // Admin endpoints are never faulted.
    assert_eq!(get_json(&http, &format!("{base}/_sim/health")).await.0, 200);
    sim.faults().set_error_rate(0.0);
    assert_eq!(put_group(&http, &base, "rg").await.status(), 201);
    assert_eq!(sim.stats().faults.server_errors, 6);
    sim.shutdown().await;
}

#[tokio::test]
async fn throttling_answers_429_with_retry_after_for_the_next_requests() {
    let sim = start_sim().await;
    let base = sim.base_url();
    let http = client();
    sim.faults().throttle_next(2, 3);
    for _ in 0..2 {
        let response = put_group(&http, &base, "rg").await;
        assert_eq!(response.status(), 429);
        assert_eq!(header(&response, "retry-after"), "3");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "TooManyRequests");
    }
    assert_eq!(put_group(&http, &base, "rg").await.status(), 201);

    // The same through the admin endpoint.
    let set = http
        .post(format!("{base}/_sim/faults"))
        .json(&json!({"throttle_requests": 1, "throttle_retry_after_secs": 0}))
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 200);
    let response = put_group(&http, &base, "rg").await;
    assert_eq!(response.status(), 429);
    assert_eq!(header(&response, "retry-after"), "0");
    assert_eq!(put_group(&http, &base, "rg").await.status(), 200);
    sim.shutdown().await;
}

#[tokio::test]
async fn dropped_connections_are_connection_errors_for_the_client() {
    let sim = start_sim().await;
    let base = sim.base_url();
    let http = client();
    // Warm a pooled connection first, so the drop hits a live keep-alive one.
    assert_eq!(put_group(&http, &base, "rg").await.status(), 201);
    sim.faults().drop_next_connections(2);
    for _ in 0..2 {
        let error = http
            .get(format!(
                "{base}/planes/radius/local/resourceGroups/rg?api-version={RG_API}"
            ))
            .send()
            .await
            .expect_err("the connection is closed without an answer");
        assert!(!error.is_status() && !error.is_timeout(), "{error:?}");
        assert!(error.is_request() || error.is_connect(), "{error:?}");
    }
    let (status, _) = get_json(
        &http,
        &format!("{base}/planes/radius/local/resourceGroups/rg?api-version={RG_API}"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(sim.stats().faults.dropped_connections, 2);
    sim.shutdown().await;
}

#[tokio::test]
async fn vanished_operations_answer_404_while_the_work_still_happens() {
    let sim = start_with(Duration::from_millis(50), Duration::from_millis(50)).await;
    let base = sim.base_url();
    let http = client();
    put_group(&http, &base, "rg").await;
    sim.faults().vanish_next_operations(1);
    let response = deploy_withresources(&http, &base, "d").await;
    assert_eq!(response.status(), 201);
    let status_url = header(&response, "azure-asyncoperation");
    let result_url = header(&response, "location");
    for url in [&status_url, &result_url] {
        let (status, body) = get_json(&http, url).await;
        assert_eq!(status, 404, "{url}");
        assert_eq!(body["error"]["code"], "NotFound");
    }
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert_eq!(get_json(&http, &status_url).await.0, 404, "stays lost");
    let (_, deployment) = get_json(&http, &deployment_url(&base, "rg", "d")).await;
    assert_eq!(deployment["properties"]["provisioningState"], "Succeeded");

    // The next operation is visible, until all operations vanish.
    let id = "/planes/radius/local/resourceGroups/rg/providers/Applications.Core/environments/deploymenttemplate-withresources-env";
    let deleted = http.delete(resource_url(&base, id)).send().await.unwrap();
    assert_eq!(deleted.status(), 202);
    let delete_status = header(&deleted, "azure-asyncoperation");
    assert_eq!(get_json(&http, &delete_status).await.0, 200);
    sim.faults().vanish_all_operations(true);
    assert_eq!(get_json(&http, &delete_status).await.0, 404);
    sim.faults().vanish_all_operations(false);
    assert_eq!(
        poll_status(&http, &delete_status).await["status"],
        "Succeeded"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn latency_delays_every_answer() {
    let sim = start_sim().await;
    let base = sim.base_url();
    let http = client();
    let url = format!("{base}/planes/radius/local/resourceGroups/rg?api-version={RG_API}");
    sim.faults().set_latency(Duration::from_millis(150));
    let started = Instant::now();
    assert_eq!(get_json(&http, &url).await.0, 404);
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
    sim.faults().set_latency(Duration::ZERO);
    let started = Instant::now();
    assert_eq!(get_json(&http, &url).await.0, 404);
    assert!(
        started.elapsed() < Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn operation_durations_change_at_run_time() {
    let sim = start_with(Duration::from_secs(60), Duration::from_secs(60)).await;
    let base = sim.base_url();
    let http = client();
    put_group(&http, &base, "rg").await;
    sim.faults().set_deploy_duration(Duration::from_millis(30));
    let response = deploy_withresources(&http, &base, "d").await;
    let started = Instant::now();
    let done = poll_status(&http, &header(&response, "azure-asyncoperation")).await;
    assert_eq!(done["status"], "Succeeded");
    assert!(started.elapsed() < Duration::from_secs(2));
    sim.shutdown().await;
}
