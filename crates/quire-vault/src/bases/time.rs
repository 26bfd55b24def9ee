//! Dates and durations of Bases expressions, in milliseconds since the Unix epoch
//! (UTC: a published page renders the same wherever the server is), with the civil
//! calendar conversions done here rather than by a date crate: `date("2025-03-01")`,
//! `date + "1 week"`, `.format("YYYY-MM-DD")`, `.relative()`.

/// Milliseconds a day.
pub(crate) const DAY_MS: i64 = 86_400_000;

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date (year, month, day) of a day number.
pub(crate) fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

/// Parses `YYYY-MM-DD`, optionally followed by `T` or a space and `HH:mm[:ss]`.
pub(crate) fn parse_date(s: &str) -> Option<i64> {
    let s = s.trim();
    let (date, time) = match s.split_once(['T', ' ']) {
        Some((d, t)) => (d, Some(t.trim_end_matches('Z'))),
        None => (s, None),
    };
    let mut parts = date.splitn(3, '-');
    let y: i64 = parts.next()?.parse().ok()?;
    let m: i64 = parts.next()?.parse().ok()?;
    let d: i64 = parts.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || !(0..=9999).contains(&y) {
        return None;
    }
    let mut ms = days_from_civil(y, m, d) * DAY_MS;
    if let Some(t) = time {
        let mut hms = t.split(':');
        let h: i64 = hms.next()?.parse().ok()?;
        let min: i64 = hms.next()?.parse().ok()?;
        let sec: f64 = hms.next().map_or(Some(0.0), |s| s.parse().ok())?;
        if h > 23 || min > 59 || !(0.0..61.0).contains(&sec) {
            return None;
        }
        ms += (h * 3600 + min * 60) * 1000 + (sec * 1000.0) as i64;
    }
    Some(ms)
}

/// Parses a duration: a signed sum of `<number> <unit>` terms, e.g. `1d`, `2 weeks`,
/// `-3h 30m`; units y, M (months of 30 days), w, d, h, m, s and their names.
pub(crate) fn parse_duration(s: &str) -> Option<i64> {
    let mut rest = s.trim();
    let mut total = 0i64;
    let mut any = false;
    while !rest.is_empty() {
        let sign = if let Some(r) = rest.strip_prefix('-') {
            rest = r.trim_start();
            -1
        } else {
            rest = rest.strip_prefix('+').unwrap_or(rest).trim_start();
            1
        };
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let n: f64 = rest[..end].parse().ok()?;
        rest = rest[end..].trim_start();
        let uend = rest
            .find(|c: char| !c.is_alphabetic())
            .unwrap_or(rest.len());
        let unit = unit_ms(&rest[..uend])?;
        rest = rest[uend..]
            .trim_start()
            .trim_start_matches(',')
            .trim_start();
        total = total.checked_add(sign * (n * unit as f64) as i64)?;
        any = true;
    }
    any.then_some(total)
}

