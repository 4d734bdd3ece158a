//! The Radius simulator's ARM expression language
//! (`radwasm_sim_radius::arm::expr`): any text as an expression and as a
//! template string; every expression that parses is then evaluated in a
//! template that gives it parameters, variables, a user function, resources
//! to reference and a copy loop.
//!
//! - Parsing gives an expression or an error, never a panic or a stack
//!   overflow (expressions nest at most `MAX_DEPTH` levels).
//! - Template strings classify as documented: `[[` is a literal `[`, text
//!   without the outer brackets is a literal, the rest is an expression.
//! - Evaluating gives a value or an error, never a panic, a stack overflow
//!   or unbounded memory.

#![no_main]

use libfuzzer_sys::fuzz_target;
use radwasm_sim_radius::arm::expr::{TemplateString, parse_expression, parse_template_string};
use radwasm_sim_radius::{EvaluationRequest, evaluate};
use serde_json::{Value, json};

const SCOPE: &str = "/planes/radius/local/resourceGroups/rg";

fn context(expression: &str, in_loop: bool) -> Value {
    let mut template = json!({
        "languageVersion": "2.0",
        "parameters": {
            "s": {"type": "string", "defaultValue": "text"},
            "n": {"type": "int", "defaultValue": 3},
            "o": {"type": "object", "defaultValue": {"a": [1, 2, {"b": "c"}], "k": "v"}},
            "a": {"type": "array", "defaultValue": ["x", "y", "z"]},
        },
        "variables": {"v": "value", "w": "[parameters('o')]", "list": [1, 2, 3]},
        "functions": [{"namespace": "ns", "members": {"f": {
            "parameters": [{"name": "x", "type": "string"}],
            "output": {"type": "string", "value": "[concat(parameters('x'), '!')]"}
        }}}],
        "resources": {
            "env": {
                "import": "Radius",
                "type": "Applications.Core/environments@2023-10-01-preview",
                "properties": {"name": "env", "properties": {"compute": {"kind": "kubernetes", "namespace": "ns"}}}
            },
            "app": {
                "import": "Radius",
                "type": "Applications.Core/applications@2023-10-01-preview",
                "properties": {"name": "app", "properties": {"environment": "[reference('env').id]"}}
            }
        },
        "outputs": {}
    });
    if in_loop {
        template["resources"]["ctr"] = json!({
            "import": "Radius",
            "type": "Applications.Core/containers@2023-10-01-preview",
            "copy": {"name": "loop", "count": 2},
            "properties": {"name": "[format('c{0}', copyIndex())]", "properties": {"x": expression}}
        });
    } else {
        template["outputs"]["o"] = json!({"type": "object", "value": expression});
    }
    template
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let parsed = parse_expression(&text);
    if let Err(error) = &parsed {
        assert!(!error.message.is_empty());
    }
    match parse_template_string(&text) {
        Ok(TemplateString::Literal(literal)) => match text.strip_prefix("[[") {
            Some(rest) => assert_eq!(literal, format!("[{rest}")),
            None => assert_eq!(literal, text),
        },
        Ok(TemplateString::Expression(_)) => {
            assert!(text.starts_with('[') && text.ends_with(']') && !text.starts_with("[["));
        }
        Err(error) => assert!(!error.message.is_empty()),
    }
    if parsed.is_ok() {
        let expression = format!("[{text}]");
        for in_loop in [false, true] {
            let template = context(&expression, in_loop);
            let _ = evaluate(&EvaluationRequest {
                scope: SCOPE,
                template: &template,
                parameters: &json!({}),
                deployment_name: "d",
                existing: None,
            });
        }
    }
});
