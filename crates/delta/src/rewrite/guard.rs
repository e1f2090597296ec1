//! The rewrite guard: every rewrite commit is checked after the fact (DESIGN.md, "Known
//! hazards", first item, and the deletion-vector hazards).
//!
//! deltalake 1.1.x marks OPTIMIZE removes `dataChange=false` and its conflict checker ignores
//! such removes, so a second compaction from the same (or an older) snapshot commits happily and
//! every row it rewrote now exists twice. Two checks run on every rewrite commit:
//!
//! - **files**: every logical file the commit removed (path and deletion vector, the protocol's
//!   identity of a file) was active in the version it committed over;
//! - **rows**: the rows of the added files equal the live rows of the removed ones (their
//!   records minus their deletion vectors' cardinalities, from the log's statistics), so a
//!   rewrite that lost rows or brought deleted rows back is caught.
//!
//! The guard cannot undo anything; it makes the damage loud, with the version to restore to.
//! This module only reads.

use std::collections::HashMap;

use crate::error::DeltaError;
use crate::log::read::{read_commit, Commit};
use crate::open::open_table_at;
use crate::snapshot::{active_files, active_set, ActiveSet, LogicalFile};

/// The removed logical files (path and deletion vector) that were not active before the
/// commit, by path, in input order.
pub(crate) fn removed_but_inactive<'a>(
    active_before: &HashMap<String, LogicalFile>,
    removed: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
) -> Vec<String> {
    removed
        .into_iter()
        .filter(|(path, dv)| {
            active_before
                .get(*path)
                .is_none_or(|file| file.deletion_vector_id.as_deref() != *dv)
        })
        .map(|(path, _)| path.to_owned())
        .collect()
}

/// Whether a commit must keep the table's live rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rows {
    /// A rewrite (compaction, Z-order, purge): added rows equal the removed live rows.
    Kept,
    /// A repair removes a stale write's rows on purpose and accounts for them itself.
    Changed,
}

/// What the guard concluded about one commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Both checks passed.
    Clean,
    /// A check could not run (the version before the commit could not be read, or a file
    /// has no row statistics): the commit stands, unchecked; the reason says why.
    Unverified(String),
}

/// The live rows of the commit's removed files (from `before`) and of its added files, or why
/// they cannot be counted.
fn row_counts(before: &ActiveSet, commit: &Commit) -> Result<(u64, u64), String> {
    let mut expected = 0u64;
    for removed in &commit.removes {
        expected += before
            .get(&removed.path)
            .and_then(|f| f.live_rows)
            .ok_or_else(|| format!("removed file {} has no row statistics", removed.path))?;
    }
    let mut found = 0u64;
    for added in &commit.adds {
        found += added
            .live_rows()
            .ok_or_else(|| format!("added file {} has no row statistics", added.path))?;
    }
    Ok((expected, found))
}

