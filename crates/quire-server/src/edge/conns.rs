//! Who may hold a connection: the per-client cap, and closing idle keep-alive
//! connections when the server is full.
//!
//! Key decisions:
//! - **One client holds at most `limits.connections_per_client` connections.** A
//!   client that opens ten thousand idle connections would otherwise use up
//!   `limits.connections` and stall every other client, the health check included.
//!   The one over the cap is answered `429` with `Retry-After` and closed at once
//!   (a connection that waits in the backlog would still hold a kernel slot).
//!   A client is an IPv4 address or an IPv6 /64 (one host commonly holds a whole
//!   /64). Trusted proxies (`trusted_proxies`) are exempt: they carry many clients.
//!   The count lives in a map keyed by client, holding only clients with an open
//!   connection, so its size is bounded by `limits.connections`.
//! - **At `limits.connections`, idle keep-alive connections make room.** When the
//!   accept loop finds no connection slot free it signals the connections; each one
//!   waiting for a next request with nothing read, idle for at least
//!   [`REAP_IDLE_MIN`], closes (nginx does the same when it runs out of
//!   connections). A connection in the middle of a request is never cut, unless
//!   every response it has open has not moved for [`REAP_IDLE_MIN`] (an HTTP/2
//!   client holding shut windows, see [`crate::edge::stall`]): that one closes at once,
//!   so stalled clients cannot keep the health check out either. The signal
//!   repeats every [`REAP_EVERY`] while the server stays full.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;

use crate::edge::client::TrustedProxies;

/// A connection idle at least this long is closed when the server is full.
pub(crate) const REAP_IDLE_MIN: Duration = Duration::from_secs(1);

/// How often the idle connections are asked to close while the server stays full.
pub(crate) const REAP_EVERY: Duration = Duration::from_millis(250);

/// The answer to a connection over the per-client cap.
pub(crate) const TOO_MANY: &[u8] = b"HTTP/1.1 429 Too Many Requests\r\n\
content-type: text/plain; charset=utf-8\r\n\
content-length: 40\r\n\
retry-after: 1\r\n\
connection: close\r\n\
\r\n\
too many connections from this address.\n";

/// A client as the cap counts it (and the rate limits, [`crate::edge::rate_limit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ClientKey {
    V4([u8; 4]),
    /// The /64 the address is in.
    V6([u8; 8]),
}

impl ClientKey {
    /// The client `ip` counts as: itself, or its /64.
    pub(crate) fn of(ip: IpAddr) -> ClientKey {
        match ip {
            IpAddr::V4(v4) => ClientKey::V4(v4.octets()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => ClientKey::V4(v4.octets()),
                None => {
                    let o = v6.octets();
                    ClientKey::V6([o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7]])
                }
            },
        }
    }
}

/// The server's connection bookkeeping.
#[derive(Debug)]
pub(crate) struct Conns {
    cap: usize,
    trusted: TrustedProxies,
    open: Mutex<HashMap<ClientKey, usize>>,
    reap: watch::Sender<u64>,
}

/// One admitted connection; dropping it gives the client's count back.
#[derive(Debug)]
pub(crate) struct Admitted {
    conns: Arc<Conns>,
    key: Option<ClientKey>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let Some(key) = self.key else { return };
        let mut open = self.conns.lock();
        if let Some(n) = open.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                open.remove(&key);
            }
        }
    }
}

impl Conns {
    /// Bookkeeping for `cap` connections per client, `trusted` exempt.
    pub(crate) fn new(cap: usize, trusted: TrustedProxies) -> Arc<Conns> {
        Arc::new(Conns {
            cap,
            trusted,
            open: Mutex::new(HashMap::new()),
            reap: watch::channel(0).0,
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<ClientKey, usize>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits a connection from `peer`, or `None` when its client is at the cap.
    pub(crate) fn admit(self: &Arc<Conns>, peer: IpAddr) -> Option<Admitted> {
        if self.trusted.contains(peer) {
            return Some(Admitted {
                conns: self.clone(),
                key: None,
            });
        }
        let key = ClientKey::of(peer);
        let mut open = self.lock();
        let n = open.entry(key).or_insert(0);
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        drop(open);
        Some(Admitted {
            conns: self.clone(),
            key: Some(key),
        })
    }

    /// Clients with an open connection (the map's size).
    #[cfg(test)]
    fn clients(&self) -> usize {
        self.lock().len()
    }

    /// Asks every idle connection to close (the server is full).
    pub(crate) fn reap_idle(&self) {
        self.reap.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// What a connection watches for [`Conns::reap_idle`].
    pub(crate) fn reaper(&self) -> watch::Receiver<u64> {
        self.reap.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_counts_per_client_and_gives_back_on_drop() {
        let c = Conns::new(2, TrustedProxies::parse(&["10.0.0.1"]).unwrap());
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let x = c.admit(a).unwrap();
        let y = c.admit(a).unwrap();
        assert!(c.admit(a).is_none(), "third from one client");
        assert!(c.admit("192.0.2.2".parse().unwrap()).is_some());
        drop(x);
        let z = c.admit(a).unwrap();
        drop((y, z));
        assert_eq!(c.clients(), 0, "nothing left behind");
        let proxy: Vec<_> = (0..10)
            .map(|_| c.admit("10.0.0.1".parse().unwrap()).unwrap())
            .collect();
        assert_eq!(proxy.len(), 10, "a trusted proxy is exempt");
    }

    #[test]
    fn an_ipv6_client_is_its_slash_64() {
        let c = Conns::new(1, TrustedProxies::default());
        let _a = c.admit("2001:db8:1:2::1".parse().unwrap()).unwrap();
        assert!(c.admit("2001:db8:1:2::ffff".parse().unwrap()).is_none());
        assert!(c.admit("2001:db8:1:3::1".parse().unwrap()).is_some());
        let _m = c.admit("::ffff:192.0.2.9".parse().unwrap()).unwrap();
        assert!(c.admit("192.0.2.9".parse().unwrap()).is_none(), "mapped v4");
    }

    #[test]
    fn the_canned_429_is_well_framed() {
        let text = std::str::from_utf8(TOO_MANY).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}", body.len())));
    }
}
