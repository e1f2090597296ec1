//! Identifiers that must not be mixed up with other integers or uuids.

use std::fmt;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The id of a row of `jobs`.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct JobId(pub i64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<i64> for JobId {
    fn from(id: i64) -> Self {
        JobId(id)
    }
}

/// A worker's hold on a running job: the job and the token that fences every write the
/// worker makes to it. A claim hands one out; heartbeat, complete, fail, release and defer
/// take it, so no write can forget the fence. Not serializable: the token is the running
/// worker's credential and never leaves the process.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lease {
    pub job: JobId,
    pub token: Uuid,
}

impl Lease {
    pub fn new(job: JobId, token: Uuid) -> Self {
        Lease { job, token }
    }
}

/// Shows the job only: the token stays out of logs.
impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("job", &self.job)
            .finish_non_exhaustive()
    }
}

/// The fence of a running task (`job_tasks.lease_token`), as [`Lease`] is a job's.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TaskLease {
    pub job: JobId,
    pub task: i32,
    pub token: Uuid,
}

/// Shows the job and task only: the token stays out of logs.
impl fmt::Debug for TaskLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskLease")
            .field("job", &self.job)
            .field("task", &self.task)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_id_is_a_plain_number_in_json() {
        assert_eq!(serde_json::to_string(&JobId(42)).unwrap(), "42");
        assert_eq!(serde_json::from_str::<JobId>("7").unwrap(), JobId(7));
    }

    #[test]
    fn a_lease_never_prints_its_token() {
        let token = Uuid::new_v4();
        let shown = format!("{:?}", Lease::new(JobId(3), token));
        assert!(!shown.contains(&token.to_string()), "{shown}");
        assert!(shown.contains('3'), "{shown}");
    }
}
