//! The machine's floor, `quire bench floor` (hidden; `quire bench http --peer floor`
//! starts it): what answering a keep-alive HTTP/1.1 request costs when nothing but the
//! kernel's work is done. One thread, one epoll set, non-blocking sockets; it reads
//! until a request's blank line (`\r\n\r\n`, found with the same vector search as
//! quire's; nothing else is parsed) and answers each
//! request with one `write` of a response built once at start, of the size of the
//! corpus's mean answer. Every server's CPU per request is then reported as a multiple
//! of this one's, so a figure says how far it is from what the machine allows.
//!
//! Key decisions:
//! - **Level-triggered, one `read` per readiness**: a short read leaves nothing
//!   behind, so a keep-alive request costs one `epoll_wait` (shared by every ready
//!   connection), one `read` and one `write`, as an ideal server's would.
//! - **Pipelined requests are answered in order, one write each**; a response the
//!   socket takes only in part is finished when it is writable again, before the
//!   next. What a client owes grows only a counter, never a buffer.
//! - **Not a server**: no request is checked, every path gets the same bytes. It is a
//!   yardstick for `bench http` on loopback and nothing else.
//! - **A second floor on tokio** (`--tokio`, `--peer floor-tokio`): the same answers
//!   from one current-thread tokio runtime, a task per connection (`read`, then one
//!   `write_all` per request), as quire's single-worker runtime runs them. The gap
//!   between the two floors is what the runtime costs per request before any of
//!   quire's own work; the gap between it and quire is quire's.
//! - **A floor over the corpus's bytes** (`--distinct N`, `--peer floor-corpus`): N
//!   distinct responses of the same size, each request answered with the one its
//!   request line hashes to. The kernel then copies from as much memory as a cache
//!   serving N pages does (28 MB for the 2,000-page corpus) rather than from one
//!   buffer that stays in the CPU's cache; the gap between the two epoll floors is
//!   what the working set's size costs any server, before any work of its own.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Args;
use rustix::event::epoll::{self, Event, EventData, EventFlags};
use rustix::time::Timespec;

/// Arguments of `quire bench floor` (hidden: `bench http --peer floor` runs it).
#[derive(Debug, Clone, Args)]
pub struct BenchFloorArgs {
    /// Where to listen, host:port.
    #[arg(long, value_name = "ADDR")]
    pub listen: String,
    /// Bytes of each response, head and body (at least the head's own length).
    #[arg(long, value_name = "N")]
    pub bytes: usize,
    /// Serve from a current-thread tokio runtime, a task per connection, instead of
    /// one epoll loop.
    #[arg(long)]
    pub tokio: bool,
    /// How many distinct responses to answer from, each request getting the one its
    /// head hashes to (1: one buffer for every request).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub distinct: u32,
}

/// Runs the floor until the process is killed.
pub fn main(args: &BenchFloorArgs) -> anyhow::Result<()> {
    let listener = TcpListener::bind(&args.listen)?;
    if args.tokio {
        tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()?
            .block_on(serve_tokio(listener, response(args.bytes).into()))?;
    } else {
        let responses = responses(args.bytes, args.distinct as usize);
        serve(listener, &responses, &AtomicBool::new(false))?;
    }
    Ok(())
}

/// `n` responses of `total` bytes each, every body its own bytes (so that each is
/// its own memory, as `n` cached pages are).
pub(crate) fn responses(total: usize, n: usize) -> Vec<Vec<u8>> {
    let first = response(total);
    let head = first.len() - first.rsplit(|&c| c == b'\n').next().map_or(0, <[u8]>::len);
    (0..n)
        .map(|i| {
            let mut r = first.clone();
            for (j, c) in r[head..].iter_mut().enumerate() {
                *c = b'a' + ((i * 7 + j) % 26) as u8;
            }
            r
        })
        .collect()
}

/// The floor on tokio: a task per connection, reading and answering as [`serve`]
/// does (pipelined requests in order, one `write_all` each), until the listener fails.
pub(crate) async fn serve_tokio(
    listener: TcpListener,
    response: std::sync::Arc<[u8]>,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    loop {
        let (sock, _) = listener.accept().await?;
        let _ = sock.set_nodelay(true);
        tokio::spawn(answer_tokio(sock, response.clone()));
    }
}

