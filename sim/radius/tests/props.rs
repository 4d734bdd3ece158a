//! Property tests of the Radius simulator's ARM template reader and
//! expression evaluator (`radwasm_sim_radius::arm`): arbitrary expression
//! strings and template JSON never panic (nor overflow the stack, which
//! aborts the process), and known identities of the template functions hold.
//!
//! Strategies mix valid ARM (what Bicep emits) with adversarial input:
//! random tokens, unbalanced quotes and brackets, escapes, Unicode, extreme
//! integers, very deep nesting, long chains of variables and references.
//! `cargo test` runs a few hundred cases; set `PROPTEST_CASES` for a long run
//! (docs/reliability.md).
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use radwasm_sim_radius::arm::expr::{TemplateString, parse_expression, parse_template_string};
use radwasm_sim_radius::{ArmError, EvaluationRequest, evaluate};
use serde_json::{Map, Value, json};

fn config(cases: u32) -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = cases;
    }
    config.failure_persistence = Some(Box::new(FileFailurePersistence::Direct(
        "tests/regressions/props.txt",
    )));
    config
}

const SCOPE: &str = "/planes/radius/local/resourceGroups/rg";

/// Evaluate `template` with `parameters`, as a deployment does.
fn run(template: &Value, parameters: &Value) -> Result<radwasm_sim_radius::Evaluation, ArmError> {
    evaluate(&EvaluationRequest {
        scope: SCOPE,
        template,
        parameters,
        deployment_name: "d",
        existing: None,
    })
}

/// The value of one expression (`[...]`), evaluated as a template output.
fn eval(expression: &str) -> Result<Value, ArmError> {
    let template =
        json!({"resources": {}, "outputs": {"o": {"type": "object", "value": expression}}});
    run(&template, &json!({})).map(|evaluation| evaluation.outputs["o"]["value"].clone())
}

/// An ARM string literal for `text`.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

// ----- strategies: expressions -------------------------------------------------------

const FUNCTIONS: &[&str] = &[
    "format",
    "concat",
    "string",
    "toLower",
    "toUpper",
    "trim",
    "replace",
    "split",
    "join",
    "substring",
    "startsWith",
    "endsWith",
    "indexOf",
    "lastIndexOf",
    "padLeft",
    "uniqueString",
    "guid",
    "length",
    "empty",
    "contains",
    "first",
    "last",
    "take",
    "skip",
    "union",
    "intersection",
    "createArray",
    "array",
    "createObject",
    "coalesce",
    "range",
    "min",
    "max",
    "equals",
    "not",
    "and",
    "or",
    "bool",
    "true",
    "false",
    "null",
    "greater",
    "greaterOrEquals",
    "less",
    "lessOrEquals",
    "int",
    "add",
    "sub",
    "mul",
    "div",
    "mod",
    "json",
    "if",
    "parameters",
    "variables",
    "reference",
    "resourceInfo",
    "resourceId",
    "copyIndex",
    "resourceGroup",
    "deployment",
    "listKeys",
    "nope",
    "__bicep.f",
    "IF",
    "Concat",
];

fn int_literal() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (-3i64..20).prop_map(|n| n.to_string()),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        1 => prop::sample::select(vec![
            "9223372036854775807", "-9223372036854775808", "9223372036854775808", "-0", "-",
            "1000000", "10000", "10001", "800", "801", "2147483647", "1.5", "01",
        ])
        .prop_map(str::to_string),
    ]
}

fn string_literal() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z0-9/{}.,-]{0,8}".prop_map(|s| quote(&s)),
        1 => any::<String>().prop_map(|s| quote(&s)),
        1 => prop::sample::select(vec![
            "'{0}'", "'{0,-3}|{1,5}'", "'{{x}}'", "'{'", "'}'", "'{999}'",
             "'{-1}'", "'{0:N2}'", "'Applications.Core/containers'",
            "'A.B/t1/t2'", "'rg'", "'p0'", "'v0'", "'r0'", "'full'", "'''", "''''", "'[['",
        ])
        .prop_map(str::to_string),
    ]
}

