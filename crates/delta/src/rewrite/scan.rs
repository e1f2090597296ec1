//! The rewrite scan: the live rows of chosen files, read through the table's schema by
//! deltalake's deletion-vector-aware scan (`DeltaScanNext` with a file selection: partition
//! columns filled in, deleted rows left out, a column-mapped table's physical columns read by
//! their logical names). Every rewrite reads its inputs here; nothing here decodes Parquet or
//! deletion vectors itself. A table with type widening is read by
//! [`crate::rewrite::widened`] instead.

use std::sync::Arc;

use deltalake::arrow::datatypes::SchemaRef;
use deltalake::datafusion::execution::SendableRecordBatchStream;
use deltalake::datafusion::prelude::{SessionConfig, SessionContext};
use deltalake::delta_datafusion::engine::AsObjectStoreUrl as _;
use deltalake::delta_datafusion::{DeltaScanNext, FileSelection};
use deltalake::kernel::{Add, EagerSnapshot};
use deltalake::logstore::LogStoreRef;

use crate::error::DeltaError;

/// The live rows of `paths` (files of `snapshot`, percent-decoded as `LogicalFileView::path`)
/// and their schema. With `in_order`, files and row groups are read one after another, so one
/// file's rows come out in the order the file holds them.
pub(crate) async fn scan(
    uri: &str,
    log_store: &LogStoreRef,
    snapshot: &EagerSnapshot,
    paths: Vec<String>,
    in_order: bool,
) -> Result<(SchemaRef, SendableRecordBatchStream), DeltaError> {
    if crate::rewrite::widened::needs_widened_scan(uri, snapshot)? {
        // deltalake's scan refuses type widening; that scan reads files in order anyway
        return crate::rewrite::widened::scan(uri, log_store, snapshot, paths).await;
    }
    let context = if in_order {
        SessionContext::new_with_config(SessionConfig::new().with_target_partitions(1))
    } else {
        SessionContext::new()
    };
    // read data files through the table's own store, as everything else is: DataFusion's
    // session would otherwise read local (`file://`) tables through a store of its own, past
    // the cost meter ([`crate::cost`])
    let root = log_store.root_url().as_object_store_url();
    context
        .runtime_env()
        .register_object_store(root.as_ref(), log_store.root_object_store(None));
    let scan = DeltaScanNext::builder()
        .with_log_store(log_store.clone())
        .with_eager_snapshot(snapshot.clone())
        // selected as deltalake's own rewrites select them (from `add` paths), so paths that
        // needed escaping in the log match (`a%b` is `a%25b` there)
        .with_file_selection(FileSelection::from_adds(paths.into_iter().map(|path| {
            Add {
                path,
                ..Add::default()
            }
        })))
        .build()
        .await
        .map_err(|e| DeltaError::delta(uri, "planning the rewrite scan", e.into()))?;
    let frame = context
        .read_table(Arc::new(scan))
        .map_err(|e| DeltaError::delta(uri, "planning the rewrite scan", e.into()))?;
    let schema = Arc::new(frame.schema().as_arrow().clone());
    let batches = frame
        .execute_stream()
        .await
        .map_err(|e| DeltaError::delta(uri, "scanning the files to rewrite", e.into()))?;
    Ok((schema, batches))
}