/// Checks an already-read rewrite commit against the active files of `commit.version - 1`.
///
/// `known_before` short-cuts loading that version when the caller already holds its file set
/// (the common case: nobody committed between our snapshot and our commit). A violation is an
/// error; a check that cannot run is [`Verdict::Unverified`], never an error, because the
/// commit has landed and must not be reported as a failed operation.
pub(crate) async fn check_commit(
    uri: &str,
    commit: &Commit,
    known_before: Option<(u64, &ActiveSet)>,
    rows: Rows,
) -> Result<Verdict, DeltaError> {
    if commit.removes.is_empty() && commit.adds.is_empty() {
        return Ok(Verdict::Clean);
    }
    let Some(previous) = commit.version.checked_sub(1) else {
        // version 0 cannot rewrite anything that existed before it
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
                loaded = active_set(&active_files(&table, uri).await?);
                &loaded
            }
            Err(err) => {
                let reason = format!(
                    "the rewrite committed version {} but its guard could not read version \
                     {previous} ({err}); the commit stands unchecked: compare the table's row \
                     count with the version before the rewrite",
                    commit.version
                );
                tracing::warn!(table = uri, version = commit.version, error = %err, "rewrite guard could not read the version before the commit");
                return Ok(Verdict::Unverified(reason));
            }
        },
    };
    let inactive = removed_but_inactive(
        active_before,
        commit.removes.iter().map(|r| {
            (
                r.path.as_str(),
                r.deletion_vector.as_ref().map(|dv| dv.id.as_str()),
            )
        }),
    );
    if !inactive.is_empty() {
        violation(uri, commit, inactive)?;
    }
    if rows == Rows::Changed {
        return Ok(Verdict::Clean);
    }
    match row_counts(active_before, commit) {
        Ok((expected, found)) if expected == found => Ok(Verdict::Clean),
        Ok((expected, found)) => {
            let version = version_of(commit);
            tracing::error!(
                table = uri,
                version,
                expected,
                found,
                "rewrite changed the table's live rows"
            );
            Err(DeltaError::RowsChanged {
                table: uri.to_owned(),
                version,
                expected,
                found,
            })
        }
        Err(missing) => {
            tracing::warn!(table = uri, version = commit.version, reason = %missing, "rewrite row check skipped");
            Ok(Verdict::Unverified(format!(
                "the row check of version {} did not run: {missing}",
                commit.version
            )))
        }
    }
}

fn version_of(commit: &Commit) -> i64 {
    i64::try_from(commit.version).unwrap_or(i64::MAX)
}

