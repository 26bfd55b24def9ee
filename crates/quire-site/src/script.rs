//! The one page script quire can add, off by default (`hover_previews = true` in
//! `site.toml`): link previews in a popover on hover or focus, and pan and zoom on
//! `/graph`. Compiled into the binary, served at [`SCRIPT_PATH`], never fetched from
//! anywhere else.
//!
//! Key decision: **the script is allowed by its hash, not by its origin.** When the
//! option is on, a page's CSP says `script-src 'sha256-…'` with the SHA-256 of
//! exactly the bytes served (computed once, at start-up; the policy is `crate::csp`), and the `<script>` element
//! carries the same value as its `integrity`: a browser runs that script and no other,
//! not even another file on this site. With the option off, pages carry no script
//! element and the CSP says `script-src 'none'`, as before.

use std::sync::LazyLock;

use base64::Engine as _;
use sha2::{Digest, Sha256};

/// The script's bytes.
pub const SCRIPT: &str = include_str!("../static/quire.js");

/// Where it is served.
pub const SCRIPT_PATH: &str = "/_static/quire.js";

/// `sha256-` and the base64 SHA-256 of [`SCRIPT`].
static INTEGRITY: LazyLock<String> = LazyLock::new(|| {
    let digest = Sha256::digest(SCRIPT.as_bytes());
    format!(
        "sha256-{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
});

/// The `integrity` value (and CSP source) of the script.
pub fn integrity() -> &'static str {
    &INTEGRITY
}

/// The script's version, in its URL (`?v=`), which makes it immutable.
pub fn version() -> u64 {
    xxhash_rust::xxh3::xxh3_64(SCRIPT.as_bytes()) | 1
}

/// The script's URL with its version.
pub fn url() -> String {
    format!("{SCRIPT_PATH}?v={:016x}", version())
}
