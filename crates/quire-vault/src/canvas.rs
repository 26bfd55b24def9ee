//! JSON Canvas 1.0 (jsoncanvas.org, Obsidian's `.canvas` files): read when the vault
//! loads, into nodes and edges, bounded; drawn into the pages that embed them by
//! `render::canvas`.
//!
//! Key decisions:
//! - **Read leniently, within bounds**: a node or edge of an unknown type, with a
//!   missing id, or naming a node that is not there is skipped and counted (the page
//!   says how many); a file over [`CANVAS_FILE_BYTES_MAX`], over [`NODES_MAX`] nodes
//!   or [`EDGES_MAX`] edges, or not JSON, is refused with why. Coordinates are
//!   clamped to ±[`COORD_MAX`], sizes to 1..=[`SIZE_MAX`], a text node to
//!   [`TEXT_BYTES_MAX`]: a hostile canvas cannot make a page unbounded.
//! - **A colour is a preset (`"1"`–`"6"`) or `#rrggbb`**, nothing else: it goes into a
//!   class or a style attribute, so no other text may.
//! - **A canvas is never an attachment**: it has no visibility of its own (no front
//!   matter), so it is published only through a note that embeds it, for that note's
//!   readers.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value as Json;

/// The largest `.canvas` file read.
pub const CANVAS_FILE_BYTES_MAX: u64 = 2 * 1024 * 1024;
/// Nodes a canvas may have.
pub const NODES_MAX: usize = 1000;
/// Edges a canvas may have.
pub const EDGES_MAX: usize = 2000;
/// A text node's markdown, at most (longer is cut, at a character boundary).
pub const TEXT_BYTES_MAX: usize = 16 * 1024;
/// How far from the origin a node may sit.
pub const COORD_MAX: i64 = 100_000;
/// A node's largest width or height.
pub const SIZE_MAX: i64 = 20_000;

/// Why a canvas could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CanvasError {
    /// Not JSON, or not a JSON object.
    #[error("not a JSON Canvas file: {0}")]
    Json(String),
    /// Past one of the bounds.
    #[error("{what}: more than {max}")]
    Limit {
        /// What was counted.
        what: &'static str,
        /// The bound.
        max: usize,
    },
    /// The file could not be read.
    #[error("the .canvas file could not be read")]
    Unreadable,
}

/// A side of a node an edge leaves or reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The top edge.
    Top,
    /// The right edge.
    Right,
    /// The bottom edge.
    Bottom,
    /// The left edge.
    Left,
}

/// A colour: one of the six presets, or `#rrggbb` (lower-cased).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Color {
    /// Preset 1 (red) to 6 (purple): the stylesheet's, in light and dark.
    Preset(u8),
    /// `#rrggbb`, lower-cased.
    Hex(String),
}

/// What a node shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeKind {
    /// Markdown.
    Text(String),
    /// A file of the vault (a note, or an attachment), with `#subpath`.
    File {
        /// Its vault path.
        file: String,
        /// `#Heading` or `#^block`, without the `#`.
        subpath: Option<String>,
    },
    /// A URL.
    Link(String),
    /// A group of the nodes inside it, with its label.
    Group {
        /// The label shown on it.
        label: Option<String>,
    },
}

/// One node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Its id, unique in the canvas.
    pub id: String,
    /// What it shows.
    pub kind: NodeKind,
    /// Left edge, in canvas pixels.
    pub x: i64,
    /// Top edge.
    pub y: i64,
    /// Width.
    pub width: i64,
    /// Height.
    pub height: i64,
    /// Its colour.
    pub color: Option<Color>,
}

/// One edge, between nodes by index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// The node it leaves (an index into the nodes).
    pub from: usize,
    /// The node it reaches.
    pub to: usize,
    /// The side it leaves by (else the one facing the other node).
    pub from_side: Option<Side>,
    /// The side it reaches.
    pub to_side: Option<Side>,
    /// Whether an arrow is drawn at each end (`fromEnd` defaults to none, `toEnd`
    /// to an arrow).
    pub from_arrow: bool,
    /// Whether an arrow is drawn where it arrives.
    pub to_arrow: bool,
    /// Its colour.
    pub color: Option<Color>,
    /// The label shown at its middle.
    pub label: Option<String>,
}

/// A canvas, read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Canvas {
    /// The nodes, in file order.
    pub nodes: Vec<Node>,
    /// The edges between them.
    pub edges: Vec<Edge>,
    /// Nodes and edges skipped as unreadable.
    pub skipped: usize,
}

impl Canvas {
    /// The vault paths its file nodes name.
    pub fn files(&self) -> impl Iterator<Item = &str> {
        self.nodes.iter().filter_map(|n| match &n.kind {
            NodeKind::File { file, .. } => Some(file.as_str()),
            _ => None,
        })
    }
}

