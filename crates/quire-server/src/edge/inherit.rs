//! Listening sockets this process is handed instead of binding its own, and the
//! hand-over channel of a binary upgrade. Two senders:
//!
//! - **systemd's socket activation** (sd_listen_fds(3)): `LISTEN_FDS` descriptors
//!   from 3 on, for the process `LISTEN_PID` names, named by `LISTEN_FDNAMES`;
//! - **the quire process a binary upgrade replaces**: `QUIRE_LISTEN_FDS` lists the
//!   descriptor numbers as that process had them (it cannot set `LISTEN_PID`: the
//!   new pid is not known before `exec`, and the numbers are not moved to 3 because
//!   that needs code between `fork` and `exec`), and `QUIRE_UPGRADE_FD` the socket
//!   on which the new process says it is up.
//!
//! Key decisions:
//! - **Which socket is which.** A socket named `listen` (a socket unit's
//!   `FileDescriptorName=listen`) is the main listener, one named `listen_http` the
//!   plain-HTTP redirect listener; sockets with other names, or no names, are taken
//!   in order to fill what is left: the first is `listen`, the second `listen_http`.
//!   `QUIRE_LISTEN_FDS` is positional (`listen[,listen_http]`). More than two, or
//!   both senders at once, is an error: a socket quire would not serve is a
//!   configuration mistake worth failing on.
//! - **Checked before owned.** A number is taken only when it is an open,
//!   listening (`SO_ACCEPTCONN`) IPv4 or IPv6 stream socket; anything else is an
//!   error naming the variable and the number, and the descriptor is left as it
//!   was. Each number is taken once per process, however often this is called.
//! - **`FD_CLOEXEC` is set on what is taken**, so the sockets do not leak into
//!   programs this process starts; an upgrade clears it for its one spawn.
//! - The variables stay in the environment (removing them is `unsafe` in a threaded
//!   process): `LISTEN_PID` makes systemd's inert in any child, and the upgrade
//!   overwrites or removes all of them for the process it starts.
//! - This module holds the crate's second kind of `unsafe`: owning a descriptor by
//!   its number. It is sound only for numbers the process was handed, which is what
//!   the variables promise and the checks confirm.

use std::collections::HashSet;
use std::net::TcpListener;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Mutex;

use rustix::io::{fcntl_getfd, fcntl_setfd, Errno, FdFlags};
use rustix::net::{sockopt, AddressFamily, SocketType};

use crate::error::{Fault, Side};

/// The variable listing the listening sockets an upgrading quire hands over.
pub const QUIRE_LISTEN_FDS: &str = "QUIRE_LISTEN_FDS";
/// The variable naming the upgrade's hand-over socket in the new process.
pub const QUIRE_UPGRADE_FD: &str = "QUIRE_UPGRADE_FD";

/// The first descriptor systemd passes (`SD_LISTEN_FDS_START`).
const SD_LISTEN_FDS_START: RawFd = 3;

/// Who handed the sockets over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandedBy {
    /// systemd (or any launcher speaking its protocol).
    Systemd,
    /// The quire process this one replaces.
    Upgrade,
}

/// Listening sockets this process was handed.
#[derive(Debug)]
pub struct Inherited {
    /// Who handed them over.
    pub by: HandedBy,
    /// The main listener (`listen`).
    pub listen: TcpListener,
    /// The plain-HTTP redirect listener (`listen_http`), when one was handed over.
    pub listen_http: Option<TcpListener>,
}

/// A handed-over descriptor or its variable is not usable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InheritError {
    /// A variable does not say what the protocol allows.
    #[error("{var}={value:?}: {reason}")]
    Env {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong.
        reason: String,
    },
    /// A descriptor is not what its variable says.
    #[error("{var}: descriptor {fd} {reason}")]
    Fd {
        /// The variable that named it.
        var: &'static str,
        /// The descriptor.
        fd: RawFd,
        /// What it is instead.
        reason: FdProblem,
    },
}