fn unit_ms(unit: &str) -> Option<i64> {
    Some(match unit {
        "y" | "year" | "years" => 365 * DAY_MS,
        "M" | "month" | "months" => 30 * DAY_MS,
        "w" | "week" | "weeks" => 7 * DAY_MS,
        "d" | "day" | "days" => DAY_MS,
        "h" | "hour" | "hours" => 3_600_000,
        "m" | "minute" | "minutes" => 60_000,
        "s" | "second" | "seconds" => 1000,
        _ => return None,
    })
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// Formats `ms` with Moment-style tokens: `YYYY`, `YY`, `MMMM`, `MMM`, `MM`, `M`,
/// `DD`, `D`, `HH`, `H`, `mm`, `ss`; other characters are copied, and text in `[…]`
/// is copied without its brackets.
pub(crate) fn format(ms: i64, fmt: &str) -> String {
    let (y, mo, d) = civil_from_days(ms.div_euclid(DAY_MS));
    let t = ms.rem_euclid(DAY_MS) / 1000;
    let (h, mi, s) = (t / 3600, t / 60 % 60, t % 60);
    let month = MONTHS[(mo - 1) as usize];
    let tokens: [(&str, String); 12] = [
        ("YYYY", format!("{y:04}")),
        ("YY", format!("{:02}", y % 100)),
        ("MMMM", month.to_owned()),
        ("MMM", month[..3].to_owned()),
        ("MM", format!("{mo:02}")),
        ("M", mo.to_string()),
        ("DD", format!("{d:02}")),
        ("D", d.to_string()),
        ("HH", format!("{h:02}")),
        ("H", h.to_string()),
        ("mm", format!("{mi:02}")),
        ("ss", format!("{s:02}")),
    ];
    let mut out = String::new();
    let mut rest = fmt;
    'outer: while let Some(c) = rest.chars().next() {
        if c == '[' {
            if let Some(end) = rest.find(']') {
                out.push_str(&rest[1..end]);
                rest = &rest[end + 1..];
                continue;
            }
        }
        for (tok, value) in &tokens {
            if let Some(r) = rest.strip_prefix(tok) {
                out.push_str(value);
                rest = r;
                continue 'outer;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// `ms` relative to `now` in words: `3 days ago`, `in 2 hours`, `just now`.
pub(crate) fn relative(ms: i64, now: i64) -> String {
    let delta = now - ms;
    let abs = delta.unsigned_abs() / 1000;
    let (n, unit) = match abs {
        0..=44 => return "just now".to_owned(),
        45..=3_599 => (abs.div_ceil(60).max(1), "minute"),
        3_600..=86_399 => (abs / 3_600, "hour"),
        86_400..=2_591_999 => (abs / 86_400, "day"),
        2_592_000..=31_535_999 => (abs / 2_592_000, "month"),
        _ => (abs / 31_536_000, "year"),
    };
    let s = if n == 1 { "" } else { "s" };
    if delta >= 0 {
        format!("{n} {unit}{s} ago")
    } else {
        format!("in {n} {unit}{s}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_round_trip_and_parse() {
        for z in [-800_000, -1, 0, 1, 10_957, 19_000, 2_932_896] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
        assert_eq!(parse_date("1970-01-02"), Some(DAY_MS));
        assert_eq!(
            parse_date("2024-02-29 12:30"),
            Some(days_from_civil(2024, 2, 29) * DAY_MS + 45_000_000)
        );
        assert_eq!(
            parse_date("2024-02-29T00:00:01Z"),
            Some(days_from_civil(2024, 2, 29) * DAY_MS + 1000)
        );
        for bad in ["2024-13-01", "2024-01", "soon", "2024-01-01 25:00", ""] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn durations_formats_and_relative_times_read_as_obsidian_writes_them() {
        assert_eq!(parse_duration("1d"), Some(DAY_MS));
        assert_eq!(parse_duration("2 weeks"), Some(14 * DAY_MS));
        assert_eq!(
            parse_duration("-3h 30m"),
            Some(-3 * 3_600_000 + 30 * 60_000)
        );
        assert_eq!(parse_duration("1 fortnight"), None);
        assert_eq!(parse_duration(""), None);
        let ms = parse_date("2025-03-07 09:05:03").unwrap();
        assert_eq!(format(ms, "YYYY-MM-DD HH:mm:ss"), "2025-03-07 09:05:03");
        assert_eq!(format(ms, "D MMM YY [at] H"), "7 Mar 25 at 9");
        assert_eq!(format(ms, "MMMM"), "March");
        assert_eq!(relative(ms + 3 * DAY_MS, ms), "in 3 days");
        assert_eq!(relative(ms - 3 * DAY_MS, ms), "3 days ago");
        assert_eq!(relative(ms, ms + 2 * 3_600_000), "2 hours ago");
        assert_eq!(relative(ms, ms + 10_000), "just now");
    }
}
