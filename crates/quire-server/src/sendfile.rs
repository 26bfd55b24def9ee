//! Large hits go to the socket with `sendfile(2)` from the volume file.
//!
//! hyper knows nothing of sendfile: it hands the connection's writer a vectored write
//! of the response head and the body `Bytes`. A hit's body `Bytes` points into the
//! store's mapping (see [`crate::body::mapped`]), and a byte at address `a` of the
//! mapping is the volume file's byte at `a - base`. So the writer ([`Volume`]) turns
//! each large enough slice that lies in the mapping into `sendfile` from the volume
//! file, and sends what precedes it (the head) with `MSG_MORE`, so head and body
//! still leave in full segments although `TCP_NODELAY` is on.
//!
//! Why this is sound, and what it costs: TCP's sendfile does not copy. The socket's
//! queue keeps references to the volume's page-cache pages until the peer has
//! acknowledged the bytes, long after `sendfile` returned; reclaim writing a new
//! region into those pages meanwhile would send the client mixed bytes. So the
//! store handle that pins the region (owned by the body `Bytes`) must outlive the
//! queue, not the call: the fast path ([`crate::fastpath`]) keeps every body it
//! sent this way until [`unacked`] reads zero for the socket, and when a connection
//! ends first it waits for the queue to drain, or aborts it ([`abort_on_close`]:
//! the queue is dropped with a reset, a clean abort) before letting go. hyper's
//! path drops a body as soon as its write returns, so it never uses sendfile.
//!
//! Small bodies keep the plain `writev` of head and body (one system call, and the
//! copy is cheaper than a second call): the threshold is [`SENDFILE_MIN_BYTES`]
//! (`sendfile_min_bytes` in the config).

use std::io::{self, IoSlice};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;

use rustix::net::{SendAncillaryBuffer, SendFlags};

use crate::state::Ctx;

/// Bodies at least this large go out with sendfile. Measured on ~14 KB gzip pages
/// (`scripts/bench-proxy-vs-nginx.py`, one core): sendfile for everything over 4 KiB
/// served 15 % fewer hits per second than copying (a second system call per response
/// costs more than the copy saves at that size), so only large bodies take it.
pub const SENDFILE_MIN_BYTES: usize = 64 * 1024;

/// Bytes in `sock`'s send queue that the peer has not acknowledged (`SIOCOUTQ`),
/// or `None` where that cannot be read (then sendfile is not used at all).
pub fn unacked(sock: impl AsFd) -> Option<usize> {
    #[cfg(all(
        target_os = "linux",
        any(
            target_arch = "x86_64",
            target_arch = "x86",
            target_arch = "aarch64",
            target_arch = "arm",
            target_arch = "riscv64"
        )
    ))]
    {
        // SIOCOUTQ (= TIOCOUTQ) on these architectures.
        const SIOCOUTQ: rustix::ioctl::Opcode = 0x5411;
        // SAFETY: SIOCOUTQ on a socket writes one C int through the pointer, which
        // is exactly the getter's output type; the fd is borrowed for the call.
        let n = unsafe {
            rustix::ioctl::ioctl(
                sock,
                rustix::ioctl::Getter::<SIOCOUTQ, std::ffi::c_int>::new(),
            )
        };
        n.ok().and_then(|n| usize::try_from(n).ok())
    }
    #[cfg(not(all(
        target_os = "linux",
        any(
            target_arch = "x86_64",
            target_arch = "x86",
            target_arch = "aarch64",
            target_arch = "arm",
            target_arch = "riscv64"
        )
    )))]
    {
        let _ = sock;
        None
    }
}

/// Makes closing `sock` reset the connection and drop its send queue at once
/// (`SO_LINGER` of zero) instead of sending the queue after the close: for a
/// connection whose queue may still point into pages the store is about to reuse.
pub fn abort_on_close(sock: impl AsFd) {
    let _ = rustix::net::sockopt::set_socket_linger(sock, Some(std::time::Duration::ZERO));
}

/// The volume mapping, for recognising mapped slices.
#[derive(Debug, Clone)]
pub struct Volume {
    base: usize,
    len: usize,
    min_bytes: usize,
    /// Keeps the store (and so the fd and the mapping) alive.
    ctx: Arc<Ctx>,
}

impl Volume {
    /// The volume of `ctx`'s store; slices of `min_bytes` or more are sent from it.
    pub fn new(ctx: Arc<Ctx>, min_bytes: usize) -> Volume {
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
    pub fn wants(&self, bufs: &[IoSlice<'_>]) -> bool {
        bufs.iter().any(|b| self.offset_of(b).is_some())
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.ctx.store.volume_fd()
    }

    /// One non-blocking write of `bufs` to `sock`: the slices before the first mapped
    /// one with `MSG_MORE`, or that mapped one with sendfile. Returns bytes written.
    pub fn write(&self, sock: impl AsFd, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
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
