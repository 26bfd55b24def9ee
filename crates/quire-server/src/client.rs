//! Who a request is from: the connection's peer, or — when the peer is a proxy the
//! operator listed in `trusted_proxies` — the client that proxy names in
//! `X-Forwarded-For`.
//!
//! Key decisions:
//! - **A forwarding header is believed only from a trusted peer.** Anyone can send
//!   `X-Forwarded-For: 1.2.3.4`; only a TLS terminator or load balancer the operator
//!   put in front of quire may say who the client is. The list is empty by default,
//!   so out of the box the client is the TCP peer.
//! - **The rightmost untrusted entry is the client** (nginx's `real_ip_recursive`):
//!   walking the header from the right, trusted proxies are skipped; the first
//!   address that is not one is the client, since everything left of it was written
//!   by parties nobody vouches for. If every entry is trusted, the leftmost is the
//!   client; an entry that is not an address ends the walk.
//! - **The last `X-Forwarded-For` entry quire forwards is always the client it
//!   resolved**: for an untrusted peer, the incoming header plus the peer (the usual
//!   append); for a trusted one, the incoming header up to and including the client
//!   (the trusted hops right of it are dropped). An origin — or the publishing site,
//!   whose sign-in throttle counts per client — reads only that last entry.
//! - The per-client limits (connections, fill slots, sign-in attempts) count this
//!   address. A trusted proxy's own connections are not held to the per-client
//!   connection cap: it carries many clients.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use http::header::HeaderMap;

/// Longest `X-Forwarded-For` (all lines joined) quire reads or extends; a longer one
/// is ignored (and not forwarded) rather than walked.
pub const FORWARDED_FOR_MAX: usize = 2048;

/// An address block: `10.0.0.0/8`, `::1/128`, or a bare address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Whether `ip` lies in the block (an IPv4-mapped IPv6 address counts as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                prefix_eq(&net.octets(), &ip.octets(), self.prefix)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                prefix_eq(&net.octets(), &ip.octets(), self.prefix)
            }
            _ => false,
        }
    }
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(s: &str) -> Result<Cidr, String> {
        let (a, p) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not an address or address/prefix"))?;
        let addr = addr.to_canonical();
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            None => max,
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{s:?}: the prefix length must be 0 to {max}"))?,
        };
        Ok(Cidr { addr, prefix })
    }
}

fn prefix_eq(a: &[u8], b: &[u8], prefix: u8) -> bool {
    let full = usize::from(prefix / 8);
    let rest = prefix % 8;
    if a[..full] != b[..full] {
        return false;
    }
    if rest == 0 {
        return true;
    }
    let mask = 0xffu8 << (8 - rest);
    (a[full] & mask) == (b[full] & mask)
}

/// The proxies whose `X-Forwarded-For` quire believes (`trusted_proxies`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<Cidr>);

impl TrustedProxies {
    /// Parses each entry; the first bad one is the error.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<TrustedProxies, String> {
        entries
            .iter()
            .map(|e| e.as_ref().parse())
            .collect::<Result<Vec<_>, _>>()
            .map(TrustedProxies)
    }

    /// Whether `ip` is a trusted proxy.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|c| c.contains(ip))
    }

    /// Whether the list is empty (the default: no forwarding header is believed).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Who a request is from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    /// The client: the peer, or the address a trusted peer named.
    pub ip: IpAddr,
    /// The `X-Forwarded-For` value to forward; its last entry is `ip`.
    pub forwarded_for: String,
}

