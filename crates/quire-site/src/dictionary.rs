//! The site's compression dictionary (RFC 9842): bytes most pages share, which a
//! browser fetches once and then receives every page `dcz`-compressed against.
//!
//! Key decisions:
//! - **Made from the site's own pages, per presentation.** A dictionary is built
//!   when a snapshot's epoch (settings, templates, stylesheet, quire's version) is
//!   new, and carried over by every snapshot of the same epoch, so editing a note
//!   never changes it and clients keep theirs. It is built before the snapshot is
//!   published, so every page of the epoch names it.
//! - **Raw content, chrome once.** Up to [`SAMPLES`] public pages (the index, then
//!   notes spread evenly over the vault in path order) are rendered as an anonymous
//!   reader sees them. The first goes in whole; each other adds only what lies
//!   between the prefix and the suffix it shares with the first (its text and its
//!   own markup, not the header, navigation and footer again), until
//!   [`BYTES_MAX`]. The last samples end up nearest the page being compressed. A raw
//!   dictionary is what RFC 9842 specifies for `dcz`; zstd's trainer output was not
//!   used, since it starts with zstd's dictionary magic, which a decoder that detects
//!   formatted dictionaries would read as one.
//! - **Served at a content-addressed path** ([`PATH_PREFIX`] + hex SHA-256), immutable,
//!   with `Use-As-Dictionary` matching every page path (`match="/*"`, documents
//!   only); pages point at it with a `Link` field. The previous epoch's dictionary is
//!   still served ([`Set`]) while browsers that hold it come back.
//! - **Off** with `compression_dictionary = false` in `site.toml`.
//!
//! The sample is rendered by [`crate::dictionary_pages`]; this module is the
//! dictionary's shape, with no import of the site's other parts.

use std::sync::Arc;

use quire_http::dictionary::Dictionary;

/// Pages sampled at most.
pub const SAMPLES: usize = 64;
/// The dictionary's size at most (Chromium and the RFC allow far more; past a few
/// tens of kilobytes a page's own chrome is covered and the rest is other pages'
/// prose).
pub const BYTES_MAX: usize = 128 * 1024;
/// Where dictionaries are served: this, then the hash in hex, then `.dict`.
pub const PATH_PREFIX: &str = "/_static/dictionary-";

/// The path a dictionary is served at.
pub fn path(d: &Dictionary) -> String {
    format!("{PATH_PREFIX}{}.dict", d.hex())
}

/// A snapshot's dictionaries: the one its pages name, and the previous epoch's,
/// still served to browsers that hold it.
#[derive(Debug, Default, Clone)]
pub struct Set {
    current: Option<Arc<Dictionary>>,
    previous: Option<Arc<Dictionary>>,
}

impl Set {
    /// The dictionary pages name.
    pub fn current(&self) -> Option<&Arc<Dictionary>> {
        self.current.as_ref()
    }

    /// The dictionary served at `hex` (its hash in hex), if kept.
    pub fn by_hex(&self, hex: &str) -> Option<&Arc<Dictionary>> {
        [&self.current, &self.previous]
            .into_iter()
            .flatten()
            .find(|d| d.hex() == hex)
    }

    /// A set of `current`, with `previous` still served.
    pub fn new(current: Option<Arc<Dictionary>>, previous: Option<Arc<Dictionary>>) -> Set {
        Set { current, previous }
    }
}

/// The dictionary's bytes from rendered pages (module doc).
pub fn assemble(pages: &[Vec<u8>]) -> Vec<u8> {
    quire_http::dictionary::assemble(pages, BYTES_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chrome_goes_in_once_and_the_size_is_capped() {
        let page = |body: &str| {
            format!("<html><nav>NAV</nav>{body}<footer>F</footer></html>").into_bytes()
        };
        let d = assemble(&[page("first"), page("second"), page("third")]);
        let text = String::from_utf8(d).unwrap();
        assert_eq!(text.matches("<nav>NAV</nav>").count(), 1, "{text}");
        assert!(text.contains("second") && text.contains("third"), "{text}");
        let big = vec![b'x'; BYTES_MAX * 2];
        assert_eq!(assemble(&[big.clone(), big]).len(), BYTES_MAX);
        assert!(assemble(&[]).is_empty());
        let magic = vec![0x37, 0xa4, 0x30, 0xec, 1, 2];
        assert!(!assemble(&[magic]).starts_with(&[0x37, 0xa4, 0x30, 0xec]));
    }
}
