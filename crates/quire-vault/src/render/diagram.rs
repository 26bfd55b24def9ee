//! Mermaid diagrams (help.obsidian.md, "Advanced formatting syntax" › "Diagram"):
//! a ` ```mermaid ` block drawn as inline SVG at render time by
//! `mermaid-rs-renderer`, so the page needs no script.
//!
//! Key decisions:
//! - **Flowcharts and sequence diagrams are drawn**, the two kinds evaluated (see
//!   docs/publishing.md); any other kind, a diagram that does not parse, one past
//!   the limits, or one whose SVG the allow-list refuses is shown as its source in a
//!   `<pre>` with a note saying why. The page always renders.
//! - **The work is bounded**: the source is at most [`SOURCE_LEN_MAX`] bytes; a
//!   flowchart (whose layout cost grows fast with crossing edges: ~30 ms for 6 edges,
//!   ~220 ms for 25 random ones, 0.5–1.2 s for 40–60, measured optimised) at most
//!   [`FLOW_EDGES_MAX`] edges and [`FLOW_NODES_MAX`] nodes; a sequence diagram at
//!   most [`SEQUENCE_MESSAGES_MAX`] messages (~25 ms for 100); a page at most
//!   [`PAGE_FLOW_EDGES_MAX`] flowchart edges and [`PAGE_DIAGRAMS_MAX`] diagrams.
//! - The renderer's SVG is rebuilt through the SVG allow-list (`sanitize`): no
//!   script, no event attributes, no links, no reference outside the diagram; ids are
//!   prefixed per diagram so two diagrams never share one. A panic in the renderer is
//!   caught and shown as the source.

use std::panic::{catch_unwind, AssertUnwindSafe};

use mermaid_rs_renderer::{
    compute_layout, parse_mermaid_strict, render_svg, DiagramKind, LayoutConfig, Theme,
};

use super::sanitize::{sanitize, Allow};
use crate::html::escape;

/// Longest diagram source drawn, in bytes.
pub(super) const SOURCE_LEN_MAX: usize = 8 * 1024;
/// Most edges of one flowchart drawn.
pub(super) const FLOW_EDGES_MAX: usize = 25;
/// Most nodes of one flowchart drawn.
pub(super) const FLOW_NODES_MAX: usize = 30;
/// Most messages of one sequence diagram drawn.
pub(super) const SEQUENCE_MESSAGES_MAX: usize = 100;
/// Most flowchart edges drawn on one page.
pub(super) const PAGE_FLOW_EDGES_MAX: usize = 60;
/// Most diagrams drawn on one page.
pub(super) const PAGE_DIAGRAMS_MAX: usize = 8;

/// What SVG may keep.
const SVG: Allow = Allow {
    elements: &[
        "svg",
        "g",
        "defs",
        "marker",
        "path",
        "rect",
        "circle",
        "ellipse",
        "line",
        "polyline",
        "polygon",
        "text",
        "tspan",
        "title",
        "desc",
        "clipPath",
        "linearGradient",
        "radialGradient",
        "stop",
    ],
    attributes: &[
        "xmlns",
        "viewBox",
        "width",
        "height",
        "x",
        "y",
        "x1",
        "x2",
        "y1",
        "y2",
        "cx",
        "cy",
        "r",
        "rx",
        "ry",
        "dx",
        "dy",
        "d",
        "points",
        "transform",
        "id",
        "class",
        "fill",
        "fill-opacity",
        "fill-rule",
        "stroke",
        "stroke-width",
        "stroke-opacity",
        "stroke-dasharray",
        "stroke-dashoffset",
        "stroke-linecap",
        "stroke-linejoin",
        "stroke-miterlimit",
        "opacity",
        "marker-start",
        "marker-mid",
        "marker-end",
        "markerWidth",
        "markerHeight",
        "markerUnits",
        "refX",
        "refY",
        "orient",
        "font-family",
        "font-size",
        "font-weight",
        "font-style",
        "text-anchor",
        "dominant-baseline",
        "alignment-baseline",
        "baseline-shift",
        "style",
        "clip-path",
        "clip-rule",
        "offset",
        "stop-color",
        "stop-opacity",
        "gradientUnits",
        "preserveAspectRatio",
        "visibility",
        "display",
        "letter-spacing",
    ],
    drop_with_content: &["script", "style", "foreignObject", "iframe", "image", "use"],
};

/// How much diagram work a page has left.
#[derive(Debug)]
pub(super) struct Budget {
    diagrams: usize,
    flow_edges: usize,
}