/// One connection of the tokio floor, until the client closes or an error.
async fn answer_tokio(mut sock: tokio::net::TcpStream, response: std::sync::Arc<[u8]>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; READ_BYTES];
    let mut ends = HeadEnds::default();
    loop {
        let n = match sock.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        for _ in 0..ends.count(&buf[..n]) {
            if sock.write_all(&response).await.is_err() {
                return;
            }
        }
    }
}

/// A `200` of `total` bytes in all (or its head alone, when that is longer): a
/// `Content-Length` and a body of `x`s. (`Connection: close` is not read either: the
/// harness only connects to it to see it is up, and never warms it.)
pub(crate) fn response(total: usize) -> Vec<u8> {
    let head = |body: usize| {
        format!("HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {body}\r\n\r\n")
    };
    // The head's length depends on the body's digits: settle it in two steps.
    let mut body = total.saturating_sub(head(0).len());
    body = total.saturating_sub(head(body).len());
    let mut r = head(body).into_bytes();
    r.resize(r.len() + body, b'x');
    r
}

/// Where request heads end in the bytes a connection sends, across reads, and (for the
/// floor over N bodies) a hash of each head's request line to pick its answer by.
///
/// It finds a head's end with `memchr`'s vector search, as quire does
/// (`edge::wire::head_end`), so the yardstick pays no more per byte than the server it
/// measures. Only the request line is hashed (FNV-1a, byte by byte so that a line split
/// across reads hashes alike): it is all that tells one page's request from another's.
#[derive(Debug, Clone, Copy)]
struct HeadEnds {
    /// The last bytes read since the last head's end (at most 3): a blank line may
    /// begin in them and end in the next read.
    tail: [u8; 3],
    tail_len: u8,
    /// The request line's hash so far.
    hash: u64,
    /// Whether the request line's `\n` is still to come.
    in_line: bool,
}

