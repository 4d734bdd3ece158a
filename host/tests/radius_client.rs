//! The Radius client against the Radius simulator over HTTP on loopback:
//! every path a controller takes (resource group, deployment, polling,
//! resume tokens, delete, get), the ARM async pattern, the aggregated API
//! path, and each fault the simulator can inject.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use radwasm::radius::{
    DeleteStart, DeploymentRequest, Endpoint, PollOutcome, RadiusClient, RadiusError, ResumeToken,
    RetryPolicy,
};
use radwasm_sim_radius::{RadiusSim, SimConfig};

const GROUP: &str = "/planes/radius/local/resourceGroups/client-tests";
const PROVIDER_CONFIG: &str = r#"{"radius":{"type":"Radius","value":{"scope":"/planes/radius/local/resourceGroups/client-tests"}},"deployments":{"type":"Microsoft.Resources","value":{"scope":"/planes/radius/local/resourceGroups/client-tests"}}}"#;

fn fixture_text(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/arm-templates")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn id(kind: &str, name: &str) -> String {
    format!("{GROUP}/providers/Applications.Core/{kind}/{name}")
}

async fn start_sim() -> RadiusSim {
    radwasm_sim_radius::start(SimConfig {
        deploy_duration: Duration::from_millis(150),
        delete_duration: Duration::from_millis(80),
        retry_after_secs: 0,
        ..SimConfig::default()
    })
    .await
    .expect("simulator starts on 127.0.0.1:0")
}

/// Short delays so retry paths run quickly; the shapes are the defaults'.
fn quick_retries() -> RetryPolicy {
    RetryPolicy {
        attempts: 4,
        base_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(100),
        max_retry_after: Duration::from_secs(2),
        timeout: Duration::from_secs(5),
    }
}

fn client_for(sim: &RadiusSim) -> RadiusClient {
    let endpoint = Endpoint::direct(&sim.base_url()).expect("simulator URL");
    RadiusClient::new(endpoint, quick_retries()).expect("client")
}

fn deployment<'a>(name: &'a str, template: &'a str, parameters: &'a str) -> DeploymentRequest<'a> {
    DeploymentRequest {
        scope: GROUP,
        name,
        template,
        parameters,
        provider_config: PROVIDER_CONFIG,
        subject: "spec-hash-1",
    }
}

