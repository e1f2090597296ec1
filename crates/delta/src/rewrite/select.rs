//! Choosing a rewrite's inputs: turning a set of partitions into partition filters, and the
//! active files those filters select, from the snapshot the rewrite plans on. Every rewrite kind
//! (compaction's bins, Z-order, purge, deltalake's OPTIMIZE) selects here, so a partition means
//! the same files to all of them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use deltalake::kernel::{Action, EagerSnapshot, LogicalFileView, Remove};
use deltalake::DeltaTable;

use crate::error::DeltaError;
use crate::log::read::partition_key;
use crate::rewrite::plan::PartitionScope;

/// An owned partition filter literal (deltalake's literals borrow their strings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OwnedFilter {
    /// `col = value`; an empty value selects the null partition.
    Eq(String, String),
    /// `col IN (values)`, none of them null.
    In(String, Vec<String>),
}

/// Filter sets (each a conjunction) that together select exactly `scopes`.
///
/// - unpartitioned table: one empty set, the whole table;
/// - one partition column: one `IN` set for all non-null values (one commit), plus an `=` set
///   for the null partition (deltalake's `IN` never matches null);
/// - several columns: one `=` conjunction per partition.
pub(crate) fn filter_sets(
    partition_columns: &[String],
    scopes: &[PartitionScope],
) -> Vec<Vec<OwnedFilter>> {
    if partition_columns.is_empty() {
        return if scopes.is_empty() {
            Vec::new()
        } else {
            vec![Vec::new()]
        };
    }
    if let [column] = partition_columns {
        let mut values = BTreeSet::new();
        let mut null = false;
        for scope in scopes {
            match scope.values.first().and_then(|(_, v)| v.clone()) {
                Some(v) => {
                    values.insert(v);
                }
                None => null = true,
            }
        }
        let mut sets = Vec::new();
        if !values.is_empty() {
            sets.push(vec![OwnedFilter::In(
                column.clone(),
                values.into_iter().collect(),
            )]);
        }
        if null {
            sets.push(vec![OwnedFilter::Eq(column.clone(), String::new())]);
        }
        return sets;
    }
    scopes
        .iter()
        .map(|scope| {
            scope
                .values
                .iter()
                .map(|(col, v)| OwnedFilter::Eq(col.clone(), v.clone().unwrap_or_default()))
                .collect()
        })
        .collect()
}

/// The snapshot of `table` a rewrite plans and reads on.
pub(crate) fn planned_snapshot(uri: &str, table: &DeltaTable) -> Result<EagerSnapshot, DeltaError> {
    Ok(table
        .snapshot()
        .map_err(|e| DeltaError::delta(uri, "reading the snapshot", e))?
        .snapshot()
        .clone())
}

/// The active files of `snapshot` in the partitions `filters` select, as `choose` maps them
/// (`None` leaves a file out), grouped by partition key in key order. Every rewrite kind picks
/// its inputs here. Filters and keys use logical column names; `choose` gets the values as the
/// log keys them (physical names on a column-mapped table), which is what new adds carry.
pub(crate) fn select_files<T>(
    uri: &str,
    snapshot: &EagerSnapshot,
    filters: &[OwnedFilter],
    mut choose: impl FnMut(&LogicalFileView, HashMap<String, Option<String>>) -> Option<T>,
) -> Result<BTreeMap<String, Vec<T>>, DeltaError> {
    let partition_columns = snapshot.metadata().partition_columns();
    let names = crate::rewrite::column_mapping::partition_names(snapshot);
    let mut partitions: BTreeMap<String, Vec<T>> = BTreeMap::new();
    for file in snapshot
        .try_log_data()
        .map_err(|e| DeltaError::delta(uri, "reading the active files", e))?
    {
        let values = file.partition_values_map();
        let logical = crate::rewrite::column_mapping::logical_values(values.clone(), &names);
        if !matches(filters, &logical) {
            continue;
        }
        let key = partition_key(partition_columns, &logical);
        if let Some(chosen) = choose(&file, values) {
            partitions.entry(key).or_default().push(chosen);
        }
    }
    Ok(partitions)
}

