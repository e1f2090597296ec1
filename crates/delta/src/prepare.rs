//! The preparation every maintenance operation starts with, written once so none can skip a
//! step: open the table (explaining a damaged log rather than the loader's error), read its
//! version, refuse what its protocol does not let tablekeeper do, list its active files and
//! make sure every one of them is in storage (a table missing data files gets no maintenance:
//! it would carry the dangling references forward).

use deltalake::DeltaTable;
use tablekeeper_vocab::Operation;
use tokio_util::sync::CancellationToken;

use crate::error::DeltaError;
use crate::features::maintainable::check_maintainable;
use crate::features::protocol::TableProtocol;
use crate::open::{loaded_version, open_table};
use crate::probe::presence::{ensure_present, explain_load_failure};
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
