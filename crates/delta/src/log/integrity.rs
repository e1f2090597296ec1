//! Which versions of a log can be loaded, whether the log is damaged, and what log cleanup may
//! delete without breaking either (DESIGN.md, "Log retention and history").
//!
//! A version loads from the JSON commits 0 up to it, or from a complete checkpoint at or before
//! it followed by every JSON commit up to it. Log cleanup makes the oldest versions unloadable
//! on purpose; anything else that makes a version between the oldest loadable one and the latest
//! unloadable is damage: a JSON commit missing in the middle, a checkpoint part missing, or a
//! `_last_checkpoint` that points at no complete checkpoint (readers start from it).
//!
//! Owns those rules as pure functions over a [`LogListing`] and the cleanup plan with its proof:
//! the files that would remain must keep every version from the oldest one inside the window to
//! the latest loadable, keep the newest checkpoint, and leave `_last_checkpoint` valid. This
//! module never touches storage.

use std::collections::BTreeSet;

use deltalake::Path;

use crate::error::DeltaError;
use crate::log::read::LogListing;

/// Which versions up to `latest` load from the listed files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Loadability {
    /// The oldest loadable version.
    pub oldest: Option<u64>,
    /// Versions after `oldest` (up to `latest`) that do not load: gaps.
    pub holes: Vec<u64>,
}

/// Sweeps the versions from the oldest listed file to `latest`.
pub(crate) fn loadability(listing: &LogListing, latest: u64) -> Loadability {
    let complete: BTreeSet<u64> = listing.complete_checkpoints().collect();
    let first_commit = listing.commits.keys().next().copied();
    let first_checkpoint = complete.iter().next().copied();
    let Some(start) = first_commit.into_iter().chain(first_checkpoint).min() else {
        return Loadability {
            oldest: None,
            holes: Vec::new(),
        };
    };
    let mut oldest = None;
    let mut holes = Vec::new();
    let mut previous_loads = false;
    for version in start..=latest {
        let loads = complete.contains(&version)
            || (listing.commits.contains_key(&version) && (version == 0 || previous_loads));
        match (loads, oldest) {
            (true, None) => oldest = Some(version),
            (false, Some(_)) => holes.push(version),
            _ => {}
        }
        previous_loads = loads;
    }
    Loadability { oldest, holes }
}

/// Describes every kind of damage in the log, one sentence each; empty when it is sound.
/// `hint` is the version `_last_checkpoint` names, if the file exists.
pub(crate) fn damage(listing: &LogListing, latest: u64, hint: Option<u64>) -> Vec<String> {
    let mut found = Vec::new();
    for (version, files) in &listing.checkpoints {
        if let Some((missing, total)) = files.missing_parts() {
            found.push(format!(
                "checkpoint {version} is missing part(s) {missing:?} of {total}"
            ));
        }
    }
    let loads = loadability(listing, latest);
    // A run of versions that does not load is damage when it starts right after a commit that
    // exists: the chain of commits broke there. Runs left by log cleanup start after a
    // checkpoint whose own and earlier commits were deleted, and are expected.
    let broken = ranges(&loads.holes)
        .into_iter()
        .filter(|(from, _)| *from == 0 || listing.commits.contains_key(&(from - 1)));
    for (from, to) in broken {
        let span = if from == to {
            format!("version {from} does not load")
        } else {
            format!("versions {from}..={to} do not load")
        };
        found.push(format!(
            "{span}: commit {from} is missing from _delta_log and no checkpoint covers it"
        ));
    }
    if let Some(hint) = hint {
        let ok = listing
            .checkpoints
            .get(&hint)
            .is_some_and(|files| files.complete());
        if !ok {
            found.push(format!(
                "_last_checkpoint points at version {hint}, which has no complete checkpoint"
            ));
        }
    }
    found
}

/// Contiguous runs of `versions` (sorted) as inclusive ranges.
fn ranges(versions: &[u64]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &v in versions {
        match out.last_mut() {
            Some((_, end)) if *end + 1 == v => *end = v,
            _ => out.push((v, v)),
        }
    }
    out
}

/// What log cleanup may delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CleanupPlan {
    /// The checkpoint every remaining version is rebuilt from.
    pub checkpoint: u64,
    /// The oldest version that stays loadable.
    pub oldest_retained: u64,
    /// JSON commit versions deleted, ascending.
    pub commits: Vec<u64>,
    /// Every file deleted (commits, older checkpoints, checksums), oldest version first.
    pub files: Vec<Path>,
}

