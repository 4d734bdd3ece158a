//! Bicep modules: the compiled templates in `tests/fixtures/modules`
//! (nested `Microsoft.Resources/deployments` with inline templates) evaluated
//! and deployed through the HTTP API, and the module shapes the simulator
//! refuses with a 400 naming what it does not support.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

mod common;

use common::*;
use radwasm_sim_radius::{Evaluation, EvaluationRequest, evaluate};
use serde_json::{Value, json};

const SCOPE: &str = "/planes/radius/local/resourceGroups/modules";

fn id(rest: &str) -> String {
    format!("{SCOPE}/providers/{rest}")
}

fn evaluate_fixture(name: &str, parameters: Value) -> Evaluation {
    evaluate_in(SCOPE, &module_fixture(name), &parameters)
        .unwrap_or_else(|e| panic!("{name} evaluates: {e}"))
}

fn evaluate_in(
    scope: &str,
    template: &Value,
    parameters: &Value,
) -> Result<Evaluation, radwasm_sim_radius::ArmError> {
    evaluate(&EvaluationRequest {
        scope,
        template,
        parameters,
        deployment_name: "main",
        existing: None,
    })
}

/// `(id, module path)` of every resource, `existing` ones included.
fn resources(evaluation: &Evaluation) -> Vec<(String, Vec<String>, bool)> {
    evaluation
        .resources
        .iter()
        .map(|r| (r.id.clone(), r.module_path.clone(), r.existing))
        .collect()
}

fn path(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

const COVERED: &[&str] = &[
    "module-app.json",
    "module-classic.json",
    "module-loop.json",
    "module-nested.json",
];

#[test]
fn every_module_fixture_has_a_case() {
    let mut found: Vec<String> = std::fs::read_dir(module_fixtures_dir())
        .expect("fixtures directory")
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".json"))
        .collect();
    found.sort();
    assert_eq!(found, COVERED, "add a test case for each new fixture");
}

#[test]
fn a_module_deploys_its_resources_where_it_stands_and_its_outputs_flow_out() {
    let evaluation = evaluate_fixture("module-app.json", json!({}));
    let container = id("Applications.Core/containers/backend");
    let app = id("Applications.Core/applications/modules-app");
    assert_eq!(
        resources(&evaluation),
        vec![
            (
                id("Applications.Core/environments/modules-env"),
                path(&[]),
                false
            ),
            (app.clone(), path(&[]), false),
            (container.clone(), path(&["backend"]), false),
            (
                id("Applications.Core/containers/frontend"),
                path(&[]),
                false
            ),
        ]
    );
    // Inner scope: the module's parameters were evaluated outside, its
    // template saw only them (and its own default for `port`).
    let backend = &evaluation.resources[2];
    assert_eq!(backend.symbolic_name, "container");
    assert_eq!(backend.api_version.as_deref(), Some("2023-10-01-preview"));
    assert_eq!(
        backend.properties(),
        json!({
            "application": app,
            "container": {
                "image": "ghcr.io/radius-project/samples/demo:latest",
                "ports": {"web": {"containerPort": 8080}}
            }
        })
    );
    // The module waits for the application (its dependsOn), and the frontend
    // for what the module deploys.
    assert_eq!(backend.depends_on, vec![app.clone()]);
    let frontend = &evaluation.resources[3];
    assert_eq!(frontend.depends_on, vec![app.clone(), container.clone()]);
    assert_eq!(
        frontend.properties()["connections"]["backend"]["source"],
        json!("http://backend:8080")
    );
    assert_eq!(
        Value::Object(evaluation.outputs.clone()),
        json!({"backendId": {"type": "string", "value": container}})
    );
    // The nested deployment itself.
    assert_eq!(evaluation.modules.len(), 1);
    let module = &evaluation.modules[0];
    assert_eq!(module.symbolic_name, "backend");
    assert_eq!(module.name, "backend");
    assert_eq!(module.id, id("Microsoft.Resources/deployments/backend"));
    assert_eq!(module.path, path(&["backend"]));
    assert_eq!(module.output_resources, vec![container.clone()]);
    assert_eq!(
        module.parameters,
        json!({
            "name": {"value": "backend"},
            "application": {"value": app},
            "image": {"value": "ghcr.io/radius-project/samples/demo:latest"}
        })
    );
    assert_eq!(
        Value::Object(module.outputs.clone()),
        json!({
            "containerId": {"type": "string", "value": container},
            "url": {"type": "string", "value": "http://backend:8080"}
        })
    );
    // outputResources: what Radius lists, never the deployment record.
    assert_eq!(
        evaluation.output_resource_ids(),
        vec![
            id("Applications.Core/environments/modules-env"),
            app,
            container,
            id("Applications.Core/containers/frontend"),
        ]
    );
}

