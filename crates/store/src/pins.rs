//! Rows of `table_pins`: versions pinned through the API, shared by every replica. The
//! store keeps and returns them; what a pin protects (files, log) is the delta crate's and
//! whether it has expired is decided by whoever reads it, against its own clock.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One pinned version of a table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TablePin {
    pub table_name: String,
    pub version: i64,
    /// The pin holds until this instant.
    pub until: DateTime<Utc>,
    pub reason: String,
    pub created_at: DateTime<Utc>,
    /// Who added it: the API caller as the daemon identified it.
    pub created_by: String,
}
