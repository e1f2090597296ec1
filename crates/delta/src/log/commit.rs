//! Every commit tablekeeper writes: rewrites (removes and adds, `dataChange: false`) and
//! VACUUM's `VACUUM START` / `VACUUM END` (no file action).
//!
//! deltalake 1.1's commit path refuses every table whose protocol lists a writer feature it
//! does not know (identity columns, row tracking, liquid clustering, domain metadata,
//! in-commit timestamps), so tablekeeper writes its commits itself and meets what those
//! features ask of a commit that moves rows between files without changing them
//! ([`CommitRules`]):
//!
//! - in-commit timestamps (`delta.enableInCommitTimestamps`): `commitInfo` is the first action
//!   and carries an `inCommitTimestamp` strictly greater than the previous commit's;
//! - row tracking (`rowTracking` supported): every added file gets a fresh `baseRowId` above
//!   the table's high-water mark and `defaultRowCommitVersion` = the commit's version, the
//!   `delta.rowTracking` domain's mark advances in the same commit, and removes carry the
//!   file's own `baseRowId` and `defaultRowCommitVersion` (the caller builds them so); a file a
//!   repair adds back as it was keeps its own `baseRowId` and `defaultRowCommitVersion`, so its
//!   rows keep their ids;
//! - identity columns, clustering and domain metadata: the commit writes no `metaData` and no
//!   domain other than row tracking's, so the schema's identity high-water marks and the
//!   clustering columns stay as they are;
//! - collations: a new file's statistics carry no `minValues`/`maxValues` for a column with a
//!   non-binary collation ([`crate::features::collations`]);
//! - IcebergCompat (UniForm): every new file has its `numRecords` and no deletion vector.
//!
//! A commit lands only as the next version (the log store's put-if-absent). When another
//! writer took that version, its commit is read: a rewrite whose removed files that commit
//! also removed (or gave a deletion vector), or that changed the table's metadata or protocol,
//! fails as a commit conflict (the operation's retry loop plans again from a fresh snapshot);
//! otherwise the commit is retried at the version after, its timestamps and row ids computed
//! again. This module never writes `metaData` or `protocol`.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use deltalake::kernel::transaction::{CommitConflictError, TransactionError};
use deltalake::kernel::{Add, EagerSnapshot, Remove};
use deltalake::logstore::object_store::ObjectStore;
use deltalake::logstore::{CommitOrBytes, LogStore};
use deltalake::{DeltaTableError, Path};
use serde_json::{json, Map, Value};
use tablekeeper_vocab::Operation;
use uuid::Uuid;

use crate::error::DeltaError;
use crate::features::collations::{collated_columns, withhold_bounds};
use crate::features::protocol::TableProtocol;
use crate::log::path::decode_path;
use crate::log::read::{
    high_water_mark_of, num_records_of, read_commit, Commit, ROW_TRACKING_DOMAIN,
};
use crate::rewrite::column_mapping::is_mapped;

/// Versions tried after the first before giving up: each lost race means another writer
/// committed in between, which a busy table does a few times at most.
const MAX_RACES: u32 = 16;

/// What the table's features ask of every commit, read from its protocol and properties.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CommitRules {
    /// The table records in-commit timestamps.
    pub in_commit_timestamps: bool,
    /// The table supports row tracking: the highest row id assigned so far (-1 for none).
    pub row_id_high_water_mark: Option<i64>,
    /// Statistics paths of the columns a collation keeps out of `minValues`/`maxValues`.
    pub collated_columns: Vec<Vec<String>>,
    /// The IcebergCompat version in force: new files need `numRecords` and no deletion vector.
    pub iceberg_compat: Option<u8>,
}

