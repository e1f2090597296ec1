//! Probing a table's health from its log alone.
//!
//! Owns [`Prober`], which keeps probed tables loaded so a re-probe only applies the new
//! commits (deltalake's incremental snapshot update) and reads only the new commit files for
//! history. A probe never opens a data file. Loaded snapshots are capped
//! ([`Prober::with_loaded_snapshots`]): past the cap, the tables with the fewest active files
//! (the cheapest to load again) are unloaded and reopened at their next probe; what the
//! history told us so far is kept for every table, so their history reads stay incremental.
//!
//! History (`created_at`, `last_*_at`, `commits_per_hour`) comes from the JSON commits still on
//! disk: log cleanup (`delta.logRetentionDuration`, 30 days by default) erases older ones, so
//! a table whose last OPTIMIZE is older than its log retention reports `last_optimize_at: null`
//! after a restart. Persist what staleness needs in the job store.
//!
//! Every commit the prober reads also feeds the stale-write watch ([`crate::watch::stale`]) and the
//! list of full overwrites by other writers, and becomes a [`CommitRecord`] waiting in
//! [`Prober::take_history`] for the caller to persist (`table_commits`), so history outlives
//! the log at no extra request.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use deltalake::DeltaTable;
use serde::{Deserialize, Serialize};

use crate::error::DeltaError;
use crate::features::protocol::TableProtocol;
use crate::log::history::CommitRecord;
use crate::log::iceberg::{iceberg_view, IcebergView};
use crate::log::read::{commits_after, commits_since, last_checkpoint, LastCheckpoint};
use crate::log::read::{list_log, partition_key, read_commits, Commit};
use crate::open::open_table;
use crate::probe::drill::{DrillOptions, RestoreDrill};
use crate::probe::erasure::ErasureLedger;
use crate::probe::presence::explain_load_failure;
use crate::rewrite::compact::{small_file_threshold, DEFAULT_SMALL_FILE_FACTOR};
use crate::rewrite::zorder::{files_added_since, FilesAddedSince};
use crate::snapshot::{active_files, ActiveFile, LiveFiles};
use crate::watch::stale::{count_stale_rows, StaleWatch, StaleWrite, DEFAULT_STALE_WATCH};

/// One hour, the window of `commits_per_hour`.
const HOUR_MS: i64 = 3_600_000;

/// How often a probe lists the table to re-check that every active file exists while the
/// table's version moves ([`ProbeOptions::presence_every`]); files added in between are
/// checked at the probe that first sees them.
pub const DEFAULT_PRESENCE_EVERY: Duration = Duration::from_secs(3600);

/// A probe that finds more files added since the last listing than this lists the table
/// again instead of asking for each one.
const MAX_FILES_ASKED_FOR: usize = 100;

/// First damage checks a prober runs beside the probes at once (each one listing of a table).
pub const FIRST_CHECKS_AT_ONCE: usize = 2;

/// First history reads a prober leaves running beside the probes at once (each one read of a
/// table's whole log, held in memory until the next probe takes it); past that a probe waits
/// for its table's read.
pub const FIRST_HISTORIES_AT_ONCE: usize = 2;

/// How often it re-checks a table whose version has not moved since the last check
/// ([`ProbeOptions::presence_idle_every`]).
pub const DEFAULT_PRESENCE_IDLE_EVERY: Duration = Duration::from_secs(6 * 3600);

/// What counts as a small file, and how often files are checked for presence.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// The table's target file size, in bytes.
    pub target_file_size: u64,
    /// A file is small when under `small_file_factor × target_file_size`
    /// (default [`DEFAULT_SMALL_FILE_FACTOR`], 0.75).
    pub small_file_factor: f64,
    /// A probe lists the table's files to find active files missing from storage (the
    /// damage check) on the first probe, then at most this often while the table is
    /// intact, and on every probe while it is damaged. The listing costs one LIST request
    /// per 1,000 objects, so it is not repeated on every probe of a large table: in between,
    /// each probe asks for the files added since the last check (one HEAD each, up to
    /// [`MAX_FILES_ASKED_FOR`]). Every maintenance operation runs the full check itself
    /// before it changes anything.
    pub presence_every: Duration,
    /// The same for a table whose version has not moved since its last check (default
    /// [`DEFAULT_PRESENCE_IDLE_EVERY`]): only someone deleting files by hand or a bucket
    /// lifecycle rule can damage it, so an idle table's probe stays one small LIST of its
    /// log and the listing comes a few times a day.
    pub presence_idle_every: Duration,
    /// How long after a tablekeeper rewrite its removed files are watched for stale writes,
    /// and how far back full overwrites by other writers are listed
    /// (default [`DEFAULT_STALE_WATCH`]).
    pub stale_watch: Duration,
    /// Now, for the presence schedule; `None` reads the system clock (tests inject one).
    pub now: Option<Instant>,
    /// The restore drill's inputs; `None`: no drill (see [`crate::probe::drill`]).
    pub drill: Option<DrillOptions>,
    /// Run a table's first damage check and its first history read beside its first probe
    /// instead of inside it (default `false`).
    ///
    /// - The damage check: the probe returns its figures without waiting for the listing (on
    ///   a table of 100,000 files the listing is most of a cold probe), with
    ///   [`Probe::damage_check_pending`] set, and a missing file is reported by the first
    ///   probe after the listing ends. At most [`FIRST_CHECKS_AT_ONCE`] run at once per
    ///   prober; past that the check runs inside the probe.
    /// - The history: every JSON commit of the log is read for it, which on a long log takes
    ///   longer than deltalake's load (which reads from the checkpoint on). A probe whose
    ///   read has not ended says [`Probe::history_pending`] and leaves the history fields
    ///   empty; the first probe after the read ends fills them. At most
    ///   [`FIRST_HISTORIES_AT_ONCE`] are left running per prober; past that the probe waits.
    ///
    /// The daemon sets it (it probes such a table again within seconds, and holds the
    /// operations that guard on the history meanwhile); one-shot callers (`plan`,
    /// `maintain`) do not.
    pub first_sight_beside: bool,
}

impl ProbeOptions {
    /// Options for `target_file_size` with the default small-file factor.
    pub fn for_target(target_file_size: u64) -> Self {
        ProbeOptions {
            target_file_size,
            small_file_factor: DEFAULT_SMALL_FILE_FACTOR,
            presence_every: DEFAULT_PRESENCE_EVERY,
            presence_idle_every: DEFAULT_PRESENCE_IDLE_EVERY,
            stale_watch: DEFAULT_STALE_WATCH,
            now: None,
            drill: None,
            first_sight_beside: false,
        }
    }
}

/// A commit by another writer the planner and operators must know of: a full overwrite (see
/// [`crate::watch::stale`]), or a rewrite by another engine (compaction, Z-order, purge).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ForeignCommit {
    pub version: i64,
    pub committed_at: Option<DateTime<Utc>>,
    pub operation: Option<String>,
    pub engine_info: Option<String>,
}

/// At most this many recent overwrites, and as many recent foreign rewrites, are listed in a
/// probe (the newest).
const LISTED_OVERWRITES: usize = 10;

/// Commits read since the last [`Prober::take_history`], for `table_commits`.
#[derive(Debug, Clone, Default)]
pub struct HistoryBatch {
    /// Records in version order.
    pub commits: Vec<CommitRecord>,
}

