//! Paths in the links a render writes: percent-encoding for URL paths, and where an
//! attachment is served. A leaf: wikilinks, tags and the face use it.

/// The site path of the attachment whose lower-cased file name is `name`.
pub fn attachment_url(name: &str) -> String {
    format!("/attachments/{}", url_path(name))
}

/// Percent-encodes what may not stand in a URL path (spaces, quotes, non-ASCII...),
/// keeping `/` and `#`.
pub(super) fn url_path(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    for b in p.bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~#".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
