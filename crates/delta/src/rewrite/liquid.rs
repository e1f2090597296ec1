//! Liquid clustering: which columns a clustered table is clustered by, and which of its files
//! still need clustering.
//!
//! A clustered table (writer feature `clustering`, or Databricks Runtime 13's preview name
//! `liquid`) declares its clustering columns in the `delta.clustering` domain (or, in the
//! preview, the `delta.liquid.clusteringColumns` property). Its layout is those columns: the
//! inventory's `layout.zorder` does not apply, and compaction clusters the files no clustering
//! implementation has clustered yet, by the clustering columns, through the Z-order rewrite
//! ([`crate::rewrite::cluster`]). Files another implementation clustered (`clusteringProvider`
//! other than tablekeeper's) are left as they are, and the domain is never written.

use std::collections::BTreeMap;

use deltalake::DeltaTable;
use serde_json::Value;

use crate::error::DeltaError;
use crate::features::protocol::TableProtocol;
use crate::log::read::{ordered_partition_values, partition_key};
use crate::prepare::Prepared;
use crate::rewrite::plan::{unclustered, PartitionScope, Plan};

/// The `clusteringProvider` tablekeeper's clustered files carry.
pub(crate) const PROVIDER: &str = "tablekeeper";

/// The domain a clustered table keeps its clustering columns in.
const CLUSTERING_DOMAIN: &str = "delta.clustering";
/// Databricks Runtime 13's preview property for the same.
const PREVIEW_PROPERTY: &str = "delta.liquid.clusteringColumns";

/// The clustering columns of `table` (logical names, nested ones dotted), or `None` when the
/// table is not clustered.
pub(crate) async fn clustering_columns(
    uri: &str,
    table: &DeltaTable,
) -> Result<Option<Vec<String>>, DeltaError> {
    let snapshot = table
        .snapshot()
        .map_err(|e| DeltaError::delta(uri, "reading the snapshot", e))?;
    if !TableProtocol::of_snapshot(uri, snapshot.snapshot())?.clustered() {
        return Ok(None);
    }
    let domain = crate::log::domain::system_domain(
        uri,
        table.log_store().as_ref(),
        snapshot.version(),
        CLUSTERING_DOMAIN,
    )
    .await?;
    let physical: Vec<Vec<String>> = match domain {
        Some(configuration) => columns_of(&configuration),
        None => snapshot
            .metadata()
            .configuration()
            .get(PREVIEW_PROPERTY)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .map(|c| {
                        tablekeeper_vocab::column_path(c).unwrap_or_else(|_| vec![c.to_owned()])
                    })
                    .collect()
            })
            .unwrap_or_default(),
    };
    let names = crate::rewrite::column_mapping::logical_names(snapshot.schema().as_ref());
    Ok(Some(
        physical
            .into_iter()
            .map(|mut path| {
                if let Some(logical) = path.first().and_then(|top| names.get(top)) {
                    path[0].clone_from(logical);
                }
                tablekeeper_vocab::quote_path(&path)
            })
            .collect(),
    ))
}

/// `clusteringColumns` of the `delta.clustering` domain's configuration: column paths, each
/// a list of (physical) names.
fn columns_of(configuration: &str) -> Vec<Vec<String>> {
    let Ok(value) = serde_json::from_str::<Value>(configuration) else {
        return Vec::new();
    };
    value
        .get("clusteringColumns")
        .and_then(Value::as_array)
        .map(|columns| {
            columns
                .iter()
                .filter_map(|path| {
                    let parts: Vec<String> = path
                        .as_array()?
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect();
                    (!parts.is_empty()).then_some(parts)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The partitions holding at least two files no clustering implementation has clustered yet,
/// and what clustering them would read.
pub(crate) fn plan(uri: &str, prepared: &Prepared) -> Result<Plan, DeltaError> {
    let columns = &prepared.protocol.partition_columns;
    let snapshot = prepared
        .table
        .snapshot()
        .map_err(|e| DeltaError::delta(uri, "reading the snapshot", e))?
        .snapshot()
        .clone();
    let names = crate::rewrite::column_mapping::partition_names(&snapshot);
    let mut scopes: BTreeMap<String, (PartitionScope, u64, u64)> = BTreeMap::new();
    for file in snapshot
        .try_log_data()
        .map_err(|e| DeltaError::delta(uri, "reading the active files", e))?
    {
        #[allow(deprecated)] // the only public way to a file's `clusteringProvider`
        let provider = file.add_action().clustering_provider;
        if !unclustered(provider.as_deref()) {
            continue;
        }
        let values =
            crate::rewrite::column_mapping::logical_values(file.partition_values_map(), &names);
        let key = partition_key(columns, &values);
        let entry = scopes.entry(key.clone()).or_insert_with(|| {
            (
                PartitionScope {
                    key,
                    values: ordered_partition_values(columns, &values),
                },
                0,
                0,
            )
        });
        entry.1 += 1;
        entry.2 += u64::try_from(file.size()).unwrap_or(0);
    }
    scopes.retain(|_, (_, files, _)| *files >= 2);
    if scopes.is_empty() {
        return Ok(Plan::Nothing(
            "the table is clustered and no partition holds two files still to cluster".into(),
        ));
    }
    let files = scopes.values().map(|(_, f, _)| f).sum();
    let bytes = scopes.values().map(|(_, _, b)| b).sum();
    Ok(Plan::Rewrite {
        scopes: scopes.into_values().map(|(scope, _, _)| scope).collect(),
        files,
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clustering_columns_are_read_from_the_domain() {
        assert_eq!(
            columns_of(
                r#"{"clusteringColumns":[["id"],["address","city"]],"domainName":"delta.clustering"}"#
            ),
            vec![
                vec!["id".to_owned()],
                vec!["address".to_owned(), "city".to_owned()]
            ]
        );
        assert!(columns_of("not json").is_empty());
        assert!(unclustered(None));
        assert!(!unclustered(Some("liquid")));
        assert!(!unclustered(Some(PROVIDER)));
    }
}