impl Client {
    /// The client of a request from `peer` with `headers`.
    pub fn resolve(peer: SocketAddr, headers: &HeaderMap, trusted: &TrustedProxies) -> Client {
        let incoming = forwarded_for(headers);
        let peer_ip = peer.ip().to_canonical();
        if trusted.is_empty() || !trusted.contains(peer_ip) {
            let forwarded_for = match incoming {
                Some(prev) if !prev.trim().is_empty() => format!("{prev}, {peer_ip}"),
                _ => peer_ip.to_string(),
            };
            return Client {
                ip: peer_ip,
                forwarded_for,
            };
        }
        let entries: Vec<&str> = incoming
            .as_deref()
            .map(|v| v.split(',').map(str::trim).collect())
            .unwrap_or_default();
        let mut chosen: Option<(usize, IpAddr)> = None;
        for (i, e) in entries.iter().enumerate().rev() {
            let Ok(ip) = e.parse::<IpAddr>().map(|ip| ip.to_canonical()) else {
                break;
            };
            chosen = Some((i, ip));
            if !trusted.contains(ip) {
                break;
            }
        }
        match chosen {
            Some((i, ip)) => Client {
                ip,
                forwarded_for: entries[..=i].join(", "),
            },
            None => Client {
                ip: peer_ip,
                forwarded_for: peer_ip.to_string(),
            },
        }
    }

    /// The client of a connection whose requests carry no forwarding header (tests,
    /// and requests that need none).
    pub fn direct(peer: SocketAddr) -> Client {
        Client::resolve(peer, &HeaderMap::new(), &TrustedProxies::default())
    }
}

/// A connection's far end: its address, and whether it speaks TLS to quire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// The TCP peer.
    pub addr: SocketAddr,
    /// Whether the connection is HTTPS.
    pub tls: bool,
}

impl Peer {
    /// A cleartext connection from `addr`.
    pub fn plain(addr: SocketAddr) -> Peer {
        Peer { addr, tls: false }
    }

    /// The scheme the client used, which keys carry and fills announce in
    /// `X-Forwarded-Proto`: `https` on a TLS connection; on a cleartext one from a
    /// trusted proxy (a TLS terminator in front of quire), what that proxy's
    /// `X-Forwarded-Proto` says (`https` or `http`); else `http`. Anyone else's
    /// `X-Forwarded-Proto` is ignored: it would let a client file an `http` page
    /// under the `https` key.
    pub fn scheme(&self, headers: &HeaderMap, trusted: &TrustedProxies) -> &'static str {
        if self.tls {
            return "https";
        }
        if trusted.is_empty() || !trusted.contains(self.addr.ip().to_canonical()) {
            return "http";
        }
        let said = headers.get("x-forwarded-proto").map(|v| v.as_bytes());
        match said {
            Some(v) if v.eq_ignore_ascii_case(b"https") => "https",
            _ => "http",
        }
    }
}

