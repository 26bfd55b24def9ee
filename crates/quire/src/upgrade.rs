//! How a serving process starts and stops around its listening sockets: socket
//! activation, and the zero-downtime binary upgrade on `SIGUSR2`.
//!
//! The upgrade, step by step (old: the serving process; new: the one it starts):
//!
//! 1. old, on `SIGUSR2`: tells systemd `RELOADING=1`, and starts its binary again
//!    (the path it was started from, resolved at start-up, so a deploy that
//!    replaced the file runs the new one) with the same arguments, handing over
//!    copies of its listening sockets (`QUIRE_LISTEN_FDS`) and one end of a socket
//!    pair (`QUIRE_UPGRADE_FD`);
//! 2. new: takes the sockets, loads and checks its configuration (origin, TLS files,
//!    admin token, access log), writes `up` on the pair and starts pinging systemd's
//!    watchdog — and does not touch the cache volume;
//! 3. old, on `up`: names the new process to systemd (`MAINPID=`), stops accepting
//!    (new connections wait in the kernel's backlog: the socket stays open in the
//!    new process), closes idle keep-alive connections and drains in-flight
//!    requests as on SIGTERM, flushes what `quire serve` holds (view counts), closes
//!    the volume and exits;
//! 4. new: waits until the volume's lock is free (for `limits.shutdown_grace` and a
//!    margin), opens the volume — `quire serve` opens the vault's databases only
//!    then, after the old process flushed them — and accepts: systemd hears
//!    `READY=1`.
//!
//! If the new process fails before step 3 (a binary that does not start, a bad
//! config, a missing certificate) the pair reads end-of-file and the old process
//! keeps serving and says why; one that says nothing for [`START_TIMEOUT`] is
//! stopped. A failure after step 3 (the volume cannot be opened) stops the service,
//! as a failed restart would: systemd's `Restart=` applies.
//!
//! Key decisions:
//! - **The volume's lock orders the two processes.** The store allows one process
//!   per volume (`flock`); the new one waits for the old one's to be released, which
//!   happens when it has drained and closed everything, so no state is ever written
//!   by both. The cost: from step 3 to 4 nobody accepts (connections queue, none is
//!   refused while the backlog of 1024 lasts), for the old process's drain plus the
//!   new one's volume open (and, for `quire serve`, the vault's start-up).
//! - **A socket pair, not a signal, says "up"**: it is private to the two processes
//!   (a stray signal cannot stop the server), and its end-of-file says "failed" as
//!   soon as the new process dies, without a timeout or a pid race.
//! - **Descriptor numbers as they are**: std's `Command` cannot move descriptors to
//!   3, 4… without `unsafe` code between `fork` and `exec`; the new process reads the
//!   numbers from `QUIRE_LISTEN_FDS` ([`quire_server::inherit`]). `FD_CLOEXEC` is
//!   cleared on the copies for the spawn and set again right after; nothing else in
//!   quire starts programs while serving.
//! - systemd's `LISTEN_*` and `WATCHDOG_PID` are removed for the new process: its
//!   sockets come from the old one, and it pings the watchdog itself.

use std::ffi::OsString;
use std::future::Future;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use quire_server::inherit::{self, HandedBy, Inherited, QUIRE_LISTEN_FDS, QUIRE_UPGRADE_FD};
use quire_server::{Config, Ctx, Server, StartError};
use rustix::io::{fcntl_getfd, fcntl_setfd, FdFlags};
use tokio::io::AsyncReadExt;

use crate::systemd;

/// What a new process writes when it has taken the sockets and checked its
/// configuration.
const UP: &[u8] = b"up\n";

/// How long a new process may take to say it is up before it is stopped.
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Beyond `limits.shutdown_grace`, how long a new process waits for the old one to
/// let go of the volume (its exit: the store's checkpoint, the runtime's end).
const TAKEOVER_MARGIN: Duration = Duration::from_secs(30);

/// How often the volume's lock is tried while the old process drains.
const LOCK_POLL: Duration = Duration::from_millis(20);

/// How this process was started, and what it was handed.
#[derive(Debug)]
pub(crate) struct Start {
    program: Program,
    inherited: Option<Inherited>,
    /// The pair to the old process, in a process an upgrade started.
    handover: Option<UnixStream>,
    /// Until when the old process's volume is waited for (set once "up" is said).
    takeover_deadline: Option<tokio::time::Instant>,
}