/// What a probe learns from reading every JSON commit still in the log (the history read),
/// beside the snapshot's figures: when the table was made and last written, the last
/// maintenance by anyone, stale writes, other writers' overwrites and rewrites, erasure. One
/// struct, so a probe whose history read is still running takes the last complete history
/// whole ([`Probe::fill_history_from`]) and no field can be left behind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct ProbeHistory {
    /// Timestamp of commit 0, or of the oldest commit still on disk (see `history_from_version`).
    pub created_at: Option<DateTime<Utc>>,
    /// Oldest JSON commit still on disk; history fields cover only what follows it.
    pub history_from_version: Option<i64>,
    pub last_commit_at: Option<DateTime<Utc>>,
    /// Commits whose timestamp falls in the hour before the probe.
    pub commits_per_hour: u64,
    /// Newest OPTIMIZE (compaction or Z-order), by anyone.
    pub last_optimize_at: Option<DateTime<Utc>>,
    /// Newest OPTIMIZE with a non-empty `operationParameters.zOrderBy`.
    pub last_zorder_at: Option<DateTime<Utc>>,
    /// Its version: pass it as `ZorderOptions::since_version`.
    pub last_zorder_version: Option<i64>,
    /// Newest `VACUUM START` or `VACUUM END`.
    pub last_vacuum_at: Option<DateTime<Utc>>,
    /// Stale writes found in the watch window: pending ones until repaired, repaired ones
    /// until the window passes (see [`crate::watch::stale`]).
    pub stale_writes: Vec<StaleWrite>,
    /// Full overwrites by other writers inside the watch window, newest first (at most 10).
    pub recent_overwrites: Vec<ForeignCommit>,
    /// Rewrites (compaction, Z-order, purge) by engines other than tablekeeper inside the
    /// watch window, newest first (at most 10): only one engine may rewrite a table.
    pub recent_foreign_rewrites: Vec<ForeignCommit>,
    /// Time of the oldest deletion whose rows storage still holds (see [`crate::probe::erasure`]);
    /// `None` when every deleted row is physically gone.
    pub erasure_pending_since: Option<DateTime<Utc>>,
    /// The version of that deletion, when its commit is still on disk.
    pub erasure_pending_version: Option<i64>,
    /// When the last file holding deleted rows left the table (a purge, or a copy-on-write
    /// delete): VACUUM may delete every such file once this is older than the retention.
    pub erasure_last_removal_at: Option<DateTime<Utc>>,
    /// Commit time of the newest commit still in the log that removed a file named by
    /// absolute path (a clone compacted, its source's files replaced by its own): versions
    /// before it still need the other table's files, so the table counts as a referrer while
    /// such a version can be inside its own VACUUM window ([`Probe::references_others`]).
    pub last_external_remove_at: Option<DateTime<Utc>>,
    /// A read of the whole log ended and the fields above are what it found; false while a
    /// table's first history read still runs and no earlier one is known (the fields then read
    /// empty: no creation time, no deletion pending, no commits in the last hour, which is
    /// not what the log says). See [`Probe::history_known`].
    pub read: bool,
}

/// A table's state as read from its log.
/// `Deserialize` lets callers keep probes (and tests build them) as JSON.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Probe {
    /// The table uri.
    pub table: String,
    /// Latest version.
    pub version: i64,
    pub probed_at: DateTime<Utc>,
    /// What the history read found (flattened: the same keys at the top level of the JSON).
    #[serde(flatten)]
    pub history: ProbeHistory,
    /// Active data files.
    pub files: u64,
    pub size_bytes: u64,
    /// Files under `small_file_threshold_bytes`.
    pub small_files: u64,
    pub small_file_threshold_bytes: u64,
    /// Bytes of the small files (what compacting all of them would read).
    #[serde(default)]
    pub small_file_bytes: u64,
    /// Small files per partition key (`col=value[/col=value]`, `""` when unpartitioned).
    pub small_files_by_partition: BTreeMap<String, u64>,
    /// Commits after the newest checkpoint (all commits when there is none).
    pub commits_since_checkpoint: u64,
    pub last_checkpoint_version: Option<i64>,
    /// When `_last_checkpoint` was last written.
    pub last_checkpoint_at: Option<DateTime<Utc>>,
    pub properties: HashMap<String, String>,
    pub min_reader_version: i32,
    pub min_writer_version: i32,
    pub reader_features: Vec<String>,
    pub writer_features: Vec<String>,
    pub partition_columns: Vec<String>,
    pub deletion_vectors_enabled: bool,
    /// Active files carrying a deletion vector.
    #[serde(default)]
    pub files_with_deletion_vectors: u64,
    /// Rows those files hold (their statistics' `numRecords`), deleted ones included.
    #[serde(default)]
    pub rows_in_files_with_deletion_vectors: u64,
    /// Rows marked deleted by deletion vectors but still inside active files.
    #[serde(default)]
    pub deleted_rows: u64,
    /// Active files the log names by absolute path, outside the table's root (a shallow
    /// clone's files in its source): VACUUM of the other table must keep them.
    #[serde(default)]
    pub external_files: u64,
    /// The last restore drill: whether every version owed still restores, and what keeping
    /// them costs; `None` before the first one.
    #[serde(default)]
    pub restore_drill: Option<RestoreDrill>,
    /// The table's first damage check is still running beside the probes
    /// ([`ProbeOptions::first_sight_beside`]): no listing has yet proved every active file
    /// present. Its verdict comes with the first probe after it ends.
    #[serde(default)]
    pub damage_check_pending: bool,
    /// The table's first history read (every JSON commit of its log) still runs beside the
    /// probes ([`ProbeOptions::first_sight_beside`]): the history ([`ProbeHistory`]) is not
    /// known yet and reads empty, and no restore drill ran.
    /// The file figures, protocol and checkpoint are complete. The first probe after the read
    /// ends fills the history.
    #[serde(default)]
    pub history_pending: bool,
    /// UniForm is on (`delta.universalFormat.enabledFormats` names `iceberg`): the table's
    /// writer generates Iceberg metadata after its commits.
    #[serde(default)]
    pub uniform_iceberg: bool,
    /// The Iceberg metadata Iceberg readers are given, on a table with UniForm or IcebergCompat
    /// on that has any ([`crate::log::iceberg`]).
    #[serde(default)]
    pub iceberg: Option<IcebergView>,
}

impl Probe {
    /// Whether a version inside a VACUUM window of `window` ending at `now` may reference
    /// another table's files: an active file does, or one was removed after the window's
    /// start (the version the window starts from, the newest at or before it, may be older
    /// than that removal and still hold it).
    pub fn references_others(&self, window: std::time::Duration, now: DateTime<Utc>) -> bool {
        if self.external_files > 0 {
            return true;
        }
        let window = chrono::Duration::from_std(window).unwrap_or(chrono::Duration::MAX);
        self.history.last_external_remove_at.is_some_and(|removed| {
            removed
                .checked_add_signed(window)
                .is_none_or(|end| end > now)
        })
    }

    /// Takes the history fields of `known` (an earlier probe of the same table) while this
    /// probe's own history is still being read ([`Probe::history_pending`] stays set): what
    /// the history said then stands until the read ends, rather than reading empty. A `known`
    /// that was itself pending passes on what it holds: the complete history it took in turn,
    /// or nothing (a read that has never ended), so a history read that spans several probes
    /// keeps the last complete history for all of them.
    pub fn fill_history_from(&mut self, known: &Probe) {
        if !self.history_pending || known.table != self.table {
            return;
        }
        self.history = known.history.clone();
        // a probe stored before `read` was recorded says so by not being pending
        self.history.read = known.history_known();
        if self.restore_drill.is_none() {
            self.restore_drill = known.restore_drill.clone();
        }
    }

