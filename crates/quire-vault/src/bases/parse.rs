//! Bases expressions parsed into a tree, by precedence climbing: `||`, `&&`,
//! equality, comparison, `+ -`, `* / %`, unary `! -`, then member access, calls and
//! indexing. Nesting is bounded ([`DEPTH_MAX`]), so a hostile `((((…` costs a
//! refusal, not the stack.

use super::error::BaseError;
use super::lex::{tokens, Token};

/// The longest expression read, in bytes.
pub const EXPR_BYTES_MAX: usize = 4096;

/// Nesting at most (parentheses, calls, unary operators, member chains).
const DEPTH_MAX: usize = 64;
/// The error of an expression nested past [`DEPTH_MAX`].
const NESTING: BaseError = BaseError::Limit {
    what: "nesting",
    max: DEPTH_MAX,
};
/// Items of a list literal or arguments of a call at most.
const ITEMS_MAX: usize = 256;

/// An expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number.
    Num(f64),
    /// A string.
    Str(String),
    /// A bare name: a note property, or `file`, `note`, `formula`, `this`.
    Name(String),
    /// `value.name`.
    Member(Box<Expr>, String),
    /// `value[index]`.
    Index(Box<Expr>, Box<Expr>),
    /// `name(args)` (a global function) or `value.name(args)` (a method).
    Call(Box<Expr>, Vec<Expr>),
    /// `!value` (`"!"`) or `-value` (`"-"`).
    Unary(&'static str, Box<Expr>),
    /// `left op right`.
    Binary(&'static str, Box<Expr>, Box<Expr>),
    /// `[a, b]`.
    List(Vec<Expr>),
}

/// Parses `src`, or says why it is not an expression.
pub fn parse(src: &str) -> Result<Expr, BaseError> {
    if src.len() > EXPR_BYTES_MAX {
        return Err(BaseError::Limit {
            what: "bytes",
            max: EXPR_BYTES_MAX,
        });
    }
    let toks = tokens(src)?;
    let mut p = Parser { toks, at: 0 };
    let e = p.binary(0, 0)?;
    match p.toks.get(p.at) {
        None => Ok(e),
        Some(t) => Err(BaseError::Syntax(format!(
            "unexpected {} after the expression",
            show(t)
        ))),
    }
}

/// Binary operators by precedence, loosest first.
const LEVELS: [&[&str]; 6] = [
    &["||"],
    &["&&"],
    &["==", "!="],
    &["<", "<=", ">", ">="],
    &["+", "-"],
    &["*", "/", "%"],
];

struct Parser {
    toks: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek_op(&self) -> Option<&'static str> {
        match self.toks.get(self.at) {
            Some(Token::Op(op)) => Some(op),
            _ => None,
        }
    }

    fn eat(&mut self, op: &str) -> bool {
        if self.peek_op() == Some(op) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, op: &str) -> Result<(), BaseError> {
        if self.eat(op) {
            return Ok(());
        }
        match self.toks.get(self.at) {
            Some(t) => Err(BaseError::Syntax(format!(
                "expected `{op}`, found {}",
                show(t)
            ))),
            None => Err(BaseError::Syntax(format!("expected `{op}` at the end"))),
        }
    }

    fn binary(&mut self, level: usize, depth: usize) -> Result<Expr, BaseError> {
        if depth > DEPTH_MAX {
            return Err(NESTING);
        }
        let Some(ops) = LEVELS.get(level) else {
            return self.unary(depth);
        };
        let mut left = self.binary(level + 1, depth)?;
        while let Some(op) = self.peek_op().filter(|op| ops.contains(op)) {
            self.at += 1;
            let right = self.binary(level + 1, depth)?;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn unary(&mut self, depth: usize) -> Result<Expr, BaseError> {
        if depth > DEPTH_MAX {
            return Err(NESTING);
        }
        for op in ["!", "-"] {
            if self.eat(op) {
                return Ok(Expr::Unary(op, Box::new(self.unary(depth + 1)?)));
            }
        }
        let mut e = self.primary(depth)?;
        for _ in 0..=DEPTH_MAX {
            if self.eat(".") {
                match self.toks.get(self.at) {
                    Some(Token::Ident(name)) => {
                        e = Expr::Member(Box::new(e), name.clone());
                        self.at += 1;
                    }
                    _ => return Err(BaseError::Syntax("expected a name after `.`".to_owned())),
                }
            } else if self.eat("(") {
                let args = self.items(")", depth)?;
                e = Expr::Call(Box::new(e), args);
            } else if self.eat("[") {
                let index = self.binary(0, depth + 1)?;
                self.expect("]")?;
                e = Expr::Index(Box::new(e), Box::new(index));
            } else {
                return Ok(e);
            }
        }
        Err(BaseError::Limit {
            what: "chain",
            max: DEPTH_MAX,
        })
    }

    fn primary(&mut self, depth: usize) -> Result<Expr, BaseError> {
        let Some(t) = self.toks.get(self.at).cloned() else {
            return Err(BaseError::Syntax("the expression ends too soon".to_owned()));
        };
        self.at += 1;
        Ok(match t {
            Token::Num(n) => Expr::Num(n),
            Token::Str(s) => Expr::Str(s),
            Token::Ident(name) => match name.as_str() {
                "true" => Expr::Bool(true),
                "false" => Expr::Bool(false),
                "null" => Expr::Null,
                _ => Expr::Name(name),
            },
            Token::Op("(") => {
                let e = self.binary(0, depth + 1)?;
                self.expect(")")?;
                e
            }
            Token::Op("[") => Expr::List(self.items("]", depth)?),
            Token::Op(op) => return Err(BaseError::Syntax(format!("unexpected `{op}`"))),
        })
    }

    /// Comma-separated expressions up to `close` (already past the opener).
    fn items(&mut self, close: &str, depth: usize) -> Result<Vec<Expr>, BaseError> {
        let mut items = Vec::new();
        if self.eat(close) {
            return Ok(items);
        }
        loop {
            if items.len() == ITEMS_MAX {
                return Err(BaseError::Limit {
                    what: "items",
                    max: ITEMS_MAX,
                });
            }
            items.push(self.binary(0, depth + 1)?);
            if self.eat(close) {
                return Ok(items);
            }
            self.expect(",")?;
        }
    }
}

fn show(t: &Token) -> String {
    match t {
        Token::Num(n) => format!("`{n}`"),
        Token::Str(s) => format!("{s:?}"),
        Token::Ident(s) => format!("`{s}`"),
        Token::Op(op) => format!("`{op}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Box<Expr> {
        Box::new(Expr::Name(s.into()))
    }

    #[test]
    fn precedence_and_chains_build_the_tree_obsidian_means() {
        assert_eq!(
            parse("a || b && !c").unwrap(),
            Expr::Binary(
                "||",
                name("a"),
                Box::new(Expr::Binary(
                    "&&",
                    name("b"),
                    Box::new(Expr::Unary("!", name("c")))
                ))
            )
        );
        assert_eq!(
            parse("(price / age).toFixed(2)").unwrap(),
            Expr::Call(
                Box::new(Expr::Member(
                    Box::new(Expr::Binary("/", name("price"), name("age"))),
                    "toFixed".into()
                )),
                vec![Expr::Num(2.0)]
            )
        );
        assert_eq!(
            parse("1 + 2 * 3 == 7").unwrap(),
            Expr::Binary(
                "==",
                Box::new(Expr::Binary(
                    "+",
                    Box::new(Expr::Num(1.0)),
                    Box::new(Expr::Binary(
                        "*",
                        Box::new(Expr::Num(2.0)),
                        Box::new(Expr::Num(3.0))
                    ))
                )),
                Box::new(Expr::Num(7.0))
            )
        );
        assert_eq!(
            parse("note[\"my prop\"][0]").unwrap(),
            Expr::Index(
                Box::new(Expr::Index(
                    name("note"),
                    Box::new(Expr::Str("my prop".into()))
                )),
                Box::new(Expr::Num(0.0))
            )
        );
    }

    #[test]
    fn bad_and_hostile_expressions_are_refused_with_a_reason() {
        for bad in ["", "a +", "f(1,", "(a", "a b", "a.", "[1 2]", ")"] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
        let deep = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(matches!(
            parse(&deep),
            Err(BaseError::Limit { what: "bytes", .. })
        ));
        let deep = format!("{}1{}", "(".repeat(1_000), ")".repeat(1_000));
        assert_eq!(parse(&deep), Err(NESTING));
        let nots = format!("{}a", "!".repeat(1_000));
        assert_eq!(parse(&nots), Err(NESTING));
        let chain = format!("a{}", ".b".repeat(500));
        assert!(matches!(
            parse(&chain),
            Err(BaseError::Limit { what: "chain", .. })
        ));
    }
}
