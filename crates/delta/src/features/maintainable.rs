//! Which tables this crate may touch, and for what.
//!
//! Owns [`check_maintainable`], the refusal rules over a table's protocol facts
//! ([`TableProtocol`], `features/protocol.rs`): a table whose protocol needs a writer feature
//! neither deltalake 1.1.2 nor tablekeeper's own commits can write is refused with a clear
//! error and never touched, rows
//! whose ids row tracking keeps are moved only with their ids, and a catalog-managed table is
//! refused for everything. Every rewrite is tablekeeper's own (`crate::rewrite`), whatever the
//! table's features.
//! Deletion vectors are maintained: rewrites read through deltalake's deletion-vector-aware
//! scan and every rewrite commit passes the row check of [`crate::rewrite::guard`]; VACUUM protects the
//! deletion-vector files of every version inside the retention window itself
//! ([`crate::retention::vacuum`]), whatever deltalake lists. This module must never inspect data files:
//! the log is enough.

use std::collections::BTreeSet;

use crate::error::DeltaError;
use crate::features::protocol::TableProtocol;
use tablekeeper_vocab::Operation;

/// Reader features deltalake-core 1.1.3 can read, mirrored from
/// `kernel/transaction/protocol.rs` (`INSTANCE`, built with the `datafusion` feature).
const SUPPORTED_READER_FEATURES: &[&str] = &[
    "timestampNtz",
    "deletionVectors",
    "variantType",
    "variantType-preview",
    "v2Checkpoint",
    "columnMapping",
];

/// Writer features deltalake-core 1.1.3 can write, mirrored from the same `INSTANCE`.
const SUPPORTED_WRITER_FEATURES: &[&str] = &[
    "appendOnly",
    "timestampNtz",
    "variantType",
    "variantType-preview",
    "v2Checkpoint",
    "changeDataFeed",
    "invariants",
    "checkConstraints",
    "generatedColumns",
    "columnMapping",
    "deletionVectors",
    "checkpointProtection",
];

/// Reader features deltalake's scan refuses whose rules concern only how data files are
/// read: type widening (files written before a column was widened hold its older type).
/// VACUUM and checkpoints read the log, never a data file; the rewrites read through
/// [`crate::rewrite::widened`], which converts the older types but applies no deletion vector
/// and writes no row ids, so those two are refused with it.
const DATA_READER_FEATURES: &[&str] = &["typeWidening", "typeWidening-preview"];

/// Writer features deltalake cannot write whose rules tablekeeper's own commits and rewrites
/// meet ([`crate::log::commit`], [`crate::rewrite::decode`]): in-commit timestamps, fresh row
/// ids and the row tracking high-water mark, no `metaData` (so identity high-water marks,
/// clustering columns, type changes and collations stay), no domain but row tracking's;
/// statistics a collation forbids left out, partition values materialized into the files
/// (`materializePartitionColumns`, IcebergCompat), `numRecords` on every added file and no
/// deletion vector (IcebergCompat), nested field ids written (IcebergCompatV2).
/// `vacuumProtocolCheck` asks VACUUM to check the writer protocol first, which this module
/// does for every operation. A type change is a schema change, which tablekeeper never makes.
const OWN_COMMIT_WRITER_FEATURES: &[&str] = &[
    "identityColumns",
    "clustering",
    // Databricks Runtime 13.x's preview name of `clustering`
    "liquid",
    "domainMetadata",
    "rowTracking",
    "inCommitTimestamp",
    "vacuumProtocolCheck",
    "typeWidening",
    "typeWidening-preview",
    "collations",
    "materializePartitionColumns",
    "icebergCompatV1",
    "icebergCompatV2",
];

/// Features saying a catalog owns the table's commits: nothing but the catalog may write.
const CATALOG_FEATURES: &[&str] = &["catalogManaged", "catalogOwned-preview"];

/// Highest protocol versions the Delta kernel in deltalake 1.1.x understands.
const MAX_READER_VERSION: i32 = 3;
const MAX_WRITER_VERSION: i32 = 7;

