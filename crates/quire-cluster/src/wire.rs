//! An invalidation as the fields of one stream entry, and back.
//!
//! Fields: `v` (format, `1`), `node` (who appended it), `op` (`purge`,
//! `invalidate` for an unsafe method's, `all`: every stored response is to be
//! revalidated, or `signout`: a reader signed out, see `crate::publishing`), `soft`
//! (`0`/`1`), and `targets`, a JSON array of `["url"|"dir"|"key", text]`; a
//! `signout` has `name` and `generation` instead. An entry that does not decode is not skipped
//! silently: the reader treats it as `all` (see `reader`), since whatever it
//! meant to remove must not stay fresh.

use quire_server::bus::Invalidation;
use quire_server::purge::Target;

/// What an entry asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Purge or invalidate these targets.
    Targets(Invalidation),
    /// Revalidate everything received before it was applied.
    All,
    /// The reader `name` signed out: their cookies below `generation` are refused.
    SignOut {
        /// The reader's name (as in the users file).
        name: String,
        /// The sign-out table's epoch the generation belongs to.
        epoch: u64,
        /// Their generation from now on.
        generation: u64,
    },
}

/// Longest reader name in a `signout` entry (the users file's limit).
const NAME_LEN_MAX: usize = 64;

/// A decoded entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The node that appended it.
    pub node: String,
    /// What it asks for.
    pub op: Op,
}

/// The fields of an entry for `op`, appended by `node`.
pub fn encode(node: &str, op: &Op) -> Vec<(&'static str, String)> {
    let mut f = vec![("v", "1".to_owned()), ("node", node.to_owned())];
    match op {
        Op::All => f.push(("op", "all".into())),
        Op::SignOut {
            name,
            epoch,
            generation,
        } => {
            f.push(("op", "signout".into()));
            f.push(("name", name.clone()));
            f.push(("epoch", format!("{epoch:016x}")));
            f.push(("generation", generation.to_string()));
        }
        Op::Targets(inv) => {
            let kind = if inv.implicit { "invalidate" } else { "purge" };
            f.push(("op", kind.into()));
            f.push(("soft", if inv.soft { "1" } else { "0" }.into()));
            let targets: Vec<(&str, &str)> = inv
                .targets
                .iter()
                .map(|t| match t {
                    Target::Url(u) => ("url", u.as_str()),
                    Target::Directory(d) => ("dir", d.as_str()),
                    Target::Key(k) => ("key", k.as_str()),
                })
                .collect();
            f.push((
                "targets",
                serde_json::to_string(&targets).unwrap_or_default(),
            ));
        }
    }
    f
}

/// Longest `targets` field decoded (the purge API takes bodies of 1 MiB at most);
/// a longer one does not decode, and the reader revalidates everything instead of
/// spending unbounded work on one entry.
pub const TARGETS_BYTES_MAX: usize = 2 << 20;

