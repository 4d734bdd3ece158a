//! Template functions that only look at their arguments (string, array,
//! object, logical and numeric functions). Functions that need the template
//! or the deployment (`parameters`, `reference`, `resourceId`, ...) live in
//! the evaluator.

use serde_json::{Map, Value};

use crate::error::ArmError;

/// Call the built-in `name` (lower case) with already evaluated arguments.
/// `None` means no such pure function exists.
pub fn call(name: &str, args: &[Value]) -> Option<Result<Value, ArmError>> {
    let result = string_function(name, args)
        .or_else(|| collection_function(name, args))
        .or_else(|| logical_function(name, args))
        .or_else(|| numeric_function(name, args))?;
    Some(result.and_then(|value| match &value {
        Value::String(text) if text.len() > MAX_STRING_BYTES => Err(arg_error(
            name,
            &format!(
                "the result would be {} bytes, more than the {MAX_STRING_BYTES} a template string may hold",
                text.len()
            ),
        )),
        _ => Ok(value),
    }))
}

/// The string functions (`concat` of arrays too); `None` if `name` is not
/// one.
fn string_function(name: &str, args: &[Value]) -> Option<Result<Value, ArmError>> {
    let result = match name {
        "format" => format(args),
        "concat" => concat(args),
        "string" => one(name, args).map(|v| Value::String(stringify(v))),
        "tolower" => string_arg(name, args, 0).map(|s| Value::String(s.to_lowercase())),
        "toupper" => string_arg(name, args, 0).map(|s| Value::String(s.to_uppercase())),
        "trim" => string_arg(name, args, 0).map(|s| Value::String(s.trim().to_string())),
        "replace" => replace(args),
        "split" => split(args),
        "join" => join(args),
        "substring" => substring(args),
        "startswith" => two_strings(name, args)
            .map(|(a, b)| Value::Bool(a.to_lowercase().starts_with(&b.to_lowercase()))),
        "endswith" => two_strings(name, args)
            .map(|(a, b)| Value::Bool(a.to_lowercase().ends_with(&b.to_lowercase()))),
        "indexof" => two_strings(name, args)
            .map(|(a, b)| index_value(a.to_lowercase().find(&b.to_lowercase()), &a.to_lowercase())),
        "lastindexof" => two_strings(name, args).map(|(a, b)| {
            index_value(a.to_lowercase().rfind(&b.to_lowercase()), &a.to_lowercase())
        }),
        "padleft" => pad_left(args),
        "uniquestring" => strings(name, args).map(|parts| Value::String(unique_string(&parts))),
        "guid" => strings(name, args).map(|parts| Value::String(guid(&parts))),
        "json" => string_arg(name, args, 0).and_then(|s| {
            serde_json::from_str(s)
                .map_err(|e| arg_error(name, &format!("the argument is not valid JSON: {e}")))
        }),
        _ => return None,
    };
    Some(result)
}

/// The array and object functions (and those that take strings too, like
/// `length` and `first`); `None` if `name` is not one.
fn collection_function(name: &str, args: &[Value]) -> Option<Result<Value, ArmError>> {
    let result = match name {
        "length" => one(name, args).and_then(|v| match v {
            Value::String(s) => Ok(Value::from(s.chars().count() as u64)),
            Value::Array(a) => Ok(Value::from(a.len() as u64)),
            Value::Object(o) => Ok(Value::from(o.len() as u64)),
            other => Err(type_error(name, "a string, array or object", other)),
        }),
        "empty" => one(name, args).map(|v| {
            Value::Bool(match v {
                Value::Null => true,
                Value::String(s) => s.is_empty(),
                Value::Array(a) => a.is_empty(),
                Value::Object(o) => o.is_empty(),
                _ => false,
            })
        }),
        "contains" => contains(args),
        "first" => one(name, args).and_then(|v| match v {
            Value::Array(a) => Ok(a.first().cloned().unwrap_or(Value::Null)),
            Value::String(s) => Ok(Value::String(s.chars().take(1).collect())),
            other => Err(type_error(name, "an array or string", other)),
        }),
        "last" => one(name, args).and_then(|v| match v {
            Value::Array(a) => Ok(a.last().cloned().unwrap_or(Value::Null)),
            Value::String(s) => Ok(Value::String(
                s.chars().last().map(String::from).unwrap_or_default(),
            )),
            other => Err(type_error(name, "an array or string", other)),
        }),
        "take" | "skip" => take_skip(name, args),
        "union" => union(args),
        "intersection" => intersection(args),
        "createarray" => Ok(Value::Array(args.to_vec())),
        "array" => one(name, args).map(|v| match v {
            Value::Array(_) => v.clone(),
            other => Value::Array(vec![other.clone()]),
        }),
        "createobject" => create_object(args),
        "coalesce" => Ok(args
            .iter()
            .find(|v| !v.is_null())
            .cloned()
            .unwrap_or(Value::Null)),
        "range" => range(args),
        _ => return None,
    };
    Some(result)
}

