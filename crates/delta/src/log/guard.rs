//! The storage-level rule that no commit of tablekeeper's deletes a transaction-log file.
//!
//! deltalake runs an expired-log cleanup after every commit, with the table's own
//! `delta.logRetentionDuration` (30 days by default) rather than the inventory's, and its
//! OPTIMIZE and VACUUM commits do not pass a caller's `with_cleanup_expired_logs(false)` on
//! (deltalake-core 1.1.3: they rebuild their `CommitProperties` from the app metadata alone).
//! Measured on real tables, compaction deleted years of history the inventory said to keep.
//!
//! Owns [`LogKeepingStore`], the object store every table tablekeeper opens is built on: it
//! forwards everything to the real store except the deletion (or rename away) of a file under
//! `_delta_log/`, which it drops from the request and logs. deltalake's cleanup then counts
//! nothing deleted and goes on; the commit itself is unaffected. Temporary commit files
//! (`*.tmp`) may still be deleted. Log files are deleted only by the checkpoint operation, which
//! proves the deletion safe first and uses the unguarded store ([`crate::open`]).

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use deltalake::logstore::object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};
use deltalake::Path;
use futures::stream::BoxStream;
use futures::StreamExt;

/// An object store that never deletes a Delta log file; see the module docs.
#[derive(Debug)]
pub(crate) struct LogKeepingStore {
    inner: Arc<dyn ObjectStore>,
}

impl LogKeepingStore {
    pub(crate) fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self { inner }
    }
}

/// Whether `location` is a file of a Delta transaction log that must outlive this request:
/// anything under a `_delta_log` directory (commits, checkpoints and their parts, sidecars,
/// checksums, `_last_checkpoint`) except a writer's temporary commit file.
pub(crate) fn is_log_file(location: &Path) -> bool {
    let mut parts = location.parts().peekable();
    let mut under_log = false;
    let mut name = None;
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            name = Some(part);
        } else if part.as_ref() == "_delta_log" {
            under_log = true;
        }
    }
    under_log && name.is_some_and(|name| !name.as_ref().ends_with(".tmp"))
}

impl fmt::Display for LogKeepingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LogKeepingStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for LogKeepingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let kept = locations.filter(|location| {
            let keep = matches!(location, Ok(path) if is_log_file(path));
            if let (true, Ok(path)) = (keep, location) {
                tracing::info!(
                    file = %path,
                    "kept a log file deltalake's post-commit cleanup would have deleted (only the checkpoint operation deletes log files)"
                );
            }
            futures::future::ready(!keep)
        });
        self.inner.delete_stream(kept.boxed())
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        if is_log_file(from) {
            // a rename away would delete the source: copy instead, keeping the log file
            tracing::info!(file = %from, to = %to, "kept a log file a rename would have removed");
            let copy = CopyOptions {
                mode: match options.target_mode {
                    deltalake::logstore::object_store::RenameTargetMode::Overwrite => {
                        deltalake::logstore::object_store::CopyMode::Overwrite
                    }
                    deltalake::logstore::object_store::RenameTargetMode::Create => {
                        deltalake::logstore::object_store::CopyMode::Create
                    }
                },
                extensions: options.extensions,
            };
            return self.inner.copy_opts(from, to, copy).await;
        }
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::logstore::object_store::memory::InMemory;
    use deltalake::logstore::object_store::ObjectStoreExt as _;

    #[test]
    fn recognises_log_files_anywhere_under_a_log_directory() {
        for path in [
            "t/_delta_log/00000000000000000003.json",
            "lake/t/_delta_log/00000000000000000010.checkpoint.parquet",
            "_delta_log/_last_checkpoint",
            "t/_delta_log/_sidecars/abc.parquet",
            "t/_delta_log/00000000000000000003.crc",
        ] {
            assert!(is_log_file(&Path::from(path)), "{path}");
        }
        for path in [
            "t/part-0001.parquet",
            "t/d=1/part-0001.parquet",
            "t/_delta_log/_commit_2b4c.json.tmp",
            "t/deletion_vector_1.bin",
        ] {
            assert!(!is_log_file(&Path::from(path)), "{path}");
        }
    }

    #[tokio::test]
    async fn deletes_pass_except_for_log_files() {
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let guarded = LogKeepingStore::new(Arc::clone(&inner));
        for path in ["t/_delta_log/00000000000000000000.json", "t/part-0.parquet"] {
            inner
                .put(&Path::from(path), PutPayload::from_static(b"x"))
                .await
                .expect("put");
        }
        let requested = futures::stream::iter(vec![
            Ok(Path::from("t/_delta_log/00000000000000000000.json")),
            Ok(Path::from("t/part-0.parquet")),
        ])
        .boxed();
        let deleted: Vec<Path> = guarded
            .delete_stream(requested)
            .map(|r| r.expect("delete"))
            .collect()
            .await;
        assert_eq!(deleted, vec![Path::from("t/part-0.parquet")]);
        assert!(inner
            .head(&Path::from("t/_delta_log/00000000000000000000.json"))
            .await
            .is_ok());
        assert!(inner.head(&Path::from("t/part-0.parquet")).await.is_err());
    }
}
