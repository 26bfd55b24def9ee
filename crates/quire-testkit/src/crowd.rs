//! A crowd of clients over real sockets: requests sent from chosen source
//! addresses (all of 127.0.0.0/8 is loopback), directly or on behalf of others
//! through `X-Forwarded-For`, each member asking for new URLs as fast as it is
//! answered. For the budget's tests, in-process and against the binary alike.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An answer as a raw client read it: status and head.
#[derive(Debug)]
pub struct Answer {
    /// The status code (0 if none could be read).
    pub status: u16,
    /// The status line and fields.
    pub head: String,
}

impl Answer {
    /// The first value of field `name`, trimmed.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// One `GET path` to `to`, sent from source address `from`, with `fields`.
pub async fn get_from(from: IpAddr, to: SocketAddr, path: &str, fields: &[(&str, &str)]) -> Answer {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind(SocketAddr::new(from, 0)).unwrap();
    let mut s = sock.connect(to).await.unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n");
    for (k, v) in fields {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let head = text.split("\r\n\r\n").next().unwrap_or("").to_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Answer { status, head }
}

/// Where the crowd's requests come from: `nets` networks (/24) of `per_net`
/// addresses each, as (source address, what the request says the client is).
pub type Crowd = Vec<(IpAddr, Option<String>)>;

/// `nets` /24s of `per_net` addresses each, asking directly.
pub fn direct_crowd(nets: u8, per_net: u8) -> Crowd {
    let mut v = Vec::new();
    for n in 0..nets {
        for a in 1..=per_net {
            v.push((IpAddr::from([127, 1, n, a]), None));
        }
    }
    v
}

/// The same many clients, carried by one proxy at 127.0.0.1 (`X-Forwarded-For`).
pub fn forwarded_crowd(nets: u8, per_net: u8) -> Crowd {
    let mut v = Vec::new();
    for n in 0..nets {
        for a in 1..=per_net {
            v.push((IpAddr::from([127, 0, 0, 1]), Some(format!("203.0.{n}.{a}"))));
        }
    }
    v
}

/// Runs the crowd until `stop`: each member asks for new URLs, one at a time, on
/// two connections; what it was answered is counted by status.
pub fn run_crowd(
    q: SocketAddr,
    crowd: Crowd,
    stop: Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<Vec<u16>>> {
    let mut tasks = Vec::new();
    for (i, (from, forwarded)) in crowd.into_iter().enumerate() {
        for lane in 0..2 {
            let stop = stop.clone();
            let forwarded = forwarded.clone();
            tasks.push(tokio::spawn(async move {
                let mut statuses = Vec::new();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let path = format!("/crowd/{i}/{lane}/{n}");
                    let fields: Vec<(&str, &str)> = forwarded
                        .as_deref()
                        .map(|f| vec![("x-forwarded-for", f)])
                        .unwrap_or_default();
                    statuses.push(get_from(from, q, &path, &fields).await.status);
                }
                statuses
            }));
        }
    }
    tasks
}