/// The logical and comparison functions; `None` if `name` is not one.
fn logical_function(name: &str, args: &[Value]) -> Option<Result<Value, ArmError>> {
    let result = match name {
        "equals" => arity(name, args, 2, 2).map(|_| Value::Bool(args[0] == args[1])),
        "not" => bool_arg(name, args, 0)
            .and_then(|b| arity(name, args, 1, 1).map(|_| !b))
            .map(Value::Bool),
        "and" | "or" => and_or(name, args),
        "bool" => one(name, args).and_then(|v| match v {
            Value::Bool(b) => Ok(Value::Bool(*b)),
            Value::String(s) if s.eq_ignore_ascii_case("true") => Ok(Value::Bool(true)),
            Value::String(s) if s.eq_ignore_ascii_case("false") => Ok(Value::Bool(false)),
            Value::Number(n) => Ok(Value::Bool(n.as_i64() != Some(0))),
            other => Err(type_error(
                name,
                "a boolean, 'true'/'false' or a number",
                other,
            )),
        }),
        "true" => arity(name, args, 0, 0).map(|_| Value::Bool(true)),
        "false" => arity(name, args, 0, 0).map(|_| Value::Bool(false)),
        "null" => arity(name, args, 0, 0).map(|_| Value::Null),
        "greater" | "greaterorequals" | "less" | "lessorequals" => compare(name, args),
        _ => return None,
    };
    Some(result)
}

/// The numeric functions; `None` if `name` is not one.
fn numeric_function(name: &str, args: &[Value]) -> Option<Result<Value, ArmError>> {
    let result = match name {
        "min" | "max" => min_max(name, args),
        "int" => one(name, args).and_then(|v| match v {
            Value::Number(n) if n.is_i64() => Ok(v.clone()),
            Value::Number(n) => Ok(Value::from(n.as_f64().unwrap_or_default() as i64)),
            Value::String(s) => s
                .trim()
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| arg_error(name, &format!("'{s}' is not an integer"))),
            other => Err(type_error(name, "a number or string", other)),
        }),
        "add" | "sub" | "mul" | "div" | "mod" => arithmetic(name, args),
        _ => return None,
    };
    Some(result)
}

/// Longest string a function may produce: a template itself may be at
/// most 4 MiB, and without a bound `replace`, `padLeft` or a chain of
/// `concat`s doubling a variable would exhaust memory.
pub const MAX_STRING_BYTES: usize = 4 << 20;

/// Widest `format` item or `padLeft` result, in characters (.NET refuses
/// format widths from 1,000,000 on).
pub const MAX_WIDTH: u64 = 1_000_000;

/// How ARM turns a value into text (`string()`, `format()`, `concat()`).
pub fn stringify(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

/// A short description of a JSON value's type, for error messages.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn arg_error(function: &str, problem: &str) -> ArmError {
    ArmError::invalid_template(format!(
        "Unable to evaluate template language function '{function}': {problem}"
    ))
}

fn type_error(function: &str, expected: &str, actual: &Value) -> ArmError {
    arg_error(
        function,
        &format!("expected {expected} but got {}", type_name(actual)),
    )
}