/// Syntactically valid expressions (possibly failing to evaluate).
fn valid_expression() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![string_literal(), int_literal()];
    leaf.prop_recursive(5, 48, 5, |inner| {
        prop_oneof![
            4 => (prop::sample::select(FUNCTIONS), vec(inner.clone(), 0..5))
                .prop_map(|(name, args)| format!("{name}({})", args.join(", "))),
            1 => (inner.clone(), "[a-zA-Z_][a-zA-Z0-9_]{0,6}")
                .prop_map(|(target, name)| format!("{target}.{name}")),
            1 => (inner.clone(), inner).prop_map(|(target, index)| format!("{target}[{index}]")),
        ]
    })
}

/// Token soup: what a broken or hostile template might hold.
fn token_soup() -> impl Strategy<Value = String> {
    vec(
        prop_oneof![
            4 => prop::sample::select(vec![
                "(", ")", "[", "]", ",", ".", "'", "''", " ", "\t", "-", "0", "1.", "$", "_",
                "concat", "format", "parameters", "if", "x", "é", "\u{0}", "]]", "[[",
            ])
            .prop_map(str::to_string),
            1 => string_literal(),
            1 => int_literal(),
            1 => "\\PC{1,3}",
        ],
        0..24,
    )
    .prop_map(|tokens| tokens.concat())
}

/// Nesting deeper than any template needs, in the shapes the grammar nests.
fn deep_expression() -> impl Strategy<Value = String> {
    (
        1usize..40_000,
        prop::sample::select(vec!["call", "index", "property", "args"]),
    )
        .prop_map(|(depth, shape)| match shape {
            "call" => format!("{}'x'{}", "concat(".repeat(depth), ")".repeat(depth)),
            "index" => format!("createArray(1){}", "[0]".repeat(depth)),
            "property" => format!("createObject('a', 1){}", ".a".repeat(depth)),
            _ => format!("{}1{}", "createArray(".repeat(depth), ")".repeat(depth)),
        })
}

fn expression_text() -> BoxedStrategy<String> {
    prop_oneof![
        6 => valid_expression(),
        3 => token_soup(),
        1 => deep_expression(),
    ]
    .boxed()
}

/// A JSON string in a template: `[expr]`, an escaped `[[...]`, or text.
fn template_string() -> BoxedStrategy<String> {
    prop_oneof![
        6 => expression_text().prop_map(|e| format!("[{e}]")),
        1 => expression_text().prop_map(|e| format!("[[{e}]")),
        1 => expression_text(),
        1 => any::<String>(),
    ]
    .boxed()
}

// ----- strategies: templates -----------------------------------------------------------

/// Expressions that refer to the template's own names (p0.., v0.., r0..),
/// so that parameters, variables and resources reference each other.
fn linked_expression() -> BoxedStrategy<String> {
    let name = || (0u8..4).prop_map(|n| n.to_string());
    prop_oneof![
        3 => name().prop_map(|n| format!("[parameters('p{n}')]")),
        3 => name().prop_map(|n| format!("[variables('v{n}')]")),
        2 => name().prop_map(|n| format!("[reference('r{n}').name]")),
        1 => name().prop_map(|n| format!("[reference('r{n}', '2023-10-01-preview', 'full').id]")),
        1 => name().prop_map(|n| format!("[resourceInfo('r{n}').id]")),
        1 => name().prop_map(|n| format!("[concat('n', copyIndex(), parameters('p{n}'))]")),
        1 => Just("[copyIndex('loop', 9223372036854775807)]".to_string()),
        2 => template_string(),
    ]
    .boxed()
}

fn json_leaf() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (0u64..900).prop_map(Value::from),
        linked_expression().prop_map(Value::String),
    ]
    .boxed()
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            btree_map(
                prop_oneof![
                    3 => prop::sample::select(vec![
                        "name", "properties", "type", "value", "copy", "count", "input", "id",
                        "dependsOn", "condition", "existing", "import", "a",
                    ])
                    .prop_map(str::to_string),
                    1 => "\\PC{0,6}",
                ],
                inner,
                0..4,
            )
            .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn parameter_declaration() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec![
            "string",
            "int",
            "bool",
            "object",
            "array",
            "securestring",
            "x",
        ]),
        proptest::option::of(json_value()),
        any::<bool>(),
        proptest::option::of(vec(json_value(), 0..3)),
        proptest::option::of(any::<i64>()),
    )
        .prop_map(|(kind, default, nullable, allowed, limit)| {
            let mut declaration = Map::new();
            declaration.insert("type".into(), json!(kind));
            if let Some(default) = default {
                declaration.insert("defaultValue".into(), default);
            }
            if nullable {
                declaration.insert("nullable".into(), json!(true));
            }
            if let Some(allowed) = allowed {
                declaration.insert("allowedValues".into(), Value::Array(allowed));
            }
            if let Some(limit) = limit {
                declaration.insert("maxLength".into(), json!(limit));
                declaration.insert("minValue".into(), json!(limit));
            }
            Value::Object(declaration)
        })
}

