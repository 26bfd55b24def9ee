//! Three socket calls with no safe form in rustix and a
//! CPU hint: one of the server's two files with
//! `unsafe` code, both on the edge floor (the other, `crate::edge::inherit`, owns the
//! descriptors handed over at exec). Everything else in the crate is checked by
//! `#![deny(unsafe_code)]`; these two modules are the named exceptions
//! (`crate::edge`'s `mod.rs`), so a reviewer reads all of it in two places.
//!
//! - [`recv_into_spare`]: a `recv` into a buffer's spare capacity, without zeroing
//!   it first (the fast path's reads: a memset of 8 KiB per read for nothing).
//! - [`unacked`]: `SIOCOUTQ`, the bytes a socket's peer has not acknowledged (what
//!   decides when a body sent by sendfile may be unpinned, see [`crate::edge::sendfile`]).
//! - [`reverse_name`]: `getnameinfo` with `NI_NAMEREQD`, an address's reverse DNS
//!   name (crawler classes' checks, see [`crate::edge::crawlers`]).
//! - [`prefetch`] and [`prefetch_l2`]: ask the CPU to load cache lines ahead of
//!   use (a repeat hit's recipe and body, see [`crate::http1::repeat`]); the
//!   intrinsic is `unsafe` only because it needs SSE, which every x86-64 CPU has.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;

use bytes::BytesMut;

/// Receives what the socket holds into the spare capacity of `buf` (one `recv`,
/// non-blocking as the socket is) and extends `buf` by it. Returns the bytes
/// received and the room there was: fewer than the room means the socket is
/// drained.
pub(crate) fn recv_into_spare(sock: impl AsFd, buf: &mut BytesMut) -> io::Result<(usize, usize)> {
    let spare = buf.spare_capacity_mut();
    let room = spare.len();
    let ((filled, _), _) = rustix::net::recv(sock, spare, rustix::net::RecvFlags::empty())?;
    let got = filled.len();
    assert!(got <= room, "recv reported more than the room it was given");
    // SAFETY: `recv` initialised the first `got` bytes of the spare capacity, which
    // lie within the allocation (`got <= room`, asserted above).
    unsafe { buf.set_len(buf.len() + got) };
    Ok((got, room))
}

/// A hint to the CPU to load the cache lines of `len` bytes at `at` (at most 8
/// lines; see `crate::http1::repeat`): nothing is read, no address faults.
pub(crate) fn prefetch(at: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    lines::<{ std::arch::x86_64::_MM_HINT_T0 }>(at, len);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (at, len);
}

/// Like [`prefetch`], into the core's L2 cache rather than its L1 (`prefetcht1`):
/// for bytes the kernel reads a little later (a body it copies into a socket),
/// which would only crowd out of L1 what the hit reads before. At most 8 lines.
pub(crate) fn prefetch_l2(at: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    lines::<{ std::arch::x86_64::_MM_HINT_T1 }>(at, len);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (at, len);
}

/// The prefetches of [`prefetch`] and [`prefetch_l2`], with the cache-level hint `HINT`.
#[cfg(target_arch = "x86_64")]
fn lines<const HINT: i32>(at: *const u8, len: usize) {
    for line in (0..len.min(8 * 64)).step_by(64) {
        // SAFETY: `prefetcht0`/`prefetcht1` need SSE, which every x86-64 CPU has;
        // they read no memory the program sees and never fault, whatever the address
        // (one out of bounds is ignored), so no pointer here has to be valid.
        unsafe { std::arch::x86_64::_mm_prefetch::<HINT>(at.wrapping_add(line).cast()) };
    }
}

/// Whether `SIOCOUTQ` is known here: Linux, where it equals `TIOCOUTQ` (0x5411) on
/// these architectures.
const SIOCOUTQ_KNOWN: bool = cfg!(all(
    target_os = "linux",
    any(
        target_arch = "x86_64",
        target_arch = "x86",
        target_arch = "aarch64",
        target_arch = "arm",
        target_arch = "riscv64"
    )
));

/// Bytes in `sock`'s send queue that the peer has not acknowledged (`SIOCOUTQ`),
/// or `None` where that cannot be read (then sendfile is not used at all).
pub(crate) fn unacked(sock: impl AsFd) -> Option<usize> {
    if !SIOCOUTQ_KNOWN {
        return None;
    }
    const SIOCOUTQ: rustix::ioctl::Opcode = 0x5411;
    // SAFETY: SIOCOUTQ on a socket writes one C int through the pointer, which is
    // exactly the getter's output type; the fd is borrowed for the call. Only reached
    // where that opcode is SIOCOUTQ (`SIOCOUTQ_KNOWN`).
    let n = unsafe {
        rustix::ioctl::ioctl(
            sock,
            rustix::ioctl::Getter::<SIOCOUTQ, std::ffi::c_int>::new(),
        )
    };
    n.ok().and_then(|n| usize::try_from(n).ok())
}

/// `ip`'s reverse DNS name (PTR, or the hosts file), without falling back to the
/// address's text (blocking).
pub(crate) fn reverse_name(ip: IpAddr) -> Option<String> {
    let sa = socket2::SockAddr::from(SocketAddr::new(ip, 0));
    let mut host = [0 as libc::c_char; 1025];
    // SAFETY: `sa` is a valid socket address of `sa.len()` bytes that outlives the
    // call; `host` is a writable buffer of the length passed; no service buffer is
    // asked for (null, 0). With NI_NAMEREQD the call fails rather than write the
    // numeric form, and on success it writes a NUL-terminated name into `host`.
    let rc = unsafe {
        libc::getnameinfo(
            sa.as_ptr().cast(),
            sa.len(),
            host.as_mut_ptr(),
            host.len() as libc::socklen_t,
            std::ptr::null_mut(),
            0,
            libc::NI_NAMEREQD,
        )
    };
    if rc != 0 {
        return None;
    }
    // SAFETY: getnameinfo succeeded, so `host` holds a NUL-terminated string
    // within its length.
    let name = unsafe { std::ffi::CStr::from_ptr(host.as_ptr()) };
    let name = name.to_str().ok()?.to_owned();
    // A name made of the address's digits is no name.
    (name.parse::<IpAddr>().is_err() && !name.is_empty()).then_some(name)
}
