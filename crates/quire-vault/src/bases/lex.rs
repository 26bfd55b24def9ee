//! The tokens of a Bases expression (`status != "done" && file.hasTag("book")`).
//! Bounded by the caller: an expression longer than [`super::parse::EXPR_BYTES_MAX`] is
//! refused before it is read.

use super::error::BaseError;

/// One token.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Token {
    /// A number literal.
    Num(f64),
    /// A string literal, unescaped.
    Str(String),
    /// A name: a property, a function, `file`, `note`, `formula`, `true`…
    Ident(String),
    /// An operator or punctuation: `(` `)` `[` `]` `,` `.` `+` `-` `*` `/` `%` `!`
    /// `==` `!=` `<` `<=` `>` `>=` `&&` `||`.
    Op(&'static str),
}

/// Operators, longest first so `<=` is not read as `<` `=`.
const OPS: [&str; 20] = [
    "==", "!=", "<=", ">=", "&&", "||", "(", ")", "[", "]", ",", ".", "+", "-", "*", "/", "%", "!",
    "<", ">",
];

/// The tokens of `src`, or why it is not an expression.
pub(crate) fn tokens(src: &str) -> Result<Vec<Token>, BaseError> {
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(c) = rest.chars().next() {
        if c.is_whitespace() {
            rest = &rest[c.len_utf8()..];
        } else if c.is_ascii_digit() {
            let end = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(rest.len());
            let n = rest[..end]
                .parse()
                .map_err(|_| BaseError::Syntax(format!("`{}` is not a number", &rest[..end])))?;
            out.push(Token::Num(n));
            rest = &rest[end..];
        } else if c == '"' || c == '\'' {
            let (s, after) = string(rest, c)?;
            out.push(Token::Str(s));
            rest = after;
        } else if c.is_alphabetic() || c == '_' {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            out.push(Token::Ident(rest[..end].to_owned()));
            rest = &rest[end..];
        } else if let Some(op) = OPS.iter().find(|op| rest.starts_with(**op)) {
            out.push(Token::Op(op));
            rest = &rest[op.len()..];
        } else {
            return Err(BaseError::Syntax(format!("unexpected `{c}`")));
        }
    }
    Ok(out)
}

/// A string literal opened by `quote` at the start of `src`; returns it and the rest.
fn string(src: &str, quote: char) -> Result<(String, &str), BaseError> {
    let mut s = String::new();
    let mut chars = src.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, 'n')) => s.push('\n'),
                Some((_, 't')) => s.push('\t'),
                Some((_, e)) => s.push(e),
                None => break,
            },
            c if c == quote => return Ok((s, &src[i + 1..])),
            c => s.push(c),
        }
    }
    Err(BaseError::Syntax("a string is not closed".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expression_is_read_into_tokens() {
        assert_eq!(
            tokens(r#"price >= 2.5 && file.hasTag('a\'b')"#).unwrap(),
            [
                Token::Ident("price".into()),
                Token::Op(">="),
                Token::Num(2.5),
                Token::Op("&&"),
                Token::Ident("file".into()),
                Token::Op("."),
                Token::Ident("hasTag".into()),
                Token::Op("("),
                Token::Str("a'b".into()),
                Token::Op(")"),
            ]
        );
        assert!(tokens("\"open").is_err());
        assert!(tokens("a # b").is_err());
        assert!(tokens("1.2.3").is_err());
    }
}
