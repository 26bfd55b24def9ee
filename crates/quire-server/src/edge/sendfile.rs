//! Large hits go to the socket with `sendfile(2)` from the volume file.
//!
//! hyper knows nothing of sendfile: it hands the connection's writer a vectored write
//! of the response head and the body `Bytes`. A hit's body `Bytes` points into the
//! store's mapping (see [`crate::request::body::mapped`]), and a byte at address `a` of the
//! mapping is the volume file's byte at `a - base`. So the writer ([`Volume`]) turns
//! each large enough slice that lies in the mapping into `sendfile` from the volume
//! file, and sends what precedes it (the head) with `MSG_MORE`, so head and body
//! still leave in full segments although `TCP_NODELAY` is on.
//!
//! What it costs, and why it is **off by default**: TCP's sendfile does not copy.
//! The socket's queue keeps references to the volume's page-cache pages after
//! `sendfile` returned; reclaim writing a new region into those pages meanwhile would
//! send the client mixed bytes. So the fast path ([`crate::http1::fastpath`]) keeps the
//! store handle that pins the region (owned by the body `Bytes`) until
//! [`crate::edge::sys::unacked`] reads zero for the socket, and when a connection ends first it waits for the
//! queue to drain or aborts the connection ([`abort`]: a reset that drops the queue
//! at once) before letting go. hyper's path drops a body as soon as its write
//! returns, so it never uses sendfile.
//!
//! That covers a peer across a network: once it has acknowledged the bytes, they
//! have left this machine. It does not cover a peer that shares this kernel's network
//! stack — loopback, a container on a veth pair, a proxy on the same host: the very
//! same buffers move to the *peer's* receive queue without a copy, acknowledged but
//! unread, still pointing into the volume. Run with sendfile on, the test
//! `a_slow_client_past_the_idle_limit_is_reset_not_sent_reused_bytes` saw such a
//! client read reused bytes (as committed, it checks the default). No acknowledgement tells when a local
//! reader has copied its data, so sendfile is only for deployments whose clients are
//! all remote: `sendfile_min_bytes` defaults to 0 (off), and hits are copied.
//!
//! When it is on, small bodies still go by one plain `writev` of head and body (one
//! system call; the copy is cheaper than two more calls): measured on ~14 KB gzip
//! pages, sendfile for everything over 4 KiB served 11 % fewer hits per second.

use std::io::{self, IoSlice};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;

use rustix::net::{SendAncillaryBuffer, SendFlags};

use crate::state::Ctx;

/// Aborts the connection now: a reset to the peer, and the send queue (with its
/// references to the volume's pages) dropped before this returns. `connect` with
/// `AF_UNSPEC` disconnects a TCP socket without closing its descriptor, so the pins
/// can be released at once, not after the caller gets round to closing. `SO_LINGER`
/// of zero also makes the eventual close a reset, should the disconnect fail.
pub(crate) fn abort(sock: impl AsFd) {
    let _ = rustix::net::sockopt::set_socket_linger(&sock, Some(std::time::Duration::ZERO));
    let _ = rustix::net::connect_unspec(&sock);
}

/// The volume mapping, for recognising mapped slices.
#[derive(Debug, Clone)]
pub(crate) struct Volume {
    base: usize,
    len: usize,
    min_bytes: usize,
    /// Keeps the store (and so the fd and the mapping) alive.
    ctx: Arc<Ctx>,
}

impl Volume {
    /// The volume of `ctx`'s store; slices of `min_bytes` or more are sent from it.
    pub(crate) fn new(ctx: Arc<Ctx>, min_bytes: usize) -> Volume {
        let (base, len) = ctx.store.mapping();
        Volume {
            base,
            len: usize::try_from(len).unwrap_or(usize::MAX),
            min_bytes: min_bytes.max(1),
            ctx,
        }
    }

    /// The file offset of `b` when it lies wholly in the mapping and is large
    /// enough to be worth a sendfile.
    fn offset_of(&self, b: &[u8]) -> Option<u64> {
        if b.len() < self.min_bytes {
            return None;
        }
        let off = (b.as_ptr() as usize).checked_sub(self.base)?;
        let end = off.checked_add(b.len())?;
        (end <= self.len).then_some(off as u64)
    }

    /// Whether any of `bufs` would go by sendfile.
    pub(crate) fn wants(&self, bufs: &[IoSlice<'_>]) -> bool {
        bufs.iter().any(|b| self.offset_of(b).is_some())
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.ctx.store.volume_fd()
    }

    /// One non-blocking write of `bufs` to `sock`: the slices before the first mapped
    /// one with `MSG_MORE`, or that mapped one with sendfile. Returns bytes written.
    pub(crate) fn write(&self, sock: impl AsFd, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match bufs.iter().position(|b| self.offset_of(b).is_some()) {
            None => Ok(rustix::io::writev(sock, bufs)?),
            Some(0) => {
                let b = &bufs[0];
                let mut off = self.offset_of(b).unwrap_or(0);
                Ok(rustix::fs::sendfile(
                    sock,
                    self.fd(),
                    Some(&mut off),
                    b.len(),
                )?)
            }
            Some(i) => Ok(rustix::net::sendmsg(
                sock,
                &bufs[..i],
                &mut SendAncillaryBuffer::default(),
                SendFlags::MORE | SendFlags::NOSIGNAL,
            )?),
        }
    }
}
