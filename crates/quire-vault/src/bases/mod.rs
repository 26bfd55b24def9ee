//! Obsidian Bases' expression language, evaluated on the server: the filters and
//! formulas of `.base` files (`status != "done" && file.hasTag("book")`,
//! `(price / age).toFixed(2)`, `(now() - file.ctime).days`).
//!
//! This module is the engine: [`read`] takes a `.base` file's YAML into a [`Base`]
//! (filters, formulas, views), [`parse`] reads an expression into a tree, [`eval`]
//! computes it for one note through the [`Row`] trait, within a [`Budget`], and
//! [`run`] runs a view over the notes an audience may read (filters, sort, groups,
//! limit, cells), and [`draw`] draws it as plain HTML. Embedding views in pages,
//! with the notes of the reader's audience, and folding what a base read into the
//! page's version come next (see docs/publishing.md).
//!
//! Key decisions:
//! - **Errors are values.** A formula that does not apply to a note shows its reason
//!   in that note's cell, a filter that errs excludes the note, and an unsupported
//!   function is an error value naming it: a base never fails a page.
//! - **Bounded.** An expression is at most [`EXPR_BYTES_MAX`] bytes and nested at
//!   most 64 deep; evaluation pays a step per node and per 64 bytes or list item it
//!   touches, formulas calling formulas stop at 16 deep (a cycle is an error), and no
//!   formula makes text over 64 KiB. A hostile base costs its budget, not the server.
//! - **Dates are UTC milliseconds**, converted with the civil-calendar arithmetic in
//!   `time.rs`; `now()` is one instant per render, so every row of a view agrees.
//! - **Read by the documented rules**: `&&`/`||` short-circuit, `if` evaluates one
//!   branch, `==` across types is false except a date against a string naming it and
//!   a link against its target's name, `<`/`>` between values that do not compare is
//!   false.

mod definition;
mod error;
mod eval;
mod func;
mod html;
mod lex;
mod note_row;
mod parse;
mod row;
mod run;
mod time;
mod value;

pub use definition::{read, Base, Filter, View, ViewKind};
pub use error::BaseError;
pub use eval::{eval, Budget, Env};
pub use html::{draw, Links};
pub use note_row::NoteRow;
pub use parse::{parse, Expr, EXPR_BYTES_MAX};
pub use row::Row;
pub use run::{run, Column, Group, Outcome, Shown};
pub use value::Value;

#[cfg(test)]
mod tests;