/// The `remove` a rewrite commits for `file`, as an action (see [`remove_keeping_row_ids`]).
pub(crate) fn remove_of(file: &LogicalFileView) -> Action {
    Action::Remove(remove_keeping_row_ids(file))
}

/// The `remove` a rewrite or a repair commits for `file`: `dataChange: false`, its deletion
/// vector, and the row ids it held (`baseRowId`, `defaultRowCommitVersion`), which row tracking
/// asks removes to carry.
pub(crate) fn remove_keeping_row_ids(file: &LogicalFileView) -> Remove {
    #[allow(deprecated)] // the only public way to the file's row-tracking fields
    let add = file.add_action();
    let mut remove = file.remove_action(false);
    remove.base_row_id = add.base_row_id;
    remove.default_row_commit_version = add.default_row_commit_version;
    remove
}

/// Whether a file's partition values satisfy a conjunction of filters (see
/// [`filter_sets`]: an empty value stands for the null partition).
pub(crate) fn matches(filters: &[OwnedFilter], values: &HashMap<String, Option<String>>) -> bool {
    filters.iter().all(|filter| match filter {
        OwnedFilter::Eq(column, value) => {
            let actual = values.get(column).cloned().flatten().unwrap_or_default();
            actual == *value
        }
        OwnedFilter::In(column, set) => values
            .get(column)
            .cloned()
            .flatten()
            .is_some_and(|v| set.contains(&v)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(values: &[(&str, Option<&str>)]) -> PartitionScope {
        PartitionScope {
            key: String::new(),
            values: values
                .iter()
                .map(|(c, v)| ((*c).to_owned(), v.map(str::to_owned)))
                .collect(),
        }
    }

    #[test]
    fn unpartitioned_tables_use_no_filter() {
        assert_eq!(
            filter_sets(&[], &[scope(&[])]),
            vec![Vec::<OwnedFilter>::new()]
        );
        assert!(filter_sets(&[], &[]).is_empty());
    }

    #[test]
    fn one_partition_column_becomes_one_in_filter_plus_null() {
        let cols = vec!["d".to_owned()];
        let sets = filter_sets(
            &cols,
            &[
                scope(&[("d", Some("2"))]),
                scope(&[("d", None)]),
                scope(&[("d", Some("1"))]),
            ],
        );
        assert_eq!(
            sets,
            vec![
                vec![OwnedFilter::In("d".into(), vec!["1".into(), "2".into()])],
                vec![OwnedFilter::Eq("d".into(), String::new())],
            ]
        );
    }

    #[test]
    fn several_partition_columns_become_one_conjunction_each() {
        let cols = vec!["d".to_owned(), "k".to_owned()];
        let sets = filter_sets(&cols, &[scope(&[("d", Some("1")), ("k", None)])]);
        assert_eq!(
            sets,
            vec![vec![
                OwnedFilter::Eq("d".into(), "1".into()),
                OwnedFilter::Eq("k".into(), String::new())
            ]]
        );
    }

    fn values(pairs: &[(&str, Option<&str>)]) -> HashMap<String, Option<String>> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.map(str::to_owned)))
            .collect()
    }

    #[test]
    fn filters_select_partitions_as_deltalake_would() {
        let d1 = values(&[("d", Some("1"))]);
        let null = values(&[("d", None)]);
        let in_set = [OwnedFilter::In("d".into(), vec!["1".into(), "2".into()])];
        assert!(matches(&in_set, &d1));
        assert!(!matches(&in_set, &null));
        let is_null = [OwnedFilter::Eq("d".into(), String::new())];
        assert!(matches(&is_null, &null));
        assert!(!matches(&is_null, &d1));
        assert!(matches(&[], &d1));
    }
}
