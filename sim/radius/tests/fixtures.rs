//! Every Bicep-compiled fixture in `tests/fixtures/arm-templates`, evaluated
//! and checked against resource ids worked out by hand from the fixture.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

mod common;

use common::{fixture, fixtures_dir};
use radwasm_sim_radius::{EvaluatedResource, evaluate_template};
use serde_json::{Value, json};

const SCOPE: &str = "/planes/radius/local/resourceGroups/fixtures";

fn ids(resources: &[EvaluatedResource]) -> Vec<&str> {
    resources
        .iter()
        .filter(|r| !r.existing)
        .map(|r| r.id.as_str())
        .collect()
}

fn evaluate(name: &str, parameters: Value) -> Vec<EvaluatedResource> {
    evaluate_template(SCOPE, &fixture(name), &parameters)
        .unwrap_or_else(|e| panic!("{name} evaluates: {e}"))
}

/// The fixtures checked below; a new fixture without a case fails the suite.
const COVERED: &[&str] = &[
    "cli-deploymenttemplate.json",
    "cli-deploymenttemplate-parameters.json",
    "deploymenttemplate-outputresources-1.json",
    "deploymenttemplate-outputresources-2.json",
    "deploymenttemplate-update-1.json",
    "deploymenttemplate-update-2.json",
    "deploymenttemplate-withresources.json",
    "env.json",
    "recipe.json",
];

#[test]
fn every_fixture_has_a_case() {
    let mut found: Vec<String> = std::fs::read_dir(fixtures_dir())
        .expect("fixtures directory")
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".json"))
        .collect();
    found.sort();
    let mut covered: Vec<String> = COVERED.iter().map(|s| s.to_string()).collect();
    covered.sort();
    assert_eq!(found, covered, "add a test case for each new fixture");
}

#[test]
fn cli_template_with_its_parameters_file() {
    let parameters = fixture("cli-deploymenttemplate-parameters.json");
    let resources = evaluate("cli-deploymenttemplate.json", parameters);
    assert_eq!(
        ids(&resources),
        vec![
            "/planes/radius/local/resourceGroups/fixtures/providers/Applications.Core/environments/parameters"
        ]
    );
    let env = &resources[0];
    assert_eq!(env.symbolic_name, "parameters");
    assert_eq!(env.resource_type, "Applications.Core/environments");
    assert_eq!(env.api_version.as_deref(), Some("2023-10-01-preview"));
    assert_eq!(
        env.properties(),
        json!({
            "compute": {"kind": "kubernetes", "resourceId": "self", "namespace": "default"},
            "recipes": {"Applications.Datastores/redisCaches": {"default": {
                "templateKind": "bicep",
                "templatePath": "ghcr.io/myregistry:v1.0.0"
            }}}
        })
    );
}

#[test]
fn cli_template_falls_back_to_default_parameters() {
    let resources = evaluate("cli-deploymenttemplate.json", json!({}));
    assert_eq!(
        resources[0].properties()["recipes"]["Applications.Datastores/redisCaches"]["default"]["templatePath"],
        json!("ghcr.io/myregistry:latest")
    );
    let resources = evaluate(
        "cli-deploymenttemplate.json",
        json!({"kubernetesNamespace": {"value": "team-a"}}),
    );
    assert_eq!(
        resources[0].properties()["compute"]["namespace"],
        json!("team-a")
    );
}

#[test]
fn output_resources_1_creates_environment_application_container_in_order() {
    let resources = evaluate("deploymenttemplate-outputresources-1.json", json!({}));
    assert_eq!(
        ids(&resources),
        vec![
            "/planes/radius/local/resourceGroups/fixtures/providers/Applications.Core/environments/output-resources-environment",
            "/planes/radius/local/resourceGroups/fixtures/providers/Applications.Core/applications/output-resources-application",
            "/planes/radius/local/resourceGroups/fixtures/providers/Applications.Core/containers/output-resources-container",
        ]
    );
    assert_eq!(
        resources[1].properties()["environment"],
        json!(
            "/planes/radius/local/resourceGroups/fixtures/providers/Applications.Core/environments/output-resources-environment"
        )
    );
    assert_eq!(
        resources[2].properties(),
        json!({
            "application": "/planes/radius/local/resourceGroups/fixtures/providers/Applications.Core/applications/output-resources-application",
            "container": {"image": "nginx"}
        })
    );
}

