//! Sizes and durations written the way people write them (`"64 MiB"`, `"2s"`, or
//! plain integers of bytes and seconds): [`ByteSize`] and [`Secs`], read and written
//! back by serde. A text that is neither says why in a [`UnitError`].

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

/// What a [`UnitError`] is about: a size or a duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    /// A byte count ([`ByteSize`]).
    Size,
    /// A duration ([`Secs`]).
    Duration,
}

impl Quantity {
    /// What a value of this quantity is, with an example, for the error.
    fn example(self) -> &'static str {
        match self {
            Quantity::Size => "a size (e.g. 512MiB)",
            Quantity::Duration => "a duration (e.g. 30s)",
        }
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Quantity::Size => "size",
            Quantity::Duration => "duration",
        })
    }
}

/// Why a text is not a size or a duration; each names the text as it was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UnitError {
    /// No number leads the text.
    #[error("`{text}` is not {}", .quantity.example())]
    NotANumber {
        /// A size or a duration.
        quantity: Quantity,
        /// The text.
        text: String,
    },
    /// The unit after the number is not one this quantity knows.
    #[error("unknown {quantity} unit `{unit}` in `{text}`")]
    UnknownUnit {
        /// A size or a duration.
        quantity: Quantity,
        /// The unit, trimmed.
        unit: String,
        /// The text.
        text: String,
    },
    /// The value does not fit (a size past `u64::MAX` bytes, a duration past
    /// `Duration::MAX`).
    #[error("{quantity} `{text}` is out of range")]
    OutOfRange {
        /// A size or a duration.
        quantity: Quantity,
        /// The text.
        text: String,
    },
}

/// `"<number><unit>"` split into the number and the trimmed unit; `quantity` names
/// the kind of value for the error.
fn number_and_unit(s: &str, quantity: Quantity) -> Result<(f64, &str), UnitError> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num = num.parse().map_err(|_| UnitError::NotANumber {
        quantity,
        text: s.to_owned(),
    })?;
    Ok((num, unit.trim()))
}

/// Deserialises an integer (of the base unit) or a string with a unit.
fn int_or_text<'de, D, T>(d: D, from_int: impl FnOnce(u64) -> T) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: std::str::FromStr<Err = UnitError>,
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
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        let (num, unit) = number_and_unit(s, Quantity::Size)?;
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
            other => {
                return Err(UnitError::UnknownUnit {
                    quantity: Quantity::Size,
                    unit: other.to_owned(),
                    text: s.to_owned(),
                })
            }
        };
        let v = num * mult as f64;
        if !v.is_finite() || v < 0.0 || v > u64::MAX as f64 {
            return Err(UnitError::OutOfRange {
                quantity: Quantity::Size,
                text: s.to_owned(),
            });
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
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        let (num, unit) = number_and_unit(s, Quantity::Duration)?;
        let secs = match unit {
            "ms" => num / 1000.0,
            "" | "s" => num,
            "m" => num * 60.0,
            "h" => num * 3600.0,
            "d" => num * 86400.0,
            other => {
                return Err(UnitError::UnknownUnit {
                    quantity: Quantity::Duration,
                    unit: other.to_owned(),
                    text: s.to_owned(),
                })
            }
        };
        Duration::try_from_secs_f64(secs)
            .map(Secs)
            .map_err(|_| UnitError::OutOfRange {
                quantity: Quantity::Duration,
                text: s.to_owned(),
            })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_names_the_text_as_written() {
        let size = |s: &str| s.parse::<ByteSize>().unwrap_err().to_string();
        let secs = |s: &str| s.parse::<Secs>().unwrap_err().to_string();
        assert_eq!(size("lots"), "`lots` is not a size (e.g. 512MiB)");
        assert_eq!(
            size("12 parsecs"),
            "unknown size unit `parsecs` in `12 parsecs`"
        );
        assert_eq!(
            size("99999999999 TiB"),
            "size `99999999999 TiB` is out of range"
        );
        assert_eq!(secs("soon"), "`soon` is not a duration (e.g. 30s)");
        assert_eq!(
            secs("3 weeks"),
            "unknown duration unit `weeks` in `3 weeks`"
        );
        let long = "99999999999999999999999d";
        assert_eq!(secs(long), format!("duration `{long}` is out of range"));
    }
}
