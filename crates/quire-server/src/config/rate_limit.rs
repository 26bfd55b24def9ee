//! The `[rate_limit]` section: per-client budgets of hits and of requests to the
//! origin (the buckets themselves are `crate::edge::rate_limit`).

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// The `[rate_limit]` section. A rate of 0 turns that budget off.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitSection {
    /// Hits per second a client may sustain.
    pub hits_per_sec: f64,
    /// Hits a client may make at once (the bucket's size).
    pub hits_burst: u32,
    /// Requests to the origin (misses, revalidations, bypasses, passes) per
    /// second a client may sustain.
    pub misses_per_sec: f64,
    /// Requests to the origin a client may make at once.
    pub misses_burst: u32,
    /// Clients tracked at most (about 100 bytes each).
    pub clients_max: usize,
}

impl Default for RateLimitSection {
    fn default() -> Self {
        RateLimitSection {
            hits_per_sec: 1000.0,
            hits_burst: 2000,
            misses_per_sec: 20.0,
            misses_burst: 100,
            clients_max: 100_000,
        }
    }
}

impl RateLimitSection {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (name, rate, burst) in [
            ("hits", self.hits_per_sec, self.hits_burst),
            ("misses", self.misses_per_sec, self.misses_burst),
        ] {
            if !(rate.is_finite() && rate >= 0.0) {
                return Err(ConfigError::new(format!(
                    "rate_limit.{name}_per_sec must be 0 (off) or above"
                )));
            }
            if rate > 0.0 && burst == 0 {
                return Err(ConfigError::new(format!(
                    "rate_limit.{name}_burst must be at least 1"
                )));
            }
        }
        if self.clients_max == 0 {
            return Err(ConfigError::new(
                "rate_limit.clients_max must be at least 1".into(),
            ));
        }
        Ok(())
    }
}
