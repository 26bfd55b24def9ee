//! The `[cluster]` section: this node, its peers and the bus. Only read by
//! `quire-cluster` (and the `Bus` port, `crate::ops::bus`, which re-exports it).
//! [`ClusterSection::validate`] checks it alone and names the rule broken in a
//! [`ClusterSectionError`].

use std::time::Duration;

use super::{OriginUrl, OriginUrlError, Secs};

/// The `[cluster]` section: this node, its peers and the bus. Only read by
/// `quire-cluster`; a configuration without it runs no cluster code.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    /// The Redis (or Valkey) server holding the log: `redis://host:port[/db]`.
    pub redis: String,
    /// This node's name, unique in the cluster.
    pub node: String,
    /// Every node by name (this one included) and the URL its listener answers on;
    /// fills go to a key's owner among them. Empty: no peer fill.
    #[serde(default)]
    pub peers: std::collections::BTreeMap<String, String>,
    /// The stream's key.
    #[serde(default = "default_stream")]
    pub stream: String,
    /// About how many entries the stream keeps (`XADD MAXLEN ~`).
    #[serde(default = "default_stream_max")]
    pub stream_max: u64,
    /// Longest a fill waits for the key's owner before it asks the origin itself.
    #[serde(default = "default_peer_timeout")]
    pub peer_timeout: Secs,
    /// `quire serve`: the secret every node signs session cookies with (32 bytes
    /// or more), so a reader signed in on one node is signed in on all. Without it
    /// (or `session_secret_file`) each node uses its vault's `.quire/secret`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_secret: Option<Secret>,
    /// `quire serve`: a file holding that secret (read at start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_secret_file: Option<std::path::PathBuf>,
}

/// A secret in the configuration: never in `Debug` output.
#[derive(Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(not shown)")
    }
}

/// Shortest session secret accepted, bytes (as the vault's `.quire/secret`).
pub const SESSION_SECRET_LEN_MIN: usize = 32;

fn default_stream() -> String {
    "quire:invalidations".into()
}

fn default_stream_max() -> u64 {
    100_000
}

fn default_peer_timeout() -> Secs {
    Secs(Duration::from_millis(200))
}

impl ClusterSection {
    /// A section for `node` on `redis` with every default.
    pub fn new(redis: &str, node: &str) -> ClusterSection {
        ClusterSection {
            redis: redis.into(),
            node: node.into(),
            peers: std::collections::BTreeMap::new(),
            stream: default_stream(),
            stream_max: default_stream_max(),
            peer_timeout: default_peer_timeout(),
            session_secret: None,
            session_secret_file: None,
        }
    }

    /// The addresses of the peers whose URL names one (not a host name).
    pub fn peer_addresses(&self) -> Vec<std::net::IpAddr> {
        self.peers
            .values()
            .filter_map(|url| OriginUrl::parse(url).ok())
            .filter_map(|u| u.host().trim_matches(['[', ']']).parse().ok())
            .collect()
    }

    /// Checks the section alone.
    ///
    /// # Errors
    ///
    /// [`ClusterSectionError`] naming the first rule broken.
    pub fn validate(&self) -> Result<(), ClusterSectionError> {
        let name_ok = |n: &str| {
            !n.is_empty()
                && n.len() <= 64
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        };
        if !name_ok(&self.node) {
            return Err(ClusterSectionError::Node);
        }
        let schemes = ["redis://", "rediss://", "unix://", "valkey://"];
        if !schemes.iter().any(|s| self.redis.starts_with(s)) {
            return Err(ClusterSectionError::Redis);
        }
        if self.stream.is_empty() || self.stream_max < 1000 {
            return Err(ClusterSectionError::Stream);
        }
        if self.peer_timeout.0.is_zero() {
            return Err(ClusterSectionError::PeerTimeout);
        }
        for (name, url) in &self.peers {
            if !name_ok(name) {
                return Err(ClusterSectionError::PeerName { name: name.clone() });
            }
            OriginUrl::parse(url).map_err(|why| ClusterSectionError::PeerUrl {
                name: name.clone(),
                why,
            })?;
        }
        match (&self.session_secret, &self.session_secret_file) {
            (Some(_), Some(_)) => return Err(ClusterSectionError::SecretTwice),
            (Some(s), None) if s.0.trim().len() < SESSION_SECRET_LEN_MIN => {
                return Err(ClusterSectionError::SecretShort)
            }
            _ => {}
        }
        if !self.peers.is_empty() && !self.peers.contains_key(&self.node) {
            return Err(ClusterSectionError::PeersWithoutNode {
                node: self.node.clone(),
            });
        }
        Ok(())
    }
}

/// The rule of the `[cluster]` section a configuration breaks
/// ([`ClusterSection::validate`]), in words for the operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterSectionError {
    /// `node` is not a node name.
    #[error("cluster.node must be 1-64 letters, digits, `-` or `_`")]
    Node,
    /// `redis` is not a Redis URL.
    #[error("cluster.redis must be a redis:// (or rediss://, unix://) URL")]
    Redis,
    /// `stream` is empty or `stream_max` below 1000.
    #[error("cluster.stream must be named and cluster.stream_max at least 1000")]
    Stream,
    /// `peer_timeout` is zero.
    #[error("cluster.peer_timeout must be above 0")]
    PeerTimeout,
    /// A key of `peers` is not a node name.
    #[error("cluster.peers: `{name}` is not a node name")]
    PeerName {
        /// The key.
        name: String,
    },
    /// A peer's URL is not an origin URL.
    #[error("cluster.peers.{name}: {why}")]
    PeerUrl {
        /// The peer.
        name: String,
        /// What is wrong with its URL.
        why: OriginUrlError,
    },
    /// Both `session_secret` and `session_secret_file` are given.
    #[error("cluster: give session_secret or session_secret_file, not both")]
    SecretTwice,
    /// `session_secret` is shorter than [`SESSION_SECRET_LEN_MIN`].
    #[error(
        "cluster.session_secret must be {SESSION_SECRET_LEN_MIN} or more random bytes (e.g. \
         `openssl rand -hex 32`)"
    )]
    SecretShort,
    /// `peers` is given without this node.
    #[error("cluster.peers must list this node (`{node}`) too, with its own URL")]
    PeersWithoutNode {
        /// This node's name.
        node: String,
    },
}