fn resource_declaration() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec![
            "Applications.Core/containers@2023-10-01-preview",
            "Applications.Core/environments@2023-10-01-preview",
            "Applications.Core/applications",
            "A.B/t1/t2@v",
            "NoNamespace",
            "",
        ]),
        prop_oneof![3 => linked_expression(), 1 => "[a-z]{1,8}"],
        json_value(),
        proptest::option::of(vec(linked_expression(), 0..3)),
        proptest::option::of(linked_expression()),
        proptest::option::of((linked_expression(), proptest::option::of("[a-z]{1,5}"))),
        any::<bool>(),
    )
        .prop_map(
            |(kind, name, properties, depends, condition, copy, extensible)| {
                let mut declaration = Map::new();
                declaration.insert("type".into(), json!(kind));
                if extensible {
                    declaration.insert("import".into(), json!("Radius"));
                    declaration.insert(
                        "properties".into(),
                        json!({"name": name, "properties": properties}),
                    );
                } else {
                    declaration.insert("name".into(), json!(name));
                    declaration.insert("properties".into(), properties);
                }
                if let Some(depends) = depends {
                    declaration.insert("dependsOn".into(), json!(depends));
                }
                if let Some(condition) = condition {
                    declaration.insert("condition".into(), json!(condition));
                }
                if let Some((count, loop_name)) = copy {
                    let mut copy = json!({"count": count});
                    if let Some(loop_name) = loop_name {
                        copy["name"] = json!(loop_name);
                    }
                    declaration.insert("copy".into(), copy);
                }
                Value::Object(declaration)
            },
        )
}

fn named<S: Strategy>(prefix: &'static str, item: S) -> impl Strategy<Value = Map<String, Value>>
where
    S::Value: Into<Value>,
{
    vec(item, 0..4).prop_map(move |items| {
        items
            .into_iter()
            .enumerate()
            .map(|(n, item)| (format!("{prefix}{n}"), item.into()))
            .collect()
    })
}

/// A template in either shape Bicep emits, with cross-references.
fn template() -> impl Strategy<Value = Value> {
    (
        named("p", parameter_declaration()),
        named("v", json_value()),
        named("r", resource_declaration()),
        named("o", linked_expression().prop_map(|value| json!({"type": "string", "value": value}))),
        any::<bool>(),
        prop::sample::select(vec![Some("2.0"), Some("1.0"), None]),
    )
        .prop_map(|(parameters, variables, resources, outputs, as_array, version)| {
            let resources = if as_array {
                Value::Array(resources.into_values().collect())
            } else {
                Value::Object(resources)
            };
            let mut template = json!({
                "parameters": parameters,
                "variables": variables,
                "resources": resources,
                "outputs": outputs,
                "functions": [{"namespace": "__bicep", "members": {"f": {
                    "parameters": [{"name": "x", "type": "string"}],
                    "output": {"type": "string", "value": "[concat(parameters('x'), __bicep.f(parameters('x')))]"}
                }}}],
            });
            if let Some(version) = version {
                template["languageVersion"] = json!(version);
            }
            template
        })
}

fn parameters() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => Just(json!({})),
        3 => btree_map((0u8..5).prop_map(|n| format!("p{n}")), json_value(), 0..3).prop_map(|map| {
            Value::Object(map.into_iter().map(|(k, v)| (k, json!({"value": v}))).collect())
        }),
        1 => json_value(),
        1 => Just(json!({"p0": {"reference": {"keyVault": {}}}})),
    ]
}

// ----- properties: never a panic -------------------------------------------------------