/// Every `X-Forwarded-For` line joined with `, `; `None` when absent, not text, or
/// longer than [`FORWARDED_FOR_MAX`].
fn forwarded_for(headers: &HeaderMap) -> Option<String> {
    let mut out = String::new();
    for v in headers.get_all("x-forwarded-for") {
        let v = v.to_str().ok()?;
        if !out.is_empty() {
            out.push_str(", ");
        }
        out.push_str(v);
        if out.len() > FORWARDED_FOR_MAX {
            return None;
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheme_is_the_connections_unless_a_trusted_proxy_says() {
        let addr: SocketAddr = "10.0.0.2:5000".parse().unwrap();
        let mut said = HeaderMap::new();
        said.insert("x-forwarded-proto", "HTTPS".parse().unwrap());
        let none = TrustedProxies::default();
        let proxy = TrustedProxies::parse(&["10.0.0.0/8"]).unwrap();
        let plain = Peer::plain(addr);
        assert_eq!(plain.scheme(&HeaderMap::new(), &proxy), "http");
        assert_eq!(
            plain.scheme(&said, &none),
            "http",
            "an untrusted peer is not believed"
        );
        assert_eq!(plain.scheme(&said, &proxy), "https");
        let tls = Peer { addr, tls: true };
        let mut http = HeaderMap::new();
        http.insert("x-forwarded-proto", "http".parse().unwrap());
        assert_eq!(
            tls.scheme(&http, &proxy),
            "https",
            "TLS to quire is https whatever is said"
        );
    }

    fn h(xff: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in xff {
            h.append("x-forwarded-for", v.parse().unwrap());
        }
        h
    }

    fn peer(s: &str) -> SocketAddr {
        SocketAddr::new(s.parse().unwrap(), 40000)
    }

    #[test]
    fn blocks_parse_and_contain() {
        let c: Cidr = "10.0.0.0/8".parse().unwrap();
        assert!(c.contains("10.200.1.1".parse().unwrap()));
        assert!(!c.contains("11.0.0.1".parse().unwrap()));
        assert!(c.contains("::ffff:10.1.2.3".parse().unwrap()), "mapped v4");
        let c: Cidr = "192.168.1.0/23".parse().unwrap();
        assert!(c.contains("192.168.0.9".parse().unwrap()));
        assert!(!c.contains("192.168.2.1".parse().unwrap()));
        let c: Cidr = "fd00::/8".parse().unwrap();
        assert!(c.contains("fd12::1".parse().unwrap()));
        assert!(!c.contains("fe80::1".parse().unwrap()));
        let c: Cidr = "127.0.0.1".parse().unwrap();
        assert!(c.contains("127.0.0.1".parse().unwrap()));
        assert!(!c.contains("127.0.0.2".parse().unwrap()));
        let c: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(c.contains("8.8.8.8".parse().unwrap()));
        for bad in ["10.0.0.0/33", "::/129", "nope", "10.0.0.0/x", ""] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_forwards() {
        let t = TrustedProxies::parse(&["10.0.0.0/8"]).unwrap();
        let c = Client::resolve(peer("192.0.2.7"), &h(&["6.6.6.6"]), &t);
        assert_eq!(c.ip, "192.0.2.7".parse::<IpAddr>().unwrap());
        assert_eq!(c.forwarded_for, "6.6.6.6, 192.0.2.7");
        let c = Client::resolve(peer("192.0.2.7"), &h(&[]), &TrustedProxies::default());
        assert_eq!(c.forwarded_for, "192.0.2.7");
    }

    #[test]
    fn a_trusted_peer_names_the_rightmost_untrusted_entry() {
        let t = TrustedProxies::parse(&["10.0.0.0/8", "127.0.0.1"]).unwrap();
        let c = Client::resolve(
            peer("127.0.0.1"),
            &h(&["6.6.6.6, 203.0.113.5", "10.1.1.1"]),
            &t,
        );
        assert_eq!(c.ip, "203.0.113.5".parse::<IpAddr>().unwrap());
        assert_eq!(c.forwarded_for, "6.6.6.6, 203.0.113.5");
        // Every entry trusted: the leftmost.
        let c = Client::resolve(peer("127.0.0.1"), &h(&["10.0.0.2, 10.0.0.3"]), &t);
        assert_eq!(c.ip, "10.0.0.2".parse::<IpAddr>().unwrap());
        // No header: the peer.
        let c = Client::resolve(peer("127.0.0.1"), &h(&[]), &t);
        assert_eq!(c.ip, "127.0.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(c.forwarded_for, "127.0.0.1");
        // Garbage where the proxy's entry should be: the peer.
        let c = Client::resolve(peer("127.0.0.1"), &h(&["1.2.3.4, junk"]), &t);
        assert_eq!(c.ip, "127.0.0.1".parse::<IpAddr>().unwrap());
        // Garbage left of the client is not reached.
        let c = Client::resolve(peer("127.0.0.1"), &h(&["junk, 1.2.3.4"]), &t);
        assert_eq!(c.ip, "1.2.3.4".parse::<IpAddr>().unwrap());
        // Too long to walk: the peer.
        let long = vec!["1.1.1.1"; 400].join(", ");
        let c = Client::resolve(peer("127.0.0.1"), &h(&[&long]), &t);
        assert_eq!(c.ip, "127.0.0.1".parse::<IpAddr>().unwrap());
    }
}
