//! CPU accounting from `/proc`: machine busy and steal time (read by the store
//! benchmark's `CpuTimes`), a process's CPU time,
//! and the verdict on whether the machine was quiet during a run (a shared VM's provider
//! may throttle it, which shows as steal: a throttled or busy machine measures
//! something else).

pub(crate) use crate::machine::CpuTimes;

/// The machine's CPU times now (the store benchmark's reader of `/proc/stat`).
pub(crate) fn machine() -> Option<CpuTimes> {
    CpuTimes::now()
}

/// utime + stime of a process, in jiffies, from `/proc/PID/stat` text.
pub(crate) fn parse_pid_stat(text: &str) -> Option<u64> {
    // The command name is in parentheses and may hold spaces: fields start after ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3 of the man page, utime 14, stime 15.
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// A process's CPU time in jiffies.
pub(crate) fn process(pid: u32) -> Option<u64> {
    parse_pid_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Waits for a load generator `child` that should finish after `duration`, sampling
/// its CPU jiffies every 50 ms (the last sample before it exits), and returns its
/// output and those jiffies. It is killed 30 s past `duration`.
pub(crate) fn wait_sampled(
    mut child: std::process::Child,
    duration: std::time::Duration,
    name: &str,
) -> anyhow::Result<(std::process::Output, u64)> {
    let pid = child.id();
    let mut jiffies = 0;
    let t0 = std::time::Instant::now();
    while child.try_wait()?.is_none() {
        if let Some(j) = process(pid) {
            jiffies = j;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        if t0.elapsed() > duration + std::time::Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("{name} did not finish");
        }
    }
    Ok((child.wait_with_output()?, jiffies))
}

/// The parent pid in `/proc/PID/stat` text.
fn parent(text: &str) -> Option<u32> {
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// CPU time in jiffies of a process and all its descendants (nginx's workers,
/// Varnish's child), from one pass over `/proc`.
pub(crate) fn tree(pid: u32) -> Option<u64> {
    let mut procs: Vec<(u32, u32, u64)> = Vec::new();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        if let (Some(pp), Some(j)) = (parent(&text), parse_pid_stat(&text)) {
            procs.push((p, pp, j));
        }
    }
    sum_tree(&procs, pid)
}

/// The jiffies of `root` and its descendants among `(pid, parent, jiffies)` rows.
fn sum_tree(procs: &[(u32, u32, u64)], root: u32) -> Option<u64> {
    let mut total = procs.iter().find(|p| p.0 == root)?.2;
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(child, pp, j) in procs {
            if pp == p && child != p {
                total += j;
                frontier.push(child);
            }
        }
    }
    Some(total)
}

/// Clock ticks per second of `/proc` times (USER_HZ: 100 on every Linux port
/// quire runs on).
pub(crate) const HZ: f64 = 100.0;

/// What the machine did during a run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub(crate) struct Quiet {
    /// CPU the server used, percent of one core.
    pub server_cpu_pct: f64,
    /// CPU the load generator used, percent of one core.
    pub loadgen_cpu_pct: f64,
    /// CPU everything else used, percent of one core.
    pub other_cpu_pct: f64,
    /// Steal, percent of all cores' time.
    pub steal_pct: f64,
    /// Why the figures may not be the server's (empty: a quiet run).
    pub warnings: Vec<String>,
}

/// The load generator's CPUs, as [`judge`] sees them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Generator {
    /// The cores it had.
    pub cores: usize,
    /// It spins (`--spin`): it uses all of its cores whatever its load, so its CPU
    /// cannot say whether it was the ceiling.
    pub spins: bool,
}