fn violation(uri: &str, commit: &Commit, files: Vec<String>) -> Result<(), DeltaError> {
    let version = version_of(commit);
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

/// Verifies the rewrite commit at `version` of the table at `uri`: every file it removed was
/// active at `version - 1`, and its added files hold the live rows of the removed ones. Works
/// for any commit, including ones other engines wrote.
pub async fn verify_rewrite_commit(uri: &str, version: i64) -> Result<(), DeltaError> {
    let version = u64::try_from(version).map_err(|_| DeltaError::Internal {
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
    match check_commit(uri, &commit, None, Rows::Kept).await? {
        Verdict::Clean => Ok(()),
        Verdict::Unverified(reason) => Err(DeltaError::Unverified {
            table: uri.to_owned(),
            reason,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::deletion_vector::DeletionVector;
    use crate::log::read::FileAction;

    /// An active file with `rows` records, `deleted` of them under deletion vector `dv`.
    fn file(dv: Option<&str>, rows: u64, deleted: u64) -> LogicalFile {
        LogicalFile {
            deletion_vector_id: dv.map(str::to_owned),
            live_rows: Some(rows - deleted),
        }
    }

    fn set(files: &[(&str, LogicalFile)]) -> ActiveSet {
        files
            .iter()
            .map(|(p, f)| ((*p).to_owned(), f.clone()))
            .collect()
    }

    fn action(path: &str, rows: Option<u64>, dv: Option<(&str, u64)>) -> FileAction {
        FileAction {
            path: path.to_owned(),
            size: Some(1),
            partition_values: Default::default(),
            data_change: false,
            deletion_timestamp: Some(1),
            num_records: rows,
            deletion_vector: dv.map(|(id, cardinality)| DeletionVector {
                id: id.to_owned(),
                cardinality,
                file: None,
            }),
        }
    }

    fn commit(removes: Vec<FileAction>, adds: Vec<FileAction>) -> Commit {
        Commit {
            version: 4,
            removes,
            adds,
            ..Commit::default()
        }
    }

    #[test]
    fn removes_of_active_files_pass_and_others_are_reported() {
        let active = set(&[("a", file(None, 1, 0)), ("b", file(Some("u1"), 3, 1))]);
        assert!(removed_but_inactive(&active, [("a", None), ("b", Some("u1"))]).is_empty());
        assert_eq!(
            removed_but_inactive(&active, [("x", None), ("b", Some("u1")), ("c", None)]),
            vec!["x", "c"]
        );
    }

    #[test]
    fn a_remove_with_another_deletion_vector_ends_no_active_file() {
        // the active file carries deletion vector u2 (a later DELETE); a remove of its older
        // logical version (u1, or none) leaves it active, so its rows would exist twice
        let active = set(&[("b", file(Some("u2"), 3, 2))]);
        assert_eq!(
            removed_but_inactive(&active, [("b", Some("u1"))]),
            vec!["b"]
        );
        assert_eq!(removed_but_inactive(&active, [("b", None)]), vec!["b"]);
    }

    #[tokio::test]
    async fn a_clean_rewrite_of_files_with_deletion_vectors_passes() {
        let before = set(&[("a", file(Some("u1"), 10, 2)), ("b", file(None, 5, 0))]);
        let good = commit(
            vec![action("a", None, Some(("u1", 2))), action("b", None, None)],
            vec![action("c", Some(13), None)],
        );
        assert_eq!(
            check_commit("/t", &good, Some((3, &before)), Rows::Kept)
                .await
                .expect("clean"),
            Verdict::Clean
        );
    }

    #[tokio::test]
    async fn a_rewrite_that_resurrects_deleted_rows_is_a_violation() {
        // the output holds all ten records of `a`, the two its deletion vector deleted included
        let before = set(&[("a", file(Some("u1"), 10, 2))]);
        let resurrecting = commit(
            vec![action("a", None, Some(("u1", 2)))],
            vec![action("c", Some(10), None)],
        );
        match check_commit("/t", &resurrecting, Some((3, &before)), Rows::Kept).await {
            Err(DeltaError::RowsChanged {
                version,
                expected,
                found,
                ..
            }) => assert_eq!((version, expected, found), (4, 8, 10)),
            other => panic!("expected a row violation, got {other:?}"),
        }
        let err = check_commit("/t", &resurrecting, Some((3, &before)), Rows::Kept)
            .await
            .expect_err("violation");
        assert!(err.to_string().contains("RESTORE it to version 3"), "{err}");
    }

    #[tokio::test]
    async fn a_rewrite_that_loses_rows_or_adds_files_from_nothing_is_a_violation() {
        let before = set(&[("a", file(None, 10, 0))]);
        let lossy = commit(
            vec![action("a", None, None)],
            vec![action("c", Some(9), None)],
        );
        assert!(matches!(
            check_commit("/t", &lossy, Some((3, &before)), Rows::Kept).await,
            Err(DeltaError::RowsChanged {
                expected: 10,
                found: 9,
                ..
            })
        ));
        let from_nothing = commit(Vec::new(), vec![action("c", Some(9), None)]);
        assert!(matches!(
            check_commit("/t", &from_nothing, Some((3, &before)), Rows::Kept).await,
            Err(DeltaError::RowsChanged {
                expected: 0,
                found: 9,
                ..
            })
        ));
    }

    #[tokio::test]
    async fn duplicate_rewrites_are_reported_and_missing_statistics_leave_rows_unchecked() {
        let before = set(&[("a", file(None, 1, 0)), ("b", file(None, 1, 0))]);
        let duplicate = commit(
            vec![action("a", None, None), action("x", None, None)],
            vec![action("c", Some(2), None)],
        );
        match check_commit("/t", &duplicate, Some((3, &before)), Rows::Kept).await {
            Err(DeltaError::DuplicateRewrite { version, files, .. }) => {
                assert_eq!(version, 4);
                assert_eq!(files, vec!["x"]);
            }
            other => panic!("unexpected {other:?}"),
        }
        let unknown_rows = commit(
            vec![action("a", None, None), action("b", None, None)],
            vec![action("c", None, None)],
        );
        assert!(matches!(
            check_commit("/t", &unknown_rows, Some((3, &before)), Rows::Kept).await,
            Ok(Verdict::Unverified(reason)) if reason.contains("no row statistics")
        ));
    }
}
