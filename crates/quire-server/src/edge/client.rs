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
//!   client.
//! - **A client is never silently the proxy.** A trusted peer's header either names
//!   a client or the request is refused (400, `quire_forwarded_for_refused_total`):
//!   an entry the walk reaches that is not an address (junk, non-text bytes, an
//!   empty header) is a proxy naming nobody, and falling back on the peer made a
//!   local TLS terminator's clients one loopback client, exempt from every limit.
//!   The walk works on bytes, field by field from the last, with no length limit of
//!   its own (the head limit, `limits.header_bytes`, bounds it): a client cannot
//!   push its terminator's entry out of reach with a long or non-text prefix, since
//!   the walk never reads past the first untrusted address. Only a trusted peer that
//!   sends no `X-Forwarded-For` at all speaks for itself (its own health checks).
//!   Every caller asks this module: the service and the fast path refuse, the access
//!   log names the same client the limits counted.
//! - **The last `X-Forwarded-For` entry quire forwards is always the client it
//!   resolved**: for an untrusted peer, the incoming header plus the peer (the usual
//!   append); for a trusted one, the incoming header up to and including the client
//!   (the trusted hops right of it are dropped). An entry that is not visible ASCII
//!   is forwarded as `unknown` (RFC 7239's word for an unnamed hop), so the header
//!   is always valid text and never dropped. An origin — or the publishing site,
//!   whose sign-in throttle counts per client — reads only that last entry.
//! - The per-client limits (connections, fill slots, sign-in attempts) count this
//!   address. A trusted proxy's own connections are not held to the per-client
//!   connection cap: it carries many clients.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use http::header::HeaderMap;

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
    type Err = CidrError;

    fn from_str(s: &str) -> Result<Cidr, CidrError> {
        let (a, p) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = a.trim().parse().map_err(|_| CidrError::Address {
            entry: s.to_owned(),
        })?;
        let addr = addr.to_canonical();
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            None => max,
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| CidrError::Prefix {
                    entry: s.to_owned(),
                    max,
                })?,
        };
        Ok(Cidr { addr, prefix })
    }
}

/// Why an entry of `trusted_proxies` is not an address block.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CidrError {
    /// The part before any `/` is not an IPv4 or IPv6 address.
    #[error("{entry:?} is not an address or address/prefix")]
    Address {
        /// The entry as written.
        entry: String,
    },
    /// The prefix length is not a number up to the address's bits.
    #[error("{entry:?}: the prefix length must be 0 to {max}")]
    Prefix {
        /// The entry as written.
        entry: String,
        /// The address's bits: 32 or 128.
        max: u8,
    },
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
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<TrustedProxies, CidrError> {
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
    /// The client of a request from `peer` with `headers`; `Err` when a trusted
    /// peer's `X-Forwarded-For` names nobody (the request is refused).
    pub fn resolve(
        peer: SocketAddr,
        headers: &HeaderMap,
        trusted: &TrustedProxies,
    ) -> Result<Client, Unnamed> {
        let peer_ip = peer.ip().to_canonical();
        let entries = entries(headers);
        if !trusted.contains(peer_ip) {
            let mut forwarded_for = joined(&entries);
            if !forwarded_for.is_empty() {
                forwarded_for.push_str(", ");
            }
            forwarded_for.push_str(&peer_ip.to_string());
            return Ok(Client {
                ip: peer_ip,
                forwarded_for,
            });
        }
        if headers.get(X_FORWARDED_FOR).is_none() {
            return Ok(Client {
                ip: peer_ip,
                forwarded_for: peer_ip.to_string(),
            });
        }
        let (i, ip) = walk(&entries, trusted)?;
        // The client's own entry is written as the address quire read from it (an
        // entry may carry a port, `192.0.2.1:5000`), so the chain always ends with `ip`.
        let mut forwarded_for = joined(&entries[..i]);
        if !forwarded_for.is_empty() {
            forwarded_for.push_str(", ");
        }
        forwarded_for.push_str(&ip.to_string());
        Ok(Client { ip, forwarded_for })
    }

    /// The client of a connection whose requests carry no forwarding header (tests,
    /// and requests that need none).
    pub fn direct(peer: SocketAddr) -> Client {
        let ip = peer.ip().to_canonical();
        Client {
            ip,
            forwarded_for: ip.to_string(),
        }
    }

    /// The client a request's log line and limits name: the resolved client, or
    /// the peer when the request is refused for naming nobody.
    pub(crate) fn ip_or_peer(
        peer: SocketAddr,
        headers: &HeaderMap,
        trusted: &TrustedProxies,
    ) -> IpAddr {
        let ip = peer.ip().to_canonical();
        if !trusted.contains(ip) {
            return ip;
        }
        Client::resolve(peer, headers, trusted).map_or(ip, |c| c.ip)
    }

    /// Whether a request from `peer` names its client (cheap for an untrusted
    /// peer: no header is read).
    pub(crate) fn named(peer: SocketAddr, headers: &HeaderMap, trusted: &TrustedProxies) -> bool {
        !trusted.contains(peer.ip().to_canonical())
            || Client::resolve(peer, headers, trusted).is_ok()
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

/// Why a trusted peer's `X-Forwarded-For` names no client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unnamed {
    /// Plain text for the 400's body.
    pub reason: &'static str,
}

const X_FORWARDED_FOR: &str = "x-forwarded-for";

/// Every `X-Forwarded-For` entry, left to right across all of its fields, trimmed,
/// empty list elements skipped (RFC 9110 §5.6.1), as bytes.
fn entries(headers: &HeaderMap) -> Vec<&[u8]> {
    headers
        .get_all(X_FORWARDED_FOR)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b',').map(<[u8]>::trim_ascii))
        .filter(|e| !e.is_empty())
        .collect()
}