/// One `.canvas` file of the vault.
#[derive(Debug)]
pub struct CanvasFile {
    /// Vault-relative path.
    pub path: String,
    /// Its stamp (size and modification time): what a page's record observes.
    pub stamp: u64,
    /// The canvas, or why it could not be read.
    pub canvas: Result<Canvas, CanvasError>,
}

/// Whether the vault-relative path `rel` is a canvas file.
pub(crate) fn is_canvas(rel: &str) -> bool {
    rel.len() > 7 && rel[rel.len() - 7..].eq_ignore_ascii_case(".canvas")
}

/// Reads the canvas file at `rel` under `root`, stamped `stamp`, unless `previous`
/// holds it with the same stamp.
pub(crate) fn load(
    root: &Path,
    rel: &str,
    stamp: u64,
    previous: Option<&HashMap<String, Arc<CanvasFile>>>,
) -> Arc<CanvasFile> {
    let name = crate::base_files::name_of(rel);
    if let Some(kept) = previous
        .and_then(|p| p.get(&name))
        .filter(|c| c.path == rel && c.stamp == stamp)
    {
        return Arc::clone(kept);
    }
    let path = root.join(rel);
    let too_big = std::fs::metadata(&path).is_ok_and(|m| m.len() > CANVAS_FILE_BYTES_MAX);
    let canvas = if too_big {
        Err(CanvasError::Limit {
            what: "bytes in a .canvas file",
            max: CANVAS_FILE_BYTES_MAX as usize,
        })
    } else {
        std::fs::read_to_string(&path)
            .map_err(|_| CanvasError::Unreadable)
            .and_then(|t| parse(&t))
    };
    Arc::new(CanvasFile {
        path: rel.to_owned(),
        stamp,
        canvas,
    })
}

/// Reads a canvas from its JSON text.
pub fn parse(text: &str) -> Result<Canvas, CanvasError> {
    let doc: Json = serde_json::from_str(text).map_err(|e| CanvasError::Json(e.to_string()))?;
    let Json::Object(doc) = doc else {
        return Err(CanvasError::Json("the top level is not an object".into()));
    };
    let empty = Vec::new();
    let nodes = doc.get("nodes").and_then(Json::as_array).unwrap_or(&empty);
    let edges = doc.get("edges").and_then(Json::as_array).unwrap_or(&empty);
    if nodes.len() > NODES_MAX {
        return Err(CanvasError::Limit {
            what: "nodes",
            max: NODES_MAX,
        });
    }
    if edges.len() > EDGES_MAX {
        return Err(CanvasError::Limit {
            what: "edges",
            max: EDGES_MAX,
        });
    }
    let mut c = Canvas::default();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    for n in nodes {
        match node(n) {
            Some(n) if !by_id.contains_key(&n.id) => {
                by_id.insert(n.id.clone(), c.nodes.len());
                c.nodes.push(n);
            }
            _ => c.skipped += 1,
        }
    }
    for e in edges {
        match edge(e, &by_id) {
            Some(e) => c.edges.push(e),
            None => c.skipped += 1,
        }
    }
    Ok(c)
}

fn text(v: &Json, key: &str) -> Option<String> {
    v.get(key).and_then(Json::as_str).map(str::to_owned)
}

fn int(v: &Json, key: &str) -> Option<i64> {
    let j = v.get(key)?;
    j.as_i64().or_else(|| j.as_f64().map(|f| f as i64))
}

fn node(v: &Json) -> Option<Node> {
    let id = text(v, "id").filter(|s| !s.is_empty())?;
    let kind = match v.get("type")?.as_str()? {
        "text" => NodeKind::Text(cut(text(v, "text").unwrap_or_default())),
        "file" => NodeKind::File {
            file: text(v, "file")?,
            subpath: text(v, "subpath").map(|s| s.trim_start_matches('#').to_owned()),
        },
        "link" => NodeKind::Link(text(v, "url")?),
        "group" => NodeKind::Group {
            label: text(v, "label").map(cut),
        },
        _ => return None,
    };
    Some(Node {
        id,
        kind,
        x: int(v, "x")?.clamp(-COORD_MAX, COORD_MAX),
        y: int(v, "y")?.clamp(-COORD_MAX, COORD_MAX),
        width: int(v, "width")?.clamp(1, SIZE_MAX),
        height: int(v, "height")?.clamp(1, SIZE_MAX),
        color: v.get("color").and_then(Json::as_str).and_then(color),
    })
}

fn edge(v: &Json, by_id: &HashMap<String, usize>) -> Option<Edge> {
    let end = |key: &str, default: bool| match v.get(key).and_then(Json::as_str) {
        Some("arrow") => true,
        Some("none") => false,
        _ => default,
    };
    Some(Edge {
        from: *by_id.get(v.get("fromNode")?.as_str()?)?,
        to: *by_id.get(v.get("toNode")?.as_str()?)?,
        from_side: v.get("fromSide").and_then(Json::as_str).and_then(side),
        to_side: v.get("toSide").and_then(Json::as_str).and_then(side),
        from_arrow: end("fromEnd", false),
        to_arrow: end("toEnd", true),
        color: v.get("color").and_then(Json::as_str).and_then(color),
        label: text(v, "label").map(cut),
    })
}

