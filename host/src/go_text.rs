//! Text exactly as Go's `encoding/json` writes it, for the places radwasm
//! must match Go byte for byte (Radius's status hash, manifests in Radius's
//! CLI shape).
//!
//! serde_json does the writing; [`GoFormatter`] wraps one of its formatters
//! and changes only what Go does differently:
//!
//! - Go escapes `<`, `>`, `&`, U+2028 and U+2029 in every string (its HTML
//!   escaping, on by default) as `\u003c`, `\u003e`, `\u0026`, `\u2028`,
//!   `\u2029`. serde_json's other escapes (`\"`, `\\`, `\b`, `\f`, `\n`,
//!   `\r`, `\t`, other control characters as lower-case `\u00XX`) are Go's
//!   already.
//! - Go writes a float64 in plain decimal between 1e-6 and 1e21 and with an
//!   exponent outside it (`1e+21`, `1.5e-7`), always in the shortest form
//!   that reads back the same (`1.0` as `1`). Whole numbers that serde_json
//!   holds as integers are written exactly (Go, reading them into float64,
//!   would round those beyond 2^53).
//!
//! Keys are written in the order the value serializes them in. Go sorts the
//! keys of every map and writes struct fields in declaration order; the same
//! holds for `serde_json::Value` (whose map is sorted while serde_json's
//! `preserve_order` feature is off), `BTreeMap` and `#[derive(Serialize)]`
//! structs, which are what this is used with.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter, PrettyFormatter};

/// Go's `json.Marshal(v)`: no whitespace.
///
/// # Panics
///
/// If `value` cannot be written as JSON at all (its `Serialize` fails, or it
/// has a map whose keys are not text); never for `serde_json::Value`,
/// strings, maps of strings or structs of those.
pub fn to_string_compact<T: Serialize + ?Sized>(value: &T) -> String {
    write_with(GoFormatter::new(CompactFormatter), value)
}

/// Go's `json.MarshalIndent(v, "", "  ")`: one entry a line, two spaces an
/// indent, `{}` and `[]` for empty objects and arrays.
///
/// # Panics
///
/// As [`to_string_compact`].
pub fn to_string_indent<T: Serialize + ?Sized>(value: &T) -> String {
    write_with(GoFormatter::new(PrettyFormatter::with_indent(b"  ")), value)
}

