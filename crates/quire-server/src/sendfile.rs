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
//! Why this is sound: the slice is borrowed from a `Bytes` that hyper holds until
//! the write completes, and that `Bytes` owns the store handle pinning the region,
//! so reclaim cannot rewrite those file bytes during the call. A write returns how
//! much it sent, as any `write_vectored` does; hyper calls again for the rest.
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
