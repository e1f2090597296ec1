//! The protocol facts of a table, read once from its log: versions, features (those a legacy
//! version implies included), properties, partition columns, and every fact about a feature
//! that callers ask ([`TableProtocol`]). Reads nothing but the snapshot it is given; the
//! refusal rules built on these facts are [`crate::features::maintainable`].

use std::collections::{BTreeSet, HashMap};

use deltalake::kernel::EagerSnapshot;
use deltalake::DeltaTable;
use serde::Serialize;
use serde_json::Value;

use crate::error::DeltaError;

/// Table property that turns in-commit timestamps on.
const IN_COMMIT_TIMESTAMPS_PROPERTY: &str = "delta.enableInCommitTimestamps";

/// The protocol facts of a table, as recorded in its log.
#[derive(Debug, Clone, Serialize)]
pub struct TableProtocol {
    /// The table uri.
    pub table: String,
    pub min_reader_version: i32,
    pub min_writer_version: i32,
    /// Explicit reader features (reader version 3).
    pub reader_features: Vec<String>,
    /// Explicit writer features (writer version 7).
    pub writer_features: Vec<String>,
    /// The table's configuration (`delta.*` properties and others).
    pub properties: HashMap<String, String>,
    pub partition_columns: Vec<String>,
}

impl TableProtocol {
    /// Reads the protocol facts of a loaded table.
    pub fn of(uri: &str, table: &DeltaTable) -> Result<TableProtocol, DeltaError> {
        let state = table
            .snapshot()
            .map_err(|err| DeltaError::delta(uri, "reading the table protocol", err))?;
        TableProtocol::of_snapshot(uri, state.snapshot())
    }

    /// Reads the protocol facts of a snapshot: the one place protocol and table properties are
    /// parsed; every caller asks the methods below.
    pub(crate) fn of_snapshot(
        uri: &str,
        snapshot: &EagerSnapshot,
    ) -> Result<TableProtocol, DeltaError> {
        // Protocol's feature enum is internal to the kernel; its serde form is the log's own.
        let protocol =
            serde_json::to_value(snapshot.protocol()).map_err(|err| DeltaError::Internal {
                table: uri.to_owned(),
                reason: format!("protocol action does not serialize: {err}"),
            })?;
        let features = |key: &str| -> Vec<String> {
            protocol
                .get(key)
                .and_then(Value::as_array)
                .map(|arr| {
                    arr.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        let version = |key: &str| -> i32 {
            protocol
                .get(key)
                .and_then(Value::as_i64)
                .and_then(|v| i32::try_from(v).ok())
                .unwrap_or(i32::MAX)
        };
        let metadata = snapshot.metadata();
        Ok(TableProtocol {
            table: uri.to_owned(),
            min_reader_version: version("minReaderVersion"),
            min_writer_version: version("minWriterVersion"),
            reader_features: features("readerFeatures"),
            writer_features: features("writerFeatures"),
            properties: metadata.configuration().clone(),
            partition_columns: metadata.partition_columns().to_vec(),
        })
    }

    /// Whether a reader feature is in force (listed, or implied by a legacy reader version).
    pub fn supports_reader_feature(&self, feature: &str) -> bool {
        self.effective_reader_features().contains(feature)
    }

    /// Whether a writer feature is in force (listed, or implied by a legacy writer version).
    pub fn supports_writer_feature(&self, feature: &str) -> bool {
        self.effective_writer_features().contains(feature)
    }

    /// Whether a boolean table property is set to `true` (case-insensitively, as Delta reads it).
    pub(crate) fn property_is_true(&self, key: &str) -> bool {
        self.properties
            .get(key)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    /// True when the table may hold deletion vectors.
    pub fn deletion_vectors_enabled(&self) -> bool {
        self.supports_reader_feature("deletionVectors")
            || self.supports_writer_feature("deletionVectors")
            || self.property_is_true("delta.enableDeletionVectors")
    }

    /// Whether the table records in-commit timestamps (`delta.enableInCommitTimestamps`): every
    /// commit must then carry one, first.
    pub fn in_commit_timestamps(&self) -> bool {
        self.property_is_true(IN_COMMIT_TIMESTAMPS_PROPERTY)
    }

    /// Whether the table supports row tracking: every added file needs row ids.
    pub fn row_tracking_supported(&self) -> bool {
        self.supports_writer_feature("rowTracking")
    }

    /// Reader features in force, including those implied by a legacy reader version.
    pub(crate) fn effective_reader_features(&self) -> BTreeSet<String> {
        let mut set: BTreeSet<String> = self.reader_features.iter().cloned().collect();
        if self.min_reader_version == 2 {
            set.insert("columnMapping".into());
        }
        set
    }

    /// Writer features in force, including those implied by a legacy writer version
    /// (protocol table "Writer Version Requirements").
    pub(crate) fn effective_writer_features(&self) -> BTreeSet<String> {
        let mut set: BTreeSet<String> = self.writer_features.iter().cloned().collect();
        // each legacy version implies its own features and every lower version's; writer
        // version 7 lists them all explicitly
        const IMPLIED: &[(i32, &[&str])] = &[
            (2, &["appendOnly", "invariants"]),
            (3, &["checkConstraints"]),
            (4, &["changeDataFeed", "generatedColumns"]),
            (5, &["columnMapping"]),
            (6, &["identityColumns"]),
        ];
        let legacy = self.min_writer_version < 7;
        let implied = IMPLIED
            .iter()
            .filter(|(version, _)| legacy && self.min_writer_version >= *version)
            .flat_map(|(_, features)| features.iter());
        set.extend(implied.map(|f| (*f).to_owned()));
        set
    }

    /// The IcebergCompat version in force (`delta.enableIcebergCompatV1`/`V2`, with its
    /// feature supported): a UniForm table whose files Iceberg readers also read.
    pub fn iceberg_compat(&self) -> Option<u8> {
        [(2, "icebergCompatV2"), (1, "icebergCompatV1")]
            .into_iter()
            .find(|(version, feature)| {
                self.supports_writer_feature(feature)
                    && self.property_is_true(&format!("delta.enableIcebergCompatV{version}"))
            })
            .map(|(version, _)| version)
    }

    /// Whether the files must also hold the partition columns' values:
    /// `materializePartitionColumns`, or IcebergCompat (Iceberg readers read partition values
    /// from the files).
    pub fn materializes_partition_columns(&self) -> bool {
        self.supports_writer_feature("materializePartitionColumns")
            || self.iceberg_compat().is_some()
    }

    /// Whether UniForm generates Iceberg metadata for the table
    /// (`delta.universalFormat.enabledFormats` names `iceberg`).
    pub fn uniform_iceberg(&self) -> bool {
        self.properties
            .get("delta.universalFormat.enabledFormats")
            .is_some_and(|formats| {
                formats
                    .split(',')
                    .any(|f| f.trim().eq_ignore_ascii_case("iceberg"))
            })
    }

    /// Whether the table uses liquid clustering (writer feature `clustering`, or Databricks
    /// Runtime 13's `liquid`): its clustering columns are its layout.
    pub fn clustered(&self) -> bool {
        self.supports_writer_feature("clustering") || self.supports_writer_feature("liquid")
    }
}
