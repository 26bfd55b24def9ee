//! The `[agents]` section: self-identified AI crawlers refused before the cache
//! (the refusal itself is `crate::request::agents`).

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// Names at most in `refuse`.
pub(crate) const REFUSE_MAX: usize = 64;
/// Bytes of one name at most.
const NAME_MAX: usize = 64;

/// The `[agents]` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentsSection {
    /// Product tokens (`GPTBot`, `CCBot`, `ClaudeBot`): a request whose `User-Agent`
    /// contains one of them, without regard to case, is refused before the cache.
    pub refuse: Vec<String>,
    /// The refusal's status: `403` (the default) or `402` (payment required).
    pub status: u16,
    /// With `402`, the price the crawler is told (`crawler-price`, as Cloudflare's
    /// pay per crawl writes it: e.g. `USD 0.01`).
    pub price: Option<String>,
}

impl Default for AgentsSection {
    fn default() -> Self {
        AgentsSection {
            refuse: Vec::new(),
            status: 403,
            price: None,
        }
    }
}

impl AgentsSection {
    /// Checks names, status and price.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::new(format!("[agents] {m}")));
        if self.refuse.len() > REFUSE_MAX {
            return bad(format!("refuse names at most {REFUSE_MAX} agents"));
        }
        for n in &self.refuse {
            if n.is_empty() || n.len() > NAME_MAX || !n.bytes().all(|b| b.is_ascii_graphic()) {
                return bad(format!(
                    "refuse: {n:?} is not a product token (1 to {NAME_MAX} visible ASCII characters, no space)"
                ));
            }
        }
        match (self.status, &self.price) {
            (403, None) | (402, _) => {}
            (403, Some(_)) => return bad("price is for status = 402".to_owned()),
            (s, _) => return bad(format!("status must be 403 or 402, not {s}")),
        }
        if let Some(p) = &self.price {
            if p.is_empty()
                || p.len() > NAME_MAX
                || !p.bytes().all(|b| b == b' ' || b.is_ascii_graphic())
            {
                return bad(format!(
                    "price {p:?} must be 1 to {NAME_MAX} printable ASCII characters"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(refuse: &[&str], status: u16, price: Option<&str>) -> AgentsSection {
        AgentsSection {
            refuse: refuse.iter().map(|s| (*s).to_owned()).collect(),
            status,
            price: price.map(str::to_owned),
        }
    }

    #[test]
    fn names_status_and_price_are_checked() {
        assert!(section(&["GPTBot", "CCBot"], 403, None).validate().is_ok());
        assert!(section(&["GPTBot"], 402, Some("USD 0.01"))
            .validate()
            .is_ok());
        assert!(section(&["GPT Bot"], 403, None).validate().is_err());
        assert!(section(&[""], 403, None).validate().is_err());
        assert!(section(&["GPTBot"], 404, None).validate().is_err());
        assert!(section(&["GPTBot"], 403, Some("USD 1")).validate().is_err());
        assert!(section(&["GPTBot"], 402, Some("USD\r\n1"))
            .validate()
            .is_err());
        let many: Vec<String> = (0..=REFUSE_MAX).map(|i| format!("Bot{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(section(&refs, 403, None).validate().is_err());
    }
}
