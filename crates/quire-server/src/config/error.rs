//! The configuration's error: the rule a configuration breaks, in words for the
//! operator (its side and retry are said in `crate::policy`, above this floor).

/// A configuration that cannot work: which rule it breaks, for the operator. Always
/// on quire's own side and never helped by trying again (`Fault` is implemented in
/// `crate::error`'s terms by `crate::policy`, above this plain-data floor).
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration: {why}")]
pub struct ConfigError {
    why: String,
}

impl ConfigError {
    /// The configuration breaks the rule `why` says.
    pub fn new(why: String) -> ConfigError {
        ConfigError { why }
    }

    /// The rule broken, without the "invalid configuration" prefix.
    pub fn reason(&self) -> &str {
        &self.why
    }
}
