//! A view, run, drawn as plain HTML: a `<table>`, cards (`<ul class="base-cards">`,
//! an image on top when the view names one) or a list, with group headings, the
//! count, and a visible note when the server cut the view. No script: the page is
//! readable as served.
//!
//! What a cell links to is the caller's to say ([`Links`]): a note's page only if the
//! reader's audience may read it (otherwise its name is plain text, as a wikilink to
//! such a note is), an image only from the vault's attachments. Every text is
//! escaped. The HTML is bounded by [`BYTES_MAX`]: past it the rows stop and the note
//! says so.

use std::fmt::Write;

use super::definition::{View, ViewKind};
use super::run::{Outcome, Shown};
use super::value::Value;
use crate::html::escape;

/// HTML one view may make, at most.
pub(crate) const BYTES_MAX: usize = 256 * 1024;

/// Where the cells of a view may link to.
pub trait Links {
    /// The page of input row `index` (the note itself), if the reader may read it.
    fn row_url(&self, index: usize) -> Option<String>;
    /// The page a link to `target` (as written in `[[target]]`) opens, if any.
    fn link_url(&self, target: &str) -> Option<String>;
    /// The URL of the image a property names (an attachment), if any.
    fn image_url(&self, name: &str) -> Option<String>;
}

/// `view`'s outcome as HTML.
pub fn draw(view: &View, out: &Outcome, links: &dyn Links) -> String {
    let mut html = String::new();
    let shown: usize = out.groups.iter().map(|g| g.rows.len()).sum();
    let _ = write!(
        html,
        "<section class=\"base base-{}\"><h4 class=\"base-name\">{}</h4><p class=\"base-count\">{} of {} notes</p>",
        kind_class(&view.kind),
        escape(&view.name),
        shown,
        out.matched
    );
    if let ViewKind::Other(kind) = &view.kind {
        let _ = write!(
            html,
            "<p class=\"base-unsupported\">Views of type “{}” are not shown on the published site.</p></section>",
            escape(kind)
        );
        return html;
    }
    let mut cut = out.cut.clone();
    for g in &out.groups {
        if let Some(key) = &g.key {
            let _ = write!(html, "<h5 class=\"base-group\">{}</h5>", cell(key, links));
        }
        if !draw_group(&mut html, view, out, &g.rows, links) {
            cut = Some(format!("the view is longer than {} KiB", BYTES_MAX / 1024));
            break;
        }
    }
    if let Some(why) = cut {
        let _ = write!(
            html,
            "<p class=\"base-cut\">Not every note is shown: {}.</p>",
            escape(&why)
        );
    }
    html.push_str("</section>");
    html
}

fn kind_class(kind: &ViewKind) -> &str {
    match kind {
        ViewKind::Table => "table",
        ViewKind::Cards => "cards",
        ViewKind::List => "list",
        ViewKind::Other(_) => "other",
    }
}

/// Draws one group's rows; false when the HTML bound stopped it.
fn draw_group(
    html: &mut String,
    view: &View,
    out: &Outcome,
    rows: &[Shown],
    links: &dyn Links,
) -> bool {
    let (open, close) = match view.kind {
        ViewKind::Table => {
            html.push_str("<table><thead><tr>");
            for c in &out.columns {
                let _ = write!(html, "<th>{}</th>", escape(&c.label));
            }
            ("</tr></thead><tbody>", "</tbody></table>")
        }
        ViewKind::Cards => ("<ul class=\"base-cards\">", "</ul>"),
        _ => ("<ul class=\"base-list\">", "</ul>"),
    };
    html.push_str(open);
    let mut whole = true;
    for row in rows {
        if html.len() > BYTES_MAX {
            whole = false;
            break;
        }
        match view.kind {
            ViewKind::Table => table_row(html, row, links),
            ViewKind::Cards => card(html, row, out, links),
            _ => list_item(html, row, links),
        }
    }
    html.push_str(close);
    whole
}

/// The first cell, linked to the note when the reader may open it.
fn title(row: &Shown, links: &dyn Links) -> String {
    let text = row
        .cells
        .first()
        .map(|v| cell(v, links))
        .unwrap_or_default();
    match links.row_url(row.index) {
        Some(url) => format!("<a href=\"{}\">{text}</a>", escape(&url)),
        None => text,
    }
}

fn table_row(html: &mut String, row: &Shown, links: &dyn Links) {
    let _ = write!(html, "<tr><td>{}</td>", title(row, links));
    for v in row.cells.iter().skip(1) {
        let _ = write!(html, "<td>{}</td>", cell(v, links));
    }
    html.push_str("</tr>");
}

fn card(html: &mut String, row: &Shown, out: &Outcome, links: &dyn Links) {
    html.push_str("<li class=\"base-card\">");
    let image = row.image.as_ref().and_then(|v| match v {
        Value::Str(s) | Value::Link(s, _) => {
            links.image_url(s.trim_start_matches("![[").trim_end_matches("]]"))
        }
        _ => None,
    });
    if let Some(src) = image {
        let _ = write!(
            html,
            "<img src=\"{}\" alt=\"\" loading=\"lazy\">",
            escape(&src)
        );
    }
    let _ = write!(
        html,
        "<p class=\"base-card-title\">{}</p><dl>",
        title(row, links)
    );
    for (c, v) in out.columns.iter().zip(&row.cells).skip(1) {
        if !v.is_empty() {
            let _ = write!(
                html,
                "<dt>{}</dt><dd>{}</dd>",
                escape(&c.label),
                cell(v, links)
            );
        }
    }
    html.push_str("</dl></li>");
}

fn list_item(html: &mut String, row: &Shown, links: &dyn Links) {
    let _ = write!(html, "<li>{}", title(row, links));
    let rest: Vec<String> = row
        .cells
        .iter()
        .skip(1)
        .filter(|v| !v.is_empty())
        .map(|v| cell(v, links))
        .collect();
    if !rest.is_empty() {
        let _ = write!(
            html,
            " <span class=\"base-meta\">{}</span>",
            rest.join(" · ")
        );
    }
    html.push_str("</li>");
}

/// One value as HTML: links resolved through `links`, lists joined, errors marked.
fn cell(v: &Value, links: &dyn Links) -> String {
    match v {
        Value::Link(target, display) => {
            let text = escape(display.as_deref().unwrap_or(target));
            match links.link_url(target) {
                Some(url) => format!("<a class=\"wikilink\" href=\"{}\">{text}</a>", escape(&url)),
                None => format!("<span class=\"wikilink broken\">{text}</span>"),
            }
        }
        Value::List(items) => items
            .iter()
            .map(|i| cell(i, links))
            .collect::<Vec<_>>()
            .join(", "),
        Value::Error(e) => format!(
            "<span class=\"base-error\" title=\"{}\">⚠</span>",
            escape(e)
        ),
        v => escape(&v.display()),
    }
}