    /// Whether the history fields describe the table's log: its own history read ended, or it
    /// took the history of an earlier probe whose read had. Figures derived from the history
    /// (erasure pending, commits per hour, the last maintenance read from the log) are
    /// unknown, not zero, until then.
    pub fn history_known(&self) -> bool {
        !self.history_pending || self.history.read
    }

    /// Stale writes not repaired yet.
    pub fn pending_stale_writes(&self) -> impl Iterator<Item = &StaleWrite> {
        self.history.stale_writes.iter().filter(|w| w.pending())
    }

    /// The protocol facts, for [`crate::check_maintainable`].
    pub fn protocol(&self) -> TableProtocol {
        TableProtocol {
            table: self.table.clone(),
            min_reader_version: self.min_reader_version,
            min_writer_version: self.min_writer_version,
            reader_features: self.reader_features.clone(),
            writer_features: self.writer_features.clone(),
            properties: self.properties.clone(),
            partition_columns: self.partition_columns.clone(),
        }
    }
}

/// Facts accumulated from the commits read so far.
#[derive(Debug)]
struct History {
    /// Highest version whose commit has been read.
    scanned_to: Option<u64>,
    first: Option<(u64, i64)>,
    last_commit: Option<(u64, i64)>,
    /// (version, timestamp) of commits in the last hour, oldest first.
    recent: VecDeque<(u64, i64)>,
    last_optimize: Option<(u64, i64)>,
    last_zorder: Option<(u64, i64)>,
    last_vacuum: Option<(u64, i64)>,
    stale: StaleWatch,
    /// Stale writes whose rows were counted (or could not be).
    stale_counted: std::collections::BTreeSet<i64>,
    /// Full overwrites by other writers inside the watch window, oldest first.
    overwrites: VecDeque<ForeignCommit>,
    /// Rewrites by other engines inside the watch window, oldest first.
    foreign_rewrites: VecDeque<ForeignCommit>,
    watch_ms: i64,
    /// Records not yet taken by [`Prober::take_history`].
    unrecorded: Vec<CommitRecord>,
    erasure: ErasureLedger,
    /// Whether any commit read removed a file: until one does, every version's files are
    /// the current version's (the restore drill then has nothing to prove beyond the damage
    /// check).
    removed_files: bool,
    /// (version, time) of the newest commit that removed a file named by absolute path.
    last_external_remove: Option<(u64, i64)>,
}

fn newer(slot: &mut Option<(u64, i64)>, version: u64, ts: i64) {
    if slot.is_none_or(|(v, _)| version > v) {
        *slot = Some((version, ts));
    }
}

impl History {
    fn new(watch: Duration) -> Self {
        History {
            scanned_to: None,
            first: None,
            last_commit: None,
            recent: VecDeque::new(),
            last_optimize: None,
            last_zorder: None,
            last_vacuum: None,
            stale: StaleWatch::new(watch),
            stale_counted: Default::default(),
            overwrites: VecDeque::new(),
            foreign_rewrites: VecDeque::new(),
            watch_ms: i64::try_from(watch.as_millis()).unwrap_or(i64::MAX),
            unrecorded: Vec::new(),
            erasure: ErasureLedger::default(),
            removed_files: false,
            last_external_remove: None,
        }
    }

    fn absorb(&mut self, commit: &Commit) {
        let version = commit.version;
        self.removed_files |= !commit.removes.is_empty();
        if let Some(record) = CommitRecord::of(commit) {
            self.unrecorded.push(record);
        }
        let Some(ts) = commit.committed_ms() else {
            return;
        };
        if commit
            .removes
            .iter()
            .any(|remove| crate::log::references::is_absolute(&remove.path))
        {
            newer(&mut self.last_external_remove, version, ts);
        }
        if self.first.is_none_or(|(v, _)| version < v) {
            self.first = Some((version, ts));
        }
        newer(&mut self.last_commit, version, ts);
        self.recent.push_back((version, ts));
        match commit.operation() {
            Some("OPTIMIZE") => {
                newer(&mut self.last_optimize, version, ts);
                if commit.is_zorder() {
                    newer(&mut self.last_zorder, version, ts);
                }
            }
            Some("VACUUM START" | "VACUUM END") => newer(&mut self.last_vacuum, version, ts),
            _ => {}
        }
        self.stale.absorb(commit, ts);
        self.erasure.absorb(commit, ts);
        let foreign = || ForeignCommit {
            version: to_i64(version),
            committed_at: millis_to_time(ts),
            operation: commit.operation().map(str::to_owned),
            engine_info: commit.engine().map(str::to_owned),
        };
        if commit.is_full_overwrite() {
            self.overwrites.push_back(foreign());
        }
        if commit.is_rewrite() && commit.marker().is_none() {
            self.foreign_rewrites.push_back(foreign());
        }
        self.scanned_to = Some(self.scanned_to.map_or(version, |s| s.max(version)));
    }

    /// Drops commits older than an hour before `now_ms` and counts the rest.
    fn commits_in_last_hour(&mut self, now_ms: i64) -> u64 {
        self.recent.retain(|(_, ts)| *ts > now_ms - HOUR_MS);
        self.recent.len() as u64
    }

    /// Forgets stale-write and overwrite facts older than the watch window.
    fn prune(&mut self, now_ms: i64) {
        self.stale.prune();
        let horizon = now_ms.saturating_sub(self.watch_ms);
        let recent = |c: &ForeignCommit| {
            c.committed_at
                .is_some_and(|t| t.timestamp_millis() >= horizon)
        };
        self.overwrites.retain(recent);
        self.foreign_rewrites.retain(recent);
    }
}

/// What a probe reads of a table's files, kept at the newest version probed. A re-probe
/// applies the new commits to it (read once, for history too) instead of updating deltalake's
/// snapshot and walking every active file again; the snapshot is brought to this version only
/// when something needs it (a listing, the restore drill, Z-order scoping).
#[derive(Debug)]
struct Live {
    version: u64,
    files: LiveFiles,
    /// Protocol, metadata and partition columns: a commit changing them reloads the snapshot.
    protocol: TableProtocol,
    /// Partition columns' logical names by physical name (column-mapped tables).
    names: HashMap<String, String>,
}

impl Live {
    /// The loaded table's files, walked once.
    async fn of(uri: &str, table: &DeltaTable) -> Result<Live, DeltaError> {
        let snapshot = table
            .snapshot()
            .map_err(|err| DeltaError::delta(uri, "reading the snapshot", err))?;
        Ok(Live {
            version: crate::open::loaded_version(uri, table)?,
            names: crate::rewrite::column_mapping::partition_names(snapshot.snapshot()),
            protocol: TableProtocol::of(uri, table)?,
            files: LiveFiles::new(active_files(table, uri).await?),
        })
    }
}

/// Every JSON commit the log held at a table's first sight, read for its history.
#[derive(Debug)]
struct WholeLog {
    /// The commit versions listed, ascending.
    listed: Vec<u64>,
    /// The commits read (one removed by log cleanup after the listing is absent).
    commits: Vec<Commit>,
}

impl WholeLog {
    async fn read(
        store: deltalake::logstore::ObjectStoreRef,
        log_store: deltalake::logstore::LogStoreRef,
        uri: String,
    ) -> Result<WholeLog, DeltaError> {
        let listing = list_log(store.as_ref(), &uri).await?;
        let listed: Vec<u64> = listing.commits.keys().copied().collect();
        let commits = read_commits(log_store.as_ref(), &uri, listed.iter().copied())
            .await?
            .into_iter()
            .filter_map(|(_, commit)| commit)
            .collect();
        Ok(WholeLog { listed, commits })
    }
}