/// The limits a cleanup works within.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CleanupBounds {
    /// The latest version.
    pub latest: u64,
    /// The oldest version inside the retention window (time travel to the cutoff lands on it):
    /// it and every later version must stay loadable.
    pub keep_from: u64,
    /// Commit files modified after this instant are kept whatever their version.
    pub cutoff_ms: i64,
    /// Only commits in this range may be deleted (those already copied into durable history);
    /// `None` allows any.
    pub deletable: Option<(u64, u64)>,
    /// The version `_last_checkpoint` names after the checkpoint was written.
    pub hint: Option<u64>,
}

/// Plans the deletion and proves it: returns `Ok(None)` when there is nothing to delete, and
/// an error naming what would break when the plan would not keep the log sound.
pub(crate) fn plan_cleanup(
    listing: &LogListing,
    bounds: &CleanupBounds,
) -> Result<Option<CleanupPlan>, String> {
    let Some(checkpoint) = listing
        .complete_checkpoints()
        .rev()
        .find(|cp| *cp <= bounds.keep_from)
    else {
        return Ok(None);
    };
    let newest_checkpoint = listing.complete_checkpoints().next_back();
    let may_delete_commit = |version: u64| {
        bounds
            .deletable
            .is_none_or(|(from, to)| version >= from && version <= to)
    };
    // a contiguous run of the oldest versions, so what remains has no hole
    let mut doomed: BTreeSet<u64> = BTreeSet::new();
    for (&version, &modified) in listing.commits.range(..checkpoint) {
        if modified > bounds.cutoff_ms || !may_delete_commit(version) {
            break;
        }
        doomed.insert(version);
    }
    let boundary = doomed.iter().next_back().map_or(0, |v| v + 1);
    let files: Vec<Path> = listing
        .files
        .iter()
        .filter(|f| f.version < boundary && f.modified_ms <= bounds.cutoff_ms)
        .map(|f| f.location.clone())
        .collect();
    if files.is_empty() {
        return Ok(None);
    }
    // the proof: rebuild the listing without the doomed files and check it
    let doomed_files: BTreeSet<&Path> = files.iter().collect();
    let mut remaining = LogListing::default();
    for entry in listing
        .files
        .iter()
        .filter(|f| !doomed_files.contains(&f.location))
    {
        remaining.add(&entry.location, entry.modified_ms);
    }
    let before = loadability(listing, bounds.latest);
    let after = loadability(&remaining, bounds.latest);
    let mut broken = Vec::new();
    match after.oldest {
        Some(oldest) if oldest <= bounds.keep_from => {}
        Some(oldest) => broken.push(format!(
            "version {} (the oldest inside the retention window) would not load; the oldest loadable would be {oldest}",
            bounds.keep_from
        )),
        None => broken.push("no version would load".to_owned()),
    }
    let new_holes: Vec<u64> = after
        .holes
        .iter()
        .filter(|v| !before.holes.contains(v))
        .copied()
        .collect();
    if !new_holes.is_empty() {
        broken.push(format!("versions {new_holes:?} would stop loading"));
    }
    if newest_checkpoint.is_some()
        && remaining.complete_checkpoints().next_back() != newest_checkpoint
    {
        broken.push(format!(
            "the newest checkpoint ({}) would be deleted",
            newest_checkpoint.unwrap_or_default()
        ));
    }
    if let Some(hint) = bounds.hint {
        if !remaining
            .checkpoints
            .get(&hint)
            .is_some_and(|c| c.complete())
        {
            broken.push(format!(
                "_last_checkpoint names version {hint}, whose checkpoint would be deleted"
            ));
        }
    }
    if !broken.is_empty() {
        return Err(broken.join("; "));
    }
    Ok(Some(CleanupPlan {
        checkpoint,
        oldest_retained: after.oldest.unwrap_or(checkpoint),
        commits: doomed.into_iter().collect(),
        files,
    }))
}