impl CommitRules {
    /// The rules of `snapshot`'s table. The row-id high-water mark is the `delta.rowTracking`
    /// domain's, or, where a writer left none, the highest row id any active file holds.
    pub(crate) async fn of(
        uri: &str,
        log_store: &dyn LogStore,
        snapshot: &EagerSnapshot,
    ) -> Result<CommitRules, DeltaError> {
        let protocol = TableProtocol::of_snapshot(uri, snapshot)?;
        let in_commit_timestamps = protocol.in_commit_timestamps();
        let row_tracking = protocol.row_tracking_supported();
        let row_id_high_water_mark = if row_tracking {
            let domain = crate::log::domain::system_domain(
                uri,
                log_store,
                snapshot.version(),
                ROW_TRACKING_DOMAIN,
            )
            .await?;
            let recorded = domain.as_deref().and_then(high_water_mark_of);
            let in_files = crate::snapshot::max_row_id(uri, snapshot)?;
            Some(recorded.unwrap_or(-1).max(in_files.unwrap_or(-1)))
        } else {
            None
        };
        let collated_columns = if protocol.supports_writer_feature("collations") {
            let schema = serde_json::to_value(snapshot.schema().as_ref()).map_err(|err| {
                DeltaError::Internal {
                    table: uri.to_owned(),
                    reason: format!("the table schema does not serialize: {err}"),
                }
            })?;
            collated_columns(&schema, is_mapped(&protocol.properties))
        } else {
            Vec::new()
        };
        Ok(CommitRules {
            in_commit_timestamps,
            row_id_high_water_mark,
            collated_columns,
            iceberg_compat: protocol.iceberg_compat(),
        })
    }
}

/// One commit: its `commitInfo` and its file actions.
#[derive(Debug, Clone)]
pub(crate) struct LogCommit {
    /// `operation`, as Delta names it (`OPTIMIZE`, `VACUUM START`).
    pub operation: &'static str,
    /// `operationParameters`; values are strings, as Delta writes them.
    pub parameters: Map<String, Value>,
    /// `operationMetrics`; values are strings, as Delta writes them.
    pub metrics: Map<String, Value>,
    /// Extra top-level `commitInfo` keys (tablekeeper's run marker).
    pub metadata: HashMap<String, Value>,
    pub removes: Vec<Remove>,
    /// New files: each gets fresh row ids where the table tracks them.
    pub adds: Vec<Add>,
    /// Files added back as they were (a repair): they keep their own row ids.
    pub restores: Vec<Add>,
}

impl LogCommit {
    /// A commit without file actions.
    pub(crate) fn info_only(
        operation: &'static str,
        parameters: Map<String, Value>,
        metrics: Map<String, Value>,
        metadata: HashMap<String, Value>,
    ) -> LogCommit {
        LogCommit {
            operation,
            parameters,
            metrics,
            metadata,
            removes: Vec::new(),
            adds: Vec::new(),
            restores: Vec::new(),
        }
    }

    /// Whether the commit moves files (a rewrite or a repair), as opposed to VACUUM's markers.
    fn has_files(&self) -> bool {
        !self.removes.is_empty() || !self.adds.is_empty() || !self.restores.is_empty()
    }
}

/// Where a commit landed, and how many versions other writers took first (each a commit
/// conflict, counted like deltalake's rebases).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Landed {
    pub version: u64,
    pub races_lost: u32,
    /// The row-id high-water mark after the commit, where the table tracks row ids.
    pub row_id_high_water_mark: Option<i64>,
}

/// Writes `commit` as the version after `after` (or the first free one after it whose
/// predecessors do not conflict with it), meeting `rules`.
pub(crate) async fn write_commit(
    log_store: &dyn LogStore,
    uri: &str,
    operation: Operation,
    after: u64,
    commit: &LogCommit,
    rules: &CommitRules,
) -> Result<Landed, DeltaError> {
    let removed: HashSet<String> = commit
        .removes
        .iter()
        .map(|r| decode_path(&r.path))
        .collect();
    let mut high_water_mark = rules.row_id_high_water_mark;
    let mut version = after + 1;
    let mut previous = None;
    for races_lost in 0..=MAX_RACES {
        if previous
            .as_ref()
            .is_none_or(|p: &Commit| p.version + 1 != version)
        {
            previous = match version.checked_sub(1) {
                Some(v) => read_commit(log_store, uri, v).await?,
                None => None,
            };
        }
        let (bytes, mark_after) = render(
            uri,
            version,
            commit,
            rules,
            previous.as_ref(),
            high_water_mark,
        )?;
        let entry = commit_entry(log_store, uri, bytes).await?;
        match log_store
            .write_commit_entry(version, entry.clone(), Uuid::new_v4())
            .await
        {
            Ok(()) => {
                return Ok(Landed {
                    version,
                    races_lost,
                    row_id_high_water_mark: mark_after,
                })
            }
            Err(TransactionError::VersionAlreadyExists(_)) => {
                let _ = log_store
                    .abort_commit_entry(version, entry, Uuid::new_v4())
                    .await;
                let winner = read_winner(log_store, uri, version, commit, &removed).await?;
                if let Some(mark) = winner.row_id_high_water_mark {
                    high_water_mark = Some(high_water_mark.unwrap_or(-1).max(mark));
                }
                tracing::info!(
                    table = uri,
                    version,
                    operation = commit.operation,
                    "another writer committed this version first; committing at the next"
                );
                previous = Some(winner);
                version += 1;
            }
            Err(err) => {
                return Err(DeltaError::delta(
                    uri,
                    "writing a commit",
                    DeltaTableError::from(err),
                ))
            }
        }
    }
    Err(DeltaError::Conflict {
        table: uri.to_owned(),
        operation,
        attempts: MAX_RACES,
        source: Box::new(DeltaTableError::VersionAlreadyExists(version - 1)),
    })
}

