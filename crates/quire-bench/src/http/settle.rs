//! Waiting, after the warm-up, until each started server has gone quiet.
//!
//! Why: a warm-up stores every page and reads it again (the check that it is a
//! hit), and quire then adds the slower codings (brotli, zstd) in the background, at
//! nice 10, once per stored response read a second time. On the
//! peer corpus that is about two minutes of one core; measured right after the
//! warm-up, the first rounds share the server's CPU with that one-time work, and
//! the CPU per request counts it. A site in production pays it once per page
//! version, not per hit, so the rounds start when the server's own CPU use has
//! dropped to idle (every server is treated alike: nginx and Varnish are quiet at
//! once). `--no-settle` skips the wait; the time waited is printed.

use std::time::{Duration, Instant};

use super::servers::Server;

/// Most CPU jiffies (1/100 s) a server may use in a second and count as quiet.
const QUIET_JIFFIES: u64 = 3;

/// Waits until `server` uses at most [`QUIET_JIFFIES`] in a second, for at most
/// `limit`; how long it took, or `None` when it was still busy at the limit.
pub(crate) fn until_quiet(server: &Server, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut before = server.cpu_jiffies()?;
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let now = server.cpu_jiffies()?;
        if now.saturating_sub(before) <= QUIET_JIFFIES {
            return Some(start.elapsed());
        }
        if start.elapsed() >= limit {
            return None;
        }
        before = now;
    }
}
