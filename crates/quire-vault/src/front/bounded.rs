//! A YAML loader with a limit on everything that grows with its input: front matter
//! is written by whoever writes a note, and YAML's anchors and aliases let a few
//! hundred bytes name billions of nodes ("billion laughs": nine levels of nine
//! aliases expand to 9⁹ scalars).
//!
//! Key decisions:
//! - **Events are pulled, the tree is built here.** yaml_rust2's `YamlLoader` copies
//!   an anchored node in full for every alias, with no bound, and its
//!   `Parser::load` recurses once per level of nesting and cannot be stopped by the
//!   receiver. Here [`Parser::next_token`] is pulled in a loop (the parser keeps its
//!   own state stack on the heap) and every event is checked against the budgets
//!   *before* the node it opens or copies is built, so the first event past a bound
//!   ends the load.
//! - **Budgets are counted after alias expansion.** Each anchored node remembers its
//!   expanded size — nodes, scalar bytes and height — when it closes; an alias costs
//!   exactly what it adds to the tree. So the tree built is never larger than
//!   [`NODES_MAX`] nodes, [`TEXT_BYTES_MAX`] bytes of scalars and [`DEPTH_MAX`]
//!   levels, whatever the aliases, and the work done is proportional to it.
//! - **The source is bounded first** ([`BYTES_MAX`]), so the parser's own state
//!   (its state stack, the scanner's indents) is bounded before it starts.
//! - **The copies kept for anchors count too**: a node is copied once for every
//!   anchored node enclosing it (up to [`DEPTH_MAX`] times), so nested anchors could
//!   otherwise keep 64 copies of a full budget. The tree and the kept copies share
//!   the node and text budgets, which bounds memory to about 2 MiB per note.
//! - yaml_rust2's scanner reads tokens ahead of the parser and has its own flow
//!   nesting limit (255, "recursion limit exceeded"): `[[[…` deeper than that may be
//!   refused by the scanner before [`DEPTH_MAX`] is checked, as invalid YAML.
//! - The first document is returned; later ones (after a `--- x` line inside the
//!   block) are parsed, counted against the same budgets and dropped, so an error in
//!   them is still an error, as with `YamlLoader`.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};
use yaml_rust2::{ScanError, Yaml};

/// Largest front matter block read, in bytes (before any parsing).
pub const BYTES_MAX: usize = 64 * 1024;
/// Most YAML nodes (scalars, lists, mappings) in the front matter, aliases expanded.
pub(crate) const NODES_MAX: usize = 10_000;
/// Most bytes of scalar text, aliases expanded: 4× [`BYTES_MAX`].
pub(crate) const TEXT_BYTES_MAX: usize = 4 * BYTES_MAX;
/// Deepest nesting of lists and mappings, aliases expanded.
pub(crate) const DEPTH_MAX: usize = 64;

/// The bound a front matter block went past.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Limit {
    /// [`BYTES_MAX`].
    #[error("{BYTES_MAX} bytes")]
    Bytes,
    /// `NODES_MAX`.
    #[error("{NODES_MAX} nodes after alias expansion")]
    Nodes,
    /// `TEXT_BYTES_MAX`.
    #[error("{TEXT_BYTES_MAX} bytes of text after alias expansion")]
    Text,
    /// `DEPTH_MAX`.
    #[error("{DEPTH_MAX} levels of nesting after alias expansion")]
    Depth,
}

/// Why a block was not loaded.
#[derive(Debug)]
pub(super) enum LoadError {
    /// Not YAML (the parser's message, with its position).
    Yaml(String),
    /// Past a bound.
    Limit(Limit),
}

impl From<ScanError> for LoadError {
    fn from(e: ScanError) -> Self {
        LoadError::Yaml(e.to_string())
    }
}

impl From<Limit> for LoadError {
    fn from(l: Limit) -> Self {
        LoadError::Limit(l)
    }
}