/// Poll until the operation is no longer in progress (bounded).
async fn poll_to_end(client: &RadiusClient, token: &ResumeToken) -> PollOutcome {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let outcome = client.poll(token).await.expect("poll");
        if !matches!(outcome, PollOutcome::InProgress { .. }) {
            return outcome;
        }
        assert!(Instant::now() < deadline, "operation did not finish");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Deploy the three-resource app as deployment `name` and wait for the end.
async fn deploy_app(client: &RadiusClient, name: &str) {
    let template = fixture_text("deploymenttemplate-outputresources-1.json");
    let token = client
        .start_deployment(&deployment(name, &template, "{}"))
        .await
        .expect("PUT accepted");
    poll_to_end(client, &token).await;
}

#[tokio::test]
async fn a_group_seen_lately_is_not_asked_for_again_and_one_gone_since_is_made_again() {
    let sim = start_sim().await;
    let client = client_for(&sim);
    assert!(client.ensure_resource_group(GROUP).await.expect("group"));
    let asked = sim.stats().requests;
    assert!(!client.ensure_resource_group(GROUP).await.expect("group"));
    assert!(
        !client
            .clone()
            .ensure_resource_group(GROUP)
            .await
            .expect("group"),
        "clones share what they know of groups"
    );
    assert_eq!(
        sim.stats().requests,
        asked,
        "a group created lately is taken to exist without a request"
    );

    // The (empty) group is deleted behind the client's back.
    let url = format!("{}{GROUP}?api-version=2023-10-01-preview", sim.base_url());
    let deleted = reqwest::Client::new()
        .delete(&url)
        .send()
        .await
        .expect("DELETE the group");
    assert!(deleted.status().is_success(), "{}", deleted.status());
    assert_eq!(sim.stats().resource_groups, 0);

    // Still taken to exist; the deployment's PUT finds it missing, the group
    // is made again, and the PUT goes through.
    assert!(!client.ensure_resource_group(GROUP).await.expect("group"));
    let template = fixture_text("deploymenttemplate-outputresources-1.json");
    let token = client
        .start_deployment(&deployment("after-the-group-went", &template, "{}"))
        .await
        .expect("the PUT goes through once the group is made again");
    assert_eq!(sim.stats().resource_groups, 1);
    assert_eq!(
        sim.stats().deployment_puts,
        2,
        "the PUT refused, then the one accepted"
    );
    assert!(matches!(
        poll_to_end(&client, &token).await,
        PollOutcome::Succeeded { .. }
    ));

    // A 404 to a PUT whose group was not taken on trust is not retried.
    let other = client_for(&sim);
    let missing = "/planes/radius/local/resourceGroups/never-made";
    let refused = other
        .start_deployment(&DeploymentRequest {
            scope: missing,
            ..deployment("no-group", &template, "{}")
        })
        .await
        .expect_err("no such group");
    assert!(
        matches!(&refused, RadiusError::Arm { status: 404, .. }),
        "{refused:?}"
    );
    assert_eq!(sim.stats().deployment_puts, 3);
}

#[tokio::test]
async fn a_deployment_runs_to_success_and_lists_its_output_resources() {
    let sim = start_sim().await;
    let client = client_for(&sim);

    assert!(
        client
            .ensure_resource_group(GROUP)
            .await
            .expect("create group")
    );
    assert!(
        !client
            .ensure_resource_group(GROUP)
            .await
            .expect("group exists"),
        "a second call finds the group and creates nothing"
    );

    let template = fixture_text("deploymenttemplate-outputresources-1.json");
    let token = client
        .start_deployment(&deployment("app-1", &template, "{}"))
        .await
        .expect("PUT accepted");
    assert_eq!(token.subject, "spec-hash-1");
    assert!(
        token.async_operation.is_some() || token.location.is_some(),
        "an accepted deployment names an operation to poll: {token:?}"
    );
    assert!(
        matches!(
            client.poll(&token).await.expect("first poll"),
            PollOutcome::InProgress { .. }
        ),
        "the operation takes 150 ms"
    );

    let outcome = poll_to_end(&client, &token).await;
    assert_eq!(
        outcome,
        PollOutcome::Succeeded {
            output_resources: vec![
                id("environments", "output-resources-environment"),
                id("applications", "output-resources-application"),
                id("containers", "output-resources-container"),
            ]
        }
    );
    let container = client
        .get_resource(&id("containers", "output-resources-container"))
        .await
        .expect("GET")
        .expect("the container exists");
    assert_eq!(container["properties"]["container"]["image"], "nginx");
    assert_eq!(sim.stats().deployment_puts, 1);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_resume_token_survives_encoding_and_a_new_client() {
    let sim = start_sim().await;
    let first = client_for(&sim);
    first.ensure_resource_group(GROUP).await.expect("group");
    let template = fixture_text("cli-deploymenttemplate.json");
    let parameters = fixture_text("cli-deploymenttemplate-parameters.json");
    let token = first
        .start_deployment(&deployment("cli", &template, &parameters))
        .await
        .expect("PUT accepted");

    // What a controller keeps in status.operation, read back by a restarted one.
    let stored = token.encode();
    assert!(stored.len() < 1024, "small enough for status: {stored}");
    let restored = ResumeToken::decode(&stored).expect("decodes");
    assert_eq!(restored, token);
    let restarted = client_for(&sim);
    assert_eq!(
        poll_to_end(&restarted, &restored).await,
        PollOutcome::Succeeded {
            output_resources: vec![id("environments", "parameters")]
        }
    );
    assert_eq!(sim.stats().deployment_puts, 1, "polling never redeploys");

    let error = ResumeToken::decode(r#"{"kind":"deployment"}"#).expect_err("no resource id");
    assert!(error.contains("status.operation"), "{error}");
    sim.shutdown().await;
}

#[tokio::test]
async fn the_aggregated_api_path_reaches_the_same_radius() {
    let sim = start_sim().await;
    let url = sim.base_url().parse().expect("simulator URL");
    let kube_config = kube::Config::new(url);
    let endpoint = Endpoint::aggregated(&kube_config).expect("aggregated endpoint");
    assert!(
        endpoint.base.ends_with("/apis/api.ucp.dev/v1alpha3"),
        "{}",
        endpoint.base
    );
    let client = RadiusClient::new(endpoint, quick_retries()).expect("client");
    client.ensure_resource_group(GROUP).await.expect("group");
    let template = fixture_text("deploymenttemplate-update-1.json");
    let token = client
        .start_deployment(&deployment("update", &template, "{}"))
        .await
        .expect("PUT accepted");
    // Operation URLs are kept relative to the base, so a direct client can
    // continue what the aggregated one started.
    for url in [&token.async_operation, &token.location]
        .into_iter()
        .flatten()
    {
        assert!(url.starts_with("/planes/"), "relative operation URL: {url}");
    }
    assert_eq!(
        poll_to_end(&client_for(&sim), &token).await,
        PollOutcome::Succeeded {
            output_resources: vec![id("environments", "deploymenttemplate-update-env")]
        }
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn a_failed_deployment_reports_the_arm_error() {
    let sim = start_sim().await;
    let client = client_for(&sim);
    client.ensure_resource_group(GROUP).await.expect("group");
    sim.faults()
        .fail_next_deployments(1, "ResourceDeploymentFailure", "container image not found");
    let template = fixture_text("deploymenttemplate-withresources.json");
    let token = client
        .start_deployment(&deployment("failing", &template, "{}"))
        .await
        .expect("PUT accepted");
    match poll_to_end(&client, &token).await {
        PollOutcome::Failed { code, message } => {
            assert_eq!(code, "ResourceDeploymentFailure");
            assert!(message.contains("container image not found"), "{message}");
        }
        other => panic!("expected Failed, got {other:?}"),
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn radius_rejecting_a_template_is_an_arm_error_naming_it() {
    let sim = start_sim().await;
    let client = client_for(&sim);
    client.ensure_resource_group(GROUP).await.expect("group");
    // Valid JSON, so the client sends it; Radius cannot evaluate it.
    let template = r#"{"resources":{"x":{"type":"Applications.Core/environments@2023-10-01-preview","name":"[nosuchfunction()]","properties":{}}}}"#;
    let error = client
        .start_deployment(&deployment("bad", template, "{}"))
        .await
        .expect_err("Radius refuses");
    match &error {
        RadiusError::Arm {
            status, message, ..
        } => {
            assert_eq!(*status, 400);
            assert!(message.contains("nosuchfunction"), "{message}");
        }
        other => panic!("expected an ARM error, got {other:?}"),
    }
    assert!(!error.is_transient(), "fixing the template is the way out");
    sim.shutdown().await;
}

#[tokio::test]
async fn deletes_accept_every_first_answer_and_404_means_gone() {
    let sim = start_sim().await;
    let client = client_for(&sim);
    client.ensure_resource_group(GROUP).await.expect("group");
    deploy_app(&client, "app-1").await;

    let container = id("containers", "output-resources-container");
    match client.start_delete(&container).await.expect("DELETE") {
        DeleteStart::Started(token) => {
            assert_eq!(
                poll_to_end(&client, &token).await,
                PollOutcome::Succeeded {
                    output_resources: Vec::new()
                }
            );
        }
        DeleteStart::Done { already_gone } => assert!(!already_gone),
    }
    assert_eq!(client.get_resource(&container).await.expect("GET"), None);
    assert_eq!(
        client.start_delete(&container).await.expect("DELETE again"),
        DeleteStart::Done { already_gone: true }
    );

    // Deletes that finish at once (200) are done without a token.
    sim.faults().set_delete_duration(Duration::ZERO);
    assert_eq!(
        client
            .start_delete(&id("applications", "output-resources-application"))
            .await
            .expect("DELETE"),
        DeleteStart::Done {
            already_gone: false
        }
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn throttling_is_retried_after_the_advertised_delay() {
    let sim = start_sim().await;
    let client = client_for(&sim);
    sim.faults().throttle_next(2, 1);
    let started = Instant::now();
    assert!(client.ensure_resource_group(GROUP).await.expect("retried"));
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "two 429s with Retry-After: 1 are each waited out"
    );
    assert_eq!(sim.faults().counts().throttled, 2);

    // A Retry-After longer than the client will wait goes back to the caller
    // (a new client: this one knows the group now and would not ask).
    sim.faults().throttle_next(1, 60);
    match client_for(&sim).ensure_resource_group(GROUP).await {
        Err(RadiusError::Throttled {
            status,
            retry_after,
            ..
        }) => {
            assert_eq!(status, 429);
            assert_eq!(retry_after, Some(Duration::from_secs(60)));
        }
        other => panic!("expected Throttled, got {other:?}"),
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn server_errors_are_retried_and_reported_when_they_persist() {
    let sim = start_sim().await;
    let client = client_for(&sim);
    sim.faults().set_error_rate(1.0);
    let error = client
        .ensure_resource_group(GROUP)
        .await
        .expect_err("every answer is 5xx");
    assert!(error.is_transient(), "{error}");
    assert_eq!(
        sim.stats().requests,
        u64::from(quick_retries().attempts),
        "one request per attempt"
    );
    sim.faults().set_error_rate(0.0);
    assert!(client.ensure_resource_group(GROUP).await.expect("recovers"));
    sim.shutdown().await;
}

#[tokio::test]
async fn dropped_connections_are_retried() {
    let sim = start_sim().await;
    let client = client_for(&sim);
    sim.faults().drop_next_connections(2);
    assert!(
        client
            .ensure_resource_group(GROUP)
            .await
            .expect("third try answers")
    );
    assert_eq!(sim.faults().counts().dropped_connections, 2);

    // A new client: this one knows the group now and would not ask.
    sim.faults().drop_next_connections(100);
    match client_for(&sim).ensure_resource_group(GROUP).await {
        Err(RadiusError::Unreachable { attempts, .. }) => {
            assert_eq!(attempts, quick_retries().attempts)
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    sim.faults().clear();
    sim.shutdown().await;
}

#[tokio::test]
async fn a_deployment_whose_operation_radius_forgot_is_followed_through_its_record() {
    let sim = start_sim().await;
    let client = client_for(&sim);
    client.ensure_resource_group(GROUP).await.expect("group");
    sim.faults().vanish_next_operations(1);
    let template = fixture_text("deploymenttemplate-outputresources-1.json");
    let token = client
        .start_deployment(&deployment("forgotten", &template, "{}"))
        .await
        .expect("PUT accepted");
    // The operation URL answers 404; the deployment itself still runs and
    // finishes with its outputs, so it is never sent again.
    match poll_to_end(&client, &token).await {
        PollOutcome::Succeeded { output_resources } => {
            assert_eq!(output_resources.len(), 3, "{output_resources:?}")
        }
        other => panic!("expected the deployment's own result, got {other:?}"),
    }
    assert_eq!(sim.stats().deployment_puts, 1);

    // A deployment Radius has no record of at all is not found.
    let mut unknown = token.clone();
    unknown.resource_id = unknown.resource_id.replace("forgotten", "never-sent");
    sim.faults().vanish_next_operations(1);
    let other = client
        .start_deployment(&deployment("other", &template, "{}"))
        .await
        .expect("PUT accepted");
    unknown.async_operation = other.async_operation.clone();
    unknown.location = other.location.clone();
    assert_eq!(
        client.poll(&unknown).await.expect("poll"),
        PollOutcome::NotFound
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn a_deletion_radius_forgot_is_followed_through_the_resource_until_it_is_gone() {
    let sim = start_sim().await;
    let client = client_for(&sim);
    client.ensure_resource_group(GROUP).await.expect("group");
    deploy_app(&client, "app").await;
    let container = id("containers", "output-resources-container");
    sim.faults().set_delete_duration(Duration::from_millis(500));
    sim.faults().vanish_next_operations(1);
    let DeleteStart::Started(token) = client.start_delete(&container).await.expect("DELETE") else {
        panic!("a 202 with an operation was expected");
    };
    // The operation URL answers 404; the resource says it is being deleted.
    assert_eq!(
        client.poll(&token).await.expect("poll"),
        PollOutcome::InProgress { retry_after: None }
    );
    assert_eq!(
        poll_to_end(&client, &token).await,
        PollOutcome::Succeeded {
            output_resources: Vec::new()
        }
    );
    assert_eq!(client.get_resource(&container).await.expect("GET"), None);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_deletion_whose_resource_is_back_and_not_being_deleted_is_not_found() {
    let sim = start_sim().await;
    let client = client_for(&sim);
    client.ensure_resource_group(GROUP).await.expect("group");
    let container = id("containers", "output-resources-container");

    // A failed DELETE leaves the resource in place, no longer deleting:
    // Radius forgot the operation, and the resource says nothing runs.
    deploy_app(&client, "app").await;
    sim.faults().fail_next_deletes(1);
    sim.faults().vanish_next_operations(1);
    let DeleteStart::Started(token) = client.start_delete(&container).await.expect("DELETE") else {
        panic!("a 202 with an operation was expected");
    };
    assert_eq!(poll_to_end(&client, &token).await, PollOutcome::NotFound);
    assert!(
        client
            .get_resource(&container)
            .await
            .expect("GET")
            .is_some()
    );

    // A DELETE that found nothing (the controller then follows the id with
    // no operation URL), and a deployment still running puts the resource
    // back afterwards: no deletion runs for it, so it is not in progress.
    sim.faults().set_delete_duration(Duration::ZERO);
    let done = client.start_delete(&container).await.expect("DELETE");
    assert_eq!(
        done,
        DeleteStart::Done {
            already_gone: false
        }
    );
    assert_eq!(
        client.start_delete(&container).await.expect("DELETE again"),
        DeleteStart::Done { already_gone: true }
    );
    let following = ResumeToken {
        kind: radwasm::radius::OperationKind::Deletion,
        resource_id: container.clone(),
        async_operation: None,
        location: None,
        subject: String::new(),
        rejected: None,
    };
    assert_eq!(
        client.poll(&following).await.expect("poll"),
        PollOutcome::Succeeded {
            output_resources: Vec::new()
        }
    );
    deploy_app(&client, "app-again").await;
    assert_eq!(
        client.poll(&following).await.expect("poll"),
        PollOutcome::NotFound
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_is_sent() {
    let sim = start_sim().await;
    let client = client_for(&sim);
    let template = fixture_text("deploymenttemplate-update-1.json");
    let cases: Vec<(DeploymentRequest<'_>, &str)> = vec![
        (
            DeploymentRequest {
                scope: "/planes/radius/local",
                ..deployment("a", &template, "{}")
            },
            "scope",
        ),
        (deployment("a", "{not json", "{}"), "template"),
        (deployment("a", "[1, 2]", "{}"), "template"),
        (deployment("a", &template, "[1]"), "parameters"),
        (deployment("a", &template, r#"{"tag": "v1"}"#), "parameters"),
        (
            DeploymentRequest {
                provider_config: "[]",
                ..deployment("a", &template, "{}")
            },
            "providerConfig",
        ),
        (
            deployment("bad name/with slash", &template, "{}"),
            "deployment name",
        ),
    ];
    for (request, field) in cases {
        match client.start_deployment(&request).await {
            Err(RadiusError::InvalidInput {
                field: named,
                problem,
            }) => {
                assert_eq!(named, field, "{problem}")
            }
            other => panic!("expected InvalidInput naming {field}, got {other:?}"),
        }
    }
    for bad_id in ["", "not-an-id", "/planes/radius/local/resourceGroups/g"] {
        match client.start_delete(bad_id).await {
            Err(RadiusError::InvalidInput { field, .. }) => assert_eq!(field, "resource id"),
            other => panic!("expected InvalidInput for {bad_id:?}, got {other:?}"),
        }
    }
    match client.ensure_resource_group("/subscriptions/x").await {
        Err(RadiusError::InvalidInput { field, .. }) => assert_eq!(field, "scope"),
        other => panic!("expected InvalidInput, got {other:?}"),
    }
    assert_eq!(sim.stats().requests, 0, "nothing reached Radius");
    assert!(Endpoint::direct("ftp://radius").is_err());
    assert!(Endpoint::direct("not a url").is_err());
    sim.shutdown().await;
}