#[test]
fn parameters_of_the_outer_template_flow_into_the_module() {
    let evaluation = evaluate_fixture(
        "module-app.json",
        json!({"image": {"value": "registry.example.com/shop:7"}}),
    );
    for resource in &evaluation.resources[2..] {
        assert_eq!(
            resource.properties()["container"]["image"],
            json!("registry.example.com/shop:7"),
            "{}",
            resource.id
        );
    }
}

#[test]
fn a_module_inside_a_module_sees_the_parents_resources_as_existing() {
    let evaluation = evaluate_fixture("module-nested.json", json!({}));
    let env = id("Applications.Core/environments/nested-env");
    let app = id("Applications.Core/applications/nested-app");
    let cache = id("Applications.Datastores/redisCaches/cache");
    let db = id("Applications.Datastores/sqlDatabases/nested-app-db");
    assert_eq!(
        resources(&evaluation),
        vec![
            (env.clone(), path(&[]), false),
            (app.clone(), path(&[]), false),
            // The `existing` application of `data` is the one deployed above.
            (app.clone(), path(&["data"]), true),
            (cache.clone(), path(&["data", "cache"]), false),
            (db.clone(), path(&["data"]), false),
        ]
    );
    // `reference()` of the existing application found what the outer
    // template deploys before the module, two levels down.
    let redis = &evaluation.resources[3];
    assert_eq!(
        redis.properties(),
        json!({
            "application": app,
            "environment": env,
            "resourceProvisioning": "manual",
            "host": "redis.example.com",
            "port": 6379
        })
    );
    assert_eq!(
        evaluation.resources[4].properties()["environment"],
        json!(env)
    );
    assert_eq!(
        Value::Object(evaluation.outputs.clone()),
        json!({
            "cacheHost": {"type": "string", "value": "redis.example.com"},
            "databaseId": {"type": "string", "value": db},
        })
    );
    let modules: Vec<(&str, Vec<String>, Vec<String>)> = evaluation
        .modules
        .iter()
        .map(|m| (m.id.as_str(), m.path.clone(), m.output_resources.clone()))
        .collect();
    let deployments = id("Microsoft.Resources/deployments/data");
    let inner = id("Microsoft.Resources/deployments/cache");
    assert_eq!(
        modules,
        vec![
            (
                deployments.as_str(),
                path(&["data"]),
                vec![cache.clone(), db.clone()]
            ),
            (
                inner.as_str(),
                path(&["data", "cache"]),
                vec![cache.clone()]
            ),
        ]
    );
    assert_eq!(evaluation.output_resource_ids(), vec![env, app, cache, db]);
}