fn write_with<F: Formatter, T: Serialize + ?Sized>(formatter: F, value: &T) -> String {
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    value
        .serialize(&mut serializer)
        .expect("the value can be written as JSON");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// A serde_json formatter that writes strings and floats as Go does and
/// leaves the layout (where whitespace goes) to the formatter it wraps.
#[derive(Debug, Clone)]
pub struct GoFormatter<F> {
    layout: F,
}

impl<F: Formatter> GoFormatter<F> {
    /// Go's text in `layout`'s layout: [`CompactFormatter`] for
    /// `json.Marshal`, `PrettyFormatter::with_indent(b"  ")` for
    /// `json.MarshalIndent(v, "", "  ")`.
    pub fn new(layout: F) -> Self {
        Self { layout }
    }
}

/// The characters Go escapes as `\uXXXX` that serde_json writes as they are.
const HTML_AND_LINE_SEPARATORS: [char; 5] = ['<', '>', '&', '\u{2028}', '\u{2029}'];

impl<F: Formatter> Formatter for GoFormatter<F> {
    /// A piece of a string that serde_json needs no escape for, with Go's
    /// extra escapes applied.
    fn write_string_fragment<W>(&mut self, writer: &mut W, fragment: &str) -> io::Result<()>
    where
        W: ?Sized + Write,
    {
        let mut rest = fragment;
        while let Some(at) = rest.find(HTML_AND_LINE_SEPARATORS) {
            let (plain, escaped) = rest.split_at(at);
            writer.write_all(plain.as_bytes())?;
            let c = escaped.chars().next().expect("find stops at a character");
            write!(writer, "\\u{:04x}", u32::from(c))?;
            rest = &escaped[c.len_utf8()..];
        }
        writer.write_all(rest.as_bytes())
    }

    fn write_f64<W>(&mut self, writer: &mut W, value: f64) -> io::Result<()>
    where
        W: ?Sized + Write,
    {
        writer.write_all(go_float64(value).as_bytes())
    }

    // The layout: whatever the wrapped formatter does. (Numbers other than
    // floats, `null` and booleans are written by the trait's defaults, which
    // neither CompactFormatter nor PrettyFormatter changes.)

    fn begin_array<W>(&mut self, writer: &mut W) -> io::Result<()>
    where
        W: ?Sized + Write,
    {
        self.layout.begin_array(writer)
    }

    fn end_array<W>(&mut self, writer: &mut W) -> io::Result<()>
    where
        W: ?Sized + Write,
    {
        self.layout.end_array(writer)
    }

    fn begin_array_value<W>(&mut self, writer: &mut W, first: bool) -> io::Result<()>
    where
        W: ?Sized + Write,
    {
        self.layout.begin_array_value(writer, first)
    }

    fn end_array_value<W>(&mut self, writer: &mut W) -> io::Result<()>
    where
        W: ?Sized + Write,
    {
        self.layout.end_array_value(writer)
    }

    fn begin_object<W>(&mut self, writer: &mut W) -> io::Result<()>
    where
        W: ?Sized + Write,
    {
        self.layout.begin_object(writer)
    }

    fn end_object<W>(&mut self, writer: &mut W) -> io::Result<()>
    where
        W: ?Sized + Write,
    {
        self.layout.end_object(writer)
    }

    fn begin_object_key<W>(&mut self, writer: &mut W, first: bool) -> io::Result<()>
    where
        W: ?Sized + Write,
    {
        self.layout.begin_object_key(writer, first)
    }

    fn end_object_key<W>(&mut self, writer: &mut W) -> io::Result<()>
    where
        W: ?Sized + Write,
    {
        self.layout.end_object_key(writer)
    }

    fn begin_object_value<W>(&mut self, writer: &mut W) -> io::Result<()>
    where
        W: ?Sized + Write,
    {
        self.layout.begin_object_value(writer)
    }

    fn end_object_value<W>(&mut self, writer: &mut W) -> io::Result<()>
    where
        W: ?Sized + Write,
    {
        self.layout.end_object_value(writer)
    }
}

/// A float64 as Go's `encoding/json` writes it: the shortest text that reads
/// back as the same number, plain decimal for magnitudes in [1e-6, 1e21)
/// (and zero), otherwise an exponent with a sign and no leading zeros
/// (`1e+21`, `1.5e-7`).
fn go_float64(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude == 0.0 || (1e-6..1e21).contains(&magnitude) {
        // Rust's Display is also the shortest round-trip form, never with
        // an exponent: `1`, `2.5`, `-0`, `0.000001`.
        return value.to_string();
    }
    // Rust's `{:e}` gives `1e21` and `1.5e-7`; Go writes a `+` on a
    // positive exponent.
    let formatted = format!("{value:e}");
    match formatted.split_once('e') {
        Some((mantissa, exponent)) if !exponent.starts_with('-') => {
            format!("{mantissa}e+{exponent}")
        }
        _ => formatted,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn indented_as_go_marshal_indent_writes_it() {
        let value: Value = serde_json::from_str(
            r#"{"b": [1, 1.0, 2.5, 1e21, 1.5e-7, -0.0, 12345678901234567890], "a": {}, "c": [], "d": "<a & b>\u2028", "e": null, "f": true, "g": {"y": [{}], "x": 1}}"#,
        )
        .expect("json");
        assert_eq!(
            to_string_indent(&value),
            "{\n  \"a\": {},\n  \"b\": [\n    1,\n    1,\n    2.5,\n    1e+21,\n    1.5e-7,\n    -0,\n    12345678901234567890\n  ],\n  \"c\": [],\n  \"d\": \"\\u003ca \\u0026 b\\u003e\\u2028\",\n  \"e\": null,\n  \"f\": true,\n  \"g\": {\n    \"x\": 1,\n    \"y\": [\n      {}\n    ]\n  }\n}"
        );
    }

    #[test]
    fn compact_as_go_marshal_writes_it() {
        let value = json!({"tag": "v1", "list": [1, 2.5, "x"], "empty": {}, "html": "<b>"});
        assert_eq!(
            to_string_compact(&value),
            r#"{"empty":{},"html":"\u003cb\u003e","list":[1,2.5,"x"],"tag":"v1"}"#
        );
    }

    #[test]
    fn object_keys_come_out_sorted_whatever_order_they_went_in() {
        // Fails if serde_json's `preserve_order` feature is ever switched on
        // in the build: Go sorts map keys, insertion order would not.
        let mut map = serde_json::Map::new();
        for key in ["zeta", "Alpha", "beta", "$schema", "10", "9"] {
            map.insert(key.to_string(), Value::from(1));
        }
        assert_eq!(
            to_string_compact(&Value::Object(map)),
            r#"{"$schema":1,"10":1,"9":1,"Alpha":1,"beta":1,"zeta":1}"#
        );
    }

    #[test]
    fn the_five_characters_go_adds_to_json_escaping() {
        for (text, expected) in [
            ("<", r#""\u003c""#),
            (">", r#""\u003e""#),
            ("&", r#""\u0026""#),
            ("\u{2028}", r#""\u2028""#),
            ("\u{2029}", r#""\u2029""#),
            (
                "a<b>&c\u{2028}d\u{2029}e",
                r#""a\u003cb\u003e\u0026c\u2028d\u2029e""#,
            ),
            // Next to serde_json's own escapes, in keys as well as values.
            ("\"<\\>\n&", r#""\"\u003c\\\u003e\n\u0026""#),
            // Other non-ASCII text is written as it is, as Go does.
            ("café ☕ 😀 \u{2027}", "\"café ☕ 😀 \u{2027}\""),
        ] {
            assert_eq!(to_string_compact(text), expected, "{text:?}");
            let map = BTreeMap::from([(text, text)]);
            assert_eq!(
                to_string_compact(&map),
                format!("{{{expected}:{expected}}}"),
                "{text:?}"
            );
        }
    }

    #[test]
    fn control_characters_as_go_escapes_them() {
        assert_eq!(to_string_compact("\u{8}\u{c}\n\r\t"), r#""\b\f\n\r\t""#);
        assert_eq!(
            to_string_compact("\u{0}\u{1}\u{b}\u{1b}\u{1f}"),
            r#""\u0000\u0001\u000b\u001b\u001f""#
        );
        // DEL and C1 controls are not escaped by Go either.
        assert_eq!(to_string_compact("\u{7f}\u{85}"), "\"\u{7f}\u{85}\"");
        assert_eq!(
            to_string_compact("tab\tquote\"\u{1}"),
            r#""tab\tquote\"\u0001""#
        );
    }

    #[test]
    fn floats_as_go_writes_a_float64() {
        for (value, expected) in [
            (1.0, "1"),
            (-2.5, "-2.5"),
            (0.0, "0"),
            (-0.0, "-0"),
            (0.1, "0.1"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (-1.5e300, "-1.5e+300"),
            (0.000001, "0.000001"),
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (123456.789, "123456.789"),
        ] {
            assert_eq!(to_string_compact(&value), expected, "{value:?}");
        }
        // Whole numbers held as integers stay exact, beyond 2^53 too.
        assert_eq!(
            to_string_compact(&json!([9007199254740993_u64, -9007199254740993_i64])),
            "[9007199254740993,-9007199254740993]"
        );
    }

    #[test]
    fn structs_keep_their_field_order() {
        // As Go writes a struct: fields in declaration order, not sorted.
        #[derive(Serialize)]
        struct Providers<'a> {
            radius: &'a str,
            deployments: &'a str,
        }
        let providers = Providers {
            radius: "<r>",
            deployments: "d",
        };
        assert_eq!(
            to_string_indent(&providers),
            "{\n  \"radius\": \"\\u003cr\\u003e\",\n  \"deployments\": \"d\"\n}"
        );
    }
}
