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

#![allow(unsafe_code)]

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
            tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
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
        // Nothing ever becomes ready, so each wait lasts its timeout. Against the
        // millisecond wait in the same run, not a clock: 20 of those take at least
        // 20 ms (the kernel never ends one early), while 50 waits of 50 µs take about
        // 5 ms (with the kernel's default timer slack of 50 µs a wait). Rounded up to
        // milliseconds, the 50 would take at least 50 ms. Only where the kernel has
        // `epoll_pwait2` (Linux 5.11).
        let epoll = rustix::event::epoll::create(rustix::event::epoll::CreateFlags::CLOEXEC)
            .expect("an epoll set");
        let timed = |waits: usize, mut fine: bool| {
            let mut events = [libc::epoll_event { events: 0, u64: 0 }; 4];
            let t = Instant::now();
            for _ in 0..waits {
                let n = wait(&epoll, &mut events, Duration::from_micros(50), &mut fine);
                assert_eq!(n.unwrap(), 0);
            }
            (t.elapsed(), fine)
        };
        let (coarse, _) = timed(20, false);
        assert!(coarse >= Duration::from_millis(20), "{coarse:?}");
        let (fine, had_it) = timed(50, true);
        if had_it {
            assert!(
                fine < coarse,
                "50 fine waits took {fine:?}, 20 coarse {coarse:?}"
            );
        }
    }
}