impl Default for HeadEnds {
    fn default() -> Self {
        HeadEnds {
            tail: [0; 3],
            tail_len: 0,
            hash: FNV_OFFSET,
            in_line: true,
        }
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// The blank line that ends a head.
static BLANK_LINE: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\r\n\r\n"));

impl HeadEnds {
    /// How many request heads end in `b`.
    fn count(&mut self, b: &[u8]) -> u64 {
        let mut n = 0;
        self.each(b, false, |_| n += 1);
        n
    }

    /// Calls `end` for each request head that ends in `b`, with its request line's
    /// hash when `hashing` (0 otherwise).
    fn each(&mut self, b: &[u8], hashing: bool, mut end: impl FnMut(u64)) {
        let mut at = self.spanning_end(b, hashing, &mut end);
        while let Some(p) = BLANK_LINE.find(&b[at..]) {
            let head = &b[at..at + p + 4];
            if hashing {
                self.hash_line(head);
            }
            end(self.take_hash(hashing));
            at += p + 4;
        }
        if hashing {
            self.hash_line(&b[at..]);
        }
        self.keep_tail(b, at);
    }

    /// Where in `b` a blank line begun in the last read's tail ends (0 when none does),
    /// calling `end` for its head.
    fn spanning_end(&mut self, b: &[u8], hashing: bool, end: &mut impl FnMut(u64)) -> usize {
        let k = usize::from(self.tail_len);
        if k == 0 {
            return 0;
        }
        // A blank line that starts in the tail ends within `b`'s first 3 bytes.
        let m = b.len().min(3);
        let mut joined = [0u8; 6];
        joined[..k].copy_from_slice(&self.tail[..k]);
        joined[k..k + m].copy_from_slice(&b[..m]);
        let Some(p) = BLANK_LINE.find(&joined[..k + m]) else {
            return 0;
        };
        debug_assert!(p < k, "4 bytes cannot fit in b's first 3");
        let e = p + 4 - k;
        if hashing {
            self.hash_line(&b[..e]);
        }
        end(self.take_hash(hashing));
        self.tail_len = 0;
        e
    }

    /// Hashes the request line's bytes in `b` while the line lasts.
    fn hash_line(&mut self, b: &[u8]) {
        if !self.in_line {
            return;
        }
        let line = match memchr::memchr(b'\n', b) {
            Some(i) => {
                self.in_line = false;
                &b[..=i]
            }
            None => b,
        };
        for &c in line {
            self.hash = (self.hash ^ u64::from(c)).wrapping_mul(0x100_0000_01b3);
        }
    }

    /// The ended head's hash (0 when not `hashing`), starting the next head's.
    fn take_hash(&mut self, hashing: bool) -> u64 {
        let h = if hashing { self.hash } else { 0 };
        self.hash = FNV_OFFSET;
        self.in_line = true;
        h
    }

    /// Keeps the last 3 bytes of the stream since the last head's end, which ended at
    /// `b[at]` (or before `b`, when `at` is 0 and no head ended in `b`).
    fn keep_tail(&mut self, b: &[u8], at: usize) {
        let rest = &b[at..];
        if rest.len() >= 3 || at > 0 {
            let n = rest.len().min(3);
            self.tail[..n].copy_from_slice(&rest[rest.len() - n..]);
            self.tail_len = n as u8;
            return;
        }
        // Fewer than 3 new bytes: some of the old tail stays.
        let mut joined = [0u8; 5];
        let k = usize::from(self.tail_len);
        joined[..k].copy_from_slice(&self.tail[..k]);
        joined[k..k + rest.len()].copy_from_slice(rest);
        let all = &joined[..k + rest.len()];
        let n = all.len().min(3);
        self.tail[..n].copy_from_slice(&all[all.len() - n..]);
        self.tail_len = n as u8;
    }
}

/// One client connection.
struct Conn {
    sock: TcpStream,
    ends: HeadEnds,
    /// Responses owed, by index (the first possibly begun).
    owed: std::collections::VecDeque<u32>,
    /// Bytes of the first owed response already written.
    offset: usize,
    /// Whether epoll also watches for writability.
    want_out: bool,
}

/// The listener's key in the epoll set; connection `i` is `i`.
const LISTENER: u64 = u64::MAX;

/// Bytes read at once.
const READ_BYTES: usize = 16 * 1024;

/// Serves one of `responses` to every request on `listener`'s connections until
/// `stop` is set (checked at least every 200 ms).
pub(crate) fn serve(
    listener: TcpListener,
    responses: &[Vec<u8>],
    stop: &AtomicBool,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
    epoll::add(&ep, &listener, EventData::new_u64(LISTENER), EventFlags::IN)?;
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut events = vec![
        Event {
            flags: EventFlags::empty(),
            data: EventData::new_u64(0),
        };
        256
    ];
    let mut buf = vec![0u8; READ_BYTES];
    let tick = Timespec {
        tv_sec: 0,
        tv_nsec: Duration::from_millis(200).as_nanos() as _,
    };
    while !stop.load(Ordering::Relaxed) {
        let n = match epoll::wait(&ep, &mut events[..], Some(&tick)) {
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        for ev in &events[..n] {
            match ev.data.u64() {
                LISTENER => accept(&ep, &listener, &mut conns),
                i => {
                    let slot = &mut conns[i as usize];
                    if !step(&ep, slot, i, ev.flags, &mut buf, responses) {
                        *slot = None;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Accepts every pending connection into a free slot of `conns`.
fn accept(ep: &impl AsFd, listener: &TcpListener, conns: &mut Vec<Option<Conn>>) {
    while let Ok((sock, _)) = listener.accept() {
        if sock.set_nonblocking(true).is_err() {
            continue;
        }
        let _ = sock.set_nodelay(true);
        let i = conns.iter().position(Option::is_none).unwrap_or_else(|| {
            conns.push(None);
            conns.len() - 1
        });
        if epoll::add(ep, &sock, EventData::new_u64(i as u64), EventFlags::IN).is_ok() {
            conns[i] = Some(Conn {
                sock,
                ends: HeadEnds::default(),
                owed: std::collections::VecDeque::new(),
                offset: 0,
                want_out: false,
            });
        }
    }
}

/// Handles readiness `flags` of connection `i`; `false` when it is to close
/// (dropping the socket takes it out of the epoll set).
fn step(
    ep: &impl AsFd,
    slot: &mut Option<Conn>,
    i: u64,
    flags: EventFlags,
    buf: &mut [u8],
    responses: &[Vec<u8>],
) -> bool {
    let Some(c) = slot else {
        return true;
    };
    if flags.intersects(EventFlags::IN | EventFlags::HUP | EventFlags::ERR) {
        match c.sock.read(buf) {
            Ok(0) => return false,
            Ok(n) => {
                let (owed, count) = (&mut c.owed, responses.len() as u64);
                c.ends
                    .each(&buf[..n], count > 1, |h| owed.push_back((h % count) as u32));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return false,
        }
    }
    let Ok(blocked) = flush(c, responses) else {
        return false;
    };
    if blocked != c.want_out {
        c.want_out = blocked;
        let interest = if blocked {
            EventFlags::IN | EventFlags::OUT
        } else {
            EventFlags::IN
        };
        return epoll::modify(ep, &c.sock, EventData::new_u64(i), interest).is_ok();
    }
    true
}

/// Writes what `c` is owed, one write per response; `true` when the socket filled
/// before the last.
fn flush(c: &mut Conn, responses: &[Vec<u8>]) -> io::Result<bool> {
    while let Some(&i) = c.owed.front() {
        let response = &responses[i as usize];
        match c.sock.write(&response[c.offset..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) if c.offset + n == response.len() => {
                c.owed.pop_front();
                c.offset = 0;
            }
            Ok(n) => c.offset += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
            Err(e) => return Err(e),
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A floor on a loopback port, stopped when the guard drops.
    struct Running {
        addr: std::net::SocketAddr,
        stop: Arc<AtomicBool>,
        thread: Option<std::thread::JoinHandle<io::Result<()>>>,
    }

    impl Drop for Running {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::Relaxed);
            if let Some(t) = self.thread.take() {
                t.join().expect("floor thread").expect("floor ran");
            }
        }
    }

    fn start(response: Vec<u8>) -> Running {
        start_all(vec![response])
    }

    fn start_all(responses: Vec<Vec<u8>>) -> Running {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || serve(listener, &responses, &s));
        Running {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    fn read_exactly(s: &mut TcpStream, n: usize) -> Vec<u8> {
        let mut v = vec![0; n];
        s.read_exact(&mut v).unwrap();
        v
    }

    #[test]
    fn the_response_has_the_size_asked_and_says_its_length() {
        for total in [0, 50, 99, 100, 101, 14_000, 1 << 20] {
            let r = response(total);
            let text = String::from_utf8(r.clone()).unwrap();
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(len, body.len());
            assert!(head.starts_with("HTTP/1.1 200 OK\r\n"));
            assert_eq!(r.len(), total.max(head.len() + 4), "total {total}");
        }
    }

    #[test]
    fn head_ends_are_counted_across_reads() {
        let mut e = HeadEnds::default();
        assert_eq!(e.count(b"GET / HTTP/1.1\r\nHost: a\r\n\r"), 0);
        assert_eq!(e.count(b"\n"), 1);
        assert_eq!(
            e.count(b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n"),
            2
        );
        // A stray `\r` restarts the match at itself.
        assert_eq!(e.count(b"x\r\r\n\r\n"), 1);
        assert_eq!(e.count(b"\r\n\n\r\n"), 0);
    }

    /// The model [`HeadEnds`] replaced: a byte-by-byte match of `\r\n\r\n`, hashing
    /// each head's bytes up to its first `\n`.
    fn model_ends(stream: &[u8]) -> Vec<u64> {
        const END: &[u8; 4] = b"\r\n\r\n";
        let (mut matched, mut hash, mut in_line, mut ends) = (0, FNV_OFFSET, true, vec![]);
        for &c in stream {
            if in_line {
                hash = (hash ^ u64::from(c)).wrapping_mul(0x100_0000_01b3);
                in_line = c != b'\n';
            }
            matched = if c == END[matched] {
                matched + 1
            } else {
                usize::from(c == b'\r')
            };
            if matched == 4 {
                ends.push(hash);
                (matched, hash, in_line) = (0, FNV_OFFSET, true);
            }
        }
        ends
    }

    #[test]
    fn head_ends_and_line_hashes_match_a_byte_by_byte_scan_however_the_reads_split() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(31);
        let alphabet = b"\r\r\r\n\n\nGa/ ";
        for _ in 0..5_000 {
            let len = rng.random_range(0..80);
            let stream: Vec<u8> = (0..len)
                .map(|_| alphabet[rng.random_range(0..alphabet.len())])
                .collect();
            let want = model_ends(&stream);
            let (mut ends, mut got, mut counted) = (HeadEnds::default(), vec![], 0);
            let mut counter = HeadEnds::default();
            let mut at = 0;
            while at < stream.len() {
                let n = rng.random_range(1..=(stream.len() - at).min(9));
                let read = &stream[at..at + n];
                ends.each(read, true, |h| got.push(h));
                counted += counter.count(read);
                at += n;
            }
            assert_eq!(got, want, "{:?}", String::from_utf8_lossy(&stream));
            assert_eq!(counted, want.len() as u64);
        }
    }

    #[test]
    fn keep_alive_requests_are_answered_in_turn() {
        let resp = response(3_000);
        let floor = start(resp.clone());
        let mut s = TcpStream::connect(floor.addr).unwrap();
        for path in ["/a", "/b", "/c"] {
            write!(s, "GET {path} HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
            assert_eq!(read_exactly(&mut s, resp.len()), resp);
        }
        // A second connection alongside is served too.
        let mut t = TcpStream::connect(floor.addr).unwrap();
        t.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(read_exactly(&mut t, resp.len()), resp);
    }

    #[test]
    fn distinct_responses_are_chosen_by_the_head_and_are_each_their_own_bytes() {
        let all = responses(5_000, 8);
        assert!(all
            .iter()
            .all(|r| r.len() == 5_000 && r.starts_with(b"HTTP/1.1 200 OK")));
        for (i, r) in all.iter().enumerate() {
            assert!(
                all[i + 1..].iter().all(|o| o != r),
                "response {i} is repeated"
            );
        }
        let floor = start_all(all.clone());
        let mut s = TcpStream::connect(floor.addr).unwrap();
        let mut seen = std::collections::HashMap::new();
        for round in 0..2 {
            for path in 0..16 {
                write!(s, "GET /{path} HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
                let got = read_exactly(&mut s, 5_000);
                assert!(all.contains(&got));
                if round == 1 {
                    assert_eq!(seen[&path], got, "/{path} got another answer");
                }
                seen.insert(path, got);
            }
        }
        let kinds: std::collections::HashSet<_> = seen.values().collect();
        assert!(kinds.len() > 1, "16 paths all hashed to one response");
    }

    #[test]
    fn the_tokio_floor_answers_keep_alive_and_pipelined_requests() {
        let resp = response(200_000);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let body: Arc<[u8]> = resp.clone().into();
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .build()
                .unwrap()
                .block_on(serve_tokio(listener, body))
        });
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\n\r")
            .unwrap();
        assert_eq!(read_exactly(&mut s, resp.len()), resp);
        s.write_all(b"\n").unwrap();
        assert_eq!(read_exactly(&mut s, resp.len()), resp);
        s.write_all(b"GET /3 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(read_exactly(&mut s, resp.len()), resp);
    }

    #[test]
    fn pipelined_and_split_requests_get_one_answer_each() {
        // Larger than a socket's buffers, so answers are finished on writability.
        let resp = response(300_000);
        let floor = start(resp.clone());
        let mut s = TcpStream::connect(floor.addr).unwrap();
        s.write_all(b"GET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\n\r\nGET /3 HTTP/1.1\r\n\r")
            .unwrap();
        for _ in 0..2 {
            assert_eq!(read_exactly(&mut s, resp.len()), resp);
        }
        s.write_all(b"\n").unwrap();
        assert_eq!(read_exactly(&mut s, resp.len()), resp);
        // Nothing more was owed: the next bytes are the next request's answer.
        s.write_all(b"GET /4 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(read_exactly(&mut s, resp.len()), resp);
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).unwrap();
        assert!(
            rest.is_empty(),
            "the floor closes after the client, owing nothing"
        );
    }
}