#[test]
fn a_loop_over_a_module_makes_one_deployment_per_item() {
    let evaluation = evaluate_fixture("module-loop.json", json!({}));
    let app = id("Applications.Core/applications/loop-app");
    let resize = id("Applications.Core/containers/resize");
    let thumbnail = id("Applications.Core/containers/thumbnail");
    assert_eq!(
        resources(&evaluation),
        vec![
            (
                id("Applications.Core/environments/loop-env"),
                path(&[]),
                false
            ),
            (app.clone(), path(&[]), false),
            (resize.clone(), path(&["worker-resize"]), false),
            (thumbnail.clone(), path(&["worker-thumbnail"]), false),
        ]
    );
    // copyIndex() in the parameters counted in the outer template.
    assert_eq!(
        evaluation.resources[3].properties(),
        json!({
            "application": app,
            "container": {"image": "ghcr.io/example/thumbnail:1.0"},
            "extensions": [{"kind": "manualScaling", "replicas": 2}]
        })
    );
    let names: Vec<(&str, &str)> = evaluation
        .modules
        .iter()
        .map(|m| (m.symbolic_name.as_str(), m.name.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![
            ("worker[0]", "worker-resize"),
            ("worker[1]", "worker-thumbnail")
        ]
    );
    // The output loop reads each instance's outputs.
    assert_eq!(
        evaluation.outputs["workerIds"],
        json!({"type": "array", "value": [resize, thumbnail]})
    );
}

#[test]
fn the_module_loop_follows_its_count() {
    let three = evaluate_fixture(
        "module-loop.json",
        json!({"workers": {"value": ["a", "b", "c"]}}),
    );
    assert_eq!(three.modules.len(), 3);
    assert_eq!(
        three.outputs["workerIds"]["value"],
        json!([
            id("Applications.Core/containers/a"),
            id("Applications.Core/containers/b"),
            id("Applications.Core/containers/c")
        ])
    );
    assert_eq!(
        three.resources[4].properties()["extensions"][0]["replicas"],
        json!(3)
    );
    let none = evaluate_fixture("module-loop.json", json!({"workers": {"value": []}}));
    assert!(none.modules.is_empty());
    assert_eq!(none.resources.len(), 2);
    assert_eq!(none.outputs["workerIds"]["value"], json!([]));
}

#[test]
fn a_classic_template_references_its_module_by_resource_id() {
    let evaluation = evaluate_fixture("module-classic.json", json!({}));
    let api = id("Applications.Core/containers/api");
    let app = id("Applications.Core/applications/classic-app");
    assert_eq!(
        resources(&evaluation),
        vec![
            (
                id("Applications.Core/environments/classic-env"),
                path(&[]),
                false
            ),
            (app.clone(), path(&[]), false),
            (api.clone(), path(&["api-deployment"]), false),
        ]
    );
    assert_eq!(
        evaluation.resources[2].body,
        json!({
            "name": "api",
            "location": "global",
            "properties": {"application": app, "container": {"image": "ghcr.io/example/api:2.0"}}
        })
    );
    assert_eq!(evaluation.resources[2].symbolic_name, "api");
    // deployment() inside a module is the nested deployment.
    assert_eq!(
        Value::Object(evaluation.outputs.clone()),
        json!({
            "apiId": {"type": "string", "value": api},
            "deployedBy": {"type": "string", "value": "api-deployment"}
        })
    );
    assert_eq!(evaluation.modules[0].symbolic_name, "api-deployment");
}

// ----- what a module may not do --------------------------------------------

/// A symbolic-name template with one module `m` whose declaration is
/// `module` merged over a minimal valid one.
fn template_with_module(module: Value) -> Value {
    let mut declaration = json!({
        "type": "Microsoft.Resources/deployments",
        "apiVersion": "2022-09-01",
        "name": "m",
        "properties": {
            "expressionEvaluationOptions": {"scope": "inner"},
            "mode": "Incremental",
            "parameters": {},
            "template": {
                "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                "languageVersion": "2.1-experimental",
                "contentVersion": "1.0.0.0",
                "imports": {"Radius": {"provider": "Radius", "version": "latest"}},
                "resources": {}
            }
        }
    });
    merge(&mut declaration, module);
    json!({
        "languageVersion": "2.1-experimental",
        "contentVersion": "1.0.0.0",
        "parameters": {"outer": {"type": "string", "defaultValue": "x"}},
        "imports": {"Radius": {"provider": "Radius", "version": "latest"}},
        "resources": {"m": declaration}
    })
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(into), Value::Object(from)) => {
            for (key, value) in from {
                merge(into.entry(key).or_insert(Value::Null), value);
            }
        }
        (into, from) => *into = from,
    }
}

fn error_message(template: &Value) -> String {
    let error = evaluate_in(SCOPE, template, &json!({})).expect_err("evaluation should fail");
    assert_eq!(error.code, "InvalidTemplate", "{error}");
    error.message
}

#[test]
fn the_minimal_module_is_valid() {
    let evaluation = evaluate_in(SCOPE, &template_with_module(json!({})), &json!({})).unwrap();
    assert!(evaluation.resources.is_empty());
    assert_eq!(evaluation.modules.len(), 1);
}

