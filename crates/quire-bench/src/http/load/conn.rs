//! One client connection: a non-blocking TCP socket (`TCP_NODELAY`), where it is in
//! its life (connecting, idle, waiting for an answer), its read buffer with the bytes
//! not parsed yet, its response parser, and the times of the request in flight.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::time::Instant;

use rustix::net::{self, AddressFamily, SocketFlags, SocketType};

use super::parse::Parser;

/// Read buffer size: a response head (or chunk line) must fit in it.
pub(crate) const BUF: usize = 64 * 1024;

/// Where a connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No socket (before the first connect, after an error, or after the run).
    Down,
    /// A connect in progress.
    Connecting,
    /// Connected, no request in flight.
    Idle,
    /// A request written (or being written), its answer not complete.
    Busy,
}

/// One connection.
#[derive(Debug)]
pub(crate) struct Conn {
    /// The socket, when there is one.
    pub sock: Option<TcpStream>,
    /// Where it is.
    pub phase: Phase,
    /// Bytes read; `buf[start..end]` are not parsed yet.
    pub buf: Box<[u8]>,
    /// First unparsed byte.
    pub start: usize,
    /// End of the bytes read.
    pub end: usize,
    /// The response being parsed.
    pub parser: Parser,
    /// Sequence number of the request in flight.
    pub req: u64,
    /// Bytes of it written so far.
    pub written: usize,
    /// Where its latency counts from: when it was sent (closed loop) or due (open).
    pub origin: Instant,
    /// When it was sent (for the timeout).
    pub sent: Instant,
    /// Whether the socket is registered for writability too.
    pub want_out: bool,
    /// When to try connecting again after a failed connect.
    pub retry_at: Option<Instant>,
}

impl Conn {
    /// A connection with no socket yet.
    pub(crate) fn new(now: Instant) -> Conn {
        Conn {
            sock: None,
            phase: Phase::Down,
            buf: vec![0; BUF].into_boxed_slice(),
            start: 0,
            end: 0,
            parser: Parser::new(),
            req: 0,
            written: 0,
            origin: now,
            sent: now,
            want_out: false,
            retry_at: None,
        }
    }

    /// Drops the socket and whatever was in flight.
    pub(crate) fn reset(&mut self) {
        self.sock = None;
        self.phase = Phase::Down;
        self.start = 0;
        self.end = 0;
        self.parser.reset();
        self.written = 0;
        self.want_out = false;
    }

    /// Moves unparsed bytes to the front of the buffer; false when it is full of them
    /// (a head larger than the buffer).
    pub(crate) fn make_room(&mut self) -> bool {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.end < self.buf.len() {
            return true;
        }
        if self.start == 0 {
            return false;
        }
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        true
    }
}

/// Starts a non-blocking connect to `addr` with `TCP_NODELAY` set.
pub(crate) fn open(addr: SocketAddr) -> io::Result<TcpStream> {
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    };
    let fd = net::socket_with(
        family,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?;
    net::sockopt::set_tcp_nodelay(&fd, true)?;
    match net::connect(&fd, &addr) {
        Ok(()) | Err(rustix::io::Errno::INPROGRESS) => Ok(TcpStream::from(fd)),
        Err(e) => Err(e.into()),
    }
}

/// Whether a connect in progress succeeded.
pub(crate) fn connected(sock: &TcpStream) -> io::Result<()> {
    net::sockopt::socket_error(sock)?.map_err(io::Error::from)
}