/// What a handed-over descriptor is instead of what its variable says; the message
/// completes `descriptor N ...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FdProblem {
    /// This process took the number already.
    #[error("was taken already")]
    Taken,
    /// No descriptor has the number.
    #[error("is not open")]
    NotOpen,
    /// The kernel would not say what it is.
    #[error("cannot be inspected: {0}")]
    Uninspectable(Errno),
    /// It is not a socket (a file, a pipe).
    #[error("is not a socket")]
    NotSocket,
    /// A socket, but not a stream (UDP, a datagram socket).
    #[error("is not a stream socket")]
    NotStream,
    /// A listener must be IPv4 or IPv6.
    #[error("is not an IPv4 or IPv6 socket")]
    NotInet,
    /// A listener must be listening (`SO_ACCEPTCONN`).
    #[error("is not listening")]
    NotListening,
    /// The hand-over channel must be a Unix socket.
    #[error("is not a Unix socket")]
    NotUnix,
    /// `FD_CLOEXEC` could not be set on it.
    #[error("cannot be set close-on-exec: {0}")]
    NoCloseOnExec(Errno),
}

/// What was handed over is this process's own setting (its launcher's variables and
/// descriptors), and the same environment gives the same answer when asked again.
impl Fault for InheritError {
    fn side(&self) -> Side {
        Side::Internal
    }

    fn retry(&self) -> bool {
        false
    }
}

/// The environment that says what was handed over (read once, so the planning is
/// pure and testable).
#[derive(Debug, Default)]
struct Env {
    listen_fds: Option<String>,
    listen_pid: Option<String>,
    listen_fdnames: Option<String>,
    quire_fds: Option<String>,
    pid: u32,
}

impl Env {
    fn read() -> Env {
        let var = |k: &str| std::env::var(k).ok();
        Env {
            listen_fds: var("LISTEN_FDS"),
            listen_pid: var("LISTEN_PID"),
            listen_fdnames: var("LISTEN_FDNAMES"),
            quire_fds: var(QUIRE_LISTEN_FDS),
            pid: std::process::id(),
        }
    }
}

/// Which numbers to take, before any is touched.
#[derive(Debug, PartialEq, Eq)]
struct Plan {
    by: HandedBy,
    var: &'static str,
    listen: RawFd,
    listen_http: Option<RawFd>,
}

/// The listening sockets this process was handed, taken; `None` when nothing was
/// handed over (or systemd's variables are for another process).
pub fn listeners() -> Result<Option<Inherited>, InheritError> {
    let Some(plan) = plan(&Env::read())? else {
        return Ok(None);
    };
    let listen = TcpListener::from(take(plan.listen, plan.var, Kind::Listener)?);
    let listen_http = match plan.listen_http {
        Some(fd) => Some(TcpListener::from(take(fd, plan.var, Kind::Listener)?)),
        None => None,
    };
    Ok(Some(Inherited {
        by: plan.by,
        listen,
        listen_http,
    }))
}

/// The upgrade's hand-over socket (`QUIRE_UPGRADE_FD`), taken; `None` when this
/// process was not started by an upgrade.
pub fn upgrade_channel() -> Result<Option<UnixStream>, InheritError> {
    let Ok(value) = std::env::var(QUIRE_UPGRADE_FD) else {
        return Ok(None);
    };
    let fd = parse_fd(QUIRE_UPGRADE_FD, &value, &value)?;
    Ok(Some(UnixStream::from(take(
        fd,
        QUIRE_UPGRADE_FD,
        Kind::Channel,
    )?)))
}

fn plan(env: &Env) -> Result<Option<Plan>, InheritError> {
    let systemd = systemd_fds(env)?;
    match (systemd, env.quire_fds.as_deref()) {
        (Some(_), Some(q)) => Err(InheritError::Env {
            var: QUIRE_LISTEN_FDS,
            value: q.to_string(),
            reason: "set together with systemd's LISTEN_FDS; one sender at a time".into(),
        }),
        (Some(fds), None) => systemd_plan(env, &fds).map(Some),
        (None, Some(q)) => quire_plan(q).map(Some),
        (None, None) => Ok(None),
    }
}

