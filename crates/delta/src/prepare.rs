//! The preparation every maintenance operation starts with, written once so none can skip a
//! step: open the table (explaining a damaged log rather than the loader's error), read its
//! version, refuse what its protocol does not let tablekeeper do, list its active files and
//! make sure every one of them is in storage (a table missing data files gets no maintenance:
//! it would carry the dangling references forward).

use deltalake::DeltaTable;
use tablekeeper_vocab::Operation;
use tokio_util::sync::CancellationToken;

use crate::error::DeltaError;
use crate::maintainable::{check_maintainable, TableProtocol};
use crate::open::open_table;
use crate::presence::{ensure_present, explain_load_failure};
use crate::run::cancellable;
use crate::snapshot::{active_files, ActiveFile};

/// A table ready for `op`: loaded, allowed, intact.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub table: DeltaTable,
    /// The version loaded.
    pub version: u64,
    pub protocol: TableProtocol,
    pub files: Vec<ActiveFile>,
}

/// The version of a loaded table; a table handed around unloaded is a bug, said plainly.
pub(crate) fn loaded_version(uri: &str, table: &DeltaTable) -> Result<u64, DeltaError> {
    table.version().ok_or_else(|| DeltaError::IncompleteLog {
        table: uri.to_owned(),
        reason: "the table was not loaded before its version was read".into(),
    })
}

/// Opens and checks the table at `uri` for `op`.
pub(crate) async fn prepare(
    uri: &str,
    op: Operation,
    cancel: &CancellationToken,
) -> Result<Prepared, DeltaError> {
    let table = match cancellable(cancel, uri, op, open_table(uri)).await {
        Ok(table) => table,
        Err(err @ DeltaError::Cancelled { .. }) => return Err(err),
        Err(err) => return Err(explain_load_failure(uri, err).await),
    };
    let version = loaded_version(uri, &table)?;
    let protocol = TableProtocol::of(uri, &table)?;
    check_maintainable(&protocol, op)?;
    let files = active_files(&table, uri).await?;
    cancellable(cancel, uri, op, ensure_present(&table, uri, &files)).await?;
    Ok(Prepared {
        table,
        version,
        protocol,
        files,
    })
}