/// The read of a table's whole log for its history, started beside its first load.
#[derive(Debug)]
struct FirstHistory {
    read: tokio_util::task::AbortOnDropHandle<Result<WholeLog, DeltaError>>,
    /// A slot of [`FIRST_HISTORIES_AT_ONCE`] while the read may run on beside the probes
    /// (taken at the load, or by a probe that would otherwise wait for it); given back when a
    /// probe takes the read.
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl FirstHistory {
    fn start(uri: &str, table: &DeltaTable) -> Self {
        FirstHistory {
            read: tokio_util::task::AbortOnDropHandle::new(crate::cost::scope::spawn(
                WholeLog::read(table.object_store(), table.log_store(), uri.to_owned()),
            )),
            slot: None,
        }
    }

    /// The log read, waiting for it unless a slot of `beside` lets it run on; `Err(self)`
    /// while it runs on.
    async fn take(
        mut self,
        uri: &str,
        beside: Option<&Arc<tokio::sync::Semaphore>>,
    ) -> Result<Result<WholeLog, FirstHistory>, DeltaError> {
        if !self.read.is_finished() {
            if self.slot.is_none() {
                self.slot = beside.and_then(|slots| Arc::clone(slots).try_acquire_owned().ok());
            }
            if self.slot.is_some() {
                return Ok(Err(self));
            }
        }
        let whole = self.read.await.map_err(|err| DeltaError::Internal {
            table: uri.to_owned(),
            reason: format!("reading the log for the table's history did not finish: {err}"),
        })??;
        Ok(Ok(whole))
    }
}

/// The first damage check of a table, running beside its probes.
#[derive(Debug)]
struct FirstCheck {
    /// When it started, and the version whose files it checks.
    started: Instant,
    version: u64,
    check: tokio::task::JoinHandle<Result<(), DeltaError>>,
}

/// A table, loaded or not, and what its history told us so far.
#[derive(Debug)]
struct Tracked {
    /// `None` once unloaded to stay under the cap; reopened at the next probe. Its snapshot
    /// may be older than `live` (see [`Live`]). Boxed, as `live` is: most of a large fleet is
    /// unloaded, and an unloaded table then costs a pointer, not the structs' inline size.
    table: Option<Box<DeltaTable>>,
    /// `None` while `table` is.
    live: Option<Box<Live>>,
    /// Commits read while catching up and not yet taken into the history.
    fresh: Vec<Commit>,
    /// The log read at first sight beside the load, until the history takes it.
    whole_log: Option<FirstHistory>,
    /// The first damage check, while it runs beside the probes.
    first_check: Option<FirstCheck>,
    /// Whether a damage check (a listing) ever started for this table in this prober.
    checked_once: bool,
    history: History,

    /// When the last damage check (a listing) found every file present, and at which version.
    presence_ok_at: Option<(Instant, u64)>,
    /// Data files added by the commits read since then, not yet seen in storage.
    unverified: HashSet<String>,
    /// `_last_checkpoint` as read at a version: re-read only when the version moves, so an
    /// idle table's probe is the one LIST of its log that finds nothing new.
    checkpoint_at: Option<(u64, Option<LastCheckpoint>)>,
    /// The last restore drill, and when it ran.
    drill: Option<(Instant, RestoreDrill)>,
    /// The Iceberg view as read at a version: listed again when the version moves, and at
    /// every probe while it lags behind (until the writer's converter catches up); its newest
    /// metadata file is read only when it is a new one.
    iceberg_at: Option<(u64, Option<IcebergView>)>,
}

/// How many tables a [`Prober`] keeps loaded by default.
pub const DEFAULT_LOADED_SNAPSHOTS: usize = 500;

/// Probes tables from their logs, keeping up to a cap of them loaded between probes.
#[derive(Debug)]
pub struct Prober {
    tables: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<Tracked>>>>>,
    /// Slots for first damage checks beside the probes ([`FIRST_CHECKS_AT_ONCE`]).
    first_checks: Arc<tokio::sync::Semaphore>,
    /// Slots for first history reads left beside the probes ([`FIRST_HISTORIES_AT_ONCE`]).
    first_histories: Arc<tokio::sync::Semaphore>,
    /// The tables whose snapshot is loaded, with their active file count (the cost of
    /// loading them again).
    loaded: Mutex<HashMap<String, u64>>,
    max_loaded: usize,
}

impl Default for Prober {
    fn default() -> Self {
        Prober::with_loaded_snapshots(DEFAULT_LOADED_SNAPSHOTS)
    }
}

fn millis_to_time(ms: i64) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_millis(ms)
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl Prober {
    /// A prober holding no tables yet, keeping up to [`DEFAULT_LOADED_SNAPSHOTS`] loaded.
    pub fn new() -> Self {
        Prober::default()
    }

    /// A prober that keeps at most `max_loaded` tables loaded between probes (at least one).
    pub fn with_loaded_snapshots(max_loaded: usize) -> Self {
        Prober {
            tables: Mutex::default(),
            first_checks: Arc::new(tokio::sync::Semaphore::new(FIRST_CHECKS_AT_ONCE)),
            first_histories: Arc::new(tokio::sync::Semaphore::new(FIRST_HISTORIES_AT_ONCE)),
            loaded: Mutex::default(),
            max_loaded: max_loaded.max(1),
        }
    }

    /// Forgets a table (e.g. removed from the inventory).
    pub fn forget(&self, uri: &str) {
        if let Ok(mut tables) = self.tables.lock() {
            tables.remove(uri);
        }
        self.loaded_lock().remove(uri);
    }

    /// How many tables are loaded now.
    pub fn loaded_snapshots(&self) -> usize {
        self.loaded_lock().len()
    }

    fn loaded_lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, u64>> {
        // poisoned only if a holder panicked between two map operations: still consistent
        self.loaded
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts `uri` as loaded with `files` active files and, past the cap, unloads the
    /// loaded table with the fewest files (ties by name), which may be `uri` itself. A table
    /// busy in a probe of its own is skipped: it counts itself again when that probe ends.
    fn keep_under_cap(&self, uri: &str, tracked: &mut Tracked, files: u64) {
        let victim = {
            let mut loaded = self.loaded_lock();
            loaded.insert(uri.to_owned(), files);
            if loaded.len() <= self.max_loaded {
                return;
            }
            let Some(victim) = loaded
                .iter()
                .min_by(|a, b| (a.1, a.0).cmp(&(b.1, b.0)))
                .map(|(name, _)| name.clone())
            else {
                return;
            };
            loaded.remove(&victim);
            victim
        };
        if victim == uri {
            tracked.unload();
            return;
        }
        let slot = self
            .tables
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&victim)
            .cloned();
        if let Some(slot) = slot {
            if let Ok(mut guard) = slot.try_lock() {
                if let Some(other) = guard.as_mut() {
                    other.unload();
                }
            }
        }
    }

    fn slot(&self, uri: &str) -> Arc<tokio::sync::Mutex<Option<Tracked>>> {
        // a poisoned lock only means another probe panicked mid-insert; the map is still usable
        let mut tables = self
            .tables
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        tables.entry(uri.to_owned()).or_default().clone()
    }

    /// Probes the table at `uri` from its log; re-probes read only the commits since the last.
    /// A panic during the probe fails it ([`DeltaError::Panicked`]) and forgets what was
    /// tracked of the table, so the next probe starts afresh.
    pub async fn probe(&self, uri: &str, options: &ProbeOptions) -> Result<Probe, DeltaError> {
        let result =
            crate::run::unwound(uri, "probe", self.probe_tracked_table(uri, options)).await;
        if matches!(result, Err(DeltaError::Panicked { .. })) {
            *self.slot(uri).lock().await = None;
        }
        result
    }

    async fn probe_tracked_table(
        &self,
        uri: &str,
        options: &ProbeOptions,
    ) -> Result<Probe, DeltaError> {
        let slot = self.slot(uri);
        let mut guard = slot.lock().await;
        let seen = guard.is_some();
        let mut tracked = guard
            .take()
            .unwrap_or_else(|| Tracked::new(options.stale_watch));
        let beside = options.first_sight_beside.then(|| Beside {
            checks: Arc::clone(&self.first_checks),
            histories: Arc::clone(&self.first_histories),
        });
        let history_slots = beside.as_ref().map(|b| &b.histories);
        if let Err(err) = tracked.catch_up(uri, history_slots).await {
            // a table seen before keeps its history for the next attempt
            if seen {
                *guard = Some(tracked);
            }
            return Err(explain_load_failure(uri, err).await);
        }
        let tracked = guard.insert(tracked);
        let result = probe_tracked(uri, tracked, options, beside).await;
        // a failed probe keeps the table loaded (it is retried soon), counted as before
        let files = match &result {
            Ok(probe) => probe.files,
            Err(_) => self.loaded_lock().get(uri).copied().unwrap_or(0),
        };
        self.keep_under_cap(uri, tracked, files);
        result
    }

    /// Forgets what the next probe of `uri` would take as unchanged while the version has
    /// not moved (the checkpoint hint): call it after a maintenance operation that changes
    /// the log without a new version (a checkpoint).
    pub async fn expire_cached_reads(&self, uri: &str) {
        let slot = self.slot(uri);
        let mut guard = slot.lock().await;
        if let Some(tracked) = guard.as_mut() {
            tracked.checkpoint_at = None;
        }
    }

    /// Takes the commit records read since the last call, for the caller to persist. A caller
    /// that fails to persist them hands them back with [`Prober::return_history`].
    pub async fn take_history(&self, uri: &str) -> HistoryBatch {
        let slot = self.slot(uri);
        let mut guard = slot.lock().await;
        match guard.as_mut() {
            Some(tracked) => HistoryBatch {
                commits: std::mem::take(&mut tracked.history.unrecorded),
            },
            None => HistoryBatch::default(),
        }
    }

    /// Gives back records [`Prober::take_history`] handed out and the caller could not persist;
    /// the next take returns them again, before newer ones.
    pub async fn return_history(&self, uri: &str, batch: HistoryBatch) {
        let slot = self.slot(uri);
        let mut guard = slot.lock().await;
        if let Some(tracked) = guard.as_mut() {
            let newer = std::mem::take(&mut tracked.history.unrecorded);
            tracked.history.unrecorded = batch.commits;
            tracked.history.unrecorded.extend(newer);
        }
    }

    /// Data files added after `since_version` (for Z-order scoping), from the tracked table
    /// at the version last probed.
    pub async fn files_added_since(
        &self,
        uri: &str,
        since_version: i64,
    ) -> Result<FilesAddedSince, DeltaError> {
        let slot = self.slot(uri);
        let mut guard = slot.lock().await;
        if let Some(Tracked {
            table: table @ Some(_),
            live: Some(live),
            ..
        }) = guard.as_mut()
        {
            let table = table_at(table, uri, live.version).await?;
            return files_added_since(table, uri, since_version).await;
        }
        drop(guard);
        let table = open_table(uri).await?;
        files_added_since(&table, uri, since_version).await
    }
}

impl Tracked {
    fn new(watch: Duration) -> Self {
        Tracked {
            table: None,
            live: None,
            fresh: Vec::new(),
            whole_log: None,
            first_check: None,
            checked_once: false,
            history: History::new(watch),
            presence_ok_at: None,
            unverified: HashSet::new(),
            checkpoint_at: None,
            drill: None,
            iceberg_at: None,
        }
    }

