//! The ARM template expression language: which JSON strings are expressions,
//! a tokenizer, and a recursive-descent parser producing an [`Expr`] tree.
//!
//! Grammar (what Bicep emits):
//!
//! ```text
//! expression := primary ( '.' identifier | '[' expression ']' )*
//! primary    := string | integer | call
//! call       := identifier [ '.' identifier ] '(' [ expression ( ',' expression )* ] ')'
//! string     := "'" ( any character but "'" | "''" )* "'"
//! ```

use std::iter::Peekable;
use std::str::CharIndices;

use crate::error::ArmError;

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    String(String),
    Int(i64),
    /// `name(args)`, or `namespace.name(args)` for user-defined functions.
    Call {
        namespace: Option<String>,
        name: String,
        args: Vec<Expr>,
    },
    /// `target.name`
    Property {
        target: Box<Expr>,
        name: String,
    },
    /// `target[index]`
    Index {
        target: Box<Expr>,
        index: Box<Expr>,
    },
}

/// What a JSON string inside a template stands for.
#[derive(Debug, Clone, PartialEq)]
pub enum TemplateString {
    /// Plain text (with a leading `[[` already turned into `[`).
    Literal(String),
    /// `[...]`: an expression to evaluate.
    Expression(Expr),
}

/// Classify and, if it is an expression, parse one template string.
pub fn parse_template_string(text: &str) -> Result<TemplateString, ArmError> {
    if let Some(rest) = text.strip_prefix("[[") {
        return Ok(TemplateString::Literal(format!("[{rest}")));
    }
    match text
        .strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
    {
        Some(inner) if !inner.trim().is_empty() => parse_expression(inner)
            .map(TemplateString::Expression)
            .map_err(|error| {
                ArmError::invalid_template(format!(
                    "The language expression '{inner}' is not valid: {}",
                    error.message
                ))
            }),
        _ => Ok(TemplateString::Literal(text.to_string())),
    }
}

/// Deepest an expression tree may be: calls inside calls, and each `.name`
/// or `[index]`. Bicep emits a few levels; the parser, the evaluator and
/// dropping the tree all recurse once per level, so a bound keeps a hostile
/// template from overflowing the stack (which aborts the whole process).
pub const MAX_DEPTH: usize = 64;

/// Parse the text between the outer brackets of an expression.
pub fn parse_expression(text: &str) -> Result<Expr, ArmError> {
    let tokens = tokenize(text)?;
    let mut parser = Parser {
        tokens,
        at: 0,
        depth: 0,
    };
    let expr = parser.expression()?;
    match parser.peek() {
        None => Ok(expr),
        Some(token) => Err(ArmError::invalid_template(format!(
            "unexpected {} at position {} after a complete expression",
            token.kind.describe(),
            token.offset
        ))),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum TokenKind {
    Identifier(String),
    String(String),
    Int(i64),
    LeftParen,
    RightParen,
    LeftBracket,
    RightBracket,
    Comma,
    Dot,
}

impl TokenKind {
    fn describe(&self) -> String {
        match self {
            TokenKind::Identifier(name) => format!("identifier '{name}'"),
            TokenKind::String(text) => format!("string '{text}'"),
            TokenKind::Int(value) => format!("number {value}"),
            TokenKind::LeftParen => "'('".into(),
            TokenKind::RightParen => "')'".into(),
            TokenKind::LeftBracket => "'['".into(),
            TokenKind::RightBracket => "']'".into(),
            TokenKind::Comma => "','".into(),
            TokenKind::Dot => "'.'".into(),
        }
    }
}

#[derive(Debug, Clone)]
struct Token {
    kind: TokenKind,
    offset: usize,
}

/// The characters of an expression still to tokenize, with their offsets.
type Chars<'t> = Peekable<CharIndices<'t>>;

fn tokenize(text: &str) -> Result<Vec<Token>, ArmError> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(offset, c)) = chars.peek() {
        let kind = if let Some(kind) = punctuation(c) {
            chars.next();
            kind
        } else if c.is_whitespace() {
            chars.next();
            continue;
        } else if c == '\'' {
            string_literal(&mut chars, offset)?
        } else if c.is_ascii_digit() || c == '-' {
            integer_literal(text, &mut chars, offset)?
        } else if c.is_alphabetic() || c == '_' || c == '$' {
            identifier(&mut chars)
        } else {
            return Err(ArmError::invalid_template(format!(
                "unexpected character '{c}' at position {offset}"
            )));
        };
        tokens.push(Token { kind, offset });
    }
    Ok(tokens)
}

/// The token a single punctuation character is, if it is one.
fn punctuation(c: char) -> Option<TokenKind> {
    match c {
        '(' => Some(TokenKind::LeftParen),
        ')' => Some(TokenKind::RightParen),
        '[' => Some(TokenKind::LeftBracket),
        ']' => Some(TokenKind::RightBracket),
        ',' => Some(TokenKind::Comma),
        '.' => Some(TokenKind::Dot),
        _ => None,
    }
}

