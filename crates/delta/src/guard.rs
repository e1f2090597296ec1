//! The duplicate-rewrite guard (DESIGN.md, "Known hazards", first item).
//!
//! deltalake 1.1.x marks OPTIMIZE removes `dataChange=false` and its conflict checker ignores
//! such removes, so a second compaction from the same (or an older) snapshot commits happily and
//! every row it rewrote now exists twice. The guard checks a rewrite commit after the fact: every
//! file the commit removed must have been active in the version it committed over. It cannot undo
//! anything; it makes the damage loud, with the version to restore to. This module only reads.

use std::collections::HashSet;

use crate::error::DeltaError;
use crate::log::{read_commit, Commit};
use crate::open::open_table_at;
use crate::snapshot::{active_files, paths};

/// The removed paths that were not active before the commit, in input order.
pub fn removed_but_inactive<'a>(
    active_before: &HashSet<String>,
    removed: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    removed
        .into_iter()
        .filter(|path| !active_before.contains(*path))
        .map(str::to_owned)
        .collect()
}

/// What the guard concluded about one commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Every removed file was active before the commit.
    Clean,
    /// The version before the commit could not be read (the log was cleaned up meanwhile):
    /// the commit stands, unchecked; the reason says why.
    Unverified(String),
}

/// Checks an already-read rewrite commit against the active files of `commit.version - 1`.
///
/// `known_before` short-cuts loading that version when the caller already holds its file set
/// (the common case: nobody committed between our snapshot and our commit). A violation is an
/// error; a version that cannot be loaded is [`Verdict::Unverified`], never an error, because
/// the commit has landed and must not be reported as a failed operation.
pub(crate) async fn check_commit(
    uri: &str,
    commit: &Commit,
    known_before: Option<(u64, &HashSet<String>)>,
) -> Result<Verdict, DeltaError> {
    if commit.removes.is_empty() {
        return Ok(Verdict::Clean);
    }
    let Some(previous) = commit.version.checked_sub(1) else {
        // version 0 cannot remove anything that existed before it
        return violation(
            uri,
            commit,
            commit.removes.iter().map(|r| r.path.clone()).collect(),
        )
        .map(|()| Verdict::Clean);
    };
    let loaded;
    let active_before = match known_before {
        Some((version, set)) if version == previous => set,
        _ => match open_table_at(uri, previous).await {
            Ok(table) => {
                loaded = paths(&active_files(&table, uri).await?);
                &loaded
            }
            Err(err) => {
                let reason = format!(
                    "the rewrite committed version {} but its duplicate-rewrite check could not \
                     read version {previous} ({err}); the commit stands unchecked: compare the \
                     table's row count with the version before the rewrite",
                    commit.version
                );
                tracing::warn!(table = uri, version = commit.version, error = %err, "duplicate-rewrite check could not read the version before the commit");
                return Ok(Verdict::Unverified(reason));
            }
        },
    };
    let inactive = removed_but_inactive(
        active_before,
        commit.removes.iter().map(|r| r.path.as_str()),
    );
    if inactive.is_empty() {
        Ok(Verdict::Clean)
    } else {
        violation(uri, commit, inactive).map(|()| Verdict::Clean)
    }
}

fn violation(uri: &str, commit: &Commit, files: Vec<String>) -> Result<(), DeltaError> {
    let version = i64::try_from(commit.version).unwrap_or(i64::MAX);
    tracing::error!(
        table = uri,
        version,
        files = files.len(),
        "duplicate rewrite detected"
    );
    Err(DeltaError::DuplicateRewrite {
        table: uri.to_owned(),
        version,
        files,
    })
}

/// Verifies the commit at `version` of the table at `uri`: every file it removed must have been
/// active at `version - 1`. Works for any commit, including ones other engines wrote.
pub async fn verify_rewrite_commit(uri: &str, version: i64) -> Result<(), DeltaError> {
    let version = u64::try_from(version).map_err(|_| DeltaError::IncompleteLog {
        table: uri.to_owned(),
        reason: format!("version {version} is negative"),
    })?;
    let table = crate::open::open_table(uri).await?;
    let commit = read_commit(table.log_store().as_ref(), uri, version)
        .await?
        .ok_or_else(|| DeltaError::IncompleteLog {
            table: uri.to_owned(),
            reason: format!("commit {version} is not on disk (log cleanup?)"),
        })?;
    match check_commit(uri, &commit, None).await? {
        Verdict::Clean => Ok(()),
        Verdict::Unverified(reason) => Err(DeltaError::IncompleteLog {
            table: uri.to_owned(),
            reason,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::FileAction;

    fn set(paths: &[&str]) -> HashSet<String> {
        paths.iter().map(|p| (*p).to_owned()).collect()
    }

    #[test]
    fn removes_of_active_files_pass() {
        let active = set(&["a", "b", "c"]);
        assert!(removed_but_inactive(&active, ["a", "c"]).is_empty());
    }

    #[test]
    fn removes_of_already_removed_files_are_reported() {
        let active = set(&["g1", "b"]);
        assert_eq!(
            removed_but_inactive(&active, ["a", "b", "c"]),
            vec!["a", "c"]
        );
    }

    fn remove(path: &str) -> FileAction {
        FileAction {
            path: path.to_owned(),
            size: Some(1),
            partition_values: Default::default(),
            data_change: false,
            deletion_timestamp: Some(1),
            num_records: None,
            deleted_rows: 0,
        }
    }

    #[tokio::test]
    async fn check_commit_uses_the_known_set_of_the_previous_version() {
        let before = set(&["a", "b"]);
        let good = Commit {
            version: 4,
            removes: vec![remove("a"), remove("b")],
            ..Commit::default()
        };
        assert_eq!(
            check_commit("/t", &good, Some((3, &before)))
                .await
                .expect("clean"),
            Verdict::Clean
        );
        let duplicate = Commit {
            version: 4,
            removes: vec![remove("a"), remove("x")],
            ..Commit::default()
        };
        let err = check_commit("/t", &duplicate, Some((3, &before)))
            .await
            .expect_err("duplicate");
        match err {
            DeltaError::DuplicateRewrite { version, files, .. } => {
                assert_eq!(version, 4);
                assert_eq!(files, vec!["x"]);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
