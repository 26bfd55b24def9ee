//! systemd's service notifications (sd_notify(3)): `READY=1` once the server
//! accepts, `RELOADING=1` … `READY=1` around a reload (SIGHUP) or a binary upgrade
//! (SIGUSR2), `MAINPID=` when an upgrade hands the service to a new process,
//! `STOPPING=1` on SIGTERM, and `WATCHDOG=1` while the runtime is alive.
//!
//! Key decisions:
//! - **No library**: the protocol is one datagram of `KEY=VALUE` lines to the Unix
//!   socket `NOTIFY_SOCKET` names (a path, or an abstract name written `@name`);
//!   the standard library sends it. Without `NOTIFY_SOCKET` (not under systemd, or
//!   `Type=` other than `notify`) every function here returns at once: the socket is
//!   looked up once, the answer kept in a `OnceLock`.
//! - **Never blocks**: the socket is non-blocking; a datagram the receiver has no
//!   room for is dropped with a warning (systemd reads its socket promptly; a
//!   missed watchdog ping is followed by the next one).
//! - **The watchdog pings from a task on the server's runtime**, every half of
//!   `WATCHDOG_USEC` (systemd's advice): a runtime stalled long enough to stop
//!   serving stops pinging, and systemd restarts the service. It pings only when
//!   `WATCHDOG_PID` is absent or names this process (sd_watchdog_enabled(3)); an
//!   upgrade removes `WATCHDOG_PID` for the new process, which pings from the moment
//!   it says it is up (and becomes the main one) while the old one drains.
//! - **`MAINPID=` with `READY=1`**: under `NotifyAccess=main` systemd reads only the
//!   main process's messages, so after an upgrade it is the old process that names
//!   the new one (`MAINPID=`, see [`crate::upgrade`]); the new one repeats its own
//!   pid with `READY=1`, which is what `NotifyAccess=all` needs.
//! - Failures are logged, never fatal: quire serves the same without systemd.

use std::ffi::OsStr;
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::OnceLock;
use std::time::Duration;

/// The notification socket, when systemd gave one.
#[derive(Debug)]
struct Notifier {
    socket: UnixDatagram,
    addr: SocketAddr,
}

static NOTIFIER: OnceLock<Option<Notifier>> = OnceLock::new();

fn notifier() -> Option<&'static Notifier> {
    NOTIFIER.get_or_init(Notifier::from_env).as_ref()
}

impl Notifier {
    fn from_env() -> Option<Notifier> {
        let path = std::env::var_os("NOTIFY_SOCKET")?;
        match Notifier::connect(&path) {
            Ok(n) => Some(n),
            Err(e) => {
                eprintln!("quire: NOTIFY_SOCKET={path:?}: {e}; systemd will not be notified");
                None
            }
        }
    }

    fn connect(path: &OsStr) -> io::Result<Notifier> {
        let addr = notify_addr(path)?;
        let socket = UnixDatagram::unbound()?;
        socket.set_nonblocking(true)?;
        Ok(Notifier { socket, addr })
    }

    fn send(&self, message: &str) {
        if let Err(e) = self.socket.send_to_addr(message.as_bytes(), &self.addr) {
            eprintln!("quire: systemd notification {message:?} not sent: {e}");
        }
    }
}

/// The address `NOTIFY_SOCKET` names: an absolute path, or `@name` for an abstract
/// socket.
fn notify_addr(path: &OsStr) -> io::Result<SocketAddr> {
    match path.as_bytes().split_first() {
        Some((b'@', name)) => SocketAddr::from_abstract_name(name),
        Some((b'/', _)) => SocketAddr::from_pathname(path),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "neither an absolute path nor an abstract name (@name)",
        )),
    }
}

fn send(message: impl FnOnce() -> String) {
    if let Some(n) = notifier() {
        n.send(&message());
    }
}

/// The server accepts connections.
pub(crate) fn ready() {
    send(|| format!("READY=1\nMAINPID={}\nSTATUS=serving", std::process::id()));
}

/// A reload (or an upgrade) starts; [`ready`] ends it.
pub(crate) fn reloading() {
    send(|| format!("RELOADING=1\nMONOTONIC_USEC={}", monotonic_usec()));
}

/// The service stops (SIGTERM or SIGINT): in-flight requests drain.
pub(crate) fn stopping() {
    send(|| "STOPPING=1\nSTATUS=draining".to_string());
}

/// Process `pid` is the service's main process from now on (an upgrade's new one).
pub(crate) fn main_pid(pid: u32) {
    send(|| format!("MAINPID={pid}\nSTATUS=upgraded; the previous process drains"));
}

