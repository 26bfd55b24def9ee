//! The `[log]` section: where the access log goes and in which format (the log
//! itself is `crate::ops::access_log`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::ByteSize;

/// The `[log]` section.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogSection {
    /// Where the access log goes: a file (appended to, created `0640`), or `-` for
    /// standard output. Off when absent.
    pub access: Option<PathBuf>,
    /// `combined` (default) or `json`.
    pub format: Format,
    /// Lines queued for the writer at most, in bytes; past it lines are dropped and
    /// counted (`quire_log_dropped_total`), never waited for.
    pub queue_bytes: ByteSize,
}

impl Default for LogSection {
    fn default() -> Self {
        LogSection {
            access: None,
            format: Format::Combined,
            queue_bytes: ByteSize(4 << 20),
        }
    }
}

/// A line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// nginx/Apache `combined`, plus `cache=<outcome>`.
    #[default]
    Combined,
    /// One JSON object a line.
    Json,
}