pub(crate) fn arity(
    function: &str,
    args: &[Value],
    min: usize,
    max: usize,
) -> Result<(), ArmError> {
    if args.len() < min || args.len() > max {
        let expected = if min == max {
            format!("{min}")
        } else if max == usize::MAX {
            format!("at least {min}")
        } else {
            format!("{min} to {max}")
        };
        return Err(arg_error(
            function,
            &format!("expects {expected} argument(s) but got {}", args.len()),
        ));
    }
    Ok(())
}

fn one<'v>(function: &str, args: &'v [Value]) -> Result<&'v Value, ArmError> {
    arity(function, args, 1, 1)?;
    Ok(&args[0])
}

pub(crate) fn string_arg<'v>(
    function: &str,
    args: &'v [Value],
    at: usize,
) -> Result<&'v str, ArmError> {
    match args.get(at) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(arg_error(
            function,
            &format!(
                "argument {} must be a string but is {}",
                at + 1,
                type_name(other)
            ),
        )),
        None => Err(arg_error(
            function,
            &format!("argument {} is missing", at + 1),
        )),
    }
}

fn int_arg(function: &str, args: &[Value], at: usize) -> Result<i64, ArmError> {
    match args.get(at) {
        Some(Value::Number(n)) if n.is_i64() => Ok(n.as_i64().unwrap_or_default()),
        Some(other) => Err(arg_error(
            function,
            &format!(
                "argument {} must be an integer but is {}",
                at + 1,
                type_name(other)
            ),
        )),
        None => Err(arg_error(
            function,
            &format!("argument {} is missing", at + 1),
        )),
    }
}

fn bool_arg(function: &str, args: &[Value], at: usize) -> Result<bool, ArmError> {
    match args.get(at) {
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(arg_error(
            function,
            &format!(
                "argument {} must be a boolean but is {}",
                at + 1,
                type_name(other)
            ),
        )),
        None => Err(arg_error(
            function,
            &format!("argument {} is missing", at + 1),
        )),
    }
}

fn two_strings<'v>(function: &str, args: &'v [Value]) -> Result<(&'v str, &'v str), ArmError> {
    arity(function, args, 2, 2)?;
    Ok((
        string_arg(function, args, 0)?,
        string_arg(function, args, 1)?,
    ))
}

fn strings(function: &str, args: &[Value]) -> Result<Vec<String>, ArmError> {
    arity(function, args, 1, usize::MAX)?;
    (0..args.len())
        .map(|i| string_arg(function, args, i).map(str::to_string))
        .collect()
}

fn index_value(found: Option<usize>, haystack: &str) -> Value {
    match found {
        Some(byte) => Value::from(haystack[..byte].chars().count() as i64),
        None => Value::from(-1),
    }
}

/// .NET composite formatting as ARM's `format()` does it: `{0}`, `{1,-5}`,
/// `{0:fmt}` (format strings are ignored), `{{` and `}}` escapes.
fn format(args: &[Value]) -> Result<Value, ArmError> {
    arity("format", args, 1, usize::MAX)?;
    let pattern = string_arg("format", args, 0)?;
    let values = &args[1..];
    let mut out = String::new();
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                let mut item = String::new();
                let mut closed = false;
                for d in chars.by_ref() {
                    if d == '}' {
                        closed = true;
                        break;
                    }
                    item.push(d);
                }
                if !closed {
                    return Err(arg_error(
                        "format",
                        &format!("the format string '{pattern}' has an unclosed '{{'"),
                    ));
                }
                let spec = item.split(':').next().unwrap_or_default();
                let mut parts = spec.splitn(2, ',');
                let index_text = parts.next().unwrap_or_default().trim();
                let index: usize = index_text.parse().map_err(|_| {
                    arg_error(
                        "format",
                        &format!("'{{{item}}}' in '{pattern}' is not a valid format item"),
                    )
                })?;
                let value = values.get(index).ok_or_else(|| {
                    arg_error(
                        "format",
                        &format!(
                            "the format string '{pattern}' refers to argument {index} but only {} were given",
                            values.len()
                        ),
                    )
                })?;
                let text = stringify(value);
                let width: i64 = parts
                    .next()
                    .map(|w| w.trim().parse().unwrap_or(0))
                    .unwrap_or(0);
                if width.unsigned_abs() >= MAX_WIDTH {
                    return Err(arg_error(
                        "format",
                        &format!("the width of '{{{item}}}' must be less than {MAX_WIDTH}"),
                    ));
                }
                let pad = (width.unsigned_abs() as usize).saturating_sub(text.chars().count());
                if width > 0 {
                    out.extend(std::iter::repeat_n(' ', pad));
                    out.push_str(&text);
                } else {
                    out.push_str(&text);
                    out.extend(std::iter::repeat_n(' ', pad));
                }
            }
            '}' => {
                return Err(arg_error(
                    "format",
                    &format!("the format string '{pattern}' has an unmatched '}}'"),
                ));
            }
            other => out.push(other),
        }
    }
    Ok(Value::String(out))
}

