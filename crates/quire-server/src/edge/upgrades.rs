//! The slots of upgraded connections (`limits.upgrades`, shared out per client by
//! `limits.upgrades_per_client`) and their counters: the admission half of a tunnel,
//! held by the server's state. The tunnel itself (forwarding the upgrade, copying
//! bytes both ways) is `crate::request::tunnel`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::edge::conns::ClientKey;

/// Tunnels open per client (only clients with one open).
type Held = Arc<Mutex<HashMap<ClientKey, usize>>>;

/// The upgraded connections: their slots and counters.
#[derive(Debug)]
pub struct Tunnels {
    slots: Arc<Semaphore>,
    max: usize,
    per_client: usize,
    pub(crate) idle: Duration,
    held: Held,
    pub(crate) opened: AtomicU64,
    refused: AtomicU64,
    refused_client: AtomicU64,
    pub(crate) malformed: AtomicU64,
    pub(crate) declined: AtomicU64,
    pub(crate) idled: AtomicU64,
}

/// One tunnel's claim: a slot of `limits.upgrades` and one of its client's share;
/// dropping it gives both back.
#[derive(Debug)]
pub(crate) struct Claim {
    _slot: OwnedSemaphorePermit,
    held: Held,
    client: ClientKey,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = held.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.client);
            }
        }
    }
}

impl Tunnels {
    /// The limits `limits.upgrades`, `limits.upgrades_per_client` and
    /// `limits.tunnel_idle`.
    pub fn new(limits: &crate::config::Limits) -> Tunnels {
        Tunnels {
            slots: Arc::new(Semaphore::new(limits.upgrades)),
            max: limits.upgrades,
            per_client: limits.upgrades_per_client,
            idle: limits.tunnel_idle.0,
            held: Arc::default(),
            opened: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            refused_client: AtomicU64::new(0),
            malformed: AtomicU64::new(0),
            declined: AtomicU64::new(0),
            idled: AtomicU64::new(0),
        }
    }

    /// A slot for one more tunnel of `client`; `None` when it holds its share or
    /// every slot is taken (each counted).
    pub(crate) fn claim(&self, client: ClientKey) -> Option<Claim> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let n = held.entry(client).or_insert(0);
        if *n >= self.per_client {
            self.refused_client.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            if *n == 0 {
                held.remove(&client);
            }
            self.refused.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        *n += 1;
        Some(Claim {
            _slot: slot,
            held: self.held.clone(),
            client,
        })
    }

    /// The counters in Prometheus text format.
    pub fn write_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let open = self.max - self.slots.available_permits();
        let _ = writeln!(
            out,
            "# HELP quire_upgrades_open Upgraded connections (WebSocket) open now.\n\
             # TYPE quire_upgrades_open gauge\n\
             quire_upgrades_open {open}\n\
             # HELP quire_upgrades_total Upgrade requests: tunnelled (the origin switched protocols), declined (it answered otherwise), refused (no slot free), refused_client (the client held its share, limits.upgrades_per_client), bad_request (body framing on an upgrade: 400).\n\
             # TYPE quire_upgrades_total counter\n\
             quire_upgrades_total{{result=\"tunnelled\"}} {}\n\
             quire_upgrades_total{{result=\"declined\"}} {}\n\
             quire_upgrades_total{{result=\"refused\"}} {}\n\
             quire_upgrades_total{{result=\"refused_client\"}} {}\n\
             quire_upgrades_total{{result=\"bad_request\"}} {}\n\
             # HELP quire_upgrades_idle_closed_total Tunnels closed after carrying nothing for limits.tunnel_idle.\n\
             # TYPE quire_upgrades_idle_closed_total counter\n\
             quire_upgrades_idle_closed_total {}",
            self.opened.load(Ordering::Relaxed),
            self.declined.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
            self.refused_client.load(Ordering::Relaxed),
            self.malformed.load(Ordering::Relaxed),
            self.idled.load(Ordering::Relaxed),
        );
    }
}