/// Fails with [`DeltaError::DamagedLog`] when the listed log has gaps.
pub(crate) fn ensure_log_sound(
    uri: &str,
    listing: &LogListing,
    latest: u64,
    hint: Option<u64>,
) -> Result<(), DeltaError> {
    let gaps = damage(listing, latest, hint);
    if gaps.is_empty() {
        Ok(())
    } else {
        Err(DeltaError::DamagedLog {
            table: uri.to_owned(),
            gaps,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(commits: &[u64], checkpoints: &[u64], modified_ms: i64) -> LogListing {
        let mut l = LogListing::default();
        for v in commits {
            l.add(&Path::from(format!("_delta_log/{v:020}.json")), modified_ms);
        }
        for v in checkpoints {
            l.add(
                &Path::from(format!("_delta_log/{v:020}.checkpoint.parquet")),
                modified_ms,
            );
        }
        l
    }

    #[test]
    fn a_complete_log_loads_everything() {
        let l = listing(&(0..=12).collect::<Vec<_>>(), &[10], 0);
        assert_eq!(
            loadability(&l, 12),
            Loadability {
                oldest: Some(0),
                holes: vec![]
            }
        );
        assert!(damage(&l, 12, Some(10)).is_empty());
    }

    #[test]
    fn cleaned_up_prefixes_are_not_damage() {
        let l = listing(&[5, 6, 7, 8, 9, 10, 11, 12], &[8], 0);
        let loads = loadability(&l, 12);
        assert_eq!(loads.oldest, Some(8));
        assert!(loads.holes.is_empty());
        assert!(damage(&l, 12, Some(8)).is_empty());
    }

    #[test]
    fn a_missing_commit_in_the_middle_is_a_gap() {
        let l = listing(&[0, 1, 2, 4, 5], &[], 0);
        let found = damage(&l, 5, None);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("versions 3..=5"), "{found:?}");
        // a checkpoint at the missing version closes the gap
        let l = listing(&[0, 1, 2, 4, 5], &[3], 0);
        assert!(damage(&l, 5, Some(3)).is_empty());
    }

    #[test]
    fn checkpoints_left_behind_by_log_cleanup_are_not_damage() {
        // commits up to 10 deleted, the checkpoints at 3 and 7 kept (they were newer)
        let l = listing(&[11, 12], &[3, 7, 11], 0);
        assert!(
            damage(&l, 12, Some(11)).is_empty(),
            "{:?}",
            damage(&l, 12, Some(11))
        );
        // a commit missing right before a checkpoint is a hole in history all the same
        let l = listing(&[0, 1, 2, 3, 5, 6], &[5], 0);
        assert_eq!(damage(&l, 6, Some(5)).len(), 1);
    }

    #[test]
    fn missing_parts_and_dangling_hints_are_damage() {
        let mut l = listing(&(0..=4).collect::<Vec<_>>(), &[], 0);
        l.add(
            &Path::from("_delta_log/00000000000000000003.checkpoint.0000000001.0000000002.parquet"),
            0,
        );
        let found = damage(&l, 4, Some(3));
        assert!(
            found.iter().any(|d| d.contains("missing part(s) [2] of 2")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|d| d.contains("_last_checkpoint points at version 3")),
            "{found:?}"
        );
        let l = listing(&(0..=4).collect::<Vec<_>>(), &[], 0);
        assert_eq!(damage(&l, 4, Some(2)).len(), 1);
    }

    fn bounds(latest: u64, keep_from: u64, hint: u64) -> CleanupBounds {
        CleanupBounds {
            latest,
            keep_from,
            cutoff_ms: 100,
            deletable: None,
            hint: Some(hint),
        }
    }

    #[test]
    fn cleanup_deletes_up_to_the_checkpoint_before_the_window() {
        let l = listing(&(0..=20).collect::<Vec<_>>(), &[10, 20], 0);
        let plan = plan_cleanup(&l, &bounds(20, 15, 20))
            .expect("sound")
            .expect("something to delete");
        assert_eq!(plan.checkpoint, 10);
        assert_eq!(plan.commits, (0..10).collect::<Vec<_>>());
        assert_eq!(plan.oldest_retained, 10);
        assert_eq!(plan.files.len(), 10);
    }

    #[test]
    fn cleanup_keeps_what_history_has_not_recorded_and_what_is_recent() {
        let l = listing(&(0..=20).collect::<Vec<_>>(), &[10, 20], 0);
        let mut b = bounds(20, 15, 20);
        b.deletable = Some((0, 4));
        let plan = plan_cleanup(&l, &b).expect("sound").expect("some");
        assert_eq!(plan.commits, (0..=4).collect::<Vec<_>>());
        b.deletable = Some((3, 20));
        assert_eq!(
            plan_cleanup(&l, &b).expect("sound"),
            None,
            "0..2 unrecorded"
        );
        let recent = listing(&(0..=20).collect::<Vec<_>>(), &[10, 20], 1_000);
        assert_eq!(
            plan_cleanup(&recent, &bounds(20, 15, 20)).expect("sound"),
            None
        );
    }

    #[test]
    fn cleanup_needs_a_checkpoint_at_or_before_the_window() {
        let l = listing(&(0..=20).collect::<Vec<_>>(), &[18], 0);
        assert_eq!(plan_cleanup(&l, &bounds(20, 15, 18)).expect("sound"), None);
    }
}