/// The binary to start for an upgrade, and its arguments.
#[derive(Debug)]
struct Program {
    /// The path, or why there is none.
    exe: anyhow::Result<PathBuf>,
    args: Vec<OsString>,
}

impl Program {
    /// The running program, as started: `argv[0]` when it is a path (made absolute
    /// against the directory at start-up, symlinks left alone so a deploy that
    /// switches a `current` link is followed), else the executable the kernel ran.
    fn at_start() -> Program {
        let mut argv = std::env::args_os();
        let argv0 = argv.next().map(PathBuf::from);
        let exe = match argv0 {
            Some(p) if p.is_absolute() => Ok(p),
            Some(p) if p.components().count() > 1 => std::env::current_dir()
                .map(|d| d.join(p))
                .context("the working directory"),
            _ => std::env::current_exe().context("the running executable"),
        };
        Program {
            exe,
            args: argv.collect(),
        }
    }
}

impl Start {
    /// Reads what this process was handed: systemd's or an old process's listening
    /// sockets, the upgrade's pair. Call it once, before the runtime starts.
    pub(crate) fn from_env() -> anyhow::Result<Start> {
        let program = Program::at_start();
        let inherited = inherit::listeners().context("the listening sockets handed over")?;
        let handover = inherit::upgrade_channel().context("the upgrade's hand-over socket")?;
        Ok(Start {
            program,
            inherited,
            handover,
            takeover_deadline: None,
        })
    }

    /// Call first on the runtime. In a process an upgrade started: runs `check`
    /// (what could fail later, done while the old process still serves), tells the
    /// old process this one is up, and waits until the old one has closed the
    /// volume. In every process: SIGHUP, SIGUSR1 and SIGUSR2 stop being fatal at
    /// once ([`hold_signals`]).
    pub(crate) async fn take_over(
        &mut self,
        cfg: &Config,
        check: impl FnOnce() -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        hold_signals();
        let Some(mut pair) = self.handover.take() else {
            return Ok(());
        };
        check().context("the new process's checks (the old one keeps serving)")?;
        pair.write_all(UP)
            .context("telling the old process this one is up")?;
        drop(pair);
        // systemd now takes this process for the main one: its pings count from here
        // (the old one's no longer do), through the old one's drain.
        systemd::start_watchdog();
        let wait = cfg.limits.shutdown_grace.0 + TAKEOVER_MARGIN;
        let deadline = tokio::time::Instant::now() + wait;
        self.takeover_deadline = Some(deadline);
        wait_for_volume(&cfg.cache.path, deadline).await
    }

    /// The shared state `open` builds; after a take-over, tried again while the
    /// volume is still held, until the take-over's deadline.
    pub(crate) async fn open(
        &self,
        mut open: impl FnMut() -> Result<Arc<Ctx>, StartError>,
    ) -> anyhow::Result<Arc<Ctx>> {
        loop {
            match open() {
                Err(StartError::Store {
                    source: quire_store::StoreError::InUse { .. },
                    ..
                }) if self
                    .takeover_deadline
                    .is_some_and(|d| tokio::time::Instant::now() < d) =>
                {
                    tokio::time::sleep(LOCK_POLL).await;
                }
                r => return Ok(r?),
            }
        }
    }
}

impl Start {
    /// The server on the sockets this process was handed, or on freshly bound ones.
    pub(crate) async fn server(&mut self, ctx: Arc<Ctx>) -> anyhow::Result<Server> {
        let Some(i) = self.inherited.take() else {
            return Ok(Server::bind(ctx).await?);
        };
        let from = match i.by {
            HandedBy::Systemd => "systemd",
            HandedBy::Upgrade => "the previous process",
        };
        let server = Server::adopt(ctx, i.listen, i.listen_http).await?;
        eprintln!(
            "quire: serving on the socket{} handed over by {from} (pid {})",
            if server.redirect_addr().is_some() {
                "s"
            } else {
                ""
            },
            std::process::id()
        );
        Ok(server)
    }

