//! An allow-list sanitiser for the markup other crates produce (MathML from the math
//! renderer, SVG from the diagram renderer): the page embeds it inline, so it is
//! hostile until rebuilt from what we allow.
//!
//! Key decisions:
//! - **The output is rebuilt, never passed through**: the input is tokenised
//!   (elements, attributes in quotes, text), and only allowed elements and
//!   attributes are written back, escaped. Anything this tokeniser does not
//!   understand (CDATA, unquoted attributes, unbalanced tags) rejects the whole
//!   input, and the caller falls back to showing the source as text.
//! - Never kept: `on*` attributes, `href`/`src` of any kind, values that name a
//!   scheme or reach outside the document (`url(` other than `url(#…)`, `@import`,
//!   `expression(`, backslash or numeric-entity escapes that could hide them).
//!   `<script>`, `<style>`, `<foreignObject>` go with their content; other unknown
//!   elements (`<a>` included) go but their content stays.
//! - Ids (and `url(#id)` references) get a per-use prefix, so two diagrams on a
//!   page never answer to each other's ids.

/// What one kind of markup may keep.
pub(super) struct Allow {
    /// Elements written back.
    pub(super) elements: &'static [&'static str],
    /// Attributes written back (on allowed elements).
    pub(super) attributes: &'static [&'static str],
    /// Elements dropped together with everything inside them.
    pub(super) drop_with_content: &'static [&'static str],
}

/// Most nesting kept.
const DEPTH_MAX: usize = 256;

/// `input` rebuilt from what `allow` keeps, ids prefixed with `id_prefix`; `None`
/// when the input is not markup this tokeniser reads.
pub(super) fn sanitize(input: &str, allow: &Allow, id_prefix: &str) -> Option<String> {
    let mut out = String::with_capacity(input.len());
    let mut open: Vec<(&str, bool)> = Vec::new(); // (name, written)
    let mut skip = 0usize; // depth inside a dropped-with-content element
    let mut rest = input;
    while !rest.is_empty() {
        let Some(lt) = rest.find('<') else {
            if skip == 0 {
                push_text(&mut out, rest);
            }
            break;
        };
        if skip == 0 {
            push_text(&mut out, &rest[..lt]);
        }
        rest = &rest[lt..];
        if let Some(after) = skip_special(rest)? {
            rest = after;
            continue;
        }
        let end = rest.find('>')?;
        let tag = &rest[1..end];
        rest = &rest[end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            let name = name.trim();
            let (top, written) = open.pop()?;
            if top != name {
                return None;
            }
            if allow.drop_with_content.contains(&name) {
                skip -= 1;
            } else if written && skip == 0 {
                out.push_str("</");
                out.push_str(name);
                out.push('>');
            }
            continue;
        }
        let self_closing = tag.ends_with('/');
        let tag = tag.strip_suffix('/').unwrap_or(tag);
        let (name, attrs) = split_name(tag)?;
        let attrs = parse_attributes(attrs)?;
        let dropped = allow.drop_with_content.contains(&name);
        let written = skip == 0 && !dropped && allow.elements.contains(&name);
        if written {
            write_start(&mut out, name, &attrs, allow, id_prefix, self_closing);
        }
        if !self_closing {
            if dropped {
                skip += 1;
            }
            open.push((name, written));
            if open.len() > DEPTH_MAX {
                return None;
            }
        }
    }
    open.is_empty().then_some(out)
}

/// Comments, processing instructions and doctypes are skipped (`Some(Some(rest))`);
/// CDATA is refused (`None`); anything else is a tag (`Some(None)`).
fn skip_special(s: &str) -> Option<Option<&str>> {
    let closing = if s.starts_with("<!--") {
        "-->"
    } else if s.starts_with("<![CDATA[") {
        return None;
    } else if s.starts_with("<?") {
        "?>"
    } else if s.starts_with("<!") {
        ">"
    } else {
        return Some(None);
    };
    let end = s.find(closing)?;
    Some(Some(&s[end + closing.len()..]))
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.')
}

/// An element's name and the text of its attributes.
fn split_name(tag: &str) -> Option<(&str, &str)> {
    let n = tag.find(|c: char| !is_name_char(c)).unwrap_or(tag.len());
    let name = &tag[..n];
    let rest = &tag[n..];
    (!name.is_empty() && (rest.is_empty() || rest.starts_with(char::is_whitespace)))
        .then_some((name, rest))
}