/// Judges a run from machine times before and after, the server's and the load
/// generator's CPU jiffies over the run, the run's length, and the load
/// generator's cores.
pub(crate) fn judge(
    before: CpuTimes,
    after: CpuTimes,
    server_jiffies: Option<u64>,
    loadgen_jiffies: u64,
    seconds: f64,
    loadgen: Generator,
) -> Quiet {
    let loadgen_cores = loadgen.cores;
    let pct = |j: u64| j as f64 / HZ / seconds.max(1e-9) * 100.0;
    let busy = after.busy.saturating_sub(before.busy);
    let total = (after.busy + after.idle + after.steal)
        .saturating_sub(before.busy + before.idle + before.steal)
        .max(1);
    let steal = after.steal.saturating_sub(before.steal);
    let server = server_jiffies.unwrap_or(0);
    let other = busy.saturating_sub(server + loadgen_jiffies);
    let q = Quiet {
        server_cpu_pct: pct(server),
        loadgen_cpu_pct: pct(loadgen_jiffies),
        other_cpu_pct: pct(other),
        steal_pct: steal as f64 / total as f64 * 100.0,
        warnings: Vec::new(),
    };
    let mut warnings = Vec::new();
    if q.steal_pct > 1.0 {
        warnings.push(format!(
            "steal was {:.1}% of CPU time: the host took cores away; figures are low",
            q.steal_pct
        ));
    }
    if q.other_cpu_pct > 10.0 {
        warnings.push(format!(
            "other processes used {:.0}% of a core during the run: the machine was not quiet",
            q.other_cpu_pct
        ));
    }
    if !loadgen.spins && q.loadgen_cpu_pct > 90.0 * loadgen_cores as f64 {
        warnings.push(format!(
            "the load generator used {:.0}% of its {} core(s): the figure is its ceiling, not the server's",
            q.loadgen_cpu_pct, loadgen_cores
        ));
    }
    if server_jiffies.is_none() {
        warnings.push("server CPU unknown (give --server-pid)".into());
    }
    Quiet { warnings, ..q }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pid_stat() {
        let p = "1234 (wrk (x) y) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0";
        assert_eq!(parse_pid_stat(p), Some(300));
        assert_eq!(parse_pid_stat("garbage"), None);
    }

    #[test]
    fn a_tree_sums_descendants_only() {
        let p = "1234 (nginx) S 77 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0";
        assert_eq!(parent(p), Some(77));
        let rows = [
            (1, 0, 5),
            (10, 1, 100),
            (11, 10, 20),
            (12, 10, 3),
            (20, 1, 7),
        ];
        assert_eq!(sum_tree(&rows, 10), Some(123));
        assert_eq!(sum_tree(&rows, 20), Some(7));
        assert_eq!(sum_tree(&rows, 99), None);
        assert!(tree(std::process::id()).is_some());
    }

    #[test]
    fn a_busy_machine_and_a_saturated_generator_are_flagged() {
        let before = CpuTimes {
            busy: 0,
            idle: 0,
            steal: 0,
        };
        // 10 s on 2 cores = 2000 jiffies; server 900, loadgen 980, others 120.
        let after = CpuTimes {
            busy: 2000,
            idle: 0,
            steal: 0,
        };
        let one = Generator {
            cores: 1,
            spins: false,
        };
        let q = judge(before, after, Some(900), 980, 10.0, one);
        assert!((q.server_cpu_pct - 90.0).abs() < 1e-9);
        assert!(
            q.warnings.iter().any(|w| w.contains("other processes")),
            "{q:?}"
        );
        assert!(
            q.warnings.iter().any(|w| w.contains("load generator")),
            "{q:?}"
        );
        // A spinning generator is busy whatever its load: no ceiling is read into it.
        let spinning = Generator { spins: true, ..one };
        let q = judge(before, after, Some(900), 980, 10.0, spinning);
        assert!(
            !q.warnings.iter().any(|w| w.contains("load generator")),
            "{q:?}"
        );
        let quiet = judge(
            before,
            CpuTimes {
                busy: 1500,
                idle: 500,
                steal: 0,
            },
            Some(900),
            580,
            10.0,
            one,
        );
        assert!(quiet.warnings.is_empty(), "{quiet:?}");
        let stolen = judge(
            before,
            CpuTimes {
                busy: 1000,
                idle: 900,
                steal: 100,
            },
            Some(500),
            500,
            10.0,
            one,
        );
        assert!(stolen.warnings.iter().any(|w| w.contains("steal")));
    }
}