#[test]
fn output_resources_2_drops_the_container() {
    let resources = evaluate("deploymenttemplate-outputresources-2.json", json!({}));
    assert_eq!(
        ids(&resources),
        vec![
            "/planes/radius/local/resourceGroups/fixtures/providers/Applications.Core/environments/output-resources-environment",
            "/planes/radius/local/resourceGroups/fixtures/providers/Applications.Core/applications/output-resources-application",
        ]
    );
}

#[test]
fn update_fixtures_keep_the_id_and_change_the_namespace() {
    let first = evaluate("deploymenttemplate-update-1.json", json!({}));
    let second = evaluate("deploymenttemplate-update-2.json", json!({}));
    let id = "/planes/radius/local/resourceGroups/fixtures/providers/Applications.Core/environments/deploymenttemplate-update-env";
    assert_eq!(ids(&first), vec![id]);
    assert_eq!(ids(&second), vec![id]);
    assert_eq!(
        first[0].properties()["compute"]["namespace"],
        json!("default")
    );
    assert_eq!(
        second[0].properties()["compute"]["namespace"],
        json!("notdefault")
    );
    assert_eq!(first[0].body["location"], json!("global"));
}

#[test]
fn with_resources_fixture() {
    let resources = evaluate("deploymenttemplate-withresources.json", json!({}));
    assert_eq!(
        ids(&resources),
        vec![
            "/planes/radius/local/resourceGroups/fixtures/providers/Applications.Core/environments/deploymenttemplate-withresources-env"
        ]
    );
}

#[test]
fn env_fixture_needs_its_parameters() {
    let resources = evaluate(
        "env.json",
        json!({"name": {"value": "corerp"}, "namespace": {"value": "corerp-ns"}}),
    );
    assert_eq!(
        ids(&resources),
        vec![
            "/planes/radius/local/resourceGroups/fixtures/providers/Applications.Core/environments/corerp-env"
        ]
    );
    assert_eq!(
        resources[0].properties()["compute"]["namespace"],
        json!("corerp-ns")
    );

    let error = evaluate_template(
        SCOPE,
        &fixture("env.json"),
        &json!({"name": {"value": "x"}}),
    )
    .expect_err("namespace is required");
    assert_eq!(error.code, "InvalidTemplate");
    assert!(error.message.contains("'namespace'"), "{error}");
}

#[test]
fn recipe_fixture_orders_env_app_recipe_and_wires_ids() {
    let resources = evaluate(
        "recipe.json",
        json!({
            "name": {"value": "dt"},
            "namespace": {"value": "dt-app"},
            "registry": {"value": "ghcr.io/radius-project/dev"},
            "version": {"value": "0.42"},
        }),
    );
    let env = "/planes/radius/local/resourceGroups/fixtures/providers/Applications.Core/environments/dt-env";
    let app = "/planes/radius/local/resourceGroups/fixtures/providers/Applications.Core/applications/dt-app";
    let recipe = "/planes/radius/local/resourceGroups/fixtures/providers/Applications.Datastores/redisCaches/dt-recipe";
    assert_eq!(ids(&resources), vec![env, app, recipe]);
    assert_eq!(
        resources[0].properties()["recipes"]["Applications.Datastores/redisCaches"]["default"]["templatePath"],
        json!(
            "ghcr.io/radius-project/dev/test/testrecipes/test-bicep-recipes/redis-recipe-value-backed:0.42"
        )
    );
    assert_eq!(
        resources[0].properties()["compute"]["namespace"],
        json!("dt-env")
    );
    assert_eq!(
        resources[1].properties(),
        json!({"environment": env, "extensions": [{"kind": "kubernetesNamespace", "namespace": "dt-app"}]})
    );
    assert_eq!(
        resources[2].properties(),
        json!({"application": app, "environment": env})
    );
    assert_eq!(
        resources[2].depends_on,
        vec![env.to_string(), app.to_string()]
    );
}
