//! Scenarios for the template evaluator: given a template and parameters,
//! these resources, ids, bodies and errors come out.

use serde_json::{Value, json};

use super::*;

const SCOPE: &str = "/planes/radius/local/resourceGroups/rg";

fn id(rest: &str) -> String {
    format!("{SCOPE}/providers/{rest}")
}

fn ids(resources: &[EvaluatedResource]) -> Vec<String> {
    resources.iter().map(|r| r.id.clone()).collect()
}

fn radius(type_: &str, body: Value) -> Value {
    json!({"import": "Radius", "type": format!("{type_}@2023-10-01-preview"), "properties": body})
}

fn error_of(template: Value, parameters: Value) -> ArmError {
    evaluate_template(SCOPE, &template, &parameters).expect_err("evaluation should fail")
}

#[test]
fn symbolic_resources_deploy_in_dependency_order_with_references_resolved() {
    let template = json!({
        "languageVersion": "2.0",
        "resources": {
            "app": {
                "import": "Radius",
                "type": "Applications.Core/applications@2023-10-01-preview",
                "properties": {"name": "app", "properties": {"environment": "[reference('env').id]"}},
                "dependsOn": ["env"]
            },
            "env": radius("Applications.Core/environments", json!({"name": "env", "properties": {"compute": {"kind": "kubernetes", "namespace": "ns"}}})),
            "ctr": radius("Applications.Core/containers", json!({
                "name": "ctr",
                "properties": {
                    "application": "[reference('app').id]",
                    "namespace": "[reference('env').properties.compute.namespace]",
                    "kind": "[reference('env').properties['compute']['kind']]",
                }
            }))
        }
    });
    let resources = evaluate_template(SCOPE, &template, &json!({})).unwrap();
    assert_eq!(
        ids(&resources),
        vec![
            id("Applications.Core/environments/env"),
            id("Applications.Core/applications/app"),
            id("Applications.Core/containers/ctr"),
        ]
    );
    let ctr = &resources[2];
    assert_eq!(ctr.resource_type, "Applications.Core/containers");
    assert_eq!(ctr.api_version.as_deref(), Some("2023-10-01-preview"));
    assert_eq!(ctr.symbolic_name, "ctr");
    assert_eq!(
        ctr.properties(),
        json!({
            "application": id("Applications.Core/applications/app"),
            "namespace": "ns",
            "kind": "kubernetes",
        })
    );
    // The implicit dependency through reference() counts like dependsOn.
    assert_eq!(
        ctr.depends_on,
        vec![
            id("Applications.Core/environments/env"),
            id("Applications.Core/applications/app")
        ]
    );
}

#[test]
fn resource_arrays_use_names_resource_ids_and_nested_types() {
    let template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "parameters": {"prefix": {"type": "string", "defaultValue": "demo"}},
        "variables": {"dbName": "[concat(parameters('prefix'), '-db')]"},
        "resources": [
            {
                "type": "Applications.Datastores/sqlDatabases",
                "apiVersion": "2023-10-01-preview",
                "name": "[variables('dbName')]",
                "location": "global",
                "properties": {"server": "[reference(resourceId('Applications.Core/applications', 'shop'), '2023-10-01-preview', 'Full').id]"},
                "dependsOn": ["[resourceId('Applications.Core/applications', 'shop')]"]
            },
            {
                "type": "Applications.Core/applications",
                "apiVersion": "2023-10-01-preview",
                "name": "shop",
                "properties": {"environment": "e"}
            },
            {
                "type": "Applications.Core/gateways/routes",
                "apiVersion": "2023-10-01-preview",
                "name": "gw/r1",
                "properties": {"app": "[reference('shop').environment]"},
                "dependsOn": ["shop"]
            }
        ]
    });
    let resources = evaluate_template(SCOPE, &template, &json!({})).unwrap();
    assert_eq!(
        ids(&resources),
        vec![
            id("Applications.Core/applications/shop"),
            id("Applications.Datastores/sqlDatabases/demo-db"),
            id("Applications.Core/gateways/gw/routes/r1"),
        ]
    );
    assert_eq!(resources[1].symbolic_name, "demo-db");
    assert_eq!(
        resources[1].body,
        json!({"name": "demo-db", "location": "global", "properties": {"server": id("Applications.Core/applications/shop")}})
    );
    assert_eq!(resources[2].properties(), json!({"app": "e"}));
}

