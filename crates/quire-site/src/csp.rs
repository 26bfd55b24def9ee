//! The `Content-Security-Policy` of quire's HTML pages: one policy that allows no
//! script, and the same policy with the one page script allowed by its hash.
//!
//! Key decision: **both policies are one text.** The scripted policy is the plain one
//! with `script-src 'none'` replaced by the script's hash, so the two cannot drift;
//! this module sits below [`crate::reply`] (which sends the header) and above
//! [`crate::script`] (which owns the script and its hash).

use std::sync::LazyLock;

/// The `Content-Security-Policy` of every page: quire's templates need no script, and
/// raw HTML in a note cannot run any either. With `hover_previews` on, the one page
/// script is allowed by its hash instead ([`scripted`]).
pub(crate) const PAGE: &str = "default-src 'self'; img-src 'self' data: https:; style-src 'self' 'unsafe-inline'; script-src 'none'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The CSP of a page that loads the script.
static SCRIPTED: LazyLock<String> = LazyLock::new(|| {
    PAGE.replace(
        "script-src 'none'",
        &format!("script-src '{}'", crate::script::integrity()),
    )
});

/// The `Content-Security-Policy` of a page that loads the script.
pub(crate) fn scripted() -> &'static str {
    &SCRIPTED
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::integrity;

    #[test]
    fn the_csp_allows_the_script_by_hash_and_nothing_else() {
        assert!(integrity().starts_with("sha256-") && integrity().len() == 7 + 44);
        assert!(scripted().contains(&format!("script-src '{}';", integrity())));
        assert!(!scripted().contains("script-src 'none'"));
        assert_eq!(
            scripted().replace(&format!("'{}'", integrity()), "'none'"),
            PAGE
        );
    }
}