/// The log entry for `bytes`: the bytes themselves where the log store writes them with
/// put-if-absent, else a temporary file it copies into place.
async fn commit_entry(
    log_store: &dyn LogStore,
    uri: &str,
    bytes: Bytes,
) -> Result<CommitOrBytes, DeltaError> {
    if ["LakeFSLogStore", "DefaultLogStore"].contains(&log_store.name().as_str()) {
        return Ok(CommitOrBytes::LogBytes(bytes));
    }
    let tmp = Path::from_iter([
        "_delta_log",
        &format!("_commit_{}.json.tmp", Uuid::new_v4()),
    ]);
    log_store
        .object_store(None)
        .put_opts(&tmp, bytes.into(), Default::default())
        .await
        .map_err(|err| DeltaError::store(uri, "writing a commit", err))?;
    Ok(CommitOrBytes::TmpCommit(tmp))
}

/// The commit another writer landed at `version` first, when `commit` may still follow it;
/// a commit conflict when it removed a file `commit` removes or changed metadata or protocol.
async fn read_winner(
    log_store: &dyn LogStore,
    uri: &str,
    version: u64,
    commit: &LogCommit,
    removed: &HashSet<String>,
) -> Result<Commit, DeltaError> {
    let winner =
        read_commit(log_store, uri, version)
            .await?
            .ok_or_else(|| DeltaError::IncompleteLog {
                table: uri.to_owned(),
                reason: format!(
                    "commit {version} exists (another writer took it) but cannot be read"
                ),
            })?;
    if commit.has_files() {
        if let Some(conflict) = conflict(&winner, removed) {
            tracing::info!(
                table = uri,
                version,
                operation = commit.operation,
                conflict = ?conflict,
                "another writer's commit conflicts with ours; planning again"
            );
            return Err(DeltaError::delta(
                uri,
                "committing the rewrite",
                DeltaTableError::Transaction {
                    source: TransactionError::CommitConflict(conflict),
                },
            ));
        }
    }
    Ok(winner)
}

/// Why `winner` (a commit another writer made after our snapshot) conflicts with a rewrite
/// removing `removed`, if it does.
fn conflict(winner: &Commit, removed: &HashSet<String>) -> Option<CommitConflictError> {
    if winner.changes_metadata {
        return Some(CommitConflictError::MetadataChanged);
    }
    if winner.changes_protocol {
        return Some(CommitConflictError::ProtocolChanged(
            "another writer changed the protocol".into(),
        ));
    }
    winner
        .removes
        .iter()
        .any(|r| removed.contains(&r.path))
        .then_some(CommitConflictError::ConcurrentDeleteDelete)
}