#[test]
fn existing_resources_are_referenced_but_not_output() {
    let template = json!({
        "languageVersion": "2.0",
        "resources": {
            "env": {
                "existing": true,
                "import": "Radius",
                "type": "Applications.Core/environments@2023-10-01-preview",
                "properties": {"name": "shared-env"}
            },
            "app": radius("Applications.Core/applications", json!({"name": "a", "properties": {"environment": "[reference('env').id]"}}))
        }
    });
    let request = EvaluationRequest {
        scope: SCOPE,
        template: &template,
        parameters: &json!({}),
        deployment_name: "d",
        existing: None,
    };
    let evaluation = evaluate(&request).unwrap();
    assert_eq!(
        evaluation.output_resource_ids(),
        vec![id("Applications.Core/applications/a")]
    );
    let env = evaluation
        .resources
        .iter()
        .find(|r| r.existing)
        .expect("existing resource listed");
    assert_eq!(env.id, id("Applications.Core/environments/shared-env"));
    assert_eq!(
        evaluation.resources[1].properties()["environment"],
        json!(id("Applications.Core/environments/shared-env"))
    );

    // With a lookup, reference() sees the stored body.
    let lookup = |wanted: &str| {
        (wanted == id("Applications.Core/environments/shared-env"))
            .then(|| json!({"id": "stored-id", "properties": {}}))
    };
    let request = EvaluationRequest {
        existing: Some(&lookup),
        ..request
    };
    let evaluation = evaluate(&request).unwrap();
    assert_eq!(
        evaluation.resources[1].properties()["environment"],
        json!("stored-id")
    );
}

#[test]
fn parameters_defaults_and_missing_values() {
    let template = json!({
        "parameters": {
            "name": {"type": "string"},
            "replicas": {"type": "int", "defaultValue": 2},
            "label": {"type": "string", "defaultValue": "[format('{0}-{1}', parameters('name'), parameters('replicas'))]"},
        },
        "resources": {
            "c": radius("Applications.Core/containers", json!({"name": "[parameters('label')]"}))
        }
    });
    let resources =
        evaluate_template(SCOPE, &template, &json!({"name": {"value": "web"}})).unwrap();
    assert_eq!(
        ids(&resources),
        vec![id("Applications.Core/containers/web-2")]
    );

    let missing = error_of(template.clone(), json!({}));
    assert_eq!(missing.code, "InvalidTemplate");
    assert!(missing.message.contains("'name'"), "{missing}");

    let wrong_type = error_of(template.clone(), json!({"name": {"value": 3}}));
    assert!(wrong_type.message.contains("'name'"), "{wrong_type}");

    let not_arm = error_of(template.clone(), json!({"name": "web"}));
    assert_eq!(not_arm.code, "InvalidRequestContent");
    assert!(not_arm.message.contains("'name'"), "{not_arm}");

    let undeclared = error_of(
        template.clone(),
        json!({"name": {"value": "w"}, "extra": {"value": 1}}),
    );
    assert!(undeclared.message.contains("'extra'"), "{undeclared}");

    let not_object = error_of(template, json!([1]));
    assert_eq!(not_object.code, "InvalidRequestContent");
}

#[test]
fn escapes_functions_and_indexing() {
    let template = json!({
        "variables": {
            "settings": {"ports": [80, 443], "Mode": "fast"},
            "literal": "[[not evaluated]",
        },
        "resources": {
            "c": radius("Applications.Core/containers", json!({
                "name": "[toLower(concat('Web', '-', string(variables('settings').ports[1])))]",
                "properties": {
                    "literal": "[variables('literal')]",
                    "direct": "[[also literal]",
                    "mode": "[variables('settings').mode]",
                    "group": "[resourceGroup().name]",
                    "deployment": "[deployment().name]",
                    "id": "[resourceId('Applications.Core/gateways/routes', 'g', 'r')]",
                    "picked": "[if(equals(length(variables('settings').ports), 2), 'two', parameters('missing'))]",
                }
            }))
        }
    });
    let resources = evaluate_template(SCOPE, &template, &json!({})).unwrap();
    assert_eq!(resources[0].name, "web-443");
    assert_eq!(
        resources[0].properties(),
        json!({
            "literal": "[not evaluated]",
            "direct": "[also literal]",
            "mode": "fast",
            "group": "rg",
            "deployment": "deployment",
            "id": id("Applications.Core/gateways/g/routes/r"),
            "picked": "two",
        })
    );
}

#[test]
fn unsupported_functions_and_bad_expressions_name_the_culprit() {
    let unsupported = error_of(
        json!({"resources": {"c": radius("Applications.Core/containers", json!({"name": "c", "properties": {"k": "[listKeys('x', '1').key1]"}}))}}),
        json!({}),
    );
    assert_eq!(unsupported.code, "InvalidTemplate");
    assert!(unsupported.message.contains("'listKeys'"), "{unsupported}");
    assert!(
        unsupported
            .message
            .contains("resources.c.properties.properties.k"),
        "{unsupported}"
    );

    let malformed = error_of(
        json!({"resources": {"c": radius("Applications.Core/containers", json!({"name": "[concat('a']"}))}}),
        json!({}),
    );
    assert!(malformed.message.contains("concat('a'"), "{malformed}");

    let unknown_property = error_of(
        json!({"resources": {
            "e": radius("Applications.Core/environments", json!({"name": "e"})),
            "c": radius("Applications.Core/containers", json!({"name": "c", "properties": {"x": "[reference('e').nope]"}}))
        }}),
        json!({}),
    );
    assert!(
        unknown_property.message.contains("'nope'"),
        "{unknown_property}"
    );

    let unknown_resource = error_of(
        json!({"resources": {"c": radius("Applications.Core/containers", json!({"name": "c", "properties": {"x": "[reference('ghost').id]"}}))}}),
        json!({}),
    );
    assert!(
        unknown_resource.message.contains("'ghost'"),
        "{unknown_resource}"
    );

    let not_object = error_of(json!("template"), json!({}));
    assert!(not_object.message.contains("JSON object"), "{not_object}");
}