proptest! {
    #![proptest_config(config(256))]

    /// Parsing any expression text: an expression or an error, nothing else.
    #[test]
    fn expressions_never_panic(text in expression_text()) {
        let _ = parse_expression(&text);
        let _ = parse_template_string(&format!("[{text}]"));
    }

    /// Classification of template strings: `[[` is a literal `[`, text
    /// without the outer brackets is a literal, the rest parses.
    #[test]
    fn template_strings_classify(text in template_string()) {
        match parse_template_string(&text) {
            Ok(TemplateString::Literal(literal)) => {
                if let Some(rest) = text.strip_prefix("[[") {
                    prop_assert_eq!(literal, format!("[{rest}"));
                } else {
                    prop_assert_eq!(&literal, &text);
                }
            }
            Ok(TemplateString::Expression(_)) => {
                prop_assert!(text.starts_with('[') && text.ends_with(']') && !text.starts_with("[["));
            }
            Err(error) => prop_assert!(!error.message.is_empty()),
        }
    }

    /// Evaluating any expression as a template output: a value or an error.
    #[test]
    fn expression_evaluation_never_panics(text in expression_text()) {
        let _ = eval(&format!("[{text}]"));
    }
}

proptest! {
    #![proptest_config(config(256))]

    /// Generated templates, cross-referencing and often broken: no panic;
    /// what evaluates is consistent (ids in the scope, dependencies first).
    #[test]
    fn templates_never_panic(template in template(), parameters in parameters()) {
        if let Ok(evaluation) = run(&template, &parameters) {
            let mut seen: Vec<&str> = Vec::new();
            for resource in &evaluation.resources {
                prop_assert!(resource.id.starts_with(SCOPE), "{}", resource.id);
                for dependency in &resource.depends_on {
                    prop_assert!(seen.contains(&dependency.as_str()), "{} before {}", dependency, resource.id);
                }
                seen.push(&resource.id);
            }
        }
    }

    /// Any JSON at all as a template or as parameters: no panic.
    #[test]
    fn arbitrary_json_never_panics(template in json_value(), parameters in json_value()) {
        let _ = run(&template, &parameters);
        let _ = run(&json!({"resources": template.clone()}), &json!({}));
        let _ = run(&json!({"variables": {"v0": template}, "outputs": {"o": {"value": "[variables('v0')]"}}}), &parameters);
    }

}

proptest! {
    #![proptest_config(config(24))]

    /// Long chains of variables, parameter defaults or references: an error
    /// or a value, never a stack overflow.
    #[test]
    fn long_chains_never_overflow_the_stack(length in prop_oneof![1usize..1200, 1200usize..3000], kind in 0u8..4) {
        let template = match kind {
            0 => {
                let mut variables = Map::new();
                for n in 0..length {
                    variables.insert(format!("v{n}"), json!(format!("[variables('v{}')]", n + 1)));
                }
                variables.insert(format!("v{length}"), json!("end"));
                json!({"variables": variables, "outputs": {"o": {"value": "[variables('v0')]"}}})
            }
            1 => {
                let mut parameters = Map::new();
                for n in 0..length {
                    parameters.insert(format!("p{n}"), json!({"type": "string", "defaultValue": format!("[parameters('p{}')]", n + 1)}));
                }
                parameters.insert(format!("p{length}"), json!({"type": "string", "defaultValue": "end"}));
                json!({"parameters": parameters})
            }
            2 => {
                let mut resources = Map::new();
                for n in 0..length {
                    resources.insert(format!("r{n}"), json!({
                        "import": "Radius", "type": "Applications.Core/containers@2023-10-01-preview",
                        "properties": {"name": format!("c{n}"), "properties": {"x": format!("[reference('r{}').properties.x]", n + 1)}}
                    }));
                }
                resources.insert(format!("r{length}"), json!({
                    "import": "Radius", "type": "Applications.Core/containers@2023-10-01-preview",
                    "properties": {"name": "last", "properties": {"x": "end"}}
                }));
                json!({"languageVersion": "2.0", "resources": resources})
            }
            _ => {
                let mut resources = Map::new();
                for n in 0..length {
                    resources.insert(format!("r{n}"), json!({
                        "import": "Radius", "type": "Applications.Core/containers@2023-10-01-preview",
                        "properties": {"name": format!("[concat(reference('r{}').name, 'x')]", n + 1)}
                    }));
                }
                resources.insert(format!("r{length}"), json!({
                    "import": "Radius", "type": "Applications.Core/containers@2023-10-01-preview",
                    "properties": {"name": "c"}
                }));
                json!({"languageVersion": "2.0", "resources": resources})
            }
        };
        let _ = run(&template, &json!({}));
    }
}