    /// Once `server` is built, before it runs: upgrades on SIGUSR2, tells systemd the
    /// service is ready and pings its watchdog. The future resolves when the server
    /// should stop: on SIGTERM or SIGINT (systemd hears `STOPPING=1`), or once a new
    /// process has taken over.
    pub(crate) fn serving(self, server: &Server) -> impl Future<Output = ()> {
        let (taken_over, upgraded) = tokio::sync::oneshot::channel();
        match on_sigusr2(self.program, server) {
            Ok(upgrades) => {
                tokio::spawn(upgrades.run(taken_over));
            }
            Err(e) => eprintln!("quire: binary upgrades on SIGUSR2 are off: {e:#}"),
        }
        if self.takeover_deadline.is_some() {
            eprintln!(
                "quire: upgrade: pid {} took over and accepts",
                std::process::id()
            );
        }
        let shutdown = crate::signals::shutdown_signal();
        systemd::ready();
        systemd::start_watchdog();
        async move {
            tokio::select! {
                () = shutdown => systemd::stopping(),
                Ok(()) = upgraded => {}
            }
        }
    }
}

/// Registers SIGHUP, SIGUSR1 and SIGUSR2 with the runtime, whose handlers stay for
/// the process's life: their default action (the end of the process) no longer
/// applies while it starts. That matters most in an upgrade: systemd names the new
/// process the main one (`MAINPID=`) while it still waits for the volume, and a
/// `systemctl reload` then must not end it. A signal that arrives before the
/// command's own handler exists is ignored: a new process reads its configuration
/// and certificates afresh anyway, and upgrades once it serves.
fn hold_signals() {
    use tokio::signal::unix::{signal, SignalKind};
    for kind in [
        SignalKind::hangup(),
        SignalKind::user_defined1(),
        SignalKind::user_defined2(),
    ] {
        if let Err(e) = signal(kind) {
            eprintln!("quire: handling signal {}: {e}", kind.as_raw_value());
        }
    }
}

/// Waits until no process holds `volume`'s lock (or it does not exist), until
/// `deadline`.
async fn wait_for_volume(volume: &Path, deadline: tokio::time::Instant) -> anyhow::Result<()> {
    loop {
        if volume_free(volume)? {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "{} is still held by the previous process; giving up",
                volume.display()
            );
        }
        tokio::time::sleep(LOCK_POLL).await;
    }
}

/// Whether `volume`'s lock is free: tried shared, so it never blocks the old
/// process's exclusive one, and let go at once (the file is closed on return).
fn volume_free(volume: &Path) -> anyhow::Result<bool> {
    use rustix::fs::{flock, FlockOperation};
    let file = match std::fs::File::open(volume) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(e).with_context(|| format!("opening {}", volume.display())),
    };
    match flock(&file, FlockOperation::NonBlockingLockShared) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
        Err(e) => Err(std::io::Error::from(e))
            .with_context(|| format!("trying the lock of {}", volume.display())),
    }
}

/// What a SIGUSR2 needs: the program, copies of the listening sockets, the signal.
#[derive(Debug)]
struct Upgrades {
    program: Program,
    listeners: Vec<std::net::TcpListener>,
    signal: tokio::signal::unix::Signal,
}

/// Installs the SIGUSR2 handler at once (the default action would end the
/// process), with copies of `server`'s sockets.
fn on_sigusr2(program: Program, server: &Server) -> anyhow::Result<Upgrades> {
    use tokio::signal::unix::{signal, SignalKind};
    let (listen, listen_http) = server
        .dup_listeners()
        .context("copying the listening sockets")?;
    let signal = signal(SignalKind::user_defined2()).context("handling SIGUSR2")?;
    Ok(Upgrades {
        program,
        listeners: std::iter::once(listen).chain(listen_http).collect(),
        signal,
    })
}

impl Upgrades {
    /// Upgrades on each SIGUSR2 until one succeeds, then says so on `taken_over`.
    async fn run(mut self, taken_over: tokio::sync::oneshot::Sender<()>) {
        while self.signal.recv().await.is_some() {
            eprintln!("quire: SIGUSR2: starting a new process to take over");
            systemd::reloading();
            match self.start_new().await {
                Ok(pid) => {
                    systemd::main_pid(pid);
                    eprintln!(
                        "quire: upgrade: pid {pid} is up; pid {} stops accepting and drains",
                        std::process::id()
                    );
                    let _ = taken_over.send(());
                    return;
                }
                Err(e) => {
                    eprintln!("quire: upgrade failed, this process keeps serving: {e:#}");
                    systemd::ready();
                }
            }
        }
    }