impl Default for Budget {
    fn default() -> Budget {
        Budget {
            diagrams: PAGE_DIAGRAMS_MAX,
            flow_edges: PAGE_FLOW_EDGES_MAX,
        }
    }
}

/// A ` ```mermaid ` block's HTML: the diagram, or its source with why it is not
/// drawn.
pub(super) fn block(src: &str, budget: &mut Budget) -> String {
    let n = PAGE_DIAGRAMS_MAX - budget.diagrams;
    match svg(src, budget, n) {
        Ok((kind, svg)) => format!(
            "<figure class=\"diagram diagram-{kind}\" role=\"img\" aria-label=\"{kind} diagram\">{svg}</figure>\n"
        ),
        Err(why) => format!(
            "<figure class=\"diagram diagram-source\"><pre><code class=\"language-mermaid\">{}</code></pre><figcaption>Diagram not drawn: {}.</figcaption></figure>\n",
            escape(src),
            escape(&why.to_string())
        ),
    }
}

/// Why a diagram is shown as its source, in the words its caption gives the reader.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum NotDrawn {
    #[error("its source is longer than {} bytes", SOURCE_LEN_MAX)]
    SourceTooLong,
    #[error("a page draws at most {} diagrams", PAGE_DIAGRAMS_MAX)]
    PageDiagrams,
    #[error("the diagram renderer failed")]
    RendererFailed,
    /// The parser's first line.
    #[error("{0}")]
    Parse(String),
    #[error("only flowcharts and sequence diagrams are drawn")]
    Kind,
    #[error("a sequence diagram is drawn up to {} messages", SEQUENCE_MESSAGES_MAX)]
    SequenceTooLarge,
    #[error(
        "a flowchart is drawn up to {} nodes and {} edges",
        FLOW_NODES_MAX,
        FLOW_EDGES_MAX
    )]
    FlowTooLarge,
    #[error("a page draws at most {} flowchart edges", PAGE_FLOW_EDGES_MAX)]
    PageFlowEdges,
    #[error("its drawing was refused")]
    Refused,
}

/// The diagram's kind and sanitised SVG, or why it is not drawn.
fn svg(src: &str, budget: &mut Budget, n: usize) -> Result<(&'static str, String), NotDrawn> {
    if src.len() > SOURCE_LEN_MAX {
        return Err(NotDrawn::SourceTooLong);
    }
    if budget.diagrams == 0 {
        return Err(NotDrawn::PageDiagrams);
    }
    let parsed = catch_unwind(|| parse_mermaid_strict(src))
        .map_err(|_| NotDrawn::RendererFailed)?
        .map_err(|e| NotDrawn::Parse(first_line(&e.to_string())))?;
    let g = &parsed.graph;
    let kind = match g.kind {
        DiagramKind::Flowchart => "flowchart",
        DiagramKind::Sequence => "sequence",
        _ => return Err(NotDrawn::Kind),
    };
    check_size(g.kind, g.nodes.len(), g.edges.len(), budget)?;
    budget.diagrams -= 1;
    let drawn = catch_unwind(AssertUnwindSafe(|| {
        let theme = Theme::modern();
        let config = LayoutConfig::default();
        render_svg(&compute_layout(g, &theme, &config), &theme, &config)
    }))
    .map_err(|_| NotDrawn::RendererFailed)?;
    let clean = sanitize(&drawn, &SVG, &format!("d{n}-")).ok_or(NotDrawn::Refused)?;
    Ok((kind, clean))
}