// ----- properties: identities --------------------------------------------------------------

/// Text an ARM string may hold: anything, with quotes and brackets.
fn arm_text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-zA-Z0-9 '\\[\\]{},.-]{0,12}",
        1 => any::<String>(),
        1 => "\\PC{200,400}",
    ]
}

/// A resource name or type segment: no `/`, not empty.
fn segment() -> impl Strategy<Value = String> {
    prop_oneof![4 => "[a-zA-Z][a-zA-Z0-9-]{0,12}", 1 => "[^/']{1,8}", 1 => "[^/]{1,8}"]
}

/// Integers, often at the edges of 64 bits.
fn integer() -> impl Strategy<Value = i64> {
    prop_oneof![
        3 => -100i64..100,
        1 => any::<i64>(),
        1 => prop::sample::select(vec![i64::MAX, i64::MIN, i64::MAX - 1, i64::MIN + 1, 0, -1]),
    ]
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn concat_of_strings_is_their_concatenation(parts in vec(arm_text(), 1..6)) {
        let quoted: Vec<String> = parts.iter().map(|p| quote(p)).collect();
        let value = eval(&format!("[concat({})]", quoted.join(", "))).expect("concat of strings");
        prop_assert_eq!(value, json!(parts.concat()));
    }

    /// `format` with literal text (braces doubled) around `{n}` items gives
    /// the text with each item replaced, padded to any width given.
    #[test]
    fn format_replaces_items(
        pieces in vec((arm_text(), 0usize..4, proptest::option::of(-12i64..12)), 1..5),
        args in vec(arm_text(), 4),
    ) {
        let mut pattern = String::new();
        let mut expected = String::new();
        for (text, index, width) in &pieces {
            pattern.push_str(&text.replace('{', "{{").replace('}', "}}"));
            expected.push_str(text);
            let arg = &args[*index];
            match width {
                Some(width) => {
                    pattern.push_str(&format!("{{{index},{width}}}"));
                    let pad = (width.unsigned_abs() as usize).saturating_sub(arg.chars().count());
                    if *width > 0 {
                        expected.push_str(&" ".repeat(pad));
                        expected.push_str(arg);
                    } else {
                        expected.push_str(arg);
                        expected.push_str(&" ".repeat(pad));
                    }
                }
                None => {
                    pattern.push_str(&format!("{{{index}}}"));
                    expected.push_str(arg);
                }
            }
        }
        let quoted: Vec<String> = args.iter().map(|a| quote(a)).collect();
        let value = eval(&format!("[format({}, {})]", quote(&pattern), quoted.join(", "))).expect("format");
        prop_assert_eq!(value, json!(expected));
    }

    /// `resourceId(type, names...)` is the scope, `providers`, and the type
    /// segments interleaved with the names.
    #[test]
    fn resource_id_of_generated_parts(
        namespace in "[A-Z][a-z]{0,6}\\.[A-Z][a-z]{0,6}",
        pairs in vec((segment(), segment()), 1..4),
        group in proptest::option::of(segment()),
    ) {
        let types: Vec<&str> = pairs.iter().map(|(t, _)| t.as_str()).collect();
        let resource_type = format!("{namespace}/{}", types.join("/"));
        let mut args = Vec::new();
        if let Some(group) = &group {
            args.push(quote(group));
        }
        args.push(quote(&resource_type));
        args.extend(pairs.iter().map(|(_, name)| quote(name)));
        let scope = match &group {
            Some(group) => format!("/planes/radius/local/resourceGroups/{group}"),
            None => SCOPE.to_string(),
        };
        let mut expected = format!("{scope}/providers/{namespace}");
        for (kind, name) in &pairs {
            expected.push_str(&format!("/{kind}/{name}"));
        }
        let value = eval(&format!("[resourceId({})]", args.join(", "))).expect("resourceId");
        prop_assert_eq!(value, json!(expected));
    }

    /// `substring`, `take`, `skip`, `length` on characters, for any indexes:
    /// the slice when it is inside the string, an error otherwise.
    #[test]
    fn substring_take_skip_and_length(
        text in arm_text(),
        start in prop_oneof![4 => -2i64..20, 1 => any::<i64>()],
        length in prop_oneof![4 => -2i64..20, 1 => any::<i64>()],
    ) {
        let chars: Vec<char> = text.chars().collect();
        let quoted = quote(&text);
        prop_assert_eq!(eval(&format!("[length({quoted})]")).expect("length"), json!(chars.len()));
        let inside = start >= 0
            && length >= 0
            && start.checked_add(length).is_some_and(|end| end as u64 <= chars.len() as u64);
        match eval(&format!("[substring({quoted}, {start}, {length})]")) {
            Ok(value) => {
                prop_assert!(inside, "substring({}, {}) of {} chars gave {}", start, length, chars.len(), value);
                let slice: String = chars[start as usize..(start + length) as usize].iter().collect();
                prop_assert_eq!(value, json!(slice));
            }
            Err(_) => prop_assert!(!inside),
        }
        let count = start.max(0) as usize;
        let taken: String = chars.iter().take(count).collect();
        let skipped: String = chars.iter().skip(count).collect();
        prop_assert_eq!(eval(&format!("[take({quoted}, {start})]")).expect("take"), json!(taken));
        prop_assert_eq!(eval(&format!("[skip({quoted}, {start})]")).expect("skip"), json!(skipped));
    }

    /// `split(join(parts, d), d)` gives the parts back when no part holds
    /// the delimiter.
    #[test]
    fn join_then_split(parts in vec("[a-z ]{0,5}", 1..6), delimiter in "[|;,/-]{1,2}") {
        prop_assume!(parts.iter().all(|p| !p.contains(&delimiter)));
        prop_assume!(!delimiter.is_empty());
        let array = format!("createArray({})", parts.iter().map(|p| quote(p)).collect::<Vec<_>>().join(", "));
        let joined = eval(&format!("[join({array}, {})]", quote(&delimiter))).expect("join");
        prop_assert_eq!(&joined, &json!(parts.join(&delimiter)));
        let split = eval(&format!("[split(join({array}, {d}), {d})]", d = quote(&delimiter))).expect("split");
        prop_assert_eq!(split, json!(parts));
    }

    /// Integer functions: the exact result, or an error where it overflows
    /// or divides by zero; `range` counts from its start.
    #[test]
    fn arithmetic_is_exact_or_an_error(a in integer(), b in integer()) {
        for (name, expected) in [
            ("add", a.checked_add(b)),
            ("sub", a.checked_sub(b)),
            ("mul", a.checked_mul(b)),
            ("div", a.checked_div(b)),
            ("mod", a.checked_rem(b)),
        ] {
            match eval(&format!("[{name}({a}, {b})]")) {
                Ok(value) => prop_assert_eq!(Some(value), expected.map(|v| json!(v)), "{}({}, {})", name, a, b),
                Err(_) => prop_assert_eq!(expected, None, "{}({}, {})", name, a, b),
            }
        }
        let count = b.rem_euclid(20);
        match eval(&format!("[range({a}, {count})]")) {
            Ok(value) => {
                let expected: Vec<i64> = (0..count).map(|i| a + i).collect();
                prop_assert_eq!(value, json!(expected));
            }
            Err(_) => prop_assert!(a.checked_add(count).is_none(), "range({}, {})", a, count),
        }
    }

    /// `copyIndex(loop, offset)` in a resource copy loop names each copy by
    /// its index plus the offset, or is an error where that overflows.
    #[test]
    fn copy_index_counts_from_the_offset(count in 0u64..5, offset in integer()) {
        let template = json!({"languageVersion": "2.0", "resources": {"r": {
            "import": "Radius", "type": "Applications.Core/containers@2023-10-01-preview",
            "copy": {"name": "l", "count": count},
            "properties": {"name": format!("[concat('c', string(copyIndex('l', {offset})))]")}
        }}});
        let overflows = (0..count as i64).any(|i| i.checked_add(offset).is_none());
        match run(&template, &json!({})) {
            Ok(evaluation) => {
                prop_assert!(!overflows);
                let names: Vec<String> = evaluation.resources.iter().map(|r| r.name.clone()).collect();
                let expected: Vec<String> = (0..count as i64).map(|i| format!("c{}", i + offset)).collect();
                prop_assert_eq!(names, expected);
            }
            Err(error) => prop_assert!(overflows, "{}", error),
        }
    }

    /// `if` evaluates only the branch it takes; `coalesce` skips nulls.
    #[test]
    fn if_and_coalesce(x in arm_text(), y in arm_text(), condition in any::<bool>()) {
        let chosen = if condition { &x } else { &y };
        let value = eval(&format!("[if({condition}(), {}, {})]", quote(&x), quote(&y))).expect("if");
        prop_assert_eq!(value, json!(chosen));
        let untaken = if condition { "[if(true(), 'a', parameters('missing'))]" } else { "[if(false(), parameters('missing'), 'a')]" };
        prop_assert_eq!(eval(untaken).expect("the other branch is not evaluated"), json!("a"));
        let value = eval(&format!("[coalesce(null(), null(), {})]", quote(&x))).expect("coalesce");
        prop_assert_eq!(value, json!(x));
    }
}