fn concat(args: &[Value]) -> Result<Value, ArmError> {
    if !args.is_empty() && args.iter().all(|v| v.is_array() || v.is_null()) {
        let items = args
            .iter()
            .filter_map(Value::as_array)
            .flat_map(|a| a.iter().cloned())
            .collect();
        return Ok(Value::Array(items));
    }
    if let Some(bad) = args.iter().find(|v| v.is_array() || v.is_object()) {
        return Err(type_error(
            "concat",
            "only strings, numbers and booleans, or only arrays",
            bad,
        ));
    }
    Ok(Value::String(args.iter().map(stringify).collect()))
}

/// `replace(text, old, new)`: every `old` in `text` replaced, refused if the
/// result would exceed [`MAX_STRING_BYTES`].
fn replace(args: &[Value]) -> Result<Value, ArmError> {
    let name = "replace";
    arity(name, args, 3, 3)?;
    let text = string_arg(name, args, 0)?;
    let old = string_arg(name, args, 1)?;
    let new = string_arg(name, args, 2)?;
    if old.is_empty() {
        return Err(arg_error(name, "the string to replace must not be empty"));
    }
    let grows = new.len().saturating_sub(old.len());
    let size = text
        .matches(old)
        .count()
        .saturating_mul(grows)
        .saturating_add(text.len());
    if size > MAX_STRING_BYTES {
        return Err(arg_error(
            name,
            &format!("the result would be more than {MAX_STRING_BYTES} bytes"),
        ));
    }
    Ok(Value::String(text.replace(old, new)))
}

