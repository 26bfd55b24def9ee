//! The kill driver: SIGKILLs quire at planned instants and restarts it on the same
//! volume and address, and notices when quire exits on its own (a crash) in between.
//!
//! Key decisions:
//! - **A restart is done when `/_quire/health` answers**; a restart that does not
//!   come within the bound stops the run (everything after would be noise).
//! - **A crash is restarted too, and recorded apart from kills**, with the log's tail.
//! - **Hooks** ([`Hooks`]) choose the kill's instant more finely (proxy mode kills
//!   right after a purge is acknowledged, the moment most likely to lose it), act while
//!   quire is down (serve mode edits a note, so the restart must pick the edit up) and
//!   check right after the restart (proxy mode asks for the URLs just purged, before
//!   anything else could refill them).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::quire::Quire;
use crate::tally::Restart;

/// How long quire has to become healthy after a restart.
const START_WITHIN: Duration = Duration::from_secs(60);

/// A boxed future of a hook.
pub(crate) type HookFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// What a run does around each kill.
pub(crate) trait Hooks {
    /// Called when a kill is due; the kill happens when the future is done.
    fn before_kill(&mut self) -> HookFuture<'_> {
        Box::pin(async {})
    }
    /// Called between the kill and the restart.
    fn while_down(&mut self) {}
    /// Called once quire is healthy again.
    fn after_restart(&mut self) -> HookFuture<'_> {
        Box::pin(async {})
    }
}

/// What the kill driver saw.
#[derive(Debug, Default)]
pub(crate) struct Chaos {
    /// Every restart (after a kill or a crash).
    pub(crate) restarts: Vec<Restart>,
    /// Kill (or crash) to healthy, ms.
    restart_ms: Vec<u32>,
    /// Why quire did not come back, if it did not.
    pub(crate) restart_failed: Option<String>,
    /// Times quire exited on its own.
    crashes: Vec<String>,
    /// Kills after which quire came back.
    kills_survived: usize,
}

impl Chaos {
    /// The figures of the kills, `planned` of them.
    pub(crate) fn figures(&self, planned: usize) -> KillFigures {
        let mut ms = self.restart_ms.clone();
        ms.sort_unstable();
        KillFigures {
            kills_planned: planned,
            kills_survived: self.kills_survived,
            restart_failed: self.restart_failed.clone(),
            crashes: self.crashes.clone(),
            restart_ms_median: ms.get(ms.len() / 2).copied(),
            restart_ms_max: ms.last().copied(),
        }
    }
}

/// What both runs (proxy and serve) report of their kills.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct KillFigures {
    /// SIGKILLs planned.
    kills_planned: usize,
    /// SIGKILLs after which quire came back healthy.
    kills_survived: usize,
    /// Why quire failed to come back, if it did.
    pub(crate) restart_failed: Option<String>,
    /// Times quire exited on its own.
    crashes: Vec<String>,
    /// Restart times (kill to healthy), ms: median.
    restart_ms_median: Option<u32>,
    /// Largest restart time.
    restart_ms_max: Option<u32>,
}

impl KillFigures {
    /// The failures among them, each line starting with `prefix`.
    pub(crate) fn failures(&self, prefix: &str, f: &mut Vec<String>) {
        if let Some(why) = &self.restart_failed {
            f.push(format!("{prefix}quire failed to restart: {why}"));
        }
        if !self.crashes.is_empty() {
            f.push(format!(
                "{prefix}quire exited on its own {} times",
                self.crashes.len()
            ));
        }
    }

    /// The report's line, with whether quire stopped cleanly at the end.
    pub(crate) fn line(&self, stopped_cleanly: bool) -> String {
        format!(
            "kills survived {}/{}; restart ms median {:?}, max {:?}; crashes {}; stopped cleanly {}",
            self.kills_survived,
            self.kills_planned,
            self.restart_ms_median,
            self.restart_ms_max,
            self.crashes.len(),
            stopped_cleanly
        )
    }
}

/// SIGKILLs quire at `kill_at` (offsets from `t0`) and restarts it, with `hooks`
/// around each kill, until `duration` has passed; `pid` follows the running process.
pub(crate) async fn drive(
    q: &mut Quire,
    kill_at: &[Duration],
    t0: Instant,
    duration: Duration,
    pid: &AtomicU32,
    hooks: &mut dyn Hooks,
) -> Chaos {
    let mut chaos = Chaos::default();
    let mut kills = kill_at.iter();
    let mut next = kills.next();
    let end = t0 + duration;
    while Instant::now() < end && chaos.restart_failed.is_none() {
        if let Some(status) = q.exited() {
            chaos.crashes.push(format!(
                "at +{:.1} s: {status}: {}",
                t0.elapsed().as_secs_f64(),
                q.log_tail()
            ));
            restart(q, t0, &mut chaos, pid, None).await;
            continue;
        }
        if next.is_some_and(|&k| t0 + k <= Instant::now()) {
            next = kills.next();
            hooks.before_kill().await;
            let killed = Instant::now();
            if let Err(e) = q.kill9().await {
                chaos.restart_failed = Some(format!("SIGKILL failed: {e:#}"));
                break;
            }
            hooks.while_down();
            restart(q, t0, &mut chaos, pid, Some(killed)).await;
            if chaos.restart_failed.is_none() {
                hooks.after_restart().await;
            }
            continue;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    chaos
}

async fn restart(
    q: &mut Quire,
    t0: Instant,
    chaos: &mut Chaos,
    pid: &AtomicU32,
    killed: Option<Instant>,
) {
    let down = killed.unwrap_or_else(Instant::now);
    match q.start(START_WITHIN).await {
        Ok(_) => {
            let ready = Instant::now();
            let ms = |at: Instant| at.duration_since(t0).as_millis() as u32;
            chaos.restarts.push(Restart {
                killed_ms: ms(down),
                ready_ms: ms(ready),
            });
            chaos
                .restart_ms
                .push(ready.duration_since(down).as_millis() as u32);
            chaos.kills_survived += usize::from(killed.is_some());
            pid.store(q.pid().unwrap_or(0), Ordering::Relaxed);
        }
        Err(e) => chaos.restart_failed = Some(format!("{e:#}")),
    }
}