    /// Drops the snapshot and the files (the history stays, and so does a first history read
    /// still running beside the probes): reopened at the next probe.
    fn unload(&mut self) {
        self.table = None;
        self.live = None;
        self.fresh.clear();
    }

    /// Opens the table and walks its files. At first sight the whole log is listed and read
    /// for the history on its own task (neither needs the other; on a long log the read
    /// takes longer); the probe takes the read. A probe that will wait for the read starts
    /// it beside the load, so the two share the cores; one that takes a slot of
    /// `history_slots` to leave it running beside the probes starts it once the table is
    /// loaded and walked, so the load, which the probe does wait for, has the cores to itself.
    async fn load(
        &mut self,
        uri: &str,
        history_slots: Option<&Arc<tokio::sync::Semaphore>>,
    ) -> Result<(), DeltaError> {
        let mut table = crate::open::build_table(uri).await?;
        let history_due = self.history.scanned_to.is_none() && self.whole_log.is_none();
        let slot = history_slots
            .filter(|_| history_due)
            .and_then(|slots| Arc::clone(slots).try_acquire_owned().ok());
        if history_due && slot.is_none() {
            self.whole_log = Some(FirstHistory::start(uri, &table));
        }
        crate::open::load_latest(uri, &mut table).await?;
        let live = Live::of(uri, &table).await?;
        if let Some(slot) = slot {
            self.whole_log = Some(FirstHistory {
                slot: Some(slot),
                ..FirstHistory::start(uri, &table)
            });
        }
        self.live = Some(Box::new(live));
        self.table = Some(Box::new(table));
        self.fresh.clear();
        Ok(())
    }

    /// Brings the table's files up to its latest version. An unloaded table is opened and
    /// walked; a loaded one costs one LIST of its log past the known version, which is all
    /// for an idle table. New commits are read once (the history takes them too) and applied
    /// to the files; a gap in the versions or a commit changing the metadata or protocol
    /// updates deltalake's snapshot instead and walks it again.
    async fn catch_up(
        &mut self,
        uri: &str,
        history_slots: Option<&Arc<tokio::sync::Semaphore>>,
    ) -> Result<(), DeltaError> {
        let (Some(table), Some(live)) = (self.table.as_deref_mut(), self.live.as_deref_mut())
        else {
            return self.load(uri, history_slots).await;
        };
        let versions = commits_after(table.object_store().as_ref(), uri, live.version).await?;
        let Some(&last) = versions.last() else {
            return Ok(());
        };
        let contiguous = versions.iter().copied().eq(live.version + 1..=last);
        let commits: Vec<Commit> = if contiguous {
            read_commits(table.log_store().as_ref(), uri, versions)
                .await?
                .into_iter()
                .filter_map(|(_, commit)| commit)
                .collect()
        } else {
            Vec::new()
        };
        let applicable = contiguous
            && commits.len() as u64 == last - live.version
            && commits
                .iter()
                .all(|c| !c.changes_metadata && !c.changes_protocol);
        if applicable {
            for commit in &commits {
                live.files.apply(&commit.removes, &commit.adds, &live.names);
            }
            live.version = last;
        } else {
            table
                .update_state()
                .await
                .map_err(|err| DeltaError::delta(uri, "refreshing the table", err))?;
            *live = Live::of(uri, table).await?;
        }
        self.fresh = commits;
        Ok(())
    }
}

/// The loaded table with its snapshot at `version` (updated if older): a re-probe moves only
/// the probe's own files forward ([`Live`]).
async fn table_at<'t>(
    table: &'t mut Option<Box<DeltaTable>>,
    uri: &str,
    version: u64,
) -> Result<&'t DeltaTable, DeltaError> {
    let table = table.as_deref_mut().ok_or_else(|| not_loaded(uri))?;
    if crate::open::loaded_version(uri, table)? < version {
        table
            .update_incremental(Some(version))
            .await
            .map_err(|err| DeltaError::delta(uri, "refreshing the table", err))?;
    }
    Ok(table)
}