fn split(args: &[Value]) -> Result<Value, ArmError> {
    arity("split", args, 2, 2)?;
    let text = string_arg("split", args, 0)?;
    let delimiters: Vec<String> = match &args[1] {
        Value::String(d) => vec![d.clone()],
        Value::Array(items) => items.iter().map(stringify).collect(),
        other => {
            return Err(type_error(
                "split",
                "a string or array of delimiters",
                other,
            ));
        }
    };
    let mut parts = vec![text.to_string()];
    for delimiter in delimiters.iter().filter(|d| !d.is_empty()) {
        parts = parts
            .iter()
            .flat_map(|p| {
                p.split(delimiter.as_str())
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect();
    }
    Ok(Value::Array(parts.into_iter().map(Value::String).collect()))
}

fn join(args: &[Value]) -> Result<Value, ArmError> {
    arity("join", args, 2, 2)?;
    let Value::Array(items) = &args[0] else {
        return Err(type_error("join", "an array", &args[0]));
    };
    let delimiter = string_arg("join", args, 1)?;
    Ok(Value::String(
        items
            .iter()
            .map(stringify)
            .collect::<Vec<_>>()
            .join(delimiter),
    ))
}

fn substring(args: &[Value]) -> Result<Value, ArmError> {
    arity("substring", args, 1, 3)?;
    let text: Vec<char> = string_arg("substring", args, 0)?.chars().collect();
    let start = if args.len() > 1 {
        int_arg("substring", args, 1)?
    } else {
        0
    };
    let length = if args.len() > 2 {
        int_arg("substring", args, 2)?
    } else {
        text.len() as i64 - start
    };
    if start < 0
        || length < 0
        || start
            .checked_add(length)
            .is_none_or(|end| end as u64 > text.len() as u64)
    {
        return Err(arg_error(
            "substring",
            &format!(
                "start {start} and length {length} are outside the string of length {}",
                text.len()
            ),
        ));
    }
    Ok(Value::String(
        text[start as usize..(start + length) as usize]
            .iter()
            .collect(),
    ))
}

fn pad_left(args: &[Value]) -> Result<Value, ArmError> {
    arity("padLeft", args, 2, 3)?;
    let text = stringify(&args[0]);
    let width = int_arg("padLeft", args, 1)?.max(0) as u64;
    if width > MAX_WIDTH {
        return Err(arg_error(
            "padLeft",
            &format!("the total length {width} is more than {MAX_WIDTH}"),
        ));
    }
    let width = width as usize;
    let fill = if args.len() > 2 {
        let fill = string_arg("padLeft", args, 2)?;
        let mut chars = fill.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => c,
            _ => return Err(arg_error("padLeft", "the padding must be one character")),
        }
    } else {
        ' '
    };
    let pad = width.saturating_sub(text.chars().count());
    Ok(Value::String(
        std::iter::repeat_n(fill, pad).chain(text.chars()).collect(),
    ))
}

fn contains(args: &[Value]) -> Result<Value, ArmError> {
    arity("contains", args, 2, 2)?;
    let found = match &args[0] {
        Value::String(s) => s.contains(stringify(&args[1]).as_str()),
        Value::Array(items) => items.contains(&args[1]),
        Value::Object(map) => {
            let key = stringify(&args[1]);
            map.keys().any(|k| k.eq_ignore_ascii_case(&key))
        }
        other => return Err(type_error("contains", "a string, array or object", other)),
    };
    Ok(Value::Bool(found))
}

fn take_skip(name: &str, args: &[Value]) -> Result<Value, ArmError> {
    arity(name, args, 2, 2)?;
    let count = int_arg(name, args, 1)?.max(0) as usize;
    let take = name == "take";
    match &args[0] {
        Value::Array(items) => Ok(Value::Array(if take {
            items.iter().take(count).cloned().collect()
        } else {
            items.iter().skip(count).cloned().collect()
        })),
        Value::String(s) => Ok(Value::String(if take {
            s.chars().take(count).collect()
        } else {
            s.chars().skip(count).collect()
        })),
        other => Err(type_error(name, "an array or string", other)),
    }
}

fn union(args: &[Value]) -> Result<Value, ArmError> {
    arity("union", args, 1, usize::MAX)?;
    if args.iter().all(Value::is_object) {
        let mut out = Map::new();
        for map in args.iter().filter_map(Value::as_object) {
            for (k, v) in map {
                out.insert(k.clone(), v.clone());
            }
        }
        return Ok(Value::Object(out));
    }
    if args.iter().all(Value::is_array) {
        let mut out: Vec<Value> = Vec::new();
        for item in args.iter().filter_map(Value::as_array).flatten() {
            if !out.contains(item) {
                out.push(item.clone());
            }
        }
        return Ok(Value::Array(out));
    }
    Err(arg_error(
        "union",
        "all arguments must be objects or all arrays",
    ))
}

fn intersection(args: &[Value]) -> Result<Value, ArmError> {
    arity("intersection", args, 1, usize::MAX)?;
    if let Some(first) = args[0]
        .as_object()
        .filter(|_| args.iter().all(Value::is_object))
    {
        let out: Map<String, Value> = first
            .iter()
            .filter(|(k, v)| args[1..].iter().all(|o| o.get(k.as_str()) == Some(v)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        return Ok(Value::Object(out));
    }
    if let Some(first) = args[0]
        .as_array()
        .filter(|_| args.iter().all(Value::is_array))
    {
        let mut out: Vec<Value> = Vec::new();
        for item in first {
            let everywhere = args[1..]
                .iter()
                .all(|a| a.as_array().is_some_and(|a| a.contains(item)));
            if everywhere && !out.contains(item) {
                out.push(item.clone());
            }
        }
        return Ok(Value::Array(out));
    }
    Err(arg_error(
        "intersection",
        "all arguments must be objects or all arrays",
    ))
}

fn create_object(args: &[Value]) -> Result<Value, ArmError> {
    if !args.len().is_multiple_of(2) {
        return Err(arg_error(
            "createObject",
            "expects pairs of key and value arguments",
        ));
    }
    let mut out = Map::new();
    for pair in args.chunks(2) {
        let Value::String(key) = &pair[0] else {
            return Err(type_error("createObject", "a string key", &pair[0]));
        };
        out.insert(key.clone(), pair[1].clone());
    }
    Ok(Value::Object(out))
}

fn range(args: &[Value]) -> Result<Value, ArmError> {
    arity("range", args, 2, 2)?;
    let start = int_arg("range", args, 0)?;
    let count = int_arg("range", args, 1)?;
    if !(0..=10_000).contains(&count) {
        return Err(arg_error("range", "the count must be between 0 and 10000"));
    }
    let end = start
        .checked_add(count)
        .ok_or_else(|| arg_error("range", "the last integer overflows a 64-bit integer"))?;
    Ok(Value::Array((start..end).map(Value::from).collect()))
}

fn min_max(name: &str, args: &[Value]) -> Result<Value, ArmError> {
    arity(name, args, 1, usize::MAX)?;
    let numbers: Vec<Value> = match (&args[0], args.len()) {
        (Value::Array(items), 1) => items.clone(),
        _ => args.to_vec(),
    };
    let ints = numbers
        .iter()
        .map(|v| v.as_i64().ok_or_else(|| type_error(name, "integers", v)))
        .collect::<Result<Vec<_>, _>>()?;
    let picked = if name == "min" {
        ints.iter().min()
    } else {
        ints.iter().max()
    };
    picked
        .map(|v| Value::from(*v))
        .ok_or_else(|| arg_error(name, "needs at least one integer"))
}

fn and_or(name: &str, args: &[Value]) -> Result<Value, ArmError> {
    arity(name, args, 2, usize::MAX)?;
    let values = (0..args.len())
        .map(|i| bool_arg(name, args, i))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Value::Bool(if name == "and" {
        values.iter().all(|b| *b)
    } else {
        values.iter().any(|b| *b)
    }))
}

fn compare(name: &str, args: &[Value]) -> Result<Value, ArmError> {
    arity(name, args, 2, 2)?;
    let ordering = match (&args[0], &args[1]) {
        (Value::Number(a), Value::Number(b)) => a
            .as_f64()
            .partial_cmp(&b.as_f64())
            .unwrap_or(std::cmp::Ordering::Equal),
        (Value::String(a), Value::String(b)) => a.cmp(b),
        (a, _) => return Err(type_error(name, "two integers or two strings", a)),
    };
    use std::cmp::Ordering::*;
    Ok(Value::Bool(match name {
        "greater" => ordering == Greater,
        "greaterorequals" => ordering != Less,
        "less" => ordering == Less,
        _ => ordering != Greater,
    }))
}

fn arithmetic(name: &str, args: &[Value]) -> Result<Value, ArmError> {
    arity(name, args, 2, 2)?;
    let a = int_arg(name, args, 0)?;
    let b = int_arg(name, args, 1)?;
    let result = match name {
        "add" => a.checked_add(b),
        "sub" => a.checked_sub(b),
        "mul" => a.checked_mul(b),
        "div" if b == 0 => return Err(arg_error(name, "division by zero")),
        "div" => a.checked_div(b),
        _ if b == 0 => return Err(arg_error(name, "division by zero")),
        _ => a.checked_rem(b),
    };
    result
        .map(Value::from)
        .ok_or_else(|| arg_error(name, "the result overflows a 64-bit integer"))
}

/// FNV-1a, 64 bit: a stable hash for the deterministic stand-ins of
/// `uniqueString()` and `guid()`.
fn fnv1a(seed: u64, parts: &[String]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325_u64 ^ seed;
    for part in parts {
        for byte in part.bytes().chain(std::iter::once(0xff)) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash
}

/// 13 base-32 characters, deterministic in the arguments, like ARM's
/// `uniqueString()` (not bit-identical to ARM's value).
fn unique_string(parts: &[String]) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut hash = fnv1a(0, parts);
    (0..13)
        .map(|_| {
            let c = ALPHABET[(hash & 31) as usize] as char;
            hash = hash.rotate_right(5);
            c
        })
        .collect()
}

/// A deterministic GUID from the arguments, shaped like ARM's `guid()`.
fn guid(parts: &[String]) -> String {
    let high = fnv1a(1, parts);
    let low = fnv1a(2, parts);
    let hex = format!("{high:016x}{low:016x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(name: &str, args: Vec<Value>) -> Result<Value, ArmError> {
        call(name, &args).expect("known function")
    }

    #[test]
    fn format_follows_dotnet_composite_formatting() {
        assert_eq!(
            run("format", vec![json!("{0}-{1}"), json!("a"), json!(2)]).unwrap(),
            json!("a-2")
        );
        assert_eq!(
            run(
                "format",
                vec![json!("{{literal}} {0,3}|{0,-3}|"), json!("x")]
            )
            .unwrap(),
            json!("{literal}   x|x  |")
        );
        assert_eq!(
            run("format", vec![json!("{0:N2}"), json!(true)]).unwrap(),
            json!("True")
        );
        let error = run("format", vec![json!("{1}"), json!("a")]).unwrap_err();
        assert!(error.message.contains("refers to argument 1"), "{error}");
    }

    #[test]
    fn concat_joins_strings_or_arrays() {
        assert_eq!(
            run("concat", vec![json!("a"), json!(1), json!("b")]).unwrap(),
            json!("a1b")
        );
        assert_eq!(
            run("concat", vec![json!([1]), json!([2, 3])]).unwrap(),
            json!([1, 2, 3])
        );
        assert!(run("concat", vec![json!("a"), json!({})]).is_err());
    }

    #[test]
    fn string_collection_and_logic_functions() {
        assert_eq!(
            run("string", vec![json!({"a": 1})]).unwrap(),
            json!("{\"a\":1}")
        );
        assert_eq!(run("tolower", vec![json!("AbC")]).unwrap(), json!("abc"));
        assert_eq!(
            run("split", vec![json!("a/b/c"), json!("/")]).unwrap(),
            json!(["a", "b", "c"])
        );
        assert_eq!(
            run("substring", vec![json!("abcdef"), json!(1), json!(3)]).unwrap(),
            json!("bcd")
        );
        assert_eq!(run("length", vec![json!([1, 2])]).unwrap(), json!(2));
        assert_eq!(run("empty", vec![json!("")]).unwrap(), json!(true));
        assert_eq!(
            run("contains", vec![json!({"Key": 1}), json!("key")]).unwrap(),
            json!(true)
        );
        assert_eq!(
            run("union", vec![json!({"a": 1}), json!({"b": 2})]).unwrap(),
            json!({"a": 1, "b": 2})
        );
        assert_eq!(
            run("coalesce", vec![Value::Null, json!("x")]).unwrap(),
            json!("x")
        );
        assert_eq!(
            run("and", vec![json!(true), json!(false)]).unwrap(),
            json!(false)
        );
        assert_eq!(run("add", vec![json!(2), json!(3)]).unwrap(), json!(5));
        assert!(run("div", vec![json!(2), json!(0)]).is_err());
        assert_eq!(
            run("createobject", vec![json!("k"), json!([1])]).unwrap(),
            json!({"k": [1]})
        );
        assert_eq!(
            run("padleft", vec![json!(7), json!(3), json!("0")]).unwrap(),
            json!("007")
        );
    }

    #[test]
    fn unique_string_and_guid_are_deterministic() {
        let a = run("uniquestring", vec![json!("rg"), json!("x")]).unwrap();
        let b = run("uniquestring", vec![json!("rg"), json!("x")]).unwrap();
        let c = run("uniquestring", vec![json!("rg"), json!("y")]).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.as_str().unwrap().len(), 13);
        let g = run("guid", vec![json!("x")]).unwrap();
        assert_eq!(g.as_str().unwrap().len(), 36);
    }

    #[test]
    fn unknown_functions_are_not_pure_builtins() {
        assert!(call("listkeys", &[]).is_none());
    }
}