/// Starts pinging the watchdog from the current runtime, when systemd asked for it
/// (once: later calls do nothing).
pub(crate) fn start_watchdog() {
    static STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let Some(n) = notifier() else {
        return;
    };
    if STARTED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let usec = std::env::var_os("WATCHDOG_USEC");
    let pid = std::env::var_os("WATCHDOG_PID");
    let period = match watchdog_period(usec.as_deref(), pid.as_deref(), std::process::id()) {
        Ok(Some(p)) => p,
        Ok(None) => return,
        Err(e) => {
            eprintln!("quire: {e}; the systemd watchdog will not be pinged");
            return;
        }
    };
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period / 2);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            n.send("WATCHDOG=1");
        }
    });
}

/// Why systemd's watchdog variables cannot be read (the watchdog is then not pinged).
#[derive(Debug, Clone, PartialEq, Eq)]
enum WatchdogError {
    /// `WATCHDOG_PID` is not a process id.
    Pid(std::ffi::OsString),
    /// `WATCHDOG_USEC` is not a count of microseconds.
    Usec(std::ffi::OsString),
}

impl std::fmt::Display for WatchdogError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WatchdogError::Pid(v) => write!(f, "WATCHDOG_PID={v:?} is not a process id"),
            WatchdogError::Usec(v) => {
                write!(f, "WATCHDOG_USEC={v:?} is not a count of microseconds")
            }
        }
    }
}

/// The watchdog period systemd asks of process `me`: `None` when it asks none (or
/// of another process).
fn watchdog_period(
    usec: Option<&OsStr>,
    pid: Option<&OsStr>,
    me: u32,
) -> Result<Option<Duration>, WatchdogError> {
    let Some(usec) = usec else {
        return Ok(None);
    };
    if let Some(pid) = pid {
        match pid.to_str().and_then(|p| p.trim().parse::<u32>().ok()) {
            Some(p) if p == me => {}
            Some(_) => return Ok(None),
            None => return Err(WatchdogError::Pid(pid.to_owned())),
        }
    }
    match usec.to_str().and_then(|u| u.trim().parse::<u64>().ok()) {
        Some(0) => Ok(None),
        Some(u) => Ok(Some(Duration::from_micros(u))),
        None => Err(WatchdogError::Usec(usec.to_owned())),
    }
}

/// `CLOCK_MONOTONIC` in microseconds, as `MONOTONIC_USEC=` wants it.
fn monotonic_usec() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let micros = u64::try_from(t.tv_nsec).unwrap_or(0) / 1_000;
    secs.saturating_mul(1_000_000).saturating_add(micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notify_socket_is_a_path_or_an_abstract_name() {
        let a = notify_addr(OsStr::new("/run/systemd/notify")).unwrap();
        assert_eq!(
            a.as_pathname(),
            Some(std::path::Path::new("/run/systemd/notify"))
        );
        let a = notify_addr(OsStr::new("@quire/notify")).unwrap();
        assert_eq!(a.as_abstract_name(), Some(&b"quire/notify"[..]));
        assert!(notify_addr(OsStr::new("relative")).is_err());
        assert!(notify_addr(OsStr::new("")).is_err());
    }

    #[test]
    fn the_watchdog_is_ours_unless_another_pid_is_named() {
        let p = |u: Option<&str>, pid: Option<&str>| {
            watchdog_period(u.map(OsStr::new), pid.map(OsStr::new), 42)
        };
        assert_eq!(p(None, None), Ok(None));
        assert_eq!(p(Some("2000000"), None), Ok(Some(Duration::from_secs(2))));
        assert_eq!(
            p(Some("2000000"), Some("42")),
            Ok(Some(Duration::from_secs(2)))
        );
        assert_eq!(p(Some("2000000"), Some("7")), Ok(None));
        assert_eq!(p(Some("0"), None), Ok(None));
        assert_eq!(
            p(Some("soon"), None),
            Err(WatchdogError::Usec("soon".into()))
        );
        assert_eq!(
            p(Some("1000"), Some("me")).unwrap_err().to_string(),
            "WATCHDOG_PID=\"me\" is not a process id"
        );
    }

    #[test]
    fn monotonic_time_moves_forward() {
        let a = monotonic_usec();
        std::thread::sleep(Duration::from_millis(2));
        assert!(monotonic_usec() > a);
    }

    #[test]
    fn messages_reach_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let rx = UnixDatagram::bind(&path).unwrap();
        let n = Notifier::connect(path.as_os_str()).unwrap();
        n.send("READY=1");
        let mut buf = [0u8; 64];
        let len = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1");
    }
}
