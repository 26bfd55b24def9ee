//! The `[budget]` section: the slots of uncached work every client shares, and how
//! long and how many requests may wait for one (the queue itself is
//! `crate::edge::budget`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::units::Secs;
use super::ConfigError;

/// The `[budget]` section.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetSection {
    /// Renders, origin fetches, searches and 404s in progress at once, all clients
    /// together. 0 (the default): twice the cores for `quire serve`, sixteen per
    /// core (at least 32) for `quire proxy`.
    pub slots: usize,
    /// Longest a request waits for a slot before it is answered `503`.
    pub queue_timeout: Secs,
    /// Requests one client may have waiting (a loopback client and a cluster peer
    /// are exempt: they carry others' requests); more are answered `503` at once.
    pub queue_per_client: usize,
    /// Requests waiting in all; more are answered `503` at once.
    pub queue_max: usize,
}

impl Default for BudgetSection {
    fn default() -> Self {
        BudgetSection {
            slots: 0,
            queue_timeout: Secs(Duration::from_secs(5)),
            queue_per_client: 8,
            queue_max: 4096,
        }
    }
}

impl BudgetSection {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.queue_timeout.0.is_zero() {
            return Err(ConfigError::new(
                "budget.queue_timeout must be above 0".into(),
            ));
        }
        if self.queue_per_client == 0 || self.queue_max == 0 {
            return Err(ConfigError::new(
                "budget.queue_per_client and budget.queue_max must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_reads_from_toml_and_bad_values_are_named() {
        let c: crate::Config = toml::from_str(
            "[budget]\nslots = 4\nqueue_timeout = \"750ms\"\nqueue_per_client = 2\n",
        )
        .unwrap();
        assert_eq!(c.budget.slots, 4);
        assert_eq!(c.budget.queue_timeout.0, Duration::from_millis(750));
        assert_eq!(c.budget.queue_per_client, 2);
        assert_eq!(c.budget.queue_max, 4096);
        assert!(BudgetSection::default().validate().is_ok());
        let zero = BudgetSection {
            queue_timeout: Secs(Duration::ZERO),
            ..BudgetSection::default()
        };
        assert!(zero
            .validate()
            .unwrap_err()
            .to_string()
            .contains("budget.queue_timeout"));
        let none = BudgetSection {
            queue_per_client: 0,
            ..BudgetSection::default()
        };
        assert!(none
            .validate()
            .unwrap_err()
            .to_string()
            .contains("queue_per_client"));
        assert!(toml::from_str::<crate::Config>("[budget]\nslot = 4\n").is_err());
    }
}