/// The expanded size of a node: what one more copy of it costs.
#[derive(Debug, Clone, Copy, Default)]
struct Size {
    nodes: usize,
    text_bytes: usize,
    /// Levels of lists and mappings: 0 for a scalar.
    height: usize,
}

/// A list or mapping still open.
struct Open {
    node: Yaml,
    /// A mapping's key waiting for its value.
    key: Option<Yaml>,
    anchor: usize,
    /// The totals when it opened: its expanded size is the difference at its end.
    nodes_before: usize,
    text_before: usize,
    /// The height of its tallest child.
    child_height: usize,
}

/// The loader's state between events.
#[derive(Default)]
struct Loader {
    /// Expanded nodes and scalar bytes so far, over every document.
    nodes: usize,
    text_bytes: usize,
    /// Nodes and scalar bytes of the copies kept for anchors.
    kept_nodes: usize,
    kept_text_bytes: usize,
    stack: Vec<Open>,
    /// Anchor id → the anchored node and its expanded size.
    anchors: HashMap<usize, (Yaml, Size)>,
    /// The current document's root, once complete.
    root: Option<Yaml>,
    /// The first document's root.
    first: Option<Yaml>,
    documents: usize,
}

/// Loads the first YAML document of `yaml`, within every bound. `Ok(None)`: no
/// document (empty or only comments).
pub(super) fn load_first(yaml: &str) -> Result<Option<Yaml>, LoadError> {
    if yaml.len() > BYTES_MAX {
        return Err(Limit::Bytes.into());
    }
    let mut parser = Parser::new_from_str(yaml);
    let mut loader = Loader::default();
    loop {
        let (event, mark) = parser.next_token()?;
        if event == Event::StreamEnd {
            break;
        }
        loader.event(event, mark)?;
    }
    Ok(loader.first)
}

impl Loader {
    fn event(&mut self, event: Event, mark: Marker) -> Result<(), LoadError> {
        match event {
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentStart => {}
            Event::DocumentEnd => self.end_document(),
            Event::SequenceStart(anchor, _) => self.open(Yaml::Array(Vec::new()), anchor)?,
            Event::MappingStart(anchor, _) => self.open(Yaml::Hash(Default::default()), anchor)?,
            Event::SequenceEnd | Event::MappingEnd => self.close(mark)?,
            Event::Scalar(value, style, anchor, tag) => {
                let size = Size {
                    nodes: 1,
                    text_bytes: value.len(),
                    height: 0,
                };
                self.charge(size)?;
                self.insert(scalar(value, style, tag.as_ref()), anchor, size, mark)?;
            }
            Event::Alias(id) => {
                // An alias of a node still open (`&a [*a]`) has nothing to copy yet.
                let size = self.anchors.get(&id).map_or(Size::default(), |a| a.1);
                let size = Size {
                    nodes: size.nodes.max(1),
                    ..size
                };
                // Charged first: the copy is made only once it fits.
                self.charge(size)?;
                let node = self
                    .anchors
                    .get(&id)
                    .map_or(Yaml::BadValue, |a| a.0.clone());
                self.insert(node, 0, size, mark)?;
            }
        }
        Ok(())
    }

    /// Counts a node of expanded `size` about to be added under the open nodes.
    fn charge(&mut self, size: Size) -> Result<(), Limit> {
        self.nodes = self.nodes.saturating_add(size.nodes);
        self.text_bytes = self.text_bytes.saturating_add(size.text_bytes);
        if self.stack.len() + size.height > DEPTH_MAX {
            return Err(Limit::Depth);
        }
        self.within_budget()
    }

    /// Counts the copy of a node of `size` kept for its anchor.
    fn charge_kept(&mut self, size: Size) -> Result<(), Limit> {
        self.kept_nodes = self.kept_nodes.saturating_add(size.nodes);
        self.kept_text_bytes = self.kept_text_bytes.saturating_add(size.text_bytes);
        self.within_budget()
    }