/// A string literal from its opening quote (at `offset`) through its
/// closing one; `''` inside stands for one quote.
fn string_literal(chars: &mut Chars<'_>, offset: usize) -> Result<TokenKind, ArmError> {
    chars.next();
    let mut value = String::new();
    while let Some((_, c)) = chars.next() {
        if c != '\'' {
            value.push(c);
        } else if chars.peek().map(|&(_, next)| next) == Some('\'') {
            chars.next();
            value.push('\'');
        } else {
            return Ok(TokenKind::String(value));
        }
    }
    Err(ArmError::invalid_template(format!(
        "the string starting at position {offset} is not terminated"
    )))
}

/// An integer literal (an optional `-` and digits) starting at `offset`
/// of `text`; a floating point literal is refused.
fn integer_literal(
    text: &str,
    chars: &mut Chars<'_>,
    offset: usize,
) -> Result<TokenKind, ArmError> {
    let mut digits = String::new();
    if let Some((_, c)) = chars.next() {
        digits.push(c);
    }
    while let Some(&(_, d)) = chars.peek() {
        if d.is_ascii_digit() {
            digits.push(d);
            chars.next();
        } else {
            break;
        }
    }
    if chars.peek().map(|&(_, d)| d) == Some('.') && digits != "-" {
        // `1.5` is not part of the language; `x[0].y` is handled by
        // the parser because the digit run ends before the dot.
        let after_dot = text[offset + digits.len() + 1..].chars().next();
        if after_dot.is_some_and(|d| d.is_ascii_digit()) {
            return Err(ArmError::invalid_template(format!(
                "floating point literals are not supported (position {offset})"
            )));
        }
    }
    let value = digits.parse::<i64>().map_err(|_| {
        ArmError::invalid_template(format!("'{digits}' at position {offset} is not an integer"))
    })?;
    Ok(TokenKind::Int(value))
}