// ----- regressions: inputs the properties found ----------------------------------------------

/// Each of these overflowed the stack (aborting the process, so one
/// template could stop the simulator): the parser, the evaluator and
/// dropping the tree recursed once per level without a bound.
#[test]
fn regression_deep_expressions_are_an_error() {
    for text in [
        format!("[{}'x'{}]", "concat(".repeat(100_000), ")".repeat(100_000)),
        format!("[createArray(1){}]", "[0]".repeat(100_000)),
        format!("[createObject('a', 1){}]", ".a".repeat(100_000)),
    ] {
        let error = eval(&text).expect_err("too deep");
        assert!(error.message.contains("levels deep"), "{}", error.message);
    }
    // As deep as Bicep ever goes is fine.
    let text = format!("[{}'x'{}]", "concat(".repeat(40), ")".repeat(40));
    assert_eq!(eval(&text).expect("40 levels"), json!("x"));
}

/// A chain of variables (or parameters, or references) recursed once per
/// link on the request handler's stack.
#[test]
fn regression_long_chains_are_an_error_or_a_value() {
    let mut variables = Map::new();
    for n in 0..3000 {
        variables.insert(format!("v{n}"), json!(format!("[variables('v{}')]", n + 1)));
    }
    variables.insert("v3000".into(), json!("end"));
    let template =
        json!({"variables": variables, "outputs": {"o": {"value": "[variables('v0')]"}}});
    let error = run(&template, &json!({})).expect_err("too deep");
    assert!(error.message.contains("levels deep"), "{}", error.message);

    let mut resources = Map::new();
    for n in 0..200 {
        resources.insert(format!("r{n}"), json!({
            "import": "Radius", "type": "Applications.Core/containers@2023-10-01-preview",
            "properties": {"name": format!("c{n}"), "properties": {"x": format!("[reference('r{}').properties.x]", n + 1)}}
        }));
    }
    resources.insert(
        "r200".into(),
        json!({
            "import": "Radius", "type": "Applications.Core/containers@2023-10-01-preview",
            "properties": {"name": "last", "properties": {"x": "end"}}
        }),
    );
    let evaluation = run(
        &json!({"languageVersion": "2.0", "resources": resources}),
        &json!({}),
    )
    .expect("a chain of 200 references");
    assert_eq!(evaluation.resources.len(), 201);
    assert_eq!(evaluation.resources[200].properties()["x"], json!("end"));
}