/// The client among `entries`, from the right: its index and address.
fn walk(entries: &[&[u8]], trusted: &TrustedProxies) -> Result<(usize, IpAddr), Unnamed> {
    let mut chosen = None;
    for (i, e) in entries.iter().enumerate().rev() {
        let Some(ip) = address(e) else {
            return Err(Unnamed {
                reason: "X-Forwarded-For from a trusted proxy names no client: \
                         an entry it vouches for is not an address",
            });
        };
        chosen = Some((i, ip));
        if !trusted.contains(ip) {
            break;
        }
    }
    chosen.ok_or(Unnamed {
        reason: "X-Forwarded-For from a trusted proxy is empty",
    })
}

/// An entry's address: `192.0.2.1`, `2001:db8::1`, and with a port as some
/// balancers write them (`192.0.2.1:5000`, `[2001:db8::1]:5000`, `[2001:db8::1]`).
fn address(e: &[u8]) -> Option<IpAddr> {
    let s = std::str::from_utf8(e).ok()?;
    let ip = s
        .parse::<IpAddr>()
        .ok()
        .or_else(|| s.parse::<SocketAddr>().ok().map(|a| a.ip()))
        .or_else(|| {
            s.strip_prefix('[')
                .and_then(|r| r.strip_suffix(']'))
                .and_then(|r| r.parse::<IpAddr>().ok())
        })?;
    Some(ip.to_canonical())
}

