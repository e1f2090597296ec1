//! What adding a table to the inventory, or removing one, does (`plan --base`).
//!
//! A new table: whether it reads, what its first scheduled compaction will rewrite (a dry
//! run of the very plan the job would make), and every refusal it will meet (unsupported
//! table features, DynamoDB-locked writers, a Z-order on a clustered table: the planner's own
//! gates). A removed table: which maintenance stops, and how fast its storage grows once
//! VACUUM stops reclaiming the files its writers remove.

use chrono::{DateTime, Utc};
use tablekeeper_delta::{OpReport, Probe};
use tablekeeper_inventory::{Operation, TableSpec};

use crate::config::Prices;
use crate::fleet::ProbeFailure;
use crate::jobs::executor::ExecError;
use crate::policy::planner::{self, Decision, Need, Probed};
use crate::review::model::{Consequence, Kind, Severity};
use crate::review::runs::runs_per_day;

/// A table the change adds.
pub(crate) fn added(
    spec: &TableSpec,
    probe: &Result<Probe, ProbeFailure>,
    first_compaction: Option<&Result<OpReport, ExecError>>,
    now: DateTime<Utc>,
) -> Vec<Consequence> {
    let probe = match probe {
        Ok(probe) => probe,
        Err(failure) => return vec![unreadable(failure)],
    };
    let mut out = vec![Consequence::new(
        Kind::FirstMaintenance,
        Severity::Info,
        format!(
            "reads: version {}, {} file(s) ({} small), {}",
            probe.version,
            probe.files,
            probe.small_files,
            bytes(probe.size_bytes)
        ),
    )];
    match first_compaction {
        Some(Ok(report)) if report.files_removed > 0 => out.push(Consequence::new(
            Kind::FirstMaintenance,
            Severity::Info,
            format!(
                "the first compaction rewrites {} small file(s), {}, in {} partition(s); estimated time and cost: not measured yet",
                report.files_removed,
                bytes(report.bytes_removed),
                report.partitions_touched.len().max(1)
            ),
        )),
        Some(Ok(report)) => out.push(Consequence::new(
            Kind::FirstMaintenance,
            Severity::Info,
            format!(
                "the first compaction finds nothing to rewrite{}",
                report
                    .skipped
                    .as_deref()
                    .map_or_else(String::new, |why| format!(": {why}"))
            ),
        )),
        Some(Err(e)) => out.push(Consequence::new(
            Kind::Refusal,
            Severity::Warning,
            format!("compaction: {e}"),
        )),
        None => {}
    }
    for op in Operation::SCHEDULED
        .into_iter()
        .filter(|op| spec.operation_enabled(*op))
    {
        if let Decision::Refuse(reason) =
            planner::admit(spec, op, Probed::Read(probe), Need::Forced, now)
        {
            out.push(Consequence::new(
                Kind::Refusal,
                Severity::Warning,
                format!("{op} will be refused: {reason}"),
            ));
        }
    }
    out
}

/// A table the change removes.
pub(crate) fn removed(
    spec: &TableSpec,
    probe: &Result<Probe, ProbeFailure>,
    prices: &Prices,
    now: DateTime<Utc>,
) -> Vec<Consequence> {
    let stopping: Vec<String> = Operation::SCHEDULED
        .into_iter()
        .filter(|op| runs_per_day(spec, *op, now) > 0.0)
        .map(|op| op.to_string())
        .collect();
    let mut out = vec![Consequence::new(
        Kind::Stops,
        Severity::Warning,
        format!(
            "tablekeeper stops maintaining `{}`: {} no longer run{}; its history is no longer recorded in table_commits, and its metrics and alerts go away (its files and log stay as they are)",
            spec.name,
            if stopping.is_empty() { "nothing scheduled would".to_owned() } else { stopping.join(", ") },
            if stopping.len() == 1 { "s" } else { "" }
        ),
    )];
    let growth = match probe {
        Ok(p) => p.restore_drill.as_ref().map(|drill| {
            // what the window holds now, spread over the window: what VACUUM reclaims a day
            let days = (spec.vacuum_window().as_secs_f64() / 86_400.0).max(1.0);
            (drill.retained_bytes.window as f64 / days) as u64
        }),
        Err(failure) => {
            out.push(unreadable(failure));
            None
        }
    };
    out.push(Consequence::new(
        Kind::Stops,
        Severity::Info,
        match growth {
            Some(per_day) => format!(
                "VACUUM stops reclaiming its removed files: storage grows by about {} a day (what the {} window holds now, spread over it), about ${:.2} more a month for every month it stays",
                bytes(per_day),
                humantime::format_duration(spec.vacuum_window()),
                prices.storage_per_month(per_day.saturating_mul(30))
            ),
            None => "VACUUM stops reclaiming its removed files; how fast storage then grows is not known (no restore drill sized the window yet)".into(),
        },
    ));
    out
}

fn unreadable(failure: &ProbeFailure) -> Consequence {
    Consequence::new(
        Kind::Unreadable,
        Severity::Warning,
        format!(
            "the table cannot be read ({}): {}",
            failure.kind.as_str(),
            failure.message
        ),
    )
}

fn bytes(b: u64) -> String {
    bytesize::ByteSize(b).display().iec().to_string()
}