/// `name="value"` and `name='value'` pairs; `None` for anything else.
fn parse_attributes(mut s: &str) -> Option<Vec<(&str, &str)>> {
    let mut out = Vec::new();
    loop {
        s = s.trim_start();
        if s.is_empty() {
            return Some(out);
        }
        let n = s.find(|c: char| !is_name_char(c))?;
        let name = &s[..n];
        s = s[n..].trim_start().strip_prefix('=')?.trim_start();
        let q = s.chars().next().filter(|c| *c == '"' || *c == '\'')?;
        let end = s[1..].find(q)?;
        out.push((name, &s[1..1 + end]));
        s = &s[end + 2..];
    }
}

/// Whether an attribute value could reach outside the document or run anything.
fn value_is_safe(v: &str) -> bool {
    let l = v.to_ascii_lowercase();
    if l.contains('\\') || l.contains("&#") || l.contains("javascript:") {
        return false;
    }
    if l.contains("@import") || l.contains("expression(") {
        return false;
    }
    l.match_indices("url(")
        .all(|(i, _)| l[i + 4..].trim_start().starts_with('#'))
}

fn write_start(
    out: &mut String,
    name: &str,
    attrs: &[(&str, &str)],
    allow: &Allow,
    id_prefix: &str,
    self_closing: bool,
) {
    out.push('<');
    out.push_str(name);
    for (k, v) in attrs {
        if !allow.attributes.contains(k) || !value_is_safe(v) {
            continue;
        }
        out.push(' ');
        out.push_str(k);
        out.push_str("=\"");
        if *k == "id" {
            out.push_str(id_prefix);
        }
        push_value(out, &v.replace("url(#", &format!("url(#{id_prefix}")));
        out.push('"');
    }
    out.push_str(if self_closing { "/>" } else { ">" });
}

/// Text with `<`, `>` escaped, and `&` kept only where it starts a named entity.
fn push_text(out: &mut String, s: &str) {
    push_escaped(out, s, false);
}

fn push_value(out: &mut String, s: &str) {
    push_escaped(out, s, true);
}

fn push_escaped(out: &mut String, s: &str, attribute: bool) {
    for (i, c) in s.char_indices() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            '&' if !named_entity(&s[i + 1..]) => out.push_str("&amp;"),
            c => out.push(c),
        }
    }
}

/// Whether `s` (what follows a `&`) is a named entity reference, `name;`.
fn named_entity(s: &str) -> bool {
    let n = s
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(s.len());
    n > 0 && n <= 32 && s[n..].starts_with(';')
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALLOW: Allow = Allow {
        elements: &["svg", "g", "text", "path"],
        attributes: &["id", "d", "fill", "style", "marker-end"],
        drop_with_content: &["script", "style"],
    };

    fn clean(s: &str) -> Option<String> {
        sanitize(s, &ALLOW, "p-")
    }

    #[test]
    fn allowed_markup_is_rebuilt() {
        assert_eq!(
            clean("<?xml version=\"1.0\"?><svg><!-- c --><g id='a' fill=\"red\"><path d=\"M0 0\"/><text>a &amp; b &lt; c</text></g></svg>").as_deref(),
            Some("<svg><g id=\"p-a\" fill=\"red\"><path d=\"M0 0\"/><text>a &amp; b &lt; c</text></g></svg>")
        );
    }

    #[test]
    fn scripts_events_and_foreign_references_are_dropped() {
        let s = clean("<svg onload=\"alert(1)\"><script>alert(2)</script><style>*{x:url(http://e)}</style><a href=\"javascript:alert(3)\"><text>kept</text></a><path style=\"fill:url(http://evil/x)\" marker-end=\"url(#m)\" fill=\"&#106;avascript\"/></svg>").unwrap();
        assert_eq!(
            s,
            "<svg><text>kept</text><path marker-end=\"url(#p-m)\"/></svg>"
        );
    }

    #[test]
    fn what_it_cannot_read_is_refused() {
        for bad in [
            "<svg><g></svg>",
            "<svg x=unquoted></svg>",
            "<svg><![CDATA[<script>]]></svg>",
            "<svg></g></svg>",
            "<svg",
        ] {
            assert_eq!(clean(bad), None, "{bad}");
        }
    }

    #[test]
    fn text_and_values_are_escaped() {
        assert_eq!(
            clean("<text id='a\"b'>x > y & z</text>").as_deref(),
            Some("<text id=\"p-a&quot;b\">x &gt; y &amp; z</text>")
        );
    }
}
