//! Local tables with the times real tables have: commits and files from days or years ago,
//! for tests and benchmarks. Nothing here is used by maintenance itself.
//!
//! Retention decisions in Delta (VACUUM's tombstone age, log cleanup) read commit timestamps
//! and file modification times, so a table written a second ago proves nothing about them.
//! [`backdate`] moves a test table's whole history into the past; [`writer_times`] gives a
//! copied reference table the times its writer left (a checkout gives every file "now").
//! Both panic on I/O errors: they are test fixtures.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

const DAY: Duration = Duration::from_secs(86_400);

fn set_mtime(path: &Path, at: SystemTime) {
    File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(at))
        .unwrap_or_else(|e| panic!("set mtime of {}: {e}", path.display()));
}

fn millis(at: SystemTime) -> i64 {
    i64::try_from(
        at.duration_since(UNIX_EPOCH)
            .expect("after epoch")
            .as_millis(),
    )
    .expect("ms")
}

fn from_millis(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).expect("after epoch"))
}

fn log_dir(root: &Path) -> PathBuf {
    root.join("_delta_log")
}

/// `(version, path)` of every JSON commit, ascending.
fn commits(root: &Path) -> Vec<(u64, PathBuf)> {
    let mut out: Vec<(u64, PathBuf)> = fs::read_dir(log_dir(root))
        .expect("read _delta_log")
        .filter_map(|e| {
            let path = e.expect("entry").path();
            let name = path.file_name()?.to_str()?.to_owned();
            let version = name.strip_suffix(".json")?.parse().ok()?;
            Some((version, path))
        })
        .collect();
    out.sort();
    out
}

/// Moves the history of the table at `root` into the past: commit `v` of the newest `n`
/// happens `days_ago(v)` days ago. Rewrites `commitInfo.timestamp`, `add.modificationTime`
/// and `remove.deletionTimestamp` and sets the modification times of commit, checkpoint and
/// data files to match, as if the table had been written then.
pub fn backdate(root: &Path, days_ago: impl Fn(u64) -> u64) {
    let now = SystemTime::now();
    let mut time_of: BTreeMap<u64, SystemTime> = BTreeMap::new();
    let mut file_times: BTreeMap<String, SystemTime> = BTreeMap::new();
    for (version, path) in commits(root) {
        let at = now - DAY * u32::try_from(days_ago(version)).expect("days");
        time_of.insert(version, at);
        let text = fs::read_to_string(&path).expect("read commit");
        let mut lines = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let mut action: Value = serde_json::from_str(line).expect("json action");
            if let Some(info) = action.get_mut("commitInfo") {
                info["timestamp"] = Value::from(millis(at));
            }
            if let Some(add) = action.get_mut("add") {
                add["modificationTime"] = Value::from(millis(at));
                if let Some(p) = add.get("path").and_then(Value::as_str) {
                    file_times.insert(p.to_owned(), at);
                }
            }
            if let Some(remove) = action.get_mut("remove") {
                remove["deletionTimestamp"] = Value::from(millis(at));
            }
            lines.push(serde_json::to_string(&action).expect("json"));
        }
        fs::write(&path, lines.join("\n") + "\n").expect("write commit");
        set_mtime(&path, at);
    }
    set_log_side_files(root, &time_of);
    for (relative, at) in file_times {
        let path = root.join(&relative);
        if path.exists() {
            set_mtime(&path, at);
        }
    }
}

/// Checkpoints, checksums and `_last_checkpoint` get the time of their version's commit.
fn set_log_side_files(root: &Path, time_of: &BTreeMap<u64, SystemTime>) {
    let newest = time_of.values().max().copied();
    for entry in fs::read_dir(log_dir(root)).expect("read _delta_log") {
        let path = entry.expect("entry").path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name.ends_with(".json") && !name.contains("checkpoint") {
            continue;
        }
        let at = name
            .get(..20)
            .and_then(|digits| digits.parse::<u64>().ok())
            .and_then(|v| time_of.get(&v).copied())
            .or(newest);
        if let (Some(at), true) = (at, path.is_file()) {
            set_mtime(&path, at);
        }
    }
}

/// Gives a copied reference table the times its writers left: every commit file its commit's
/// own time (`inCommitTimestamp`, else `commitInfo.timestamp`), every data file its
/// `add.modificationTime`. Commits without a time keep the previous commit's.
pub fn writer_times(root: &Path) {
    let mut time_of: BTreeMap<u64, SystemTime> = BTreeMap::new();
    let mut previous = UNIX_EPOCH + DAY;
    for (version, path) in commits(root) {
        let text = fs::read_to_string(&path).expect("read commit");
        let mut at = None;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let action: Value = serde_json::from_str(line).expect("json action");
            if let Some(info) = action.get("commitInfo") {
                let ms = info
                    .get("inCommitTimestamp")
                    .and_then(Value::as_i64)
                    .or_else(|| info.get("timestamp").and_then(Value::as_i64));
                at = at.or(ms.filter(|ms| *ms > 0).map(from_millis));
            }
            if let Some(add) = action.get("add") {
                if let (Some(p), Some(ms)) = (
                    add.get("path").and_then(Value::as_str),
                    add.get("modificationTime").and_then(Value::as_i64),
                ) {
                    let file = root.join(crate::log::decode_path(p));
                    if file.exists() && ms > 0 {
                        set_mtime(&file, from_millis(ms));
                    }
                }
            }
        }
        let at = at.unwrap_or(previous);
        previous = at;
        time_of.insert(version, at);
        set_mtime(&path, at);
    }
    set_log_side_files(root, &time_of);
}

/// Every file under `_delta_log` with its bytes: compare two of these to prove a log unchanged.
pub fn log_contents(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    collect(&log_dir(root), &log_dir(root), &mut out);
    out
}

fn collect(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
    for entry in fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            collect(base, &path, out);
        } else {
            let rel = path.strip_prefix(base).expect("under base");
            out.insert(
                rel.to_string_lossy().into_owned(),
                fs::read(&path).expect("read"),
            );
        }
    }
}
