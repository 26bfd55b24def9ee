//! `--plot FILE.svg`: one picture of a whole benchmark, every server on it — the
//! latency distribution (left: latency against percentile on a "nines" axis, so
//! p99.9 is as wide as p50–p90, up to the last percentile below the maximum, which
//! is one request (`max_ms` in the JSON)) and throughput over time (right: requests per
//! second in 1 s steps). Plain SVG written by hand: a few lines and labels do not
//! need a plotting crate, and the file opens in any browser.

use std::fmt::Write;

/// One run to draw.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    /// Server name; runs of one server share a colour.
    pub server: String,
    /// `(percentile, latency in microseconds)`, percentiles ascending.
    pub latency: Vec<(f64, f64)>,
    /// Requests completed per `step_ms` interval.
    pub timeline: Vec<u64>,
    /// Length of a timeline interval, milliseconds.
    pub step_ms: u64,
}

const W: f64 = 1000.0;
const H: f64 = 420.0;
const PANEL_W: f64 = 420.0;
const PANEL_H: f64 = 300.0;
const TOP: f64 = 50.0;
const LEFT: [f64; 2] = [70.0, 570.0];
const COLOURS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];

/// The "nines" of a percentile: 50 → 0.30, 90 → 1, 99 → 2, 99.9 → 3.
pub(crate) fn nines(pct: f64) -> f64 {
    -(1.0 - (pct / 100.0).min(0.999_999)).log10()
}

/// Requests per second in 1 s steps from a timeline of `step_ms` intervals (a last
/// partial second is dropped).
pub(crate) fn per_second(timeline: &[u64], step_ms: u64) -> Vec<f64> {
    let per = (1000 / step_ms.clamp(1, 1000)) as usize;
    timeline
        .chunks_exact(per)
        .map(|c| c.iter().sum::<u64>() as f64 * 1000.0 / (per as u64 * step_ms) as f64)
        .collect()
}

/// A round number at or above `v` (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power
/// of ten), so the data fills most of the panel.
fn nice_ceil(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|&c| c >= v)
        .unwrap_or(10.0 * p)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The latency points of a run that are drawn: all but p100. The largest latency is
/// one request: it would set the scale for the whole distribution, so the panel stops
/// at the last percentile below it.
fn shown(s: &Series) -> Vec<(f64, f64)> {
    s.latency.iter().copied().filter(|p| p.0 < 100.0).collect()
}

/// The axes of both panels, from all the runs drawn.
struct Scales {
    /// Top of the latency axis, milliseconds.
    y_lat: f64,
    /// Right end of the percentile axis, in nines.
    x_nines: f64,
    /// Requests per second of each run, in 1 s steps.
    rates: Vec<Vec<f64>>,
    /// Top of the throughput axis.
    y_rate: f64,
    /// Right end of the time axis, seconds.
    x_secs: f64,
}

impl Scales {
    fn of(series: &[Series]) -> Scales {
        let max_ms = series
            .iter()
            .flat_map(|s| shown(s).into_iter().map(|p| p.1 / 1000.0))
            .fold(0.0, f64::max);
        let x_nines = series
            .iter()
            .flat_map(|s| s.latency.iter().filter(|p| p.0 < 100.0).map(|p| nines(p.0)))
            .fold(3.0, f64::max)
            .ceil();
        let rates: Vec<Vec<f64>> = series
            .iter()
            .map(|s| per_second(&s.timeline, s.step_ms))
            .collect();
        let y_rate = nice_ceil(rates.iter().flatten().copied().fold(0.0, f64::max));
        let x_secs = rates.iter().map(Vec::len).max().unwrap_or(0).max(1) as f64;
        Scales {
            y_lat: nice_ceil(max_ms),
            x_nines,
            rates,
            y_rate,
            x_secs,
        }
    }
}

/// The SVG text for `series`, titled `title`.
pub(crate) fn svg(title: &str, series: &[Series]) -> String {
    let mut names: Vec<&str> = Vec::new();
    for s in series {
        if !names.contains(&s.server.as_str()) {
            names.push(&s.server);
        }
    }
    let colour = |name: &str| {
        let i = names.iter().position(|n| *n == name).unwrap_or(0);
        COLOURS[i % COLOURS.len()]
    };
    let sc = Scales::of(series);
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>
"#,
        W / 2.0,
        escape(title)
    );
    panels(&mut out, &sc);
    x_ticks(&mut out, &sc);
    for (s, rate) in series.iter().zip(&sc.rates) {
        lines(&mut out, s, rate, &sc, colour(&s.server));
    }
    // Legend.
    for (i, n) in names.iter().enumerate() {
        let x = LEFT[0] + 120.0 * i as f64;
        let y = H - 14.0;
        let _ = writeln!(
            out,
            r#"<rect x="{x}" y="{}" width="14" height="4" fill="{}"/><text x="{}" y="{y}">{}</text>"#,
            y - 5.0,
            colour(n),
            x + 20.0,
            escape(n)
        );
    }
    out.push_str("</svg>\n");
    out
}