/// `entries` joined with `, `, each that is not visible ASCII written `unknown`.
fn joined(entries: &[&[u8]]) -> String {
    let mut out = String::new();
    for e in entries {
        if !out.is_empty() {
            out.push_str(", ");
        }
        match std::str::from_utf8(e) {
            Ok(s) if e.iter().all(|b| (0x20..0x7f).contains(b)) => out.push_str(s),
            _ => out.push_str("unknown"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::HeaderValue;

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
        let e = |s: &str| s.parse::<Cidr>().unwrap_err().to_string();
        assert_eq!(e("nope"), r#""nope" is not an address or address/prefix"#);
        assert_eq!(
            e("::/129"),
            r#""::/129": the prefix length must be 0 to 128"#
        );
        let list = TrustedProxies::parse(&["10.0.0.1", "10.0.0.0/33"]).unwrap_err();
        assert!(matches!(list, CidrError::Prefix { max: 32, .. }), "{list}");
    }

    fn resolve(p: &str, xff: &[&str], t: &TrustedProxies) -> Result<Client, Unnamed> {
        Client::resolve(peer(p), &h(xff), t)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_forwards() {
        let t = TrustedProxies::parse(&["10.0.0.0/8"]).unwrap();
        let c = resolve("192.0.2.7", &["6.6.6.6"], &t).unwrap();
        assert_eq!(c.ip, ip("192.0.2.7"));
        assert_eq!(c.forwarded_for, "6.6.6.6, 192.0.2.7");
        let c = resolve("192.0.2.7", &[], &TrustedProxies::default()).unwrap();
        assert_eq!(c.forwarded_for, "192.0.2.7");
        // Junk from an untrusted peer is not refused: nobody believes it anyway.
        let mut junk = HeaderMap::new();
        junk.insert(
            "x-forwarded-for",
            HeaderValue::from_bytes(b"\xff\xfe, 1.2.3.4").unwrap(),
        );
        let c = Client::resolve(peer("192.0.2.7"), &junk, &t).unwrap();
        assert_eq!(c.forwarded_for, "unknown, 1.2.3.4, 192.0.2.7");
    }

    #[test]
    fn a_trusted_peer_names_the_rightmost_untrusted_entry() {
        let t = TrustedProxies::parse(&["10.0.0.0/8", "127.0.0.1"]).unwrap();
        let c = resolve("127.0.0.1", &["6.6.6.6, 203.0.113.5", "10.1.1.1"], &t).unwrap();
        assert_eq!(c.ip, ip("203.0.113.5"));
        assert_eq!(c.forwarded_for, "6.6.6.6, 203.0.113.5");
        // Every entry trusted: the leftmost.
        let c = resolve("127.0.0.1", &["10.0.0.2, 10.0.0.3"], &t).unwrap();
        assert_eq!(c.ip, ip("10.0.0.2"));
        // No header: the peer speaks for itself.
        let c = resolve("127.0.0.1", &[], &t).unwrap();
        assert_eq!(c.ip, ip("127.0.0.1"));
        assert_eq!(c.forwarded_for, "127.0.0.1");
        // Garbage left of the client is not reached.
        let c = resolve("127.0.0.1", &["junk, 1.2.3.4"], &t).unwrap();
        assert_eq!(c.ip, ip("1.2.3.4"));
        // Ports, as some balancers write them.
        let c = resolve("127.0.0.1", &["[2001:db8::1]:80, 10.0.0.1:5000"], &t).unwrap();
        assert_eq!(c.ip, ip("2001:db8::1"));
        // The chain forwarded ends with the client as quire read it, port dropped.
        assert_eq!(c.forwarded_for, "2001:db8::1");
        let c = resolve("127.0.0.1", &["1.2.3.4, 192.0.2.7:5000"], &t).unwrap();
        assert_eq!(c.forwarded_for, "1.2.3.4, 192.0.2.7");
        // Empty list elements are skipped (RFC 9110 §5.6.1).
        let c = resolve("127.0.0.1", &[" , 1.2.3.4 ,, "], &t).unwrap();
        assert_eq!(c.ip, ip("1.2.3.4"));
    }

    #[test]
    fn a_trusted_peer_naming_nobody_is_refused_never_the_client() {
        let t = TrustedProxies::parse(&["10.0.0.0/8", "127.0.0.1"]).unwrap();
        for xff in [
            &["1.2.3.4, junk"][..],
            &["1.2.3.4", "junk"],
            &["junk, 10.0.0.2"],
            &[""],
            &[" , "],
        ] {
            let got = resolve("127.0.0.1", xff, &t);
            assert!(got.is_err(), "{xff:?}: {got:?}");
            assert_eq!(
                Client::ip_or_peer(peer("127.0.0.1"), &h(xff), &t),
                ip("127.0.0.1"),
                "the log names the peer of a refused request"
            );
            assert!(!Client::named(peer("127.0.0.1"), &h(xff), &t));
        }
    }

    #[test]
    fn a_long_forwarded_for_still_names_its_rightmost_client() {
        let t = TrustedProxies::parse(&["127.0.0.1"]).unwrap();
        let long = vec!["1.1.1.1"; 4000].join(", ");
        let c = resolve("127.0.0.1", &[&long, "203.0.113.5"], &t).unwrap();
        assert_eq!(c.ip, ip("203.0.113.5"));
        assert!(c.forwarded_for.ends_with(", 1.1.1.1, 203.0.113.5"));
        assert!(Client::named(peer("127.0.0.1"), &h(&[&long]), &t));
    }

    #[test]
    fn non_text_forwarded_for_names_its_client_and_forwards_text() {
        let t = TrustedProxies::parse(&["127.0.0.1"]).unwrap();
        let mut hm = HeaderMap::new();
        hm.insert(
            "x-forwarded-for",
            HeaderValue::from_bytes(b"caf\xc3\xa9, \xff, 203.0.113.5").unwrap(),
        );
        let c = Client::resolve(peer("127.0.0.1"), &hm, &t).unwrap();
        assert_eq!(c.ip, ip("203.0.113.5"));
        assert_eq!(c.forwarded_for, "unknown, unknown, 203.0.113.5");
        hm.insert(
            "x-forwarded-for",
            HeaderValue::from_bytes(b"203.0.113.5, \xff").unwrap(),
        );
        assert!(Client::resolve(peer("127.0.0.1"), &hm, &t).is_err());
    }
}