/// systemd's descriptors for this process, when there are any.
fn systemd_fds(env: &Env) -> Result<Option<Vec<RawFd>>, InheritError> {
    let (Some(n), Some(pid)) = (env.listen_fds.as_deref(), env.listen_pid.as_deref()) else {
        return Ok(None);
    };
    // Another process's (a parent's, passed down by mistake): not ours to take.
    if pid.trim().parse::<u32>().ok() != Some(env.pid) {
        return Ok(None);
    }
    let count: RawFd = n.trim().parse().map_err(|_| InheritError::Env {
        var: "LISTEN_FDS",
        value: n.to_string(),
        reason: "not a count of descriptors".into(),
    })?;
    if count == 0 {
        return Ok(None);
    }
    if !(1..=2).contains(&count) {
        return Err(InheritError::Env {
            var: "LISTEN_FDS",
            value: n.to_string(),
            reason: "quire serves at most two sockets (listen, listen_http)".into(),
        });
    }
    Ok(Some(
        (SD_LISTEN_FDS_START..SD_LISTEN_FDS_START + count).collect(),
    ))
}

/// Assigns systemd's descriptors by name, then by order.
fn systemd_plan(env: &Env, fds: &[RawFd]) -> Result<Plan, InheritError> {
    let names: Vec<&str> = match env.listen_fdnames.as_deref() {
        Some(v) => v.split(':').collect(),
        None => vec![""; fds.len()],
    };
    let bad_names = |reason: &str| InheritError::Env {
        var: "LISTEN_FDNAMES",
        value: env.listen_fdnames.clone().unwrap_or_default(),
        reason: reason.into(),
    };
    if names.len() != fds.len() {
        return Err(bad_names("not one name per descriptor of LISTEN_FDS"));
    }
    let named = |want: &str| -> Result<Option<RawFd>, InheritError> {
        let mut hits = fds.iter().zip(&names).filter(|(_, n)| **n == want);
        let first = hits.next().map(|(fd, _)| *fd);
        if hits.next().is_some() {
            return Err(bad_names(&format!("two sockets named {want}")));
        }
        Ok(first)
    };
    let (mut listen, mut listen_http) = (named("listen")?, named("listen_http")?);
    for &fd in fds {
        if Some(fd) == listen || Some(fd) == listen_http {
            continue;
        }
        if listen.is_none() {
            listen = Some(fd);
        } else if listen_http.is_none() {
            listen_http = Some(fd);
        }
    }
    let listen = listen.ok_or_else(|| bad_names("no socket for listen"))?;
    Ok(Plan {
        by: HandedBy::Systemd,
        var: "LISTEN_FDS",
        listen,
        listen_http,
    })
}

/// `QUIRE_LISTEN_FDS=listen[,listen_http]`.
fn quire_plan(value: &str) -> Result<Plan, InheritError> {
    let fds = value
        .split(',')
        .map(|s| parse_fd(QUIRE_LISTEN_FDS, value, s))
        .collect::<Result<Vec<_>, _>>()?;
    let bad = |reason: &str| InheritError::Env {
        var: QUIRE_LISTEN_FDS,
        value: value.to_string(),
        reason: reason.into(),
    };
    match fds[..] {
        [listen] => Ok(Plan {
            by: HandedBy::Upgrade,
            var: QUIRE_LISTEN_FDS,
            listen,
            listen_http: None,
        }),
        [listen, http] if listen != http => Ok(Plan {
            by: HandedBy::Upgrade,
            var: QUIRE_LISTEN_FDS,
            listen,
            listen_http: Some(http),
        }),
        [_, _] => Err(bad("the same descriptor twice")),
        _ => Err(bad("one or two descriptors: listen[,listen_http]")),
    }
}

/// A descriptor number above stdin, stdout and stderr.
fn parse_fd(var: &'static str, value: &str, s: &str) -> Result<RawFd, InheritError> {
    match s.trim().parse::<RawFd>() {
        Ok(fd) if fd >= SD_LISTEN_FDS_START => Ok(fd),
        _ => Err(InheritError::Env {
            var,
            value: value.to_string(),
            reason: format!("{s:?} is not a descriptor number of 3 or more"),
        }),
    }
}

/// What a handed-over descriptor must be.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// A listening TCP socket.
    Listener,
    /// A connected Unix stream socket.
    Channel,
}

/// Numbers already taken by this process.
static TAKEN: Mutex<Option<HashSet<RawFd>>> = Mutex::new(None);