#[test]
fn a_module_aimed_at_another_scope_is_refused_naming_the_field() {
    for (field, value) in [
        ("resourceGroup", json!("other")),
        (
            "subscriptionId",
            json!("00000000-0000-0000-0000-000000000000"),
        ),
        (
            "scope",
            json!("[format('/planes/radius/local/resourceGroups/{0}', 'x')]"),
        ),
    ] {
        let message = error_message(&template_with_module(json!({ field: value })));
        assert!(
            message.contains(&format!("sets '{field}'"))
                && message.contains("module 'resources.m'"),
            "{field}: {message}"
        );
    }
}

#[test]
fn module_shapes_bicep_does_not_emit_are_refused_naming_them() {
    let cases = [
        (
            json!({"properties": {"expressionEvaluationOptions": {"scope": "outer"}}}),
            "'outer' scope",
        ),
        (
            json!({"properties": {"expressionEvaluationOptions": null}}),
            "'outer' scope",
        ),
        (
            json!({"properties": {"mode": "Complete"}}),
            "mode 'Complete'",
        ),
        (
            json!({"properties": {"templateLink": {"uri": "https://example.com/t.json"}}}),
            "'properties.templateLink'",
        ),
        (
            json!({"properties": {"parametersLink": {"uri": "https://example.com/p.json"}}}),
            "'properties.parametersLink'",
        ),
        (
            json!({"properties": {"template": null}}),
            "properties.template",
        ),
    ];
    for (change, expected) in cases {
        let message = error_message(&template_with_module(change.clone()));
        assert!(message.contains(expected), "{change}: {message}");
    }
}

#[test]
fn the_inner_scope_does_not_see_the_outer_template() {
    // An outer parameter, an outer variable and an outer resource are all
    // out of reach inside the module.
    let inner = |expression: &str| {
        template_with_module(json!({"properties": {"template": {"outputs": {
            "o": {"type": "string", "value": expression}
        }}}}))
    };
    let message = error_message(&inner("[parameters('outer')]"));
    assert!(
        message.starts_with("In module 'm': ")
            && message.contains("parameter 'outer' is not found"),
        "{message}"
    );
    let mut with_variable = inner("[variables('v')]");
    with_variable["variables"] = json!({"v": "outer"});
    let message = error_message(&with_variable);
    assert!(message.contains("variable 'v' is not found"), "{message}");
    let mut with_resource = inner("[reference('env').id]");
    with_resource["resources"]["env"] = json!({
        "import": "Radius",
        "type": "Applications.Core/environments@2023-10-01-preview",
        "properties": {"name": "e"}
    });
    let message = error_message(&with_resource);
    assert!(message.contains("names the resource 'env'"), "{message}");
}

#[test]
fn module_parameters_are_checked_against_the_inner_declarations() {
    let undeclared =
        template_with_module(json!({"properties": {"parameters": {"stray": {"value": 1}}}}));
    let message = error_message(&undeclared);
    assert!(
        message.starts_with("In module 'm': ") && message.contains("'stray'"),
        "{message}"
    );

    let missing = template_with_module(json!({"properties": {"template": {"parameters": {
        "needed": {"type": "string"}
    }}}}));
    let error = evaluate_in(SCOPE, &missing, &json!({})).unwrap_err();
    assert!(error.message.contains("'needed'"), "{error}");
}

#[test]
fn a_cycle_through_a_module_is_reported() {
    // The module's parameter needs `a`, and `a` needs the module's output.
    let mut template = template_with_module(json!({
        "properties": {
            "parameters": {"p": {"value": "[reference('a').id]"}},
            "template": {
                "parameters": {"p": {"type": "string"}},
                "outputs": {"o": {"type": "string", "value": "[parameters('p')]"}}
            }
        }
    }));
    template["resources"]["a"] = json!({
        "import": "Radius",
        "type": "Applications.Core/applications@2023-10-01-preview",
        "properties": {"name": "a", "properties": {"environment": "[reference('m').outputs.o.value]"}}
    });
    let message = error_message(&template);
    assert!(message.contains("Circular"), "{message}");
}

