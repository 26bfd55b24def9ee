//! A TCP relay between one quire node and Redis that can make the link slow or
//! silent: every chunk is held for half the lag in each direction (so each round
//! trip gains the whole lag), or, while silenced, nothing moves at all while both
//! sockets stay open (no reset, no FIN), as a partition looks from either side.
//!
//! Key decisions:
//! - **Order is kept**: a reader task stamps each chunk with the instant it arrived
//!   and queues it; a writer task writes it once its stamp plus the delay has
//!   passed, so a pipelined client sees the same byte stream, only later.
//! - **Silence holds, it does not drop**: while silenced the writer writes nothing
//!   and the reader stops reading once [`HELD_BYTES_MAX`] are queued (the kernel's
//!   buffers then fill and the sender blocks); when healed what was held flows on.
//! - **New connections go through too**: a node that gives up on a connection and
//!   reconnects is relayed (and delayed or silenced) the same way, and a Redis
//!   restarted on the same port is reached again by the next connection.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Most bytes held in one direction before the relay stops reading.
const HELD_BYTES_MAX: u64 = 8 << 20;

/// How often a held writer or reader looks at the switches again.
const TICK: Duration = Duration::from_millis(10);

/// The switches, shared by every connection of one relay.
#[derive(Debug, Default)]
struct Switches {
    /// The added round-trip time, milliseconds (half each way).
    lag_ms: AtomicU64,
    silent: AtomicBool,
}

/// A running relay; stops accepting when dropped (open connections end with
/// either side).
#[derive(Debug)]
pub(crate) struct Relay {
    port: u16,
    switches: Arc<Switches>,
    accept: JoinHandle<()>,
}

impl Relay {
    /// A relay on a free loopback port to Redis on `redis_port`.
    pub(crate) async fn start(redis_port: u16) -> anyhow::Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let switches = Arc::new(Switches::default());
        let accept = tokio::spawn(accept_loop(listener, redis_port, switches.clone()));
        Ok(Relay {
            port,
            switches,
            accept,
        })
    }

    /// The URL a node is given for Redis.
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Adds `lag` to every round trip from now on (chunks already queued keep theirs).
    pub(crate) fn set_lag(&self, lag: Duration) {
        let ms = u64::try_from(lag.as_millis()).unwrap_or(u64::MAX);
        self.switches.lag_ms.store(ms, Ordering::SeqCst);
    }

    /// Stops (`true`) or resumes (`false`) forwarding, holding every socket open.
    pub(crate) fn set_silent(&self, silent: bool) {
        self.switches.silent.store(silent, Ordering::SeqCst);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn accept_loop(listener: TcpListener, redis_port: u16, switches: Arc<Switches>) {
    loop {
        let Ok((node, _)) = listener.accept().await else {
            tokio::time::sleep(TICK).await;
            continue;
        };
        let Ok(redis) = TcpStream::connect(("127.0.0.1", redis_port)).await else {
            // Redis is down: the node sees its connection closed, as it would.
            continue;
        };
        let _ = node.set_nodelay(true);
        let _ = redis.set_nodelay(true);
        let (nr, nw) = node.into_split();
        let (rr, rw) = redis.into_split();
        direction(nr, rw, switches.clone());
        direction(rr, nw, switches.clone());
    }
}

/// Relays one direction: a reader that stamps chunks, a writer that delays them.
fn direction(from: OwnedReadHalf, to: OwnedWriteHalf, switches: Arc<Switches>) {
    let (tx, rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let held = Arc::new(AtomicU64::new(0));
    tokio::spawn(read_side(from, tx, switches.clone(), held.clone()));
    tokio::spawn(write_side(to, rx, switches, held));
}

async fn read_side(
    mut from: OwnedReadHalf,
    tx: mpsc::UnboundedSender<(Instant, Vec<u8>)>,
    switches: Arc<Switches>,
    held: Arc<AtomicU64>,
) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        while switches.silent.load(Ordering::SeqCst)
            && held.load(Ordering::SeqCst) >= HELD_BYTES_MAX
        {
            tokio::time::sleep(TICK).await;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        held.fetch_add(n as u64, Ordering::SeqCst);
        if tx.send((Instant::now(), buf[..n].to_vec())).is_err() {
            return;
        }
    }
}

async fn write_side(
    mut to: OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<(Instant, Vec<u8>)>,
    switches: Arc<Switches>,
    held: Arc<AtomicU64>,
) {
    while let Some((at, chunk)) = rx.recv().await {
        loop {
            let half = Duration::from_millis(switches.lag_ms.load(Ordering::SeqCst) / 2);
            let due = at + half;
            let now = Instant::now();
            if switches.silent.load(Ordering::SeqCst) {
                tokio::time::sleep(TICK).await;
            } else if now < due {
                tokio::time::sleep((due - now).min(TICK * 10)).await;
            } else {
                break;
            }
        }
        held.fetch_sub(chunk.len() as u64, Ordering::SeqCst);
        if to.write_all(&chunk).await.is_err() {
            return;
        }
    }
    // The other side closed: close this one too (the node or Redis sees a FIN).
    let _ = to.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server standing in for Redis; its port.
    async fn echo() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        port
    }

    async fn round_trip(s: &mut TcpStream, msg: &[u8]) -> Vec<u8> {
        s.write_all(msg).await.unwrap();
        let mut got = vec![0u8; msg.len()];
        s.read_exact(&mut got).await.unwrap();
        got
    }

    #[tokio::test]
    async fn a_lag_delays_each_round_trip_and_keeps_the_bytes_in_order() {
        let relay = Relay::start(echo().await).await.unwrap();
        let mut s = TcpStream::connect(("127.0.0.1", relay.port)).await.unwrap();
        assert_eq!(round_trip(&mut s, b"ping").await, b"ping");
        relay.set_lag(Duration::from_millis(400));
        let began = Instant::now();
        assert_eq!(round_trip(&mut s, b"one two").await, b"one two");
        // Half the lag each way: the round trip is at least the lag.
        assert!(began.elapsed() >= Duration::from_millis(400));
    }

    #[tokio::test]
    async fn silence_holds_the_bytes_until_healed() {
        let relay = Relay::start(echo().await).await.unwrap();
        let mut s = TcpStream::connect(("127.0.0.1", relay.port)).await.unwrap();
        relay.set_silent(true);
        s.write_all(b"held").await.unwrap();
        let mut got = [0u8; 4];
        let early = tokio::time::timeout(Duration::from_millis(300), s.read_exact(&mut got)).await;
        assert!(early.is_err(), "nothing moves while silent");
        relay.set_silent(false);
        s.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"held");
    }
}
