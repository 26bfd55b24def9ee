//! The machine the figures came from: cores, CPU model, and how much CPU time the
//! hypervisor stole and how busy the machine was while the benchmark ran (from
//! /proc/stat), so figures are never read without the state they were taken in.

use serde::Serialize;

/// CPU time counters from the first line of /proc/stat, in clock ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CpuTimes {
    pub busy: u64,
    pub idle: u64,
    pub steal: u64,
}

impl CpuTimes {
    /// Reads /proc/stat; `None` where it is not available.
    pub(crate) fn now() -> Option<CpuTimes> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        parse_proc_stat(&text)
    }

    fn total(&self) -> u64 {
        self.busy + self.idle + self.steal
    }
}

/// Parses the aggregate `cpu` line: user nice system idle iowait irq softirq steal ...
pub(crate) fn parse_proc_stat(text: &str) -> Option<CpuTimes> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    Some(CpuTimes {
        busy: at(0) + at(1) + at(2) + at(5) + at(6),
        idle: at(3) + at(4),
        steal: at(7),
    })
}

/// The machine, and its state over the run.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Machine {
    pub cores: usize,
    pub cpu_model: String,
    /// Share of CPU time stolen by the hypervisor during the run (0..1), if known.
    pub steal_share: Option<f64>,
    /// Share of CPU time busy (user+system+irq) during the run (0..1), if known.
    pub busy_share: Option<f64>,
    pub os: String,
}

impl Machine {
    /// Cores and model now; the run's shares are filled in by [`Machine::finish`].
    pub(crate) fn probe() -> Machine {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, m)| m.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".to_string());
        Machine {
            cores,
            cpu_model,
            steal_share: None,
            busy_share: None,
            os: std::env::consts::OS.to_string(),
        }
    }

    /// Fills in the shares from counters taken at the start and at the end of the run.
    pub(crate) fn finish(&mut self, start: Option<CpuTimes>, end: Option<CpuTimes>) {
        if let (Some(a), Some(b)) = (start, end) {
            let total = b.total().saturating_sub(a.total());
            if total > 0 {
                self.steal_share = Some(b.steal.saturating_sub(a.steal) as f64 / total as f64);
                self.busy_share = Some(b.busy.saturating_sub(a.busy) as f64 / total as f64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_aggregate_line() {
        let t = "cpu  100 5 20 800 10 1 2 30 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        let c = parse_proc_stat(t).expect("parsed");
        assert_eq!(
            c,
            CpuTimes {
                busy: 128,
                idle: 810,
                steal: 30
            }
        );
        let mut m = Machine::default();
        let later = CpuTimes {
            busy: 228,
            idle: 890,
            steal: 50,
        };
        m.finish(Some(c), Some(later));
        assert_eq!(m.steal_share, Some(20.0 / 200.0));
        assert_eq!(m.busy_share, Some(100.0 / 200.0));
        assert!(parse_proc_stat("intr 1 2 3").is_none());
    }
}