/// The commit's lines: `commitInfo` first (with the in-commit timestamp when the table keeps
/// them: the previous commit's plus one at least), then removes, adds (with fresh row ids
/// where the table tracks them) and the row tracking domain's new mark. Returns them with the
/// mark after the commit.
fn render(
    uri: &str,
    version: u64,
    commit: &LogCommit,
    rules: &CommitRules,
    previous: Option<&Commit>,
    high_water_mark: Option<i64>,
) -> Result<(Bytes, Option<i64>), DeltaError> {
    let unserializable = |err: serde_json::Error| DeltaError::Internal {
        table: uri.to_owned(),
        reason: format!("a commit does not serialize: {err}"),
    };
    let now = chrono::Utc::now().timestamp_millis();
    let mut info = Map::new();
    if rules.in_commit_timestamps {
        let previous = previous.and_then(|c| c.info("inCommitTimestamp").and_then(Value::as_i64));
        let ict = previous.map_or(now, |p| now.max(p + 1));
        info.insert("inCommitTimestamp".into(), json!(ict));
    }
    info.insert("timestamp".into(), json!(now));
    info.insert("operation".into(), json!(commit.operation));
    info.insert(
        "operationParameters".into(),
        Value::Object(commit.parameters.clone()),
    );
    info.insert(
        "operationMetrics".into(),
        Value::Object(commit.metrics.clone()),
    );
    if commit.has_files() {
        info.insert("readVersion".into(), json!(version - 1));
        info.insert("isolationLevel".into(), json!("SnapshotIsolation"));
        info.insert("isBlindAppend".into(), json!(false));
    }
    info.insert(
        "engineInfo".into(),
        json!(format!("tablekeeper/{}", env!("CARGO_PKG_VERSION"))),
    );
    for (key, value) in &commit.metadata {
        info.insert(key.clone(), value.clone());
    }
    let mut out =
        Vec::with_capacity(2 + commit.removes.len() + commit.adds.len() + commit.restores.len());
    out.push(json!({ "commitInfo": info }));
    for remove in &commit.removes {
        out.push(json!({ "remove": serde_json::to_value(remove).map_err(unserializable)? }));
    }
    let mut next_row_id = high_water_mark.map(|mark| mark + 1);
    let restored = commit.restores.iter().map(|add| (add, true));
    for (add, restored) in commit.adds.iter().map(|add| (add, false)).chain(restored) {
        let mut add = add.clone();
        if !restored {
            meet_file_rules(uri, &mut add, rules)?;
        }
        let keeps_ids = restored && add.base_row_id.is_some();
        if let (Some(next), false) = (next_row_id.as_mut(), keeps_ids) {
            let rows = add
                .stats
                .as_deref()
                .and_then(num_records_of)
                .ok_or_else(|| DeltaError::MissingFacts {
                    table: uri.to_owned(),
                    reason: format!(
                        "new file {} has no numRecords statistic, which row tracking needs to \
                         give its rows ids; nothing was committed",
                        add.path
                    ),
                })?;
            add.base_row_id = Some(*next);
            add.default_row_commit_version = Some(i64::try_from(version).unwrap_or(i64::MAX));
            *next += i64::try_from(rows).unwrap_or(i64::MAX);
        }
        out.push(json!({ "add": serde_json::to_value(&add).map_err(unserializable)? }));
    }
    if let (Some(next), Some(before)) = (next_row_id, high_water_mark) {
        if next - 1 > before {
            let configuration = json!({ "rowIdHighWaterMark": next - 1 }).to_string();
            out.push(json!({ "domainMetadata": {
                "domain": ROW_TRACKING_DOMAIN,
                "configuration": configuration,
                "removed": false,
            }}));
        }
    }
    let mut text = String::new();
    for line in out {
        text.push_str(&serde_json::to_string(&line).map_err(unserializable)?);
        text.push('\n');
    }
    Ok((Bytes::from(text), next_row_id.map(|next| next - 1)))
}