/// Refuses `op` on a table this crate cannot maintain safely; `Ok(())` means go ahead.
///
/// - every op: protocol versions above reader 3 / writer 7, or reader features deltalake cannot
///   read;
/// - every op: catalog-managed tables (`catalogManaged`), naming the catalog's ownership;
/// - compaction, Z-order, purge, vacuum: writer features neither deltalake nor tablekeeper's
///   own commits ([`OWN_COMMIT_WRITER_FEATURES`]) can write;
/// - compaction, Z-order, purge: row tracking enabled without the materialized columns named
///   (rows a rewrite moves keep their ids in them, [`crate::rewrite::row_ids`]).
pub fn check_maintainable(protocol: &TableProtocol, op: Operation) -> Result<(), DeltaError> {
    let refuse = |features: Vec<String>, reason: String| DeltaError::UnsupportedProtocol {
        table: protocol.table.clone(),
        operation: op,
        features,
        reason,
    };
    if protocol.min_reader_version > MAX_READER_VERSION
        || protocol.min_writer_version > MAX_WRITER_VERSION
    {
        return Err(refuse(
            Vec::new(),
            format!(
                "protocol reader {} / writer {} is newer than deltalake 1.1.2 understands",
                protocol.min_reader_version, protocol.min_writer_version
            ),
        ));
    }
    let catalog: Vec<String> = protocol
        .effective_reader_features()
        .into_iter()
        .chain(protocol.effective_writer_features())
        .filter(|f| CATALOG_FEATURES.contains(&f.as_str()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if !catalog.is_empty() {
        return Err(refuse(
            catalog,
            "the table is catalog-managed: its catalog owns every commit, and only the \
             catalog's own maintenance may write to it"
                .into(),
        ));
    }
    let unknown_readers: Vec<String> = protocol
        .effective_reader_features()
        .into_iter()
        .filter(|f| {
            !SUPPORTED_READER_FEATURES.contains(&f.as_str())
                && !DATA_READER_FEATURES.contains(&f.as_str())
        })
        .collect();
    if !unknown_readers.is_empty() {
        return Err(refuse(
            unknown_readers,
            "the table needs reader features deltalake 1.1.2 does not support".into(),
        ));
    }
    let widened: Vec<String> = protocol
        .effective_reader_features()
        .into_iter()
        .filter(|f| DATA_READER_FEATURES.contains(&f.as_str()))
        .collect();
    let rows_kept =
        protocol.deletion_vectors_enabled() || protocol.property_is_true("delta.enableRowTracking");
    if op.rewrites() && !widened.is_empty() && rows_kept {
        return Err(refuse(
            widened,
            "type widening with deletion vectors or row tracking: a rewrite converts the older \
             files' values itself (deltalake 1.1.3's scan refuses the feature), and that read \
             applies no deletion vector and carries no row id; VACUUM and checkpoints, which \
             read only the log, still run"
                .into(),
        ));
    }
    if op == Operation::Checkpoint {
        return Ok(());
    }
    let unknown_writers: Vec<String> = protocol
        .effective_writer_features()
        .into_iter()
        .filter(|f| {
            !SUPPORTED_WRITER_FEATURES.contains(&f.as_str())
                && !OWN_COMMIT_WRITER_FEATURES.contains(&f.as_str())
        })
        .collect();
    if !unknown_writers.is_empty() {
        return Err(refuse(
            unknown_writers,
            "the table needs writer features neither deltalake 1.1.2 nor tablekeeper can write"
                .into(),
        ));
    }
    if op.rewrites() {
        if let Err(reason) = crate::rewrite::row_ids::RowTracking::of(&protocol.properties) {
            return Err(refuse(
                vec!["rowTracking".into()],
                format!(
                    "{reason}: rows a rewrite moves must keep their row ids, materialized in \
                     that column, so the table cannot be rewritten; VACUUM and checkpoints \
                     still run"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn protocol(
        reader: i32,
        writer: i32,
        rf: &[&str],
        wf: &[&str],
        props: &[(&str, &str)],
    ) -> TableProtocol {
        TableProtocol {
            table: "s3://lake/t".into(),
            min_reader_version: reader,
            min_writer_version: writer,
            reader_features: rf.iter().map(|s| (*s).to_owned()).collect(),
            writer_features: wf.iter().map(|s| (*s).to_owned()).collect(),
            properties: props
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            partition_columns: Vec::new(),
        }
    }

    #[test]
    fn plain_tables_are_maintainable() {
        let p = protocol(1, 2, &[], &[], &[]);
        for op in [
            Operation::Compact,
            Operation::Zorder,
            Operation::Vacuum,
            Operation::Checkpoint,
        ] {
            assert!(check_maintainable(&p, op).is_ok(), "{op}");
        }
        let p = protocol(
            3,
            7,
            &["timestampNtz"],
            &["timestampNtz", "appendOnly"],
            &[],
        );
        assert!(check_maintainable(&p, Operation::Compact).is_ok());
    }

    #[test]
    fn deletion_vectors_are_maintained_by_every_operation() {
        for p in [
            protocol(3, 7, &["deletionVectors"], &["deletionVectors"], &[]),
            protocol(1, 2, &[], &[], &[("delta.enableDeletionVectors", "true")]),
        ] {
            for op in Operation::ALL {
                assert!(check_maintainable(&p, op).is_ok(), "{op}");
            }
        }
    }

    #[test]
    fn unknown_features_are_refused() {
        let p = protocol(3, 7, &[], &["rowTracking", "futureWriter"], &[]);
        let err = check_maintainable(&p, Operation::Compact).expect_err("refused");
        match err {
            DeltaError::UnsupportedProtocol { features, .. } => {
                assert_eq!(features, vec!["futureWriter".to_owned()]);
            }
            other => panic!("unexpected {other:?}"),
        }
        // identity columns come with legacy writer version 6: tablekeeper's commits keep them
        assert!(check_maintainable(&protocol(1, 6, &[], &[], &[]), Operation::Compact).is_ok());
        // row tracking supported: fresh ids; enabled: ids carried in the materialized columns,
        // refused when the table names none
        let tracked = protocol(3, 7, &[], &["rowTracking", "domainMetadata"], &[]);
        assert!(check_maintainable(&tracked, Operation::Compact).is_ok());
        let unnamed = protocol(
            3,
            7,
            &[],
            &["rowTracking", "domainMetadata"],
            &[("delta.enableRowTracking", "true")],
        );
        let err = check_maintainable(&unnamed, Operation::Zorder).expect_err("refused");
        assert!(
            err.to_string()
                .contains("delta.rowTracking.materializedRowIdColumnName"),
            "{err}"
        );
        assert!(check_maintainable(&unnamed, Operation::Vacuum).is_ok());
        let clustered = protocol(
            3,
            7,
            &[],
            &[
                "clustering",
                "domainMetadata",
                "rowTracking",
                "inCommitTimestamp",
            ],
            &[],
        );
        assert!(check_maintainable(&clustered, Operation::Vacuum).is_ok());
        assert!(check_maintainable(&clustered, Operation::Compact).is_ok());
        assert!(check_maintainable(
            &protocol(3, 7, &[], &["futureWriter"], &[]),
            Operation::Vacuum
        )
        .is_err());
        // a catalog-managed table is refused for everything, naming the catalog
        let managed = protocol(
            3,
            7,
            &["catalogManaged"],
            &["catalogManaged", "inCommitTimestamp"],
            &[],
        );
        for op in Operation::ALL {
            let err = check_maintainable(&managed, op).expect_err("catalog-managed");
            assert!(err.to_string().contains("catalog-managed"), "{err}");
        }
        // an unreadable table is refused even for checkpoints
        let p = protocol(3, 7, &["futureFeature"], &[], &[]);
        assert!(check_maintainable(&p, Operation::Checkpoint).is_err());
        assert!(check_maintainable(&protocol(4, 7, &[], &[], &[]), Operation::Checkpoint).is_err());
    }

    #[test]
    fn spark_4_and_databricks_features() {
        let uniform = protocol(
            2,
            7,
            &[],
            &[
                "columnMapping",
                "icebergCompatV2",
                "appendOnly",
                "invariants",
            ],
            &[
                ("delta.enableIcebergCompatV2", "true"),
                ("delta.columnMapping.mode", "id"),
            ],
        );
        let collated = protocol(1, 7, &[], &["domainMetadata", "collations"], &[]);
        let materialized = protocol(3, 7, &[], &["materializePartitionColumns"], &[]);
        for p in [&uniform, &collated, &materialized] {
            for op in Operation::ALL {
                assert!(check_maintainable(p, op).is_ok(), "{op}: {p:?}");
            }
        }
        assert_eq!(uniform.iceberg_compat(), Some(2));
        assert!(uniform.materializes_partition_columns());
        assert!(
            !uniform.uniform_iceberg(),
            "no enabledFormats: compatible, not converted"
        );
        assert!(materialized.materializes_partition_columns());
        assert!(!collated.materializes_partition_columns());
        // supported but not enabled: no IcebergCompat rule applies
        let supported = protocol(2, 7, &[], &["columnMapping", "icebergCompatV1"], &[]);
        assert_eq!(supported.iceberg_compat(), None);

        // type widening: every operation; with deletion vectors, rewrites are refused
        let widened = protocol(
            3,
            7,
            &["timestampNtz", "typeWidening-preview"],
            &[
                "timestampNtz",
                "typeWidening-preview",
                "appendOnly",
                "invariants",
            ],
            &[("delta.enableTypeWidening", "true")],
        );
        for op in Operation::ALL {
            assert!(check_maintainable(&widened, op).is_ok(), "{op}");
        }
        let with_vectors = protocol(
            3,
            7,
            &["typeWidening", "deletionVectors"],
            &["typeWidening", "deletionVectors"],
            &[],
        );
        for op in Operation::ALL {
            let result = check_maintainable(&with_vectors, op);
            if op.rewrites() {
                let err = result.expect_err("a rewrite is refused");
                assert!(err.to_string().contains("type widening"), "{err}");
            } else {
                assert!(result.is_ok(), "{op}: {result:?}");
            }
        }
    }

    #[test]
    fn column_mapped_tables_are_maintained() {
        let p = protocol(2, 5, &[], &[], &[("delta.columnMapping.mode", "name")]);
        for op in Operation::ALL {
            assert!(check_maintainable(&p, op).is_ok(), "{op}");
        }
    }
}
