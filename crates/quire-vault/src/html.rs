//! HTML escaping: the one primitive both the markdown renderer and the code
//! highlighter write text through. It has its own module so that neither of them
//! depends on the other for it (`render` calls `highlight`, and both escape).

/// HTML-escapes text and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