fn not_loaded(uri: &str) -> DeltaError {
    DeltaError::Internal {
        table: uri.to_owned(),
        reason: "the table was not loaded before its probe".into(),
    }
}

/// The prober's slots for first-sight work left running beside the probes
/// ([`ProbeOptions::first_sight_beside`]).
#[derive(Debug, Clone)]
struct Beside {
    checks: Arc<tokio::sync::Semaphore>,
    histories: Arc<tokio::sync::Semaphore>,
}

async fn probe_tracked(
    uri: &str,
    tracked: &mut Tracked,
    options: &ProbeOptions,
    beside: Option<Beside>,
) -> Result<Probe, DeltaError> {
    let probed_at = Utc::now();
    let live = tracked.live.take().ok_or_else(|| not_loaded(uri))?;
    let result = probe_live(uri, tracked, &live, options, beside, probed_at).await;
    tracked.live = Some(live);
    result
}

/// The probe of a table whose files are caught up (`live`, taken out of `tracked` meanwhile).
async fn probe_live(
    uri: &str,
    tracked: &mut Tracked,
    live: &Live,
    options: &ProbeOptions,
    beside: Option<Beside>,
    probed_at: DateTime<Utc>,
) -> Result<Probe, DeltaError> {
    let version = live.version;
    let protocol = live.protocol.clone();
    let threshold = small_file_threshold(options.target_file_size, options.small_file_factor);
    let files = live.files.as_slice();
    let figures = FileFigures::of(files, threshold, &protocol.partition_columns);
    let (history_from, history_pending) =
        read_history(uri, tracked, version, beside.as_ref().map(|b| &b.histories)).await?;
    let now = options.now.unwrap_or_else(Instant::now);
    let damage_check_pending = damage_check(
        uri,
        tracked,
        &live.files,
        version,
        now,
        options,
        beside.map(|b| b.checks),
    )
    .await?;
    // the drill's shortcut for a table that never removed a file needs the whole history
    if let Some(drill_options) = options.drill.as_ref().filter(|_| !history_pending) {
        drill_if_due(uri, tracked, live, drill_options, now, probed_at).await?;
    }
    let restore_drill = tracked.drill.as_ref().map(|(_, d)| d.clone());
    let checkpoint = checkpoint_at(uri, tracked, version).await?;
    let uniform_iceberg = protocol.uniform_iceberg();
    let iceberg = if uniform_iceberg || protocol.iceberg_compat().is_some() {
        iceberg_at(uri, tracked, version).await?
    } else {
        None
    };
    let history = &mut tracked.history;
    let erasure = history.erasure.summary(files);
    history.prune(probed_at.timestamp_millis());
    count_new_stale_rows(uri, history).await;
    let history_from = history_from.or(history.first.map(|(v, _)| v));
    Ok(Probe {
        table: uri.to_owned(),
        version: to_i64(version),
        probed_at,
        history: probe_history(history, history_from, &erasure, probed_at, history_pending),
        files: figures.count,
        size_bytes: figures.size,
        small_files: figures.small,
        small_file_bytes: figures.small_size,
        small_file_threshold_bytes: threshold,
        small_files_by_partition: figures.small_by_partition,
        commits_since_checkpoint: commits_since(version, checkpoint),
        last_checkpoint_version: checkpoint.map(|cp| to_i64(cp.version)),
        last_checkpoint_at: checkpoint.and_then(|cp| millis_to_time(cp.written_at_ms)),
        deletion_vectors_enabled: protocol.deletion_vectors_enabled(),
        properties: protocol.properties,
        min_reader_version: protocol.min_reader_version,
        min_writer_version: protocol.min_writer_version,
        reader_features: protocol.reader_features,
        writer_features: protocol.writer_features,
        partition_columns: protocol.partition_columns,
        files_with_deletion_vectors: figures.dv_files,
        rows_in_files_with_deletion_vectors: figures.dv_rows,
        deleted_rows: figures.deleted_rows,
        external_files: figures.external,
        restore_drill,
        damage_check_pending,
        history_pending,
        uniform_iceberg,
        iceberg,
    })
}

/// What a probe counts over the active files.
#[derive(Debug, Default)]
struct FileFigures {
    count: u64,
    size: u64,
    small: u64,
    small_size: u64,
    small_by_partition: BTreeMap<String, u64>,
    dv_files: u64,
    dv_rows: u64,
    deleted_rows: u64,
    external: u64,
}

impl FileFigures {
    fn of(files: &[ActiveFile], threshold: u64, partition_columns: &[String]) -> FileFigures {
        let mut figures = FileFigures::default();
        for file in files {
            figures.count += 1;
            figures.external += u64::from(crate::log::references::is_absolute(&file.path));
            figures.size += file.size;
            if let Some(dv) = &file.deletion_vector {
                figures.dv_files += 1;
                figures.dv_rows += file.num_records.unwrap_or(dv.cardinality);
                figures.deleted_rows += dv.cardinality;
            }
            if file.size < threshold {
                figures.small += 1;
                figures.small_size += file.size;
                *figures
                    .small_by_partition
                    .entry(partition_key(partition_columns, &file.partition_values))
                    .or_insert(0u64) += 1;
            }
        }
        figures
    }
}

/// Runs the restore drill when its cadence says so, keeping the result in `tracked`; a drill
/// that cannot run is logged and tried again at the next probe.
async fn drill_if_due(
    uri: &str,
    tracked: &mut Tracked,
    live: &Live,
    options: &DrillOptions,
    now: Instant,
    probed_at: DateTime<Utc>,
) -> Result<(), DeltaError> {
    let due = tracked
        .drill
        .as_ref()
        .is_none_or(|(at, _)| now.saturating_duration_since(*at) >= options.every);
    if !due {
        return Ok(());
    }
    let table = table_at(&mut tracked.table, uri, live.version).await?;
    let property = live
        .protocol
        .properties
        .get(crate::retention::window::DELETED_FILE_RETENTION_PROPERTY)
        .map(String::as_str);
    let append_only = !tracked.history.removed_files;
    let drill = crate::probe::drill::drill(
        uri,
        table,
        live.files.as_slice(),
        property,
        options,
        append_only,
        probed_at,
    );
    match drill.await {
        Ok(drill) => {
            let unrestorable = drill.unrestorable();
            if unrestorable > 0 {
                tracing::warn!(
                    table = uri,
                    unrestorable,
                    "restore drill: versions owed cannot be restored"
                );
            }
            tracked.drill = Some((now, drill));
        }
        Err(err) => {
            tracing::warn!(table = uri, error = %err, "restore drill could not run; retried at the next probe");
        }
    }
    Ok(())
}

/// The table's last checkpoint as of `version`, read once per version.
async fn checkpoint_at(
    uri: &str,
    tracked: &mut Tracked,
    version: u64,
) -> Result<Option<LastCheckpoint>, DeltaError> {
    if let Some((at, checkpoint)) = tracked.checkpoint_at {
        if at == version {
            return Ok(checkpoint);
        }
    }
    let store = tracked
        .table
        .as_ref()
        .ok_or_else(|| not_loaded(uri))?
        .object_store();
    let checkpoint = last_checkpoint(store.as_ref(), uri).await?;
    tracked.checkpoint_at = Some((version, checkpoint));
    Ok(checkpoint)
}

