//! Why a Bases expression or a `.base` file was refused: the one error type of the
//! engine. A refused formula or filter is kept as its error and shown where it is
//! used; a refused base is shown in place of its embed.

use crate::front::FrontError;

/// Why an expression or a base was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BaseError {
    /// Not an expression: what was found where, in words.
    #[error("{0}")]
    Syntax(String),
    /// Past one of the engine's bounds (hostile or runaway input).
    #[error("{what}: more than {max}")]
    Limit {
        /// What was counted: `bytes`, `nesting`, `items`, `views`…
        what: &'static str,
        /// The bound.
        max: usize,
    },
    /// YAML of the wrong shape for a base, with what it should be.
    #[error("{0}")]
    Shape(&'static str),
    /// The YAML itself was refused (not YAML, or past the front-matter bounds).
    #[error(transparent)]
    Yaml(#[from] FrontError),
}