/// `start + length` overflowed (a panic in debug builds, a wrapped check in
/// release builds).
#[test]
fn regression_substring_with_huge_indexes() {
    assert!(eval("[substring('', 5191316560541459533, 4032055476313316275)]").is_err());
    assert!(eval("[substring('abc', 1, 9223372036854775807)]").is_err());
    assert_eq!(
        eval("[substring('abc', 1, 2)]").expect("inside"),
        json!("bc")
    );
}

/// `start + count` overflowed: a panic in debug builds, an empty array in
/// release builds.
#[test]
fn regression_range_and_copy_index_at_the_edge() {
    assert!(eval("[range(9223372036854775807, 1)]").is_err());
    assert_eq!(
        eval("[range(9223372036854775806, 1)]").expect("fits"),
        json!([9223372036854775806i64])
    );
    let template = json!({"languageVersion": "2.0", "resources": {"r": {
        "import": "Radius", "type": "Applications.Core/containers@2023-10-01-preview",
        "copy": {"name": "l", "count": 2},
        "properties": {"name": "[concat('c', string(copyIndex('l', 9223372036854775807)))]"}
    }}});
    assert!(run(&template, &json!({})).is_err());
}

/// A width or length in the billions allocated the whole string (or
/// aborted on a failed allocation); a `replace` could multiply a string.
#[test]
fn regression_huge_widths_and_results_are_an_error() {
    for text in [
        "[format('{0,2147483647}', 'x')]",
        "[format('{0,-9223372036854775808}', 'x')]",
        "[padLeft('x', 9223372036854775807)]",
        "[padLeft('x', 2000000, '0')]",
    ] {
        assert!(eval(text).is_err(), "{text}");
    }
    assert_eq!(eval("[padLeft('7', 3, '0')]").expect("small"), json!("007"));
    assert_eq!(
        eval("[format('{0,3}|', 'x')]").expect("small"),
        json!("  x|")
    );
    let mut variables = Map::new();
    variables.insert("a".into(), json!("a".repeat(10_000)));
    variables.insert("b".into(), json!("b".repeat(10_000)));
    let template = json!({"variables": variables,
        "outputs": {"o": {"value": "[replace(variables('a'), 'a', variables('b'))]"}}});
    assert!(
        run(&template, &json!({})).is_err(),
        "100 MB from two 10 kB strings"
    );
    let mut doubling = Map::new();
    doubling.insert("v0".into(), json!("x".repeat(1000)));
    for n in 1..40 {
        doubling.insert(
            format!("v{n}"),
            json!(format!(
                "[concat(variables('v{m}'), variables('v{m}'))]",
                m = n - 1
            )),
        );
    }
    let template =
        json!({"variables": doubling, "outputs": {"o": {"value": "[length(variables('v39'))]"}}});
    assert!(run(&template, &json!({})).is_err(), "2^39 kB by doubling");
}

