//! Sizes and durations written the way people write them (`"64 MiB"`, `"2s"`, or
//! plain integers of bytes and seconds): [`ByteSize`] and [`Secs`], read and written
//! back by serde.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A byte count, written as an integer or as `"<number> <unit>"` with units B, KB,
/// KiB, MB, MiB, GB, GiB, TB, TiB (decimal and binary; `K`, `M`, `G`, `T` are binary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes", self.0)
    }
}

/// `"<number><unit>"` split into the number and the trimmed unit; `what` names the
/// kind of value for the error.
fn number_and_unit<'a>(s: &'a str, what: &str) -> Result<(f64, &'a str), String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num = num.parse().map_err(|_| format!("`{s}` is not {what}"))?;
    Ok((num, unit.trim()))
}

/// Deserialises an integer (of the base unit) or a string with a unit.
fn int_or_text<'de, D, T>(d: D, from_int: impl FnOnce(u64) -> T) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: std::str::FromStr<Err = String>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        N(u64),
        S(String),
    }
    match Raw::deserialize(d)? {
        Raw::N(n) => Ok(from_int(n)),
        Raw::S(s) => s.parse().map_err(serde::de::Error::custom),
    }
}

impl std::str::FromStr for ByteSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (num, unit) = number_and_unit(s, "a size (e.g. 512MiB)")?;
        let mult: u64 = match unit.to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "kb" => 1_000,
            "k" | "kib" => 1 << 10,
            "mb" => 1_000_000,
            "m" | "mib" => 1 << 20,
            "gb" => 1_000_000_000,
            "g" | "gib" => 1 << 30,
            "tb" => 1_000_000_000_000,
            "t" | "tib" => 1 << 40,
            other => return Err(format!("unknown size unit `{other}` in `{s}`")),
        };
        let v = num * mult as f64;
        if !v.is_finite() || v < 0.0 || v > u64::MAX as f64 {
            return Err(format!("size `{s}` is out of range"));
        }
        Ok(ByteSize(v as u64))
    }
}

/// Written back as a count of bytes (what [`Config`]'s TOML reads again).
impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        int_or_text(d, ByteSize)
    }
}

/// A duration, written as an integer of seconds or as `"<number><unit>"` with units
/// ms, s, m, h, d.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Secs(pub Duration);

impl std::str::FromStr for Secs {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (num, unit) = number_and_unit(s, "a duration (e.g. 30s)")?;
        let secs = match unit {
            "ms" => num / 1000.0,
            "" | "s" => num,
            "m" => num * 60.0,
            "h" => num * 3600.0,
            "d" => num * 86400.0,
            other => return Err(format!("unknown duration unit `{other}` in `{s}`")),
        };
        Duration::try_from_secs_f64(secs)
            .map(Secs)
            .map_err(|_| format!("duration `{s}` is out of range"))
    }
}

/// Written back as whole seconds, or as `"<n>ms"` when it has a fraction.
impl Serialize for Secs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0.subsec_nanos() == 0 {
            s.serialize_u64(self.0.as_secs())
        } else {
            s.serialize_str(&format!("{}ms", self.0.as_millis()))
        }
    }
}

impl<'de> Deserialize<'de> for Secs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        int_or_text(d, |n| Secs(Duration::from_secs(n)))
    }
}
