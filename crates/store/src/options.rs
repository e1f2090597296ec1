//! How to connect to the job store: pool size, timeouts, laziness and the call observer.
//! Plain settings, shared by both dialects; this module never opens a connection.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::store::StoreObserver;

/// Default [`StoreOptions::call_timeout`]: far above any statement the store runs (they
/// take milliseconds), far below the kernel's TCP retransmission limit.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Connection settings shared by both backends.
#[derive(Clone)]
pub struct StoreOptions {
    /// Pool size. SQLite in-memory databases always use 1 (a second connection would
    /// see a different database).
    pub max_connections: u32,
    /// How long a call waits for a pooled connection before failing with `Unavailable`.
    pub acquire_timeout: Duration,
    /// Do not connect until the first call. `connect` then succeeds even while the
    /// database is down, and `ping` reports when it is reachable.
    pub connect_lazily: bool,
    /// Longest any call (except `migrate`) may take before it fails with `Unavailable`.
    /// sqlx has no query timeout and sets no TCP keepalive, so without this a call on a
    /// connection whose peer vanished silently (a network partition, a dropped NAT entry)
    /// would wait for the kernel to give up, which takes up to 15 minutes, holding its
    /// worker all that time. `None` waits forever.
    pub call_timeout: Option<Duration>,
    /// Told about every call (operation, duration, error): hook for metrics.
    pub observer: Option<Arc<dyn StoreObserver>>,
}

impl fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreOptions")
            .field("max_connections", &self.max_connections)
            .field("acquire_timeout", &self.acquire_timeout)
            .field("connect_lazily", &self.connect_lazily)
            .field("call_timeout", &self.call_timeout)
            .field("observer", &self.observer.is_some())
            .finish()
    }
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            // sqlx's default pool size; a replica runs a handful of workers, each holding
            // a connection only for one short statement at a time.
            max_connections: 10,
            // Short, so /readyz and the worker loops notice an outage within seconds
            // instead of queueing behind a dead database.
            acquire_timeout: Duration::from_secs(5),
            connect_lazily: false,
            call_timeout: Some(DEFAULT_CALL_TIMEOUT),
            observer: None,
        }
    }
}