/// The Iceberg view of the table at `version`: what was read at that version, unless it lagged.
async fn iceberg_at(
    uri: &str,
    tracked: &mut Tracked,
    version: u64,
) -> Result<Option<IcebergView>, DeltaError> {
    if let Some((at, view)) = &tracked.iceberg_at {
        let caught_up = view
            .as_ref()
            .and_then(|v| v.delta_version)
            .is_some_and(|converted| converted >= version);
        if *at == version && caught_up {
            return Ok(view.clone());
        }
    }
    let store = tracked
        .table
        .as_ref()
        .ok_or_else(|| not_loaded(uri))?
        .object_store();
    let known = tracked
        .iceberg_at
        .as_ref()
        .and_then(|(_, view)| view.as_ref());
    let view = iceberg_view(store.as_ref(), uri, known).await?;
    tracked.iceberg_at = Some((version, view.clone()));
    Ok(view)
}

/// The history part of a probe, from what the prober read of the log.
fn probe_history(
    history: &mut History,
    history_from: Option<u64>,
    erasure: &crate::probe::erasure::Erasure,
    probed_at: DateTime<Utc>,
    history_pending: bool,
) -> ProbeHistory {
    let at = |slot: Option<(u64, i64)>| slot.and_then(|(_, ts)| millis_to_time(ts));
    let latest = |listed: &VecDeque<ForeignCommit>| {
        listed
            .iter()
            .rev()
            .take(LISTED_OVERWRITES)
            .cloned()
            .collect()
    };
    ProbeHistory {
        created_at: at(history.first),
        history_from_version: history_from.map(to_i64),
        last_commit_at: at(history.last_commit),
        commits_per_hour: history.commits_in_last_hour(probed_at.timestamp_millis()),
        last_optimize_at: at(history.last_optimize),
        last_zorder_at: at(history.last_zorder),
        last_zorder_version: history.last_zorder.map(|(v, _)| to_i64(v)),
        last_vacuum_at: at(history.last_vacuum),
        stale_writes: history.stale.summaries(),
        recent_overwrites: latest(&history.overwrites),
        recent_foreign_rewrites: latest(&history.foreign_rewrites),
        erasure_pending_since: erasure.pending_since_ms.and_then(millis_to_time),
        erasure_pending_version: erasure.pending_version.map(to_i64),
        erasure_last_removal_at: erasure.last_removal_ms.and_then(millis_to_time),
        last_external_remove_at: at(history.last_external_remove),
        read: !history_pending,
    }
}

/// Takes the commits up to `version` the history has not seen into it: at first sight the
/// whole log read beside the load, then the commits catching up read (or, where they do not
/// cover the gap, a read of the missing ones). While the first read still runs beside the
/// probes (a slot of `beside` free), returns it pending, and the caught-up commits' new files
/// wait for the damage check's HEADs all the same. Returns the oldest commit version listed
/// at first sight and whether the history is pending.
async fn read_history(
    uri: &str,
    tracked: &mut Tracked,
    version: u64,
    beside: Option<&Arc<tokio::sync::Semaphore>>,
) -> Result<(Option<u64>, bool), DeltaError> {
    let fresh = std::mem::take(&mut tracked.fresh);
    let watching = tracked.presence_ok_at.is_some() || tracked.first_check.is_some();
    let mut history_from = None;
    if tracked.history.scanned_to.is_none() {
        let table = tracked.table.as_deref().ok_or_else(|| not_loaded(uri))?;
        let first = match tracked.whole_log.take() {
            Some(first) => first,
            None => FirstHistory::start(uri, table),
        };
        match first.take(uri, beside).await? {
            Ok(whole) => {
                history_from = whole.listed.first().copied().filter(|v| *v <= version);
                for commit in whole.commits.iter().filter(|c| c.version <= version) {
                    tracked.history.absorb(commit);
                }
            }
            Err(running) => {
                tracked.whole_log = Some(running);
                if watching {
                    tracked
                        .unverified
                        .extend(fresh.into_iter().flat_map(|c| c.adds).map(|add| add.path));
                }
                return Ok((None, true));
            }
        }
    }
    let Some(scanned) = tracked.history.scanned_to.filter(|s| *s < version) else {
        return Ok((history_from, false));
    };
    // the commits catching up read, unless they do not cover what history lacks
    let mut commits: Vec<Commit> = fresh
        .into_iter()
        .filter(|c| c.version > scanned && c.version <= version)
        .collect();
    if !commits.iter().map(|c| c.version).eq(scanned + 1..=version) {
        let log_store = tracked
            .table
            .as_ref()
            .ok_or_else(|| not_loaded(uri))?
            .log_store();
        commits = read_commits(log_store.as_ref(), uri, scanned + 1..=version)
            .await?
            .into_iter()
            .filter_map(|(_, commit)| commit)
            .collect();
    }
    for commit in commits {
        tracked.history.absorb(&commit);
        if watching {
            tracked
                .unverified
                .extend(commit.adds.into_iter().map(|add| add.path));
        }
    }
    Ok((history_from, false))
}

/// The damage check of one probe: a listing when due, else a HEAD of each file added since
/// the last one. A table's first listing runs beside the probe when `first_checks` has a slot
/// free; its verdict is taken by the first probe after it ends. Returns whether that first
/// check is still running.
async fn damage_check(
    uri: &str,
    tracked: &mut Tracked,
    live: &LiveFiles,
    version: u64,
    now: Instant,
    options: &ProbeOptions,
    first_checks: Option<Arc<tokio::sync::Semaphore>>,
) -> Result<bool, DeltaError> {
    let files = live.as_slice();
    if let Some(first) = tracked.first_check.take() {
        if !first.check.is_finished() {
            tracked.first_check = Some(first);
            return Ok(true);
        }
        match first.check.await {
            Ok(Ok(())) => tracked.presence_ok_at = Some((first.started, first.version)),
            // damaged: the next probes list the table until it reads again
            Ok(Err(err)) => return Err(err),
            Err(crashed) => tracing::warn!(
                table = uri,
                error = %crashed,
                "the first damage check did not finish; the next probe lists the table"
            ),
        }
    }
    let listing_due = tracked.presence_ok_at.is_none_or(|(at, checked)| {
        let every = if checked == version {
            options.presence_idle_every
        } else {
            options.presence_every
        };
        now.saturating_duration_since(at) >= every
    });
    let added: Vec<&ActiveFile> = if listing_due || tracked.unverified.is_empty() {
        Vec::new()
    } else {
        files
            .iter()
            .filter(|f| tracked.unverified.contains(&f.path))
            .collect()
    };
    let mut pending = false;
    if listing_due || added.len() > MAX_FILES_ASKED_FOR {
        tracked.presence_ok_at = None;
        // the slow, thorough pass: the damage check lists the table, and the checkpoint
        // hint is read again even if the version did not move
        tracked.checkpoint_at = None;
        let slot = first_checks
            .filter(|_| !tracked.checked_once)
            .and_then(|slots| slots.try_acquire_owned().ok());
        tracked.checked_once = true;
        let table = table_at(&mut tracked.table, uri, version).await?;
        match slot {
            Some(slot) => {
                let (table, owned_uri, files) = (table.clone(), uri.to_owned(), live.shared());
                let check = crate::cost::scope::spawn(async move {
                    let _slot = slot;
                    crate::probe::presence::ensure_present(&table, &owned_uri, &files).await
                });
                tracked.first_check = Some(FirstCheck {
                    started: now,
                    version,
                    check,
                });
                pending = true;
            }
            None => {
                crate::probe::presence::ensure_present(table, uri, files).await?;
                tracked.presence_ok_at = Some((now, version));
            }
        }
    } else if !added.is_empty() {
        let table = tracked.table.as_deref().ok_or_else(|| not_loaded(uri))?;
        if let Err(err) =
            crate::probe::presence::ensure_files_present(table, uri, &added, files.len()).await
        {
            // damaged: the next probes list the table until it reads again
            tracked.presence_ok_at = None;
            return Err(err);
        }
    }
    tracked.unverified.clear();
    Ok(pending)
}