/// Checks one diagram against its kind's limits and the page's budget (taking its
/// share from the budget when it fits).
fn check_size(
    kind: DiagramKind,
    nodes: usize,
    edges: usize,
    budget: &mut Budget,
) -> Result<(), NotDrawn> {
    if kind == DiagramKind::Sequence {
        return if edges > SEQUENCE_MESSAGES_MAX {
            Err(NotDrawn::SequenceTooLarge)
        } else {
            Ok(())
        };
    }
    if edges > FLOW_EDGES_MAX || nodes > FLOW_NODES_MAX {
        return Err(NotDrawn::FlowTooLarge);
    }
    if edges > budget.flow_edges {
        return Err(NotDrawn::PageFlowEdges);
    }
    budget.flow_edges -= edges;
    Ok(())
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::to_html;

    fn html(md: &str) -> String {
        to_html(md).html
    }

    const FLOW: &str = "```mermaid\nflowchart LR\n    A[Request] --> B{In cache?}\n    B -->|yes| C[Serve]\n    B -->|no| D[Fetch]\n```\n";
    const SEQUENCE: &str = "```mermaid\nsequenceDiagram\n    participant B as Browser\n    participant Q as quire\n    B->>Q: GET /page\n    Q-->>B: 200 OK\n```\n";

    #[test]
    fn flowcharts_and_sequence_diagrams_are_drawn_as_svg() {
        let h = html(FLOW);
        assert!(
            h.starts_with("<figure class=\"diagram diagram-flowchart\" role=\"img\" aria-label=\"flowchart diagram\"><svg "),
            "{h}"
        );
        assert!(h.contains(">In cache?<") && h.contains(">yes<"), "{h}");
        assert!(h.trim_end().ends_with("</svg></figure>"), "{h}");
        let h = html(SEQUENCE);
        assert!(
            h.starts_with("<figure class=\"diagram diagram-sequence\""),
            "{h}"
        );
        assert!(h.contains(">GET /page<") && h.contains(">Browser<"), "{h}");
    }

    #[test]
    fn two_diagrams_on_a_page_never_share_an_id() {
        let h = html(&format!("{SEQUENCE}\n{SEQUENCE}"));
        assert!(h.contains("id=\"d0-") && h.contains("id=\"d1-"), "{h}");
        assert!(h.contains("url(#d1-"), "{h}");
    }

    #[test]
    fn a_diagram_that_does_not_parse_is_shown_as_its_source() {
        let h = html("```mermaid\nflowchart LR\n  A -->\n  ))((<b>\n```\n\n```mermaid\ngantt\n  title T\n```\n");
        assert_eq!(
            h.matches(
                "<figure class=\"diagram diagram-source\"><pre><code class=\"language-mermaid\">"
            )
            .count(),
            2,
            "{h}"
        );
        assert!(h.contains("))((&lt;b&gt;"), "{h}");
        assert!(h.contains("<figcaption>Diagram not drawn: only flowcharts and sequence diagrams are drawn.</figcaption>"), "{h}");
        assert!(!h.contains("<svg"), "{h}");
    }

    #[test]
    fn mermaid_svg_has_no_script_events_or_links() {
        let h = html("```mermaid\nflowchart LR\n    A[\"<script>alert(1)</script>\"] --> B[\"<img src=x onerror=alert(1)>\"]\n    click A \"javascript:alert(1)\"\n    click B \"https://evil.example/\"\n    B --> C[\"x\"]\n```\n");
        assert!(h.contains("<svg "), "{h}");
        let lower = h.to_ascii_lowercase();
        for bad in [
            "<script",
            "<img",
            "javascript:",
            "<a ",
            "evil.example",
            "<style",
            "<foreignobject",
        ] {
            assert!(!lower.contains(bad), "{bad} in {h}");
        }
        // No attribute of any element is an event handler or a link.
        for tag in lower
            .split('<')
            .skip(1)
            .filter_map(|t| t.split_once('>'))
            .map(|(t, _)| t)
        {
            assert!(
                !tag.contains(" on") && !tag.contains("href"),
                "<{tag}> in {h}"
            );
        }
        assert!(h.contains("&lt;script&gt;"), "{h}");
    }

    #[test]
    fn deeply_nested_subgraphs_never_crash_the_render() {
        let depth = 300;
        let open: String = (0..depth).map(|i| format!("subgraph S{i}\n")).collect();
        let close = "end\n".repeat(depth);
        let h = html(&format!(
            "```mermaid\nflowchart TD\n{open}A --> B\n{close}```\n"
        ));
        assert!(
            h.contains("<figure class=\"diagram"),
            "{}",
            &h[..h.len().min(300)]
        );
    }

    #[test]
    fn diagrams_past_the_limits_are_not_drawn() {
        let big: String = (0..=FLOW_EDGES_MAX)
            .map(|i| format!("  N{i} --> N{}\n", i + 1))
            .collect();
        let h = html(&format!("```mermaid\nflowchart TD\n{big}```\n"));
        assert!(
            h.contains("Diagram not drawn: a flowchart is drawn up to"),
            "{h}"
        );
        let long = format!(
            "```mermaid\nflowchart TD\n  A --> B\n%% {}\n```\n",
            "x".repeat(SOURCE_LEN_MAX)
        );
        assert!(html(&long).contains("longer than"));
        let many = SEQUENCE.repeat(PAGE_DIAGRAMS_MAX + 1);
        let h = html(&many);
        assert_eq!(h.matches("<svg ").count(), PAGE_DIAGRAMS_MAX);
        assert!(h.contains("a page draws at most"), "{h}");
    }
}