#[test]
fn cycles_and_unknown_dependencies_are_rejected() {
    let cycle = error_of(
        json!({"resources": {
            "a": {"import": "Radius", "type": "A.B/x@1", "properties": {"name": "a"}, "dependsOn": ["b"]},
            "b": {"import": "Radius", "type": "A.B/x@1", "properties": {"name": "b"}, "dependsOn": ["a"]},
            "c": {"import": "Radius", "type": "A.B/x@1", "properties": {"name": "c"}},
        }}),
        json!({}),
    );
    assert!(cycle.message.contains("Circular dependency"), "{cycle}");
    assert!(cycle.message.contains("'a', 'b'"), "{cycle}");

    let reference_cycle = error_of(
        json!({"resources": {
            "a": {"import": "Radius", "type": "A.B/x@1", "properties": {"name": "a", "p": "[reference('b').id]"}},
            "b": {"import": "Radius", "type": "A.B/x@1", "properties": {"name": "b", "p": "[reference('a').id]"}},
        }}),
        json!({}),
    );
    assert!(
        reference_cycle.message.contains("Circular"),
        "{reference_cycle}"
    );

    let unknown = error_of(
        json!({"resources": {"a": {"import": "Radius", "type": "A.B/x@1", "properties": {"name": "a"}, "dependsOn": ["zzz"]}}}),
        json!({}),
    );
    assert!(unknown.message.contains("'zzz'"), "{unknown}");
}

#[test]
fn copies_conditions_and_user_functions() {
    let template = json!({
        "languageVersion": "2.0",
        "functions": [{"namespace": "__bicep", "members": {
            "label": {"parameters": [{"name": "n", "type": "string"}], "output": {"type": "string", "value": "[format('c-{0}', parameters('n'))]"}}
        }}],
        "parameters": {"withDb": {"type": "bool", "defaultValue": false}},
        "resources": {
            "env": radius("Applications.Core/environments", json!({"name": "env"})),
            "ctrs": {
                "copy": {"name": "ctrs", "count": 2},
                "import": "Radius",
                "type": "Applications.Core/containers@2023-10-01-preview",
                "properties": {
                    "name": "[__bicep.label(string(copyIndex()))]",
                    "properties": {"ports": {"copy": [{"name": "list", "count": 2, "input": "[add(copyIndex('list'), 8080)]"}]}}
                },
                "dependsOn": ["env"]
            },
            "db": {
                "condition": "[parameters('withDb')]",
                "import": "Radius",
                "type": "Applications.Datastores/redisCaches@2023-10-01-preview",
                "properties": {"name": "db"}
            },
            "last": radius("Applications.Core/applications", json!({"name": "[format('after-{0}', reference('ctrs[1]').name)]"}))
        }
    });
    let resources = evaluate_template(SCOPE, &template, &json!({})).unwrap();
    assert_eq!(
        ids(&resources),
        vec![
            id("Applications.Core/environments/env"),
            id("Applications.Core/containers/c-0"),
            id("Applications.Core/containers/c-1"),
            id("Applications.Core/applications/after-c-1"),
        ]
    );
    assert_eq!(resources[1].symbolic_name, "ctrs[0]");
    assert_eq!(
        resources[2].properties(),
        json!({"ports": {"list": [8080, 8081]}})
    );

    let with_db = evaluate_template(SCOPE, &template, &json!({"withDb": {"value": true}})).unwrap();
    assert!(with_db.iter().any(|r| r.name == "db"));
}

#[test]
fn outputs_are_evaluated() {
    let template = json!({
        "resources": {"env": radius("Applications.Core/environments", json!({"name": "e"}))},
        "outputs": {"envId": {"type": "string", "value": "[reference('env').id]"}}
    });
    let evaluation = evaluate(&EvaluationRequest {
        scope: SCOPE,
        template: &template,
        parameters: &Value::Null,
        deployment_name: "d",
        existing: None,
    })
    .unwrap();
    assert_eq!(
        evaluation.outputs["envId"],
        json!({"type": "string", "value": id("Applications.Core/environments/e")})
    );
}

#[test]
fn duplicate_ids_and_missing_names_are_rejected() {
    let duplicate = error_of(
        json!({"resources": {
            "a": radius("Applications.Core/containers", json!({"name": "same"})),
            "b": radius("Applications.Core/containers", json!({"name": "SAME"})),
        }}),
        json!({}),
    );
    assert!(duplicate.message.contains("multiple times"), "{duplicate}");
    let nameless = error_of(
        json!({"resources": {"a": radius("Applications.Core/containers", json!({"properties": {}}))}}),
        json!({}),
    );
    assert!(nameless.message.contains("properties.name"), "{nameless}");
}
