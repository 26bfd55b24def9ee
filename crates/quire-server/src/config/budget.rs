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
    /// The share of its cores (0–1) the process may use past which, while requests
    /// wait for a slot, slots are handed out at a rate instead of as they free, so
    /// cheap uncached work cannot fill the cores and slow the hits; 1 = never.
    pub cpu_busy_max: f64,
    /// Crawlers given slots of their own (`[[budget.crawlers]]`), checked in order.
    pub crawlers: Vec<CrawlerClass>,
}

/// The default `cpu_busy_max`: see `crate::edge::budget::pace` for what it was
/// measured at.
pub(crate) const CPU_BUSY_MAX: f64 = 0.4;

/// Crawler classes at most.
pub(crate) const CRAWLER_CLASSES_MAX: usize = 16;

/// A crawler named in `[[budget.crawlers]]`: requests whose `User-Agent` contains
/// `user_agent` (and, when `domains` are given, whose address's reverse DNS name is
/// under one of them and resolves back to it) take their uncached work from `slots`
/// of their own instead of everyone's.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CrawlerClass {
    /// The class's name, in metrics (`a-z`, `0-9`, `-`, `_`; at most 32 bytes).
    pub name: String,
    /// A part of the `User-Agent` field, matched without regard to case.
    pub user_agent: String,
    /// Domains the crawler's addresses resolve to (`googlebot.com`), checked by
    /// forward-confirmed reverse DNS. Empty: the `User-Agent` alone decides, which
    /// anyone can send.
    #[serde(default)]
    pub domains: Vec<String>,
    /// Slots of the class's own (default 2).
    #[serde(default = "default_crawler_slots")]
    pub slots: usize,
}

fn default_crawler_slots() -> usize {
    2
}

impl CrawlerClass {
    fn validate(&self) -> Result<(), String> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 32
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if !name_ok {
            return Err(format!(
                "name {:?} must be 1 to 32 of a-z, 0-9, - and _",
                self.name
            ));
        }
        if self.name == "everyone" {
            return Err("name \"everyone\" is the budget's own class".into());
        }
        let ua = self.user_agent.trim();
        if ua.is_empty() || ua.len() > 128 || !ua.is_ascii() {
            return Err("user_agent must be 1 to 128 ASCII bytes".into());
        }
        for d in &self.domains {
            let ok = !d.is_empty()
                && d.len() <= 253
                && d.split('.').all(|l| {
                    !l.is_empty()
                        && l.len() <= 63
                        && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                });
            if !ok {
                return Err(format!("domain {d:?} is not a DNS name"));
            }
        }
        if self.slots == 0 {
            return Err("slots must be at least 1".into());
        }
        Ok(())
    }
}

impl Default for BudgetSection {
    fn default() -> Self {
        BudgetSection {
            slots: 0,
            queue_timeout: Secs(Duration::from_secs(5)),
            queue_per_client: 8,
            queue_max: 4096,
            cpu_busy_max: CPU_BUSY_MAX,
            crawlers: Vec::new(),
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
        if !(0.1..=1.0).contains(&self.cpu_busy_max) {
            return Err(ConfigError::new(format!(
                "budget.cpu_busy_max must be from 0.1 to 1 (1: never paced), not {}",
                self.cpu_busy_max
            )));
        }
        if self.crawlers.len() > CRAWLER_CLASSES_MAX {
            return Err(ConfigError::new(format!(
                "budget.crawlers: at most {CRAWLER_CLASSES_MAX} classes"
            )));
        }
        for (i, c) in self.crawlers.iter().enumerate() {
            c.validate()
                .map_err(|why| ConfigError::new(format!("budget.crawlers[{i}]: {why}")))?;
            if self.crawlers[..i].iter().any(|o| o.name == c.name) {
                return Err(ConfigError::new(format!(
                    "budget.crawlers[{i}]: name {:?} given twice",
                    c.name
                )));
            }
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
        let c: crate::Config = toml::from_str("[budget]\ncpu_busy_max = 1.0\n").unwrap();
        assert_eq!(c.budget.cpu_busy_max, 1.0);
        assert_eq!(BudgetSection::default().cpu_busy_max, CPU_BUSY_MAX);
        for bad in [0.0, 0.05, 1.5, f64::NAN] {
            let b = BudgetSection {
                cpu_busy_max: bad,
                ..BudgetSection::default()
            };
            let e = b.validate().unwrap_err().to_string();
            assert!(e.contains("budget.cpu_busy_max"), "{bad}: {e}");
        }
    }

    #[test]
    fn crawler_classes_read_from_toml_and_bad_ones_are_named() {
        let c: crate::Config = toml::from_str(
            "[[budget.crawlers]]\nname = \"googlebot\"\nuser_agent = \"Googlebot\"\n\
             domains = [\"googlebot.com\", \"google.com\"]\n\
             [[budget.crawlers]]\nname = \"feeds\"\nuser_agent = \"FeedFetcher\"\nslots = 1\n",
        )
        .unwrap();
        assert_eq!(c.budget.crawlers.len(), 2);
        assert_eq!(c.budget.crawlers[0].slots, 2, "the default");
        assert_eq!(c.budget.crawlers[1].domains, Vec::<String>::new());
        assert!(c.budget.validate().is_ok());
        let bad = |f: &dyn Fn(&mut CrawlerClass), want: &str| {
            let mut b = c.budget.clone();
            f(&mut b.crawlers[1]);
            let e = b.validate().unwrap_err().to_string();
            assert!(e.contains("budget.crawlers[1]") && e.contains(want), "{e}");
        };
        bad(&|k| k.name = "Google Bot".into(), "name");
        bad(&|k| k.name = "everyone".into(), "everyone");
        bad(&|k| k.name = "googlebot".into(), "twice");
        bad(&|k| k.user_agent = " ".into(), "user_agent");
        bad(&|k| k.domains = vec!["google..com".into()], "domain");
        bad(&|k| k.slots = 0, "slots");
        let mut many = c.budget.clone();
        many.crawlers = (0..17)
            .map(|i| CrawlerClass {
                name: format!("c{i}"),
                ..c.budget.crawlers[1].clone()
            })
            .collect();
        assert!(many.validate().unwrap_err().to_string().contains("at most"));
        assert!(toml::from_str::<crate::Config>(
            "[[budget.crawlers]]\nname = \"x\"\nuser_agent = \"X\"\nslot = 1\n"
        )
        .is_err());
    }
}
