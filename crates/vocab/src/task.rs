//! The job-task contract: what `job_tasks.input` and `job_tasks.result` hold, typed once for
//! every crate that reads or writes them — the store (which adds up task sizes for progress),
//! the daemon's coordinator and task runner, and `tablekeeper maintain`.
//!
//! The rewrite's own unit (the files of one partition) and its report belong to the delta
//! crate; they travel here as type parameters, so each reader names the view it needs: the
//! store reads a [`TaskSpec<TaskSize>`], the daemon a `TaskSpec<TaskInput>`.

use serde::{Deserialize, Serialize};

/// What `job_tasks.input` holds: the rewrite's unit (its fields at the top level), the table
/// version it was planned at, and the earlier tasks (re-planned ones) it takes over from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSpec<U> {
    #[serde(flatten)]
    pub unit: U,
    pub version: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaces: Vec<i32>,
}

/// The part of a task's unit every reader may rely on: the input bytes it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSize {
    pub bytes: u64,
}

/// What a succeeded task's `result` holds: the worker that ran it, what its rewrite
/// reported (written as the whole report, read back as the part a job adds up) and what it
/// cost (DESIGN "Cost and outcome"; nothing for a result written before costs were measured).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskOutcome<R> {
    pub worker_id: String,
    pub report: R,
    #[serde(default)]
    pub cost: crate::Cost,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reader_reads_its_view_of_one_record() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Unit {
            partition: String,
            bytes: u64,
        }
        let spec = TaskSpec {
            unit: Unit {
                partition: "day=1".into(),
                bytes: 42,
            },
            version: 7,
            replaces: vec![],
        };
        let stored = serde_json::to_value(&spec).unwrap();
        assert_eq!(
            stored,
            serde_json::json!({"partition": "day=1", "bytes": 42, "version": 7})
        );
        let size: TaskSpec<TaskSize> = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(size.unit.bytes, 42);
        let back: TaskSpec<Unit> = serde_json::from_value(stored).unwrap();
        assert_eq!(back, spec);
        // a record without the size is an error, not a zero
        assert!(serde_json::from_value::<TaskSpec<TaskSize>>(
            serde_json::json!({"partition": "p", "version": 1})
        )
        .is_err());
    }
}
