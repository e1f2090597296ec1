//! The cost-and-outcome contract (DESIGN "Cost and outcome"): what a finished job's and task's
//! `result` carry under `cost` and `outcome`, and what the operations API, the chargeback
//! report and the cost counters add up. Typed once here for the delta crate (which measures),
//! the store (which sums stored results) and the daemon (which prices and publishes them).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The operation name probes' costs go under, beside the maintenance operations'.
pub const PROBE_OPERATION: &str = "probe";

/// The kinds of object-store request counted, in the order reports list them.
pub const REQUEST_KINDS: [RequestKind; 5] = [
    RequestKind::Get,
    RequestKind::Put,
    RequestKind::List,
    RequestKind::Head,
    RequestKind::Delete,
];

/// One kind of object-store request (the `kind` label of
/// `tablekeeper_object_store_requests_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RequestKind {
    Get,
    Put,
    List,
    Head,
    Delete,
}

impl RequestKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestKind::Get => "get",
            RequestKind::Put => "put",
            RequestKind::List => "list",
            RequestKind::Head => "head",
            RequestKind::Delete => "delete",
        }
    }
}

/// Object-store requests by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Requests {
    #[serde(default)]
    pub get: u64,
    #[serde(default)]
    pub put: u64,
    #[serde(default)]
    pub list: u64,
    #[serde(default)]
    pub head: u64,
    #[serde(default)]
    pub delete: u64,
}

impl Requests {
    pub fn of(&self, kind: RequestKind) -> u64 {
        match kind {
            RequestKind::Get => self.get,
            RequestKind::Put => self.put,
            RequestKind::List => self.list,
            RequestKind::Head => self.head,
            RequestKind::Delete => self.delete,
        }
    }

    pub fn total(&self) -> u64 {
        REQUEST_KINDS.iter().map(|k| self.of(*k)).sum()
    }

    fn add(&mut self, other: &Requests) {
        self.get += other.get;
        self.put += other.put;
        self.list += other.list;
        self.head += other.head;
        self.delete += other.delete;
    }
}

/// What one job, task or run of probes cost, measured where it happened (the price aside).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Cost {
    /// CPU time its threads used (user + system).
    #[serde(default)]
    pub cpu_seconds: f64,
    /// From its start to its end.
    #[serde(default)]
    pub wall_seconds: f64,
    /// Object-store requests it sent, by kind.
    #[serde(default)]
    pub requests: Requests,
    #[serde(default)]
    pub bytes_read: u64,
    #[serde(default)]
    pub bytes_written: u64,
    /// The measures above at the configured prices (README "Prices"); storage not included.
    #[serde(default)]
    pub estimated_usd: f64,
}

impl Cost {
    /// The sum of two costs. Wall time adds too: the sum of a job's tasks is the time they
    /// ran, not how long the job took.
    pub fn plus(mut self, other: &Cost) -> Cost {
        self.cpu_seconds += other.cpu_seconds;
        self.wall_seconds += other.wall_seconds;
        self.requests.add(&other.requests);
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
        self.estimated_usd += other.estimated_usd;
        self
    }
}

/// A table's shape at one moment, from its log: what a job's outcome compares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TableFigures {
    pub files: Option<u64>,
    pub small_files: Option<u64>,
    pub average_file_bytes: Option<u64>,
    pub bytes: Option<u64>,
    pub commits_since_checkpoint: Option<u64>,
    /// Rows deletion vectors mark deleted but active files still hold.
    pub deleted_rows: Option<u64>,
    /// Bytes on storage only the retention window, pins or clones keep.
    pub retained_bytes: Option<u64>,
}

/// What a job did to its table: the figures before it ran and after it ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Outcome {
    pub before: TableFigures,
    pub after: TableFigures,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_add_up_field_by_field() {
        let a = Cost {
            cpu_seconds: 1.5,
            wall_seconds: 2.0,
            requests: Requests {
                get: 3,
                put: 1,
                ..Requests::default()
            },
            bytes_read: 10,
            bytes_written: 4,
            estimated_usd: 0.25,
        };
        let sum = a.plus(&a);
        assert_eq!(sum.requests.get, 6);
        assert_eq!(sum.requests.total(), 8);
        assert_eq!(sum.bytes_read, 20);
        assert!((sum.cpu_seconds - 3.0).abs() < 1e-9);
    }

    #[test]
    fn a_result_written_before_costs_reads_as_nothing_spent() {
        let cost: Cost = serde_json::from_str("{}").unwrap();
        assert_eq!(cost, Cost::default());
    }
}