fn side(s: &str) -> Option<Side> {
    Some(match s {
        "top" => Side::Top,
        "right" => Side::Right,
        "bottom" => Side::Bottom,
        "left" => Side::Left,
        _ => return None,
    })
}

/// A preset `"1"`–`"6"` or `#rrggbb`; anything else is no colour.
fn color(s: &str) -> Option<Color> {
    match s.as_bytes() {
        [d @ b'1'..=b'6'] => Some(Color::Preset(d - b'0')),
        [b'#', hex @ ..] if hex.len() == 6 && hex.iter().all(u8::is_ascii_hexdigit) => {
            Some(Color::Hex(s.to_ascii_lowercase()))
        }
        _ => None,
    }
}

/// `s` cut to [`TEXT_BYTES_MAX`] at a character boundary.
fn cut(mut s: String) -> String {
    if s.len() > TEXT_BYTES_MAX {
        let mut end = TEXT_BYTES_MAX;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_canvas_is_read_as_the_spec_writes_it() {
        let c = parse(r##"{"nodes":[
            {"id":"a","type":"text","text":"# Hi","x":0,"y":0,"width":200,"height":100,"color":"4"},
            {"id":"b","type":"file","file":"Notes/B.md","subpath":"#Part","x":300,"y":0,"width":200,"height":100},
            {"id":"c","type":"link","url":"https://example.com","x":0,"y":200,"width":200,"height":60,"color":"#FFaa00"},
            {"id":"g","type":"group","label":"G","x":-20,"y":-20,"width":600,"height":400,"color":"red"},
            {"id":"x","type":"plugin-thing","x":0,"y":0,"width":1,"height":1},
            {"id":"a","type":"text","text":"dup","x":0,"y":0,"width":1,"height":1}
        ],"edges":[
            {"id":"e1","fromNode":"a","fromSide":"right","toNode":"b","toSide":"left","label":"to B"},
            {"id":"e2","fromNode":"a","toNode":"nowhere"},
            {"id":"e3","fromNode":"b","toNode":"c","fromEnd":"arrow","toEnd":"none"}
        ]}"##)
        .unwrap();
        assert_eq!(c.nodes.len(), 4);
        assert_eq!(
            c.skipped, 3,
            "the unknown type, the duplicate id, the dangling edge"
        );
        assert_eq!(c.nodes[0].color, Some(Color::Preset(4)));
        assert_eq!(c.nodes[2].color, Some(Color::Hex("#ffaa00".into())));
        assert_eq!(c.nodes[3].color, None, "only presets and #rrggbb");
        assert_eq!(
            c.nodes[1].kind,
            NodeKind::File {
                file: "Notes/B.md".into(),
                subpath: Some("Part".into())
            }
        );
        assert_eq!(c.edges.len(), 2);
        let e = &c.edges[0];
        assert_eq!(
            (e.from, e.to, e.from_side, e.to_side),
            (0, 1, Some(Side::Right), Some(Side::Left))
        );
        assert!(!e.from_arrow && e.to_arrow);
        assert!(c.edges[1].from_arrow && !c.edges[1].to_arrow);
    }

    #[test]
    fn a_hostile_canvas_is_bounded() {
        let far = r#"{"nodes":[{"id":"a","type":"text","text":"x","x":1e300,"y":-9999999999,"width":-5,"height":99999999}]}"#;
        let c = parse(far).unwrap();
        let n = &c.nodes[0];
        assert_eq!(
            (n.x, n.y, n.width, n.height),
            (COORD_MAX, -COORD_MAX, 1, SIZE_MAX)
        );
        let many = format!(
            "{{\"nodes\":[{}]}}",
            vec![r#"{"id":"a","type":"group","x":0,"y":0,"width":1,"height":1}"#; NODES_MAX + 1]
                .join(",")
        );
        assert!(matches!(
            parse(&many),
            Err(CanvasError::Limit { what: "nodes", .. })
        ));
        let long = format!(
            r#"{{"nodes":[{{"id":"a","type":"text","text":"{}","x":0,"y":0,"width":1,"height":1}}]}}"#,
            "é".repeat(TEXT_BYTES_MAX)
        );
        match &parse(&long).unwrap().nodes[0].kind {
            NodeKind::Text(t) => assert!(t.len() <= TEXT_BYTES_MAX),
            k => panic!("{k:?}"),
        }
        assert!(matches!(parse("[1]"), Err(CanvasError::Json(_))));
        assert!(matches!(parse("{"), Err(CanvasError::Json(_))));
    }
}
