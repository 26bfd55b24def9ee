//! Math: `$inline$` and `$$display$$` (help.obsidian.md, "Advanced formatting
//! syntax" › "Math") rendered to MathML at render time, so browsers show formulas
//! without a script.
//!
//! Key decisions:
//! - Which `$` open math is pulldown-cmark's rule (`ENABLE_MATH`, the rule of
//!   commonmark-hs and GitHub): an opening `$` is not followed by white space and a
//!   closing `$` is not preceded by it nor followed by a digit, so "costs $5 and $10"
//!   stays prose. `\$` is a literal dollar.
//! - `pulldown-latex` writes the MathML; its output is then rebuilt through the
//!   MathML allow-list (`sanitize`), so nothing but math elements reaches the page.
//! - A formula that does not parse (or is longer than [`FORMULA_LEN_MAX`]) shows its
//!   source, escaped, marked as an error with the reason in a tooltip; the page
//!   renders on.
//! - **Output is bounded, not just input** (`budget`): `\def` multiplies a formula
//!   (a 7 KB one wrote 4.4 MB of MathML), so a formula's parse stops after
//!   `formula_bytes_max / 16` events, its MathML may not pass `formula_bytes_max`, and
//!   the page's formulas together not `math_bytes_max`; past either the formula shows
//!   as source like one that does not parse, and once the page's MathML is spent the
//!   formulas after it are not even parsed. A formula stopped at its bound costs the
//!   page a full formula's budget, so a page of bombs parses at most
//!   `math_bytes_max / formula_bytes_max` of them. The bound is in the tooltip.

use pulldown_cmark::{CowStr, Event};
use pulldown_latex::config::DisplayMode;
use pulldown_latex::{push_mathml, Parser, RenderConfig, Storage};

use super::budget::{self, Bound};
use super::sanitize::{sanitize, Allow};
use crate::html::escape;

/// Longest formula rendered, in bytes; a longer one is shown as source.
pub(super) const FORMULA_LEN_MAX: usize = 8 * 1024;

/// What MathML may keep (MathML Core's elements and presentation attributes).
const MATHML: Allow = Allow {
    elements: &[
        "math",
        "semantics",
        "annotation",
        "mrow",
        "mi",
        "mn",
        "mo",
        "ms",
        "mtext",
        "mspace",
        "msup",
        "msub",
        "msubsup",
        "mfrac",
        "msqrt",
        "mroot",
        "mover",
        "munder",
        "munderover",
        "mtable",
        "mtr",
        "mtd",
        "mstyle",
        "mpadded",
        "mphantom",
        "menclose",
        "merror",
        "mmultiscripts",
        "mprescripts",
        "none",
    ],
    attributes: &[
        "display",
        "displaystyle",
        "scriptlevel",
        "mathvariant",
        "stretchy",
        "fence",
        "separator",
        "lspace",
        "rspace",
        "minsize",
        "maxsize",
        "movablelimits",
        "largeop",
        "symmetric",
        "accent",
        "accentunder",
        "linethickness",
        "width",
        "height",
        "depth",
        "voffset",
        "style",
        "class",
        "columnalign",
        "rowalign",
        "columnspacing",
        "rowspacing",
        "columnlines",
        "rowlines",
        "frame",
        "notation",
        "form",
        "encoding",
    ],
    drop_with_content: &["script", "style", "annotation-xml"],
};

