//! Rows of the two tables replicas share to split probing between them: `replicas` (who is
//! alive, from each replica's beat) and `table_probes` (the newest probe of each table,
//! whichever replica ran it). The store knows nothing of Delta: a probe travels as the
//! JSON its owner wrote; who probes which table is the daemon's (`fleet::sharing`).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tablekeeper_vocab::ProbeFailureKind;

/// A replica unseen this long is deleted from `replicas` by the next beat of any replica
/// (replica ids change with every pod; their rows must not pile up).
pub const FORGET_REPLICAS_AFTER: Duration = Duration::from_secs(86_400);

/// One table's newest probe, as `table_probes` holds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeRow {
    pub table_name: String,
    /// The replica that ran the probe.
    pub replica_id: String,
    pub probed_at: DateTime<Utc>,
    /// The probe's facts (the last good ones when this probe failed).
    pub probe: Option<Value>,
    /// Why this probe failed; `None` when it succeeded.
    pub error: Option<String>,
    pub error_kind: Option<ProbeFailureKind>,
    /// When the row was last written (database clock); ignored on write.
    pub updated_at: DateTime<Utc>,
}