#[test]
fn a_module_switched_off_by_its_condition_deploys_nothing() {
    let template = template_with_module(json!({
        "condition": false,
        "properties": {"template": {"resources": {"x": {
            "import": "Radius",
            "type": "Applications.Core/applications@2023-10-01-preview",
            "properties": {"name": "x"}
        }}}}
    }));
    let evaluation = evaluate_in(SCOPE, &template, &json!({})).unwrap();
    assert!(evaluation.resources.is_empty());
    assert!(evaluation.modules.is_empty());
}

// ----- through the HTTP API ------------------------------------------------

async fn deploy(
    http: &reqwest::Client,
    base: &str,
    rg: &str,
    name: &str,
    template: &Value,
) -> Value {
    let response = put_deployment(http, base, rg, name, template, &json!({})).await;
    assert_eq!(response.status(), 201);
    let done = poll_status(http, &header(&response, "azure-asyncoperation")).await;
    assert_eq!(done["status"], "Succeeded", "{done}");
    let (status, deployment) = get_json(http, &deployment_url(base, rg, name)).await;
    assert_eq!(status, 200);
    deployment
}

#[tokio::test]
async fn a_deployment_with_nested_modules_lists_what_the_modules_deployed() {
    let sim = start_sim().await;
    let base = sim.base_url();
    let http = client();
    put_group(&http, &base, "modules").await;

    let deployment = deploy(
        &http,
        &base,
        "modules",
        "nested",
        &module_fixture("module-nested.json"),
    )
    .await;
    let env = id("Applications.Core/environments/nested-env");
    let app = id("Applications.Core/applications/nested-app");
    let cache = id("Applications.Datastores/redisCaches/cache");
    let db = id("Applications.Datastores/sqlDatabases/nested-app-db");
    // Each resource once, in order; no Microsoft.Resources/deployments.
    assert_eq!(
        deployment["properties"]["outputResources"],
        json!([{"id": env}, {"id": app}, {"id": cache}, {"id": db}])
    );
    assert_eq!(
        deployment["properties"]["outputs"],
        json!({
            "cacheHost": {"type": "string", "value": "redis.example.com"},
            "databaseId": {"type": "string", "value": db}
        })
    );
    for resource in [&env, &app, &cache, &db] {
        let (status, stored) = get_json(&http, &resource_url(&base, resource)).await;
        assert_eq!(status, 200, "{resource}");
        assert_eq!(stored["properties"]["provisioningState"], "Succeeded");
    }
    let (_, stored) = get_json(&http, &resource_url(&base, &cache)).await;
    assert_eq!(stored["properties"]["environment"], env);
    assert_eq!(sim.resource_ids().len(), 4);
    // The nested deployments are not recorded (a documented gap).
    let (status, body) = get_json(&http, &deployment_url(&base, "modules", "data")).await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "DeploymentNotFound");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_module_loop_deploys_through_http_and_a_smaller_loop_is_incremental() {
    let sim = start_sim().await;
    let base = sim.base_url();
    let http = client();
    put_group(&http, &base, "modules").await;
    let template = module_fixture("module-loop.json");
    let deployment = deploy(&http, &base, "modules", "loop", &template).await;
    let ids: Vec<&str> = deployment["properties"]["outputResources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        vec![
            id("Applications.Core/environments/loop-env"),
            id("Applications.Core/applications/loop-app"),
            id("Applications.Core/containers/resize"),
            id("Applications.Core/containers/thumbnail"),
        ]
    );
    let mut smaller = template.clone();
    smaller["parameters"]["workers"]["defaultValue"] = json!(["resize"]);
    let deployment = deploy(&http, &base, "modules", "loop", &smaller).await;
    assert_eq!(
        deployment["properties"]["outputResources"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        deployment["properties"]["outputs"]["workerIds"]["value"],
        json!([id("Applications.Core/containers/resize")])
    );
    // Incremental: the thumbnail worker stays.
    assert_eq!(sim.resource_ids().len(), 4);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_module_aimed_at_another_resource_group_is_a_400_naming_it() {
    let sim = start_sim().await;
    let base = sim.base_url();
    let http = client();
    put_group(&http, &base, "modules").await;
    let template = template_with_module(json!({"resourceGroup": "elsewhere"}));
    let response = put_deployment(&http, &base, "modules", "scoped", &template, &json!({})).await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "InvalidTemplate");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("'resourceGroup'"), "{message}");
    assert!(sim.resource_ids().is_empty());
    sim.shutdown().await;
}