/// Counts the rows of stale writes found since the last probe (they are rare: loading the
/// versions before their rewrites is affordable). A failure leaves `rows` unknown.
async fn count_new_stale_rows(uri: &str, history: &mut History) {
    let uncounted: Vec<u64> = history
        .stale
        .detections()
        .filter(|d| !history.stale_counted.contains(&d.summary.version))
        .filter_map(|d| u64::try_from(d.summary.version).ok())
        .collect();
    for version in uncounted {
        let Some(detection) = history.stale.detection_mut(version) else {
            continue;
        };
        match count_stale_rows(uri, detection).await {
            Ok(rows) => detection.summary.rows = rows,
            Err(err) => {
                tracing::warn!(table = uri, version, error = %err, "cannot count the rows of a stale write")
            }
        }
        history.stale_counted.insert(detection.summary.version);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(version: u64, ts: i64, info: &str) -> Commit {
        let text = format!(r#"{{"commitInfo":{{"timestamp":{ts},{info}}}}}"#);
        Commit::parse(version, text.as_bytes()).expect("parses")
    }

    #[test]
    fn history_tracks_the_newest_of_each_kind() {
        let mut h = History::new(DEFAULT_STALE_WATCH);
        h.absorb(&commit(0, 1_000, r#""operation":"CREATE TABLE""#));
        h.absorb(&commit(1, 2_000, r#""operation":"OPTIMIZE""#));
        h.absorb(&commit(
            2,
            3_000,
            r#""operation":"OPTIMIZE","operationParameters":{"zOrderBy":"[\"k\"]"}"#,
        ));
        h.absorb(&commit(3, 4_000, r#""operation":"VACUUM START""#));
        h.absorb(&commit(4, 5_000, r#""operation":"VACUUM END""#));
        assert_eq!(h.first, Some((0, 1_000)));
        assert_eq!(h.last_commit, Some((4, 5_000)));
        assert_eq!(h.last_optimize, Some((2, 3_000)));
        assert_eq!(h.last_zorder, Some((2, 3_000)));
        assert_eq!(h.last_vacuum, Some((4, 5_000)));
        assert_eq!(h.scanned_to, Some(4));
        assert_eq!(h.unrecorded.len(), 5);
        assert_eq!(h.unrecorded[2].version, 2);
    }

    fn probe_of(table: &str, patch: serde_json::Value) -> Probe {
        let mut json = serde_json::json!({
            "table": table, "version": 7, "probed_at": "2026-12-04T12:00:00Z",
            "created_at": null, "history_from_version": null, "last_commit_at": null,
            "files": 3, "size_bytes": 30, "small_files": 3, "small_file_threshold_bytes": 100,
            "small_files_by_partition": {}, "commits_since_checkpoint": 7,
            "last_checkpoint_version": null, "last_checkpoint_at": null, "commits_per_hour": 0,
            "last_optimize_at": null, "last_zorder_at": null, "last_zorder_version": null,
            "last_vacuum_at": null, "properties": {}, "min_reader_version": 1,
            "min_writer_version": 2, "reader_features": [], "writer_features": [],
            "partition_columns": [], "deletion_vectors_enabled": false
        });
        if let (Some(base), Some(patch)) = (json.as_object_mut(), patch.as_object()) {
            base.extend(patch.clone());
        }
        serde_json::from_value(json).expect("a probe")
    }

    #[test]
    fn the_history_reads_and_writes_as_top_level_keys_of_the_probe() {
        let probe = probe_of(
            "t",
            serde_json::json!({"created_at": "2026-01-01T00:00:00Z", "commits_per_hour": 3,
                "last_external_remove_at": "2026-12-01T00:00:00Z"}),
        );
        assert_eq!(probe.history.commits_per_hour, 3);
        let json = serde_json::to_value(&probe).unwrap();
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        for key in [
            "created_at",
            "commits_per_hour",
            "stale_writes",
            "last_external_remove_at",
        ] {
            assert!(keys.contains(&key), "{key} missing from {keys:?}");
        }
        assert!(
            !keys.contains(&"history"),
            "no nested history object: {keys:?}"
        );
        let again: Probe = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(
            serde_json::to_value(&again).unwrap(),
            json,
            "a stored probe reads back whole"
        );
    }

    #[test]
    fn a_pending_history_takes_the_last_complete_one_and_nothing_else() {
        let known = probe_of(
            "t",
            serde_json::json!({"version": 5, "files": 9, "created_at": "2026-01-01T00:00:00Z",
                "last_zorder_version": 4, "last_zorder_at": "2026-12-01T00:00:00Z",
                "recent_overwrites": [{"version": 3, "committed_at": null, "operation": "WRITE",
                    "engine_info": null}]}),
        );
        let mut pending = probe_of("t", serde_json::json!({"history_pending": true}));
        assert!(!pending.history_known(), "nothing read yet");
        pending.fill_history_from(&known);
        assert!(
            pending.history_pending,
            "still pending: the scheduler holds on it"
        );
        assert!(pending.history_known(), "the last complete history stands");
        assert_eq!(pending.history.created_at, known.history.created_at);
        assert_eq!(pending.history.last_zorder_version, Some(4));
        assert_eq!(
            pending.history.recent_overwrites,
            known.history.recent_overwrites
        );
        assert_eq!(
            (pending.version, pending.files),
            (7, 3),
            "its own snapshot figures"
        );

        // the next probe, its read still running, keeps the same history from the pending one
        let mut still_pending = probe_of("t", serde_json::json!({"history_pending": true}));
        still_pending.fill_history_from(&pending);
        assert_eq!(still_pending.history.created_at, known.history.created_at);
        assert_eq!(still_pending.history.last_zorder_version, Some(4));
        assert_eq!(
            still_pending.history.recent_overwrites,
            known.history.recent_overwrites
        );

        // a complete probe keeps its own history; another table's gives none, nor does a
        // pending probe that never took one
        let mut complete = probe_of("t", serde_json::json!({}));
        complete.fill_history_from(&known);
        assert_eq!(complete.history.created_at, None);
        for other in [
            probe_of(
                "u",
                serde_json::json!({"created_at": "2026-01-01T00:00:00Z"}),
            ),
            probe_of("t", serde_json::json!({"history_pending": true})),
        ] {
            let mut pending = probe_of("t", serde_json::json!({"history_pending": true}));
            pending.fill_history_from(&other);
            assert_eq!(pending.history.created_at, None);
        }
    }

    #[test]
    fn commits_per_hour_counts_only_the_last_hour() {
        let mut h = History::new(DEFAULT_STALE_WATCH);
        let now = 10 * HOUR_MS;
        h.absorb(&commit(0, now - 2 * HOUR_MS, r#""operation":"WRITE""#));
        h.absorb(&commit(1, now - HOUR_MS / 2, r#""operation":"WRITE""#));
        h.absorb(&commit(2, now - 1, r#""operation":"WRITE""#));
        assert_eq!(h.commits_in_last_hour(now), 2);
        assert_eq!(h.recent.len(), 2);
    }
}