/// Reading, while writing the `arm_templates` fuzz target (which reproduces
/// them: inputs kept in `fuzz/regressions/arm_templates/`): strings were
/// bounded one by one, arrays and objects not at all. Forty variables each
/// `concat` of the one before twice, or copy loops of 800 elements nested
/// five deep, asked for 2^40 values from a template of 2 kB, and the
/// simulator ran out of memory (an abort of the whole process). An
/// evaluation may now produce at most 64 MiB of values, counted over every
/// expression, copy loop element and resource body.
#[test]
fn regression_fuzz_arrays_and_copy_loops_are_bounded() {
    let mut doubling = Map::new();
    doubling.insert("v0".into(), json!([1]));
    for n in 1..=40 {
        doubling.insert(
            format!("v{n}"),
            json!(format!(
                "[concat(variables('v{m}'), variables('v{m}'))]",
                m = n - 1
            )),
        );
    }
    let template = json!({"variables": doubling, "resources": {}, "outputs": {"o": {"type": "int", "value": "[length(variables('v40'))]"}}});
    let error = run(&template, &json!({})).expect_err("2^40 elements");
    assert!(error.message.contains("MiB of values"), "{}", error.message);

    let mut nested = Map::new();
    nested.insert("v0".into(), json!("[range(0, 800)]"));
    for n in 1..=5 {
        nested.insert(
            format!("v{n}"),
            json!({"copy": [{"name": "x", "count": 800, "input": format!("[variables('v{}')]", n - 1)}]}),
        );
    }
    let template = json!({"variables": nested, "resources": {}, "outputs": {"o": {"type": "int", "value": "[length(variables('v5').x)]"}}});
    let error = run(&template, &json!({})).expect_err("800^5 elements");
    assert!(error.message.contains("MiB of values"), "{}", error.message);

    // What a real template does is far below the bound: 800 resources of a
    // copy loop, each with an 800-element property from a nested loop.
    let template = json!({"languageVersion": "2.0", "resources": {"c": {
        "import": "Radius", "type": "Applications.Core/containers@2023-10-01-preview",
        "copy": {"name": "l", "count": 800},
        "properties": {"name": "[format('c{0}', copyIndex())]", "properties": {
            "copy": [{"name": "ports", "count": 800, "input": "[copyIndex('ports')]"}]
        }}
    }}});
    let evaluation = run(&template, &json!({})).expect("800 x 800");
    assert_eq!(evaluation.resources.len(), 800);
    assert_eq!(
        evaluation.resources[799].properties()["ports"][799],
        json!(799)
    );
}
