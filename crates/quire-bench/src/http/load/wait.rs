//! The engine's wait for events, with a timeout finer than a millisecond: the one
//! place in the bench crate with `unsafe` code.
//!
//! An open loop at 40,000 requests/s has a request due every 25 µs, and the engine
//! sleeps until the next one falls due. rustix's `epoll::wait` takes a `Timespec` but
//! calls `epoll_pwait`, whose timeout is whole milliseconds (rounded up), unless
//! rustix is built for Linux 5.11 or later (its `linux_5_11` feature), which cannot be
//! turned on for the load generator alone: the server in the same binary must start
//! on older kernels. So every short wait slept a whole millisecond, and the requests
//! due in it went out together, late, as a burst; their latency counts from when they
//! were due. Seen with `perf trace` (`epoll_pwait(..., timeout: 1)`) and `perf sched
//! timehist`: the server idle for 1.1 ms, 60 times a second against quire, while
//! requests were due; p90 at 40,000/s was 0.4–0.9 ms against a p50 of 0.1 ms.
//!
//! Here the engine calls `epoll_pwait2` (Linux 5.11), whose timeout is a `timespec`,
//! and falls back to the millisecond wait where the kernel does not have it.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

/// Waits up to `timeout` for events on `epoll`, into `events`; how many came.
/// `fine` says whether `epoll_pwait2` is to be tried, and turns false the first
/// time the kernel says it has none.
pub(crate) fn wait(
    epoll: &OwnedFd,
    events: &mut [libc::epoll_event],
    timeout: Duration,
    fine: &mut bool,
) -> io::Result<usize> {
    let max = libc::c_int::try_from(events.len()).unwrap_or(libc::c_int::MAX);
    if *fine {
        let ts = libc::timespec {
            tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
            // (Under 10^9: fits any `c_long`.)
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: `events` is a writable buffer of at least `max` `epoll_event`s
        // for the kernel to fill, and `ts` outlives the call; a null signal mask
        // means none (its size is then not read). The call touches no other memory.
        let n = unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait2,
                epoll.as_raw_fd(),
                events.as_mut_ptr(),
                max,
                &raw const ts,
                std::ptr::null::<libc::sigset_t>(),
                0usize,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ENOSYS) {
            return Err(e);
        }
        *fine = false;
    }
    // Whole milliseconds, rounded up (a wait never ends before it is due).
    let ms = timeout.as_nanos().div_ceil(1_000_000);
    let ms = libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX);
    // SAFETY: as above: `events` holds at least `max` records for the kernel to fill.
    let n = unsafe { libc::epoll_wait(epoll.as_raw_fd(), events.as_mut_ptr(), max, ms) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::wait;
    use std::time::{Duration, Instant};

    #[test]
    fn a_short_wait_is_not_rounded_up_to_a_millisecond() {
        // Nothing ever becomes ready, so each wait lasts its timeout: at least 1 ms
        // for the millisecond wait (the kernel never ends one early), about 100 µs
        // for one of 50 µs (with the kernel's default timer slack of 50 µs). The two
        // kinds alternate, so a busy machine delays both alike, and their sums are
        // compared rather than either against a clock: rounded up to milliseconds,
        // the short waits would take as long as the others. Only where the kernel
        // has `epoll_pwait2` (Linux 5.11).
        let epoll = rustix::event::epoll::create(rustix::event::epoll::CreateFlags::CLOEXEC)
            .expect("an epoll set");
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 4];
        let mut wait_once = |mut fine: bool| {
            let t = Instant::now();
            let n = wait(&epoll, &mut events, Duration::from_micros(50), &mut fine);
            assert_eq!(n.unwrap(), 0);
            (t.elapsed(), fine)
        };
        let (mut short, mut coarse, mut had_it) = (Duration::ZERO, Duration::ZERO, true);
        for _ in 0..20 {
            let (took, fine) = wait_once(true);
            short += took;
            had_it &= fine;
            let (took, _) = wait_once(false);
            assert!(took >= Duration::from_millis(1), "{took:?}");
            coarse += took;
        }
        if had_it {
            assert!(
                short < coarse,
                "20 short waits took {short:?}, 20 coarse {coarse:?}"
            );
        }
    }
}