/// A function, namespace or property name: letters, digits, `_` and `$`.
fn identifier(chars: &mut Chars<'_>) -> TokenKind {
    let mut name = String::new();
    while let Some(&(_, d)) = chars.peek() {
        if d.is_alphanumeric() || d == '_' || d == '$' {
            name.push(d);
            chars.next();
        } else {
            break;
        }
    }
    TokenKind::Identifier(name)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    /// Depth of the node being parsed, see [`MAX_DEPTH`].
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn peek_kind(&self, ahead: usize) -> Option<&TokenKind> {
        self.tokens.get(self.at + ahead).map(|t| &t.kind)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        if token.is_some() {
            self.at += 1;
        }
        token
    }

    fn expect(&mut self, kind: &TokenKind) -> Result<(), ArmError> {
        match self.next() {
            Some(token) if &token.kind == kind => Ok(()),
            Some(token) => Err(ArmError::invalid_template(format!(
                "expected {} at position {} but found {}",
                kind.describe(),
                token.offset,
                token.kind.describe()
            ))),
            None => Err(ArmError::invalid_template(format!(
                "expected {} but the expression ended",
                kind.describe()
            ))),
        }
    }

    /// One level deeper; an error past [`MAX_DEPTH`].
    fn nest(&mut self) -> Result<(), ArmError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let offset = self.peek().map_or(0, |token| token.offset);
            return Err(ArmError::invalid_template(format!(
                "the expression nests more than {MAX_DEPTH} levels deep (at position {offset})"
            )));
        }
        Ok(())
    }

    fn expression(&mut self) -> Result<Expr, ArmError> {
        let entry = self.depth;
        let result = self.nested_expression();
        self.depth = entry;
        result
    }

    fn nested_expression(&mut self) -> Result<Expr, ArmError> {
        self.nest()?;
        let mut expr = self.primary()?;
        loop {
            match self.peek_kind(0) {
                Some(TokenKind::Dot) => {
                    self.nest()?;
                    self.next();
                    match self.next() {
                        Some(Token {
                            kind: TokenKind::Identifier(name),
                            ..
                        }) => {
                            expr = Expr::Property {
                                target: Box::new(expr),
                                name,
                            }
                        }
                        Some(token) => {
                            return Err(ArmError::invalid_template(format!(
                                "expected a property name after '.' at position {} but found {}",
                                token.offset,
                                token.kind.describe()
                            )));
                        }
                        None => {
                            return Err(ArmError::invalid_template(
                                "expected a property name after '.' but the expression ended",
                            ));
                        }
                    }
                }
                Some(TokenKind::LeftBracket) => {
                    self.nest()?;
                    self.next();
                    let index = self.expression()?;
                    self.expect(&TokenKind::RightBracket)?;
                    expr = Expr::Index {
                        target: Box::new(expr),
                        index: Box::new(index),
                    };
                }
                _ => return Ok(expr),
            }
        }
    }

    fn primary(&mut self) -> Result<Expr, ArmError> {
        let Some(token) = self.next() else {
            return Err(ArmError::invalid_template(
                "expected a value but the expression ended",
            ));
        };
        match token.kind {
            TokenKind::String(text) => Ok(Expr::String(text)),
            TokenKind::Int(value) => Ok(Expr::Int(value)),
            TokenKind::Identifier(first) => {
                // `namespace.function(` is a user-defined function call.
                let (namespace, name) =
                    match (self.peek_kind(0), self.peek_kind(1), self.peek_kind(2)) {
                        (
                            Some(TokenKind::Dot),
                            Some(TokenKind::Identifier(_)),
                            Some(TokenKind::LeftParen),
                        ) => {
                            self.next();
                            let Some(Token {
                                kind: TokenKind::Identifier(name),
                                ..
                            }) = self.next()
                            else {
                                unreachable!("peeked an identifier");
                            };
                            (Some(first), name)
                        }
                        _ => (None, first),
                    };
                if self.peek_kind(0) != Some(&TokenKind::LeftParen) {
                    return Err(ArmError::invalid_template(format!(
                        "'{name}' at position {} must be a function call (an identifier followed by '(')",
                        token.offset
                    )));
                }
                self.next();
                let mut args = Vec::new();
                if self.peek_kind(0) == Some(&TokenKind::RightParen) {
                    self.next();
                } else {
                    loop {
                        args.push(self.expression()?);
                        match self.next() {
                            Some(Token {
                                kind: TokenKind::Comma,
                                ..
                            }) => continue,
                            Some(Token {
                                kind: TokenKind::RightParen,
                                ..
                            }) => break,
                            Some(other) => {
                                return Err(ArmError::invalid_template(format!(
                                    "expected ',' or ')' in the arguments of '{name}' at position {} but found {}",
                                    other.offset,
                                    other.kind.describe()
                                )));
                            }
                            None => {
                                return Err(ArmError::invalid_template(format!(
                                    "the arguments of '{name}' are not closed with ')'"
                                )));
                            }
                        }
                    }
                }
                Ok(Expr::Call {
                    namespace,
                    name,
                    args,
                })
            }
            other => Err(ArmError::invalid_template(format!(
                "expected a value at position {} but found {}",
                token.offset,
                other.describe()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: Vec<Expr>) -> Expr {
        Expr::Call {
            namespace: None,
            name: name.into(),
            args,
        }
    }

    fn s(text: &str) -> Expr {
        Expr::String(text.into())
    }

    #[test]
    fn literals_and_escapes_are_not_expressions() {
        assert_eq!(
            parse_template_string("plain").unwrap(),
            TemplateString::Literal("plain".into())
        );
        assert_eq!(
            parse_template_string("[[not an expression]").unwrap(),
            TemplateString::Literal("[not an expression]".into())
        );
        assert_eq!(
            parse_template_string("[]").unwrap(),
            TemplateString::Literal("[]".into())
        );
        assert_eq!(
            parse_template_string("[a] b").unwrap(),
            TemplateString::Literal("[a] b".into())
        );
    }

    #[test]
    fn parses_calls_properties_and_indexes() {
        let parsed = parse_expression("reference('env').properties['compute'].kind").unwrap();
        let expected = Expr::Property {
            target: Box::new(Expr::Index {
                target: Box::new(Expr::Property {
                    target: Box::new(call("reference", vec![s("env")])),
                    name: "properties".into(),
                }),
                index: Box::new(s("compute")),
            }),
            name: "kind".into(),
        };
        assert_eq!(parsed, expected);
    }

    #[test]
    fn parses_nested_calls_numbers_and_quotes() {
        let parsed =
            parse_expression(" format( '{0}-''x''', parameters('name'), -3 )[0] ").unwrap();
        assert_eq!(
            parsed,
            Expr::Index {
                target: Box::new(call(
                    "format",
                    vec![
                        s("{0}-'x'"),
                        call("parameters", vec![s("name")]),
                        Expr::Int(-3)
                    ]
                )),
                index: Box::new(Expr::Int(0)),
            }
        );
    }

    #[test]
    fn parses_user_function_namespaces() {
        assert_eq!(
            parse_expression("__bicep.greet('x')").unwrap(),
            Expr::Call {
                namespace: Some("__bicep".into()),
                name: "greet".into(),
                args: vec![s("x")],
            }
        );
    }

    #[test]
    fn rejects_malformed_expressions_with_a_reason() {
        for (text, needle) in [
            ("concat('a'", "not closed"),
            ("'open", "not terminated"),
            ("name", "must be a function call"),
            ("f() g()", "after a complete expression"),
            ("f(,)", "expected a value"),
            ("f().", "property name"),
            ("f(1.5)", "floating point"),
            ("f(#)", "unexpected character"),
        ] {
            let error = parse_expression(text).unwrap_err();
            assert!(
                error.message.contains(needle),
                "{text}: {} should mention {needle}",
                error.message
            );
        }
    }
}