/// Decodes an entry's fields; `None` when they do not make one.
pub fn decode(get: impl Fn(&str) -> Option<String>) -> Option<Entry> {
    if get("v")? != "1" {
        return None;
    }
    let node = get("node")?;
    if node.len() > 64 {
        return None;
    }
    let op = match get("op")?.as_str() {
        "all" => Op::All,
        "signout" => Op::SignOut {
            name: get("name").filter(|n| {
                !n.is_empty() && n.len() <= NAME_LEN_MAX && !n.chars().any(char::is_control)
            })?,
            epoch: u64::from_str_radix(&get("epoch")?, 16).ok()?,
            generation: get("generation")?.parse().ok()?,
        },
        kind @ ("purge" | "invalidate") => {
            let text = get("targets").filter(|t| t.len() <= TARGETS_BYTES_MAX)?;
            let pairs: Vec<(String, String)> = serde_json::from_str(&text).ok()?;
            let targets = pairs
                .into_iter()
                .map(|(k, v)| match k.as_str() {
                    "url" => Some(Target::Url(v)),
                    "dir" => Some(Target::Directory(v)),
                    "key" => Some(Target::Key(v)),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?;
            Op::Targets(Invalidation {
                targets,
                soft: get("soft")? == "1",
                implicit: kind == "invalidate",
            })
        }
        _ => return None,
    };
    Some(Entry { node, op })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn round_trip(op: &Op) -> Option<Entry> {
        let fields: HashMap<&str, String> = encode("n1", op).into_iter().collect();
        decode(|k| fields.get(k).cloned())
    }

    #[test]
    fn a_sign_out_survives_the_trip_and_a_hostile_one_does_not_decode() {
        let op = Op::SignOut {
            name: "ada".into(),
            epoch: 0xfeed,
            generation: 7,
        };
        assert_eq!(round_trip(&op).unwrap().op, op);
        let ok = "000000000000feed";
        for (name, epoch, generation) in [
            ("ada", ok, "7"),
            ("", ok, "1"),
            ("a\nb", ok, "1"),
            (&*"x".repeat(65), ok, "1"),
            ("ada", ok, "-1"),
            ("ada", ok, "seven"),
            ("ada", "not hex", "1"),
        ] {
            let fields: HashMap<&str, String> = [
                ("v", "1"),
                ("node", "n"),
                ("op", "signout"),
                ("name", name),
                ("epoch", epoch),
                ("generation", generation),
            ]
            .into_iter()
            .map(|(k, v)| (k, v.to_owned()))
            .collect();
            let got = decode(|k| fields.get(k).cloned());
            // The first is well formed: the others fail for their own field alone.
            assert_eq!(
                got.is_some(),
                generation == "7",
                "{name:?} {epoch} {generation}"
            );
        }
    }

    #[test]
    fn every_target_kind_survives_the_trip() {
        let inv = Invalidation {
            targets: vec![
                Target::Url("https://h/a?b=\"c\"".into()),
                Target::Directory("http://h/blog/".into()),
                Target::Key("post-1".into()),
            ],
            soft: true,
            implicit: false,
        };
        let e = round_trip(&Op::Targets(inv.clone())).unwrap();
        assert_eq!(e.node, "n1");
        assert_eq!(e.op, Op::Targets(inv));
        let implicit = Invalidation {
            targets: vec![Target::Url("http://h/x".into())],
            soft: false,
            implicit: true,
        };
        assert_eq!(
            round_trip(&Op::Targets(implicit.clone())).unwrap().op,
            Op::Targets(implicit)
        );
        assert_eq!(round_trip(&Op::All).unwrap().op, Op::All);
    }

    #[test]
    fn malformed_entries_do_not_decode() {
        let cases: [&[(&str, &str)]; 4] = [
            &[("v", "2"), ("node", "a"), ("op", "all")],
            &[("v", "1"), ("op", "all")],
            &[
                ("v", "1"),
                ("node", "a"),
                ("op", "purge"),
                ("soft", "0"),
                ("targets", "[[\"x\",\"y\"]]"),
            ],
            &[
                ("v", "1"),
                ("node", "a"),
                ("op", "purge"),
                ("soft", "0"),
                ("targets", "{"),
            ],
        ];
        for c in cases {
            let m: HashMap<&str, &str> = c.iter().copied().collect();
            assert!(
                decode(|k| m.get(k).map(|v| (*v).to_owned())).is_none(),
                "{c:?}"
            );
        }
    }

    #[test]
    fn an_oversized_entry_is_not_decoded() {
        let one = r#"["url","x"],"#;
        let huge = format!("[{}[\"url\",\"x\"]]", one.repeat(TARGETS_BYTES_MAX / 10));
        let m: HashMap<&str, String> = [
            ("v", "1".to_owned()),
            ("node", "a".to_owned()),
            ("op", "purge".to_owned()),
            ("soft", "0".to_owned()),
            ("targets", huge),
        ]
        .into_iter()
        .collect();
        assert!(decode(|k| m.get(k).cloned()).is_none());
        let small = r#"[["url","x"]]"#.to_owned();
        let m2: HashMap<&str, String> = m
            .into_iter()
            .map(|(k, v)| (k, if k == "targets" { small.clone() } else { v }))
            .collect();
        assert!(
            decode(|k| m2.get(k).cloned()).is_some(),
            "the same entry, small"
        );
    }
}