/// A y-axis tick's label: thousands as `k`, small values with two decimals.
fn y_label(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// Both panels' frames, titles, x-axis names and y-axis ticks with grid lines.
fn panels(out: &mut String, sc: &Scales) {
    let panels = [
        ("latency (ms) by percentile", sc.y_lat, "percentile"),
        ("requests/s over time", sc.y_rate, "seconds"),
    ];
    for (i, (label, ymax, xlabel)) in panels.iter().enumerate() {
        let x0 = LEFT[i];
        let _ = write!(
            out,
            r##"<text x="{}" y="{}" text-anchor="middle">{label}</text>
<rect x="{x0}" y="{TOP}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#888"/>
<text x="{}" y="{}" text-anchor="middle">{xlabel}</text>
"##,
            x0 + PANEL_W / 2.0,
            TOP - 8.0,
            x0 + PANEL_W / 2.0,
            TOP + PANEL_H + 34.0
        );
        for k in 0..=5 {
            let v = ymax * k as f64 / 5.0;
            let y = TOP + PANEL_H - PANEL_H * k as f64 / 5.0;
            let _ = writeln!(
                out,
                r##"<line x1="{x0}" x2="{}" y1="{y}" y2="{y}" stroke="#eee"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
                x0 + PANEL_W,
                x0 - 6.0,
                y + 4.0,
                y_label(v)
            );
        }
    }
}

/// The x-axis tick labels: percentiles by nines on the left, seconds on the right.
fn x_ticks(out: &mut String, sc: &Scales) {
    for n in 0..=(sc.x_nines as usize) {
        let x = LEFT[0] + PANEL_W * n as f64 / sc.x_nines;
        let label = match n {
            0 => "0".to_owned(),
            n => format!("{}", 100.0 - 100.0 / 10f64.powi(n as i32)),
        };
        let _ = writeln!(
            out,
            r#"<text x="{x}" y="{}" text-anchor="middle">{label}</text>"#,
            TOP + PANEL_H + 16.0
        );
    }
    for k in 0..=4 {
        let x = LEFT[1] + PANEL_W * k as f64 / 4.0;
        let t = sc.x_secs * k as f64 / 4.0;
        let _ = writeln!(
            out,
            r#"<text x="{x}" y="{}" text-anchor="middle">{}</text>"#,
            TOP + PANEL_H + 16.0,
            if sc.x_secs < 20.0 {
                format!("{t:.1}")
            } else {
                format!("{t:.0}")
            }
        );
    }
}

/// One run's two lines, in colour `c`: its latency distribution and its throughput.
fn lines(out: &mut String, s: &Series, rate: &[f64], sc: &Scales, c: &str) {
    let pts: Vec<String> = shown(s)
        .into_iter()
        .map(|(p, us)| {
            format!(
                "{:.1},{:.1}",
                LEFT[0] + PANEL_W * nines(p).min(sc.x_nines) / sc.x_nines,
                TOP + PANEL_H - PANEL_H * (us / 1000.0 / sc.y_lat).min(1.0)
            )
        })
        .collect();
    let _ = writeln!(
        out,
        r#"<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{}"/>"#,
        pts.join(" ")
    );
    let pts: Vec<String> = rate
        .iter()
        .enumerate()
        .map(|(t, r)| {
            format!(
                "{:.1},{:.1}",
                LEFT[1] + PANEL_W * (t as f64 + 0.5) / sc.x_secs,
                TOP + PANEL_H - PANEL_H * (r / sc.y_rate).min(1.0)
            )
        })
        .collect();
    let _ = writeln!(
        out,
        r#"<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{}"/>"#,
        pts.join(" ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nines_and_per_second() {
        assert!((nines(90.0) - 1.0).abs() < 1e-9);
        assert!((nines(99.9) - 3.0).abs() < 1e-9);
        assert!((nines(100.0) - 6.0).abs() < 1e-9, "p100 is clamped");
        assert_eq!(per_second(&[1; 25], 100), vec![10.0, 10.0]);
        assert_eq!(per_second(&[5, 5], 500), vec![10.0]);
        assert_eq!(nice_ceil(0.0), 1.0);
        assert_eq!(nice_ceil(3.2), 4.0);
        assert_eq!(nice_ceil(101_000.0), 120_000.0);
    }

    #[test]
    fn every_series_is_drawn_and_names_are_escaped() {
        let s = |server: &str| Series {
            server: server.into(),
            latency: vec![
                (50.0, 100.0),
                (99.0, 900.0),
                (99.9, 2000.0),
                (100.0, 90_000.0),
            ],
            timeline: vec![100; 30],
            step_ms: 100,
        };
        let out = svg("a <b>", &[s("quire"), s("nginx"), s("quire")]);
        assert!(out.starts_with("<svg"));
        assert!(out.trim_end().ends_with("</svg>"));
        assert!(out.contains("a &lt;b&gt;"));
        assert_eq!(out.matches("<polyline").count(), 6, "two lines per run");
        assert_eq!(
            out.matches("#1f77b4\" stroke-width").count(),
            4,
            "quire's runs share a colour"
        );
        assert!(out.contains(">nginx</text>"));
        assert!(
            out.contains(">2.00</text>"),
            "p100 does not set the latency scale"
        );
    }
}