    /// Whether the tree and the kept copies together fit the budgets.
    fn within_budget(&self) -> Result<(), Limit> {
        if self.nodes.saturating_add(self.kept_nodes) > NODES_MAX {
            return Err(Limit::Nodes);
        }
        if self.text_bytes.saturating_add(self.kept_text_bytes) > TEXT_BYTES_MAX {
            return Err(Limit::Text);
        }
        Ok(())
    }

    fn open(&mut self, node: Yaml, anchor: usize) -> Result<(), Limit> {
        self.charge(Size {
            nodes: 1,
            text_bytes: 0,
            height: 1,
        })?;
        self.stack.push(Open {
            node,
            key: None,
            anchor,
            nodes_before: self.nodes - 1,
            text_before: self.text_bytes,
            child_height: 0,
        });
        Ok(())
    }

    fn close(&mut self, mark: Marker) -> Result<(), LoadError> {
        let Some(open) = self.stack.pop() else {
            return Err(LoadError::Yaml(at(
                "unbalanced end of a list or mapping",
                mark,
            )));
        };
        let size = Size {
            nodes: self.nodes - open.nodes_before,
            text_bytes: self.text_bytes - open.text_before,
            height: open.child_height + 1,
        };
        self.insert(open.node, open.anchor, size, mark)
    }

    /// Adds a complete node (already charged) to the open node, or makes it the
    /// document's root; remembers it if anchored.
    fn insert(
        &mut self,
        node: Yaml,
        anchor: usize,
        size: Size,
        mark: Marker,
    ) -> Result<(), LoadError> {
        if anchor > 0 {
            self.charge_kept(size)?;
            self.anchors.insert(anchor, (node.clone(), size));
        }
        let Some(parent) = self.stack.last_mut() else {
            self.root = Some(node);
            return Ok(());
        };
        parent.child_height = parent.child_height.max(size.height);
        match (&mut parent.node, parent.key.take()) {
            (Yaml::Array(items), _) => items.push(node),
            (Yaml::Hash(_), None) => parent.key = Some(node),
            (Yaml::Hash(map), Some(key)) => {
                if map.insert(key, node).is_some() {
                    return Err(LoadError::Yaml(at("duplicated key in mapping", mark)));
                }
            }
            _ => {
                return Err(LoadError::Yaml(at(
                    "a value outside a list or mapping",
                    mark,
                )))
            }
        }
        Ok(())
    }

    fn end_document(&mut self) {
        let root = self.root.take();
        if self.documents == 0 {
            self.first = root;
        }
        self.documents += 1;
        self.stack.clear();
    }
}

fn at(what: &str, mark: Marker) -> String {
    format!("{what} at line {} column {}", mark.line(), mark.col() + 1)
}

/// A scalar's value, resolved as `YamlLoader` resolves it: quoted scalars are
/// strings, `!!bool`, `!!int`, `!!float` and `!!null` are checked, plain scalars are
/// guessed (`true`, `12`, `~`).
fn scalar(value: String, style: TScalarStyle, tag: Option<&Tag>) -> Yaml {
    if style != TScalarStyle::Plain {
        return Yaml::String(value);
    }
    let Some(tag) = tag.filter(|t| t.handle == "tag:yaml.org,2002:") else {
        return match tag {
            Some(_) => Yaml::String(value),
            None => Yaml::from_str(&value),
        };
    };
    match (tag.suffix.as_str(), Yaml::from_str(&value)) {
        ("bool", b @ Yaml::Boolean(_)) => b,
        ("int", i @ Yaml::Integer(_)) => i,
        ("float", Yaml::Real(_) | Yaml::Integer(_)) => Yaml::Real(value),
        ("null", Yaml::Null) if !value.is_empty() => Yaml::Null,
        ("bool" | "int" | "float" | "null", _) => Yaml::BadValue,
        _ => Yaml::String(value),
    }
}