/// Takes ownership of `fd` after checking it is what `kind` says, and marks it
/// close-on-exec.
fn take(fd: RawFd, var: &'static str, kind: Kind) -> Result<OwnedFd, InheritError> {
    let err = |reason: FdProblem| InheritError::Fd { var, fd, reason };
    let mut taken = TAKEN.lock().unwrap_or_else(|p| p.into_inner());
    if !taken.get_or_insert_with(HashSet::new).insert(fd) {
        return Err(err(FdProblem::Taken));
    }
    if let Err(reason) = check(fd, kind) {
        taken.get_or_insert_with(HashSet::new).remove(&fd);
        return Err(err(reason));
    }
    // SAFETY: `fd` is open (checked above: `fcntl` did not fail with EBADF) and is a
    // socket of the kind asked for, which this process did not create: it was
    // handed over at exec, under the variable `var` whose protocol gives the
    // receiver ownership. `TAKEN` makes this the only owner in the process: each
    // number is taken once, and nothing else in quire reads these variables.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    fcntl_setfd(&owned, FdFlags::CLOEXEC).map_err(|e| err(FdProblem::NoCloseOnExec(e)))?;
    Ok(owned)
}

/// Why `fd` is not what `kind` says, if it is not.
fn check(fd: RawFd, kind: Kind) -> Result<(), FdProblem> {
    // SAFETY: the borrow does not outlive this function, and only asks the kernel
    // about the number: on a number that is not open every call fails with EBADF
    // (checked first), and nothing is read or written through it.
    let b = unsafe { BorrowedFd::borrow_raw(fd) };
    match fcntl_getfd(b) {
        Err(Errno::BADF) => return Err(FdProblem::NotOpen),
        Err(e) => return Err(FdProblem::Uninspectable(e)),
        Ok(_) => {}
    }
    let not_socket = |e: Errno| match e {
        Errno::NOTSOCK => FdProblem::NotSocket,
        e => FdProblem::Uninspectable(e),
    };
    let kind_of = sockopt::socket_type(b).map_err(not_socket)?;
    let domain = sockopt::socket_domain(b).map_err(not_socket)?;
    if kind_of != SocketType::STREAM {
        return Err(FdProblem::NotStream);
    }
    match kind {
        Kind::Listener => {
            if domain != AddressFamily::INET && domain != AddressFamily::INET6 {
                return Err(FdProblem::NotInet);
            }
            if !sockopt::socket_acceptconn(b).map_err(not_socket)? {
                return Err(FdProblem::NotListening);
            }
        }
        Kind::Channel => {
            if domain != AddressFamily::UNIX {
                return Err(FdProblem::NotUnix);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        let get = |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        };
        Env {
            listen_fds: get("LISTEN_FDS"),
            listen_pid: get("LISTEN_PID"),
            listen_fdnames: get("LISTEN_FDNAMES"),
            quire_fds: get(QUIRE_LISTEN_FDS),
            pid: 42,
        }
    }

    fn plan_of(pairs: &[(&str, &str)]) -> Option<(RawFd, Option<RawFd>)> {
        plan(&env(pairs))
            .unwrap()
            .map(|p| (p.listen, p.listen_http))
    }

    #[test]
    fn nothing_handed_over_is_none() {
        assert_eq!(plan_of(&[]), None);
        assert_eq!(plan_of(&[("LISTEN_FDS", "1")]), None, "no LISTEN_PID");
        assert_eq!(plan_of(&[("LISTEN_FDS", "0"), ("LISTEN_PID", "42")]), None);
    }

    #[test]
    fn systemd_sockets_for_another_process_are_left_alone() {
        assert_eq!(plan_of(&[("LISTEN_FDS", "1"), ("LISTEN_PID", "7")]), None);
    }

    #[test]
    fn systemd_sockets_are_taken_in_order_without_names() {
        let p = |n| plan_of(&[("LISTEN_FDS", n), ("LISTEN_PID", "42")]);
        assert_eq!(p("1"), Some((3, None)));
        assert_eq!(p("2"), Some((3, Some(4))));
        assert!(plan(&env(&[("LISTEN_FDS", "3"), ("LISTEN_PID", "42")])).is_err());
        assert!(plan(&env(&[("LISTEN_FDS", "x"), ("LISTEN_PID", "42")])).is_err());
    }

    #[test]
    fn systemd_names_say_which_socket_is_which() {
        let p = |names| {
            plan_of(&[
                ("LISTEN_FDS", "2"),
                ("LISTEN_PID", "42"),
                ("LISTEN_FDNAMES", names),
            ])
        };
        assert_eq!(p("listen_http:listen"), Some((4, Some(3))));
        assert_eq!(p("listen:listen_http"), Some((3, Some(4))));
        // Unit-name defaults: by order.
        assert_eq!(p("quire.socket:quire.socket"), Some((3, Some(4))));
        // One named, the other fills what is left.
        assert_eq!(p("quire.socket:listen"), Some((4, Some(3))));
        assert_eq!(p("listen_http:quire.socket"), Some((4, Some(3))));
        let e = plan(&env(&[
            ("LISTEN_FDS", "2"),
            ("LISTEN_PID", "42"),
            ("LISTEN_FDNAMES", "listen:listen"),
        ]));
        assert!(e
            .unwrap_err()
            .to_string()
            .contains("two sockets named listen"));
        let e = plan(&env(&[
            ("LISTEN_FDS", "2"),
            ("LISTEN_PID", "42"),
            ("LISTEN_FDNAMES", "listen"),
        ]));
        assert!(e.is_err(), "one name for two descriptors");
    }

    #[test]
    fn quire_fds_are_positional() {
        assert_eq!(plan_of(&[(QUIRE_LISTEN_FDS, "7")]), Some((7, None)));
        assert_eq!(plan_of(&[(QUIRE_LISTEN_FDS, "7,5")]), Some((7, Some(5))));
        for bad in ["", "2", "7,7", "5,6,7", "a,b", "-1"] {
            assert!(plan(&env(&[(QUIRE_LISTEN_FDS, bad)])).is_err(), "{bad:?}");
        }
        let both = env(&[
            (QUIRE_LISTEN_FDS, "7"),
            ("LISTEN_FDS", "1"),
            ("LISTEN_PID", "42"),
        ]);
        assert!(plan(&both).is_err());
    }

    #[test]
    fn a_descriptor_that_is_not_a_listener_is_refused() {
        use std::os::fd::AsRawFd;
        let file = tempfile::tempfile().unwrap();
        let e = check(file.as_raw_fd(), Kind::Listener).unwrap_err();
        assert_eq!(e, FdProblem::NotSocket);
        assert_eq!(e.to_string(), "is not a socket");
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = check(udp.as_raw_fd(), Kind::Listener).unwrap_err();
        assert_eq!(e, FdProblem::NotStream);
        let unbound = std::net::TcpStream::connect(
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap(),
        )
        .unwrap();
        let e = check(unbound.as_raw_fd(), Kind::Listener).unwrap_err();
        assert_eq!(e, FdProblem::NotListening);
        let (a, _b) = UnixStream::pair().unwrap();
        assert!(check(a.as_raw_fd(), Kind::Channel).is_ok());
        let e = check(a.as_raw_fd(), Kind::Listener).unwrap_err();
        assert_eq!(e, FdProblem::NotInet);
        assert_eq!(
            check(1_000_000, Kind::Listener).unwrap_err(),
            FdProblem::NotOpen
        );
    }

    #[test]
    fn a_listener_is_taken_once() {
        use std::os::fd::IntoRawFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let fd = l.into_raw_fd();
        let owned = take(fd, "TEST", Kind::Listener).unwrap();
        assert!(fcntl_getfd(&owned).unwrap().contains(FdFlags::CLOEXEC));
        let twice = take(fd, "TEST", Kind::Listener).unwrap_err();
        assert!(
            matches!(
                twice,
                InheritError::Fd {
                    reason: FdProblem::Taken,
                    ..
                }
            ),
            "taken twice: {twice}"
        );
        assert_eq!(
            twice.to_string(),
            format!("TEST: descriptor {fd} was taken already")
        );
        let l = TcpListener::from(owned);
        assert_eq!(l.local_addr().unwrap(), addr);
    }
}