    /// Starts the new process and waits for it to say it is up; its pid.
    async fn start_new(&self) -> anyhow::Result<u32> {
        let (ours, theirs) = UnixStream::pair().context("creating the hand-over socket")?;
        let mut child = self.spawn(&theirs)?;
        drop(theirs);
        let pid = child.id().unwrap_or_default();
        ours.set_nonblocking(true).context("the hand-over socket")?;
        let mut ours = tokio::net::UnixStream::from_std(ours).context("the hand-over socket")?;
        let mut said = Vec::new();
        let mut first = (&mut ours).take(UP.len() as u64);
        let read = first.read_to_end(&mut said);
        match tokio::time::timeout(START_TIMEOUT, read).await {
            Ok(Ok(_)) if said == UP => Ok(pid),
            Ok(_) => {
                let status = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
                let how = match status {
                    Ok(Ok(s)) => s.to_string(),
                    _ => "still running; stopped".to_string(),
                };
                let _ = child.start_kill();
                bail!("the new process (pid {pid}) ended before taking over ({how})")
            }
            Err(_) => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                bail!("the new process (pid {pid}) did not take over within {START_TIMEOUT:?}; stopped it")
            }
        }
    }

    /// Starts the binary with the sockets and `pair` inherited.
    fn spawn(&self, pair: &UnixStream) -> anyhow::Result<tokio::process::Child> {
        let exe = self
            .program
            .exe
            .as_ref()
            .map_err(|e| anyhow::anyhow!("no path to start the new binary from: {e:#}"))?;
        let fds: Vec<BorrowedFd<'_>> = self.listeners.iter().map(AsFd::as_fd).collect();
        let numbers = fds
            .iter()
            .map(|f| f.as_raw_fd().to_string())
            .collect::<Vec<_>>()
            .join(",");
        let mut cmd = tokio::process::Command::new(exe);
        cmd.args(&self.program.args)
            .env(QUIRE_LISTEN_FDS, numbers)
            .env(QUIRE_UPGRADE_FD, pair.as_raw_fd().to_string())
            .env_remove("LISTEN_FDS")
            .env_remove("LISTEN_PID")
            .env_remove("LISTEN_FDNAMES")
            .env_remove("WATCHDOG_PID")
            .kill_on_drop(false);
        let all: Vec<BorrowedFd<'_>> = fds.into_iter().chain([pair.as_fd()]).collect();
        let _inheritable = Inheritable::new(&all)?;
        cmd.spawn()
            .with_context(|| format!("starting {}", exe.display()))
    }
}

/// Descriptors without `FD_CLOEXEC` while this lives, so a spawn passes them on;
/// the flag is set again on drop.
struct Inheritable<'a>(Vec<BorrowedFd<'a>>);

impl<'a> Inheritable<'a> {
    fn new(fds: &[BorrowedFd<'a>]) -> anyhow::Result<Inheritable<'a>> {
        let mut done = Inheritable(Vec::with_capacity(fds.len()));
        for &fd in fds {
            let flags = fcntl_getfd(fd).context("reading descriptor flags")?;
            fcntl_setfd(fd, flags - FdFlags::CLOEXEC).context("clearing FD_CLOEXEC")?;
            done.0.push(fd);
        }
        Ok(done)
    }
}

impl Drop for Inheritable<'_> {
    fn drop(&mut self) {
        for fd in &self.0 {
            if let Err(e) = fcntl_setfd(fd, FdFlags::CLOEXEC) {
                eprintln!(
                    "quire: descriptor {}: FD_CLOEXEC not set again: {e}",
                    fd.as_raw_fd()
                );
            }
        }
    }
}

/// What `quire proxy` could fail on once the old process is gone, checked before a
/// new process says it is up: the configuration, the origin client (URL, CA file),
/// TLS, the admin token, the trusted proxies, the access log's file. (Only the
/// volume is left to fail.)
pub(crate) fn check_proxy(cfg: &Config) -> anyhow::Result<()> {
    check_common(cfg)?;
    quire_server::origins::check(cfg)?;
    Ok(())
}

/// [`check_proxy`] for `quire serve`: the vault must be a folder (it is opened
/// once the old process has closed its databases).
pub(crate) fn check_serve(cfg: &Config, vault: &Path) -> anyhow::Result<()> {
    check_common(cfg)?;
    if !vault.is_dir() {
        bail!("the vault {} is not a folder", vault.display());
    }
    Ok(())
}

fn check_common(cfg: &Config) -> anyhow::Result<()> {
    // The same checks the server's start makes (but the volume's).
    quire_server::policy::check(cfg)?;
    Ok(())
}