/// Replaces every math event by its MathML (or its source marked as an error).
pub(super) fn math(events: Vec<Event<'_>>) -> Vec<Event<'_>> {
    events
        .into_iter()
        .map(|e| match e {
            Event::InlineMath(src) => Event::InlineHtml(CowStr::from(formula(&src, false))),
            Event::DisplayMath(src) => Event::InlineHtml(CowStr::from(formula(&src, true))),
            e => e,
        })
        .collect()
}

/// MathML bytes one parse event may write, at most, for the event cap.
const EVENT_BYTES: usize = 16;

/// One formula as MathML, or as its source marked as an error.
fn formula(src: &str, display: bool) -> String {
    let rendered = if budget::math_spent() || budget::cancelled() {
        Err(NotRendered::Past(Bound::MathBytes))
    } else {
        mathml(src, display).and_then(|m| match budget::spend_math(m.len()) {
            Ok(()) => Ok(m),
            Err(b) => {
                if b == Bound::FormulaBytes {
                    budget::charge_math(budget::current().formula_bytes_max);
                }
                Err(NotRendered::Past(b))
            }
        })
    };
    match rendered {
        Ok(m) => m,
        Err(reason) => {
            let (open, close) = if display { ("$$", "$$") } else { ("$", "$") };
            format!(
                "<code class=\"math-error\" title=\"{}\">{}</code>",
                escape(&format!("Formula not rendered: {reason}")),
                escape(&format!("{open}{src}{close}"))
            )
        }
    }
}

/// The formula's MathML, or why it could not be rendered.
fn mathml(src: &str, display: bool) -> Result<String, NotRendered> {
    if src.len() > FORMULA_LEN_MAX {
        return Err(NotRendered::TooLong);
    }
    let storage = Storage::new();
    let events_max = budget::current().formula_bytes_max / EVENT_BYTES;
    let mut events = Vec::new();
    for e in Parser::new(src, &storage) {
        if events.len() >= events_max {
            budget::reach(Bound::FormulaBytes);
            // The work was done: the page pays for it as for a formula written.
            budget::charge_math(budget::current().formula_bytes_max);
            return Err(NotRendered::Past(Bound::FormulaBytes));
        }
        events.push(e);
    }
    if let Some(Err(e)) = events.iter().find(|e| e.is_err()) {
        // The first line says what; the rest draws the source around it.
        return Err(NotRendered::Parse(
            e.to_string().lines().next().unwrap_or("").to_owned(),
        ));
    }
    let config = RenderConfig {
        display_mode: if display {
            DisplayMode::Block
        } else {
            DisplayMode::Inline
        },
        ..RenderConfig::default()
    };
    let mut out = String::with_capacity(src.len() * 8);
    push_mathml(&mut out, events.into_iter(), config)
        .map_err(|e| NotRendered::Write(e.to_string()))?;
    // pulldown-latex 0.8 writes a spacing command's `&nbsp;` escaped, as text; a
    // no-break space is what it means.
    let out = out.replace("&amp;nbsp;", "\u{a0}");
    sanitize(&out, &MATHML, "").ok_or(NotRendered::Refused)
}

/// Why a formula is shown as its source, in the words its `title` gives the reader.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum NotRendered {
    /// The source is over [`FORMULA_LEN_MAX`].
    #[error("longer than {} bytes", FORMULA_LEN_MAX)]
    TooLong,
    /// The page's or the formula's render budget is spent.
    #[error("its MathML is past the render budget ({} = {} bytes)", .0.key(), .0.limit(&budget::current()))]
    Past(Bound),
    /// The LaTeX does not parse (the parser's first line).
    #[error("{0}")]
    Parse(String),
    /// Writing the MathML failed.
    #[error("{0}")]
    Write(String),
    /// The MathML holds what the allow-list refuses.
    #[error("unexpected MathML")]
    Refused,
}

#[cfg(test)]
mod tests {
    use crate::render::to_html;

    fn html(md: &str) -> String {
        to_html(md).html
    }

    #[test]
    fn inline_and_display_math_become_mathml() {
        let h =
            html("Euler: $e^{i\\pi} + 1 = 0$.\n\n$$\n\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}\n$$\n");
        assert!(h.contains("<p>Euler: <math display=\"inline\""), "{h}");
        assert!(h.contains("<msup><mi>e</mi>"), "{h}");
        assert!(h.contains("<math display=\"block\""), "{h}");
        assert!(h.contains("<mfrac>"), "{h}");
        assert!(!h.contains('$'), "{h}");
        let h = html("$1\\ \\text{litre}$\n");
        assert!(
            h.contains("<mtext>\u{a0}</mtext>") && !h.contains("&amp;nbsp;"),
            "{h}"
        );
    }

    #[test]
    fn dollar_amounts_in_prose_are_not_math() {
        for md in [
            "It costs $5 and $10 at most.\n",
            "Between $ 5 and 10 $ dollars.\n",
            "A literal \\$x\\$ here.\n",
            "`$code$` stays code.\n",
        ] {
            let h = html(md);
            assert!(!h.contains("<math"), "{md:?}: {h}");
        }
    }

    #[test]
    fn math_error_is_escaped_and_marked() {
        let h =
            html("Broken: $\\frac{1}{x < y \"'} \\nope$ and $\\unknowncommand{x}$ then more.\n");
        assert_eq!(h.matches("math-error").count(), 2, "{h}");
        assert!(h.contains("{x &lt; y &quot;&#39;} \\nope$</code>"), "{h}");
        assert!(
            h.contains("<code class=\"math-error\" title=\"Formula not rendered: "),
            "{h}"
        );
        assert!(h.contains("then more."), "{h}");
    }

    #[test]
    fn math_text_cannot_inject_markup() {
        let h = html("$\\text{<img src=x onerror=alert(1)>}$ $\\operatorname{<b>x</b>}$\n");
        assert!(!h.contains("<img") && !h.contains("<b>"), "{h}");
    }

    #[test]
    fn deeply_nested_formulas_never_crash_the_render() {
        for src in [
            format!("${}x{}$", "{".repeat(4000), "}".repeat(4000)),
            format!("${}x{}$", "\\sqrt{".repeat(1000), "}".repeat(1000)),
            format!("${}x{}$", "\\frac{1}{".repeat(800), "}".repeat(800)),
        ] {
            let h = html(&format!("{src}\n"));
            assert!(h.contains("<math") || h.contains("math-error") || h.contains('$'));
        }
    }

    #[test]
    fn an_overlong_formula_is_shown_as_source() {
        let long = "x+".repeat(super::FORMULA_LEN_MAX);
        let h = html(&format!("$${long}1$$\n"));
        assert!(
            h.contains("math-error") && !h.contains("<math"),
            "{}",
            &h[..200]
        );
    }
}
