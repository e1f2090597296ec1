//! The table's system domains (`delta.rowTracking`, `delta.clustering`), read through the
//! Delta kernel. deltalake's `domain_metadata` refuses every `delta.*` domain (it serves user
//! domains only), so this module replays the log's domain metadata at a known version with
//! the kernel deltalake itself runs on (its internal-API reader, which allows them). Reading
//! only; nothing here writes a domain.

use deltalake::logstore::LogStore;
use deltalake::DeltaTableError;

use crate::error::DeltaError;

/// The table's root URL with the trailing slash the kernel resolves paths against.
pub(crate) fn table_root(log_store: &dyn LogStore) -> url::Url {
    let mut root = log_store.config().location().clone();
    if !root.path().ends_with('/') {
        root.set_path(&format!("{}/", root.path()));
    }
    root
}

/// The configuration of system domain `domain` at `version`, or `None` when the table has none
/// (or removed it).
pub(crate) async fn system_domain(
    uri: &str,
    log_store: &dyn LogStore,
    version: u64,
    domain: &str,
) -> Result<Option<String>, DeltaError> {
    let engine = log_store.engine(None);
    let root = table_root(log_store);
    let domain = domain.to_owned();
    let read = tokio::task::spawn_blocking(move || {
        let snapshot = delta_kernel::Snapshot::builder_for(root.as_str())
            .at_version(version)
            .build(engine.as_ref())?;
        snapshot.get_domain_metadata_internal(&domain, engine.as_ref())
    })
    .await
    .map_err(|e| {
        DeltaError::delta(
            uri,
            "reading a system domain",
            DeltaTableError::Generic(format!("the reading task ended: {e}")),
        )
    })?;
    read.map_err(|e| DeltaError::delta(uri, "reading a system domain", DeltaTableError::from(e)))
}