/// Meets the rules `rules` sets for a new file: a collation's columns out of its bounds, and
/// IcebergCompat's `numRecords` and no deletion vector (a file that breaks them fails the
/// commit before anything is written).
fn meet_file_rules(uri: &str, add: &mut Add, rules: &CommitRules) -> Result<(), DeltaError> {
    if !rules.collated_columns.is_empty() {
        if let Some(stats) = add
            .stats
            .as_deref()
            .and_then(|stats| withhold_bounds(stats, &rules.collated_columns))
        {
            add.stats = Some(stats);
        }
    }
    if let Some(version) = rules.iceberg_compat {
        let broken = if add.deletion_vector.is_some() {
            Some("has a deletion vector")
        } else if add.stats.as_deref().and_then(num_records_of).is_none() {
            Some("has no numRecords statistic")
        } else {
            None
        };
        if let Some(broken) = broken {
            return Err(DeltaError::MissingFacts {
                table: uri.to_owned(),
                reason: format!(
                    "new file {} {broken}, which icebergCompatV{version} forbids (every added \
                     file needs numRecords and no deletion vector); nothing was committed",
                    add.path
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(path: &str, rows: u64) -> Add {
        Add {
            path: path.into(),
            size: 10,
            stats: Some(format!("{{\"numRecords\":{rows}}}")),
            ..Add::default()
        }
    }

    fn parse((bytes, _): &(Bytes, Option<i64>)) -> Vec<Value> {
        std::str::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn rewrite() -> LogCommit {
        LogCommit {
            operation: "OPTIMIZE",
            parameters: Map::new(),
            metrics: Map::new(),
            metadata: HashMap::new(),
            removes: vec![Remove {
                path: "a.parquet".into(),
                base_row_id: Some(0),
                default_row_commit_version: Some(1),
                ..Remove::default()
            }],
            adds: vec![add("b.parquet", 3), add("c.parquet", 4)],
            restores: Vec::new(),
        }
    }

    #[test]
    fn row_tracked_adds_get_fresh_ids_above_the_mark_and_the_mark_advances() {
        let rules = CommitRules {
            in_commit_timestamps: false,
            row_id_high_water_mark: Some(9),
            ..CommitRules::default()
        };
        let lines = parse(&render("t", 5, &rewrite(), &rules, None, Some(9)).unwrap());
        assert!(lines[0].get("commitInfo").is_some());
        assert_eq!(lines[1]["remove"]["baseRowId"], 0);
        assert_eq!(lines[1]["remove"]["defaultRowCommitVersion"], 1);
        assert_eq!(lines[2]["add"]["baseRowId"], 10);
        assert_eq!(lines[2]["add"]["defaultRowCommitVersion"], 5);
        assert_eq!(lines[3]["add"]["baseRowId"], 13);
        let domain = &lines[4]["domainMetadata"];
        assert_eq!(domain["domain"], ROW_TRACKING_DOMAIN);
        assert_eq!(
            high_water_mark_of(domain["configuration"].as_str().unwrap()),
            Some(16)
        );
        // a table without row tracking gets no ids and no domain
        let plain =
            parse(&render("t", 5, &rewrite(), &CommitRules::default(), None, None).unwrap());
        assert_eq!(plain.len(), 4);
        assert!(plain[2]["add"]["baseRowId"].is_null());
    }

    #[test]
    fn restored_files_keep_their_row_ids_and_new_ones_get_fresh_ids() {
        let rules = CommitRules {
            in_commit_timestamps: false,
            row_id_high_water_mark: Some(9),
            ..CommitRules::default()
        };
        let mut commit = rewrite();
        commit.adds.truncate(1);
        let mut kept = add("kept.parquet", 5);
        kept.base_row_id = Some(2);
        kept.default_row_commit_version = Some(3);
        // restated by a writer that tracked no row ids yet: it gets fresh ones
        commit.restores = vec![kept, add("untracked.parquet", 2)];
        let lines = parse(&render("t", 6, &commit, &rules, None, Some(9)).unwrap());
        assert_eq!(lines[2]["add"]["path"], "b.parquet");
        assert_eq!(lines[2]["add"]["baseRowId"], 10);
        assert_eq!(lines[3]["add"]["path"], "kept.parquet");
        assert_eq!(lines[3]["add"]["baseRowId"], 2);
        assert_eq!(lines[3]["add"]["defaultRowCommitVersion"], 3);
        assert_eq!(lines[4]["add"]["baseRowId"], 13);
        assert_eq!(lines[4]["add"]["defaultRowCommitVersion"], 6);
        assert_eq!(
            high_water_mark_of(
                lines[5]["domainMetadata"]["configuration"]
                    .as_str()
                    .unwrap()
            ),
            Some(14)
        );
    }

    #[test]
    fn in_commit_timestamps_come_first_and_increase() {
        let rules = CommitRules {
            in_commit_timestamps: true,
            ..CommitRules::default()
        };
        let future = chrono::Utc::now().timestamp_millis() + 3_600_000;
        let previous = Commit::parse(
            4,
            format!("{{\"commitInfo\":{{\"inCommitTimestamp\":{future}}}}}\n").as_bytes(),
        )
        .unwrap();
        let written = parse(&render("t", 5, &rewrite(), &rules, Some(&previous), None).unwrap());
        assert_eq!(written[0]["commitInfo"]["inCommitTimestamp"], future + 1);
    }

    #[test]
    fn conflicts_are_removed_files_and_metadata_changes() {
        let removed: HashSet<String> = ["a b.parquet".to_owned()].into();
        let other = |line: &str| Commit::parse(7, line.as_bytes()).unwrap();
        assert!(conflict(
            &other(r#"{"remove":{"path":"a%20b.parquet","dataChange":true}}"#),
            &removed
        )
        .is_some());
        assert!(conflict(
            &other(r#"{"add":{"path":"new.parquet","dataChange":true}}"#),
            &removed
        )
        .is_none());
        assert!(matches!(
            conflict(&other(r#"{"metaData":{"id":"x"}}"#), &removed),
            Some(CommitConflictError::MetadataChanged)
        ));
    }
}
