//! One read of each immutable log file per process: [`SharedReads`], the object-store layer
//! under every table tablekeeper opens, serving repeated whole reads of a commit
//! (`<version>.json`) or checksum (`<version>.crc`) file from memory.
//!
//! A replica meeting a table reads its log several times over within seconds: the first
//! probe's snapshot load, the history read beside it, the damage check, the restore drill and
//! the first job each open the table on a store of their own. A commit file never changes once
//! written (writers create it with put-if-absent), so the first read is kept and the others
//! are answered from it; concurrent readers of one file wait for a single request.
//!
//! What is kept, and for how long:
//! - whole reads only (no range, no condition, no version); anything else passes through;
//! - at most the process's [`set_log_read_cache`] bytes in all ([`DEFAULT_LOG_READ_CACHE`]
//!   unless set; 0 turns the layer off), least recently used dropped first, and a file is
//!   dropped [`IDLE`] after its last read;
//! - a file larger than [`LARGEST`] is read through and not kept.
//!
//! What would make a kept file wrong, and how it is caught: a table deleted and recreated at
//! the same path, or two writers without a commit coordinator overwriting one version on S3.
//! Every reader lists the log before reading it, and every listing that passes through here
//! drops a kept file whose size or ETag (its modification second where the store gives no
//! ETag) the listing contradicts. A write, copy, rename or delete of a kept file drops it too.
//!
//! The layer sits above the request meter ([`crate::cost`]): a file answered from memory is no
//! request, and costs nothing.

use std::fmt;
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use deltalake::logstore::object_store::{
    Attributes, CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
    Result,
};
use deltalake::Path;
use futures::stream::BoxStream;
use futures::StreamExt;
use moka::future::Cache;
use moka::policy::EvictionPolicy;

use super::read::{classify_log_file, LogFile};

/// Bytes of log files kept in memory by the whole process, unless set otherwise.
pub const DEFAULT_LOG_READ_CACHE: u64 = 1024 * 1024;
/// A kept file unread for this long is dropped.
pub(crate) const IDLE: Duration = Duration::from_secs(5 * 60);
/// Files larger than this are read through and not kept.
pub(crate) const LARGEST: u64 = 1024 * 1024;

/// A log file as it was read: its bytes and what the store said of it.
#[derive(Debug)]
struct Kept {
    bytes: Bytes,
    meta: ObjectMeta,
    attributes: Attributes,
}

impl Kept {
    fn result(&self) -> GetResult {
        let bytes = self.bytes.clone();
        GetResult {
            payload: GetResultPayload::Stream(
                futures::stream::once(async move { Ok(bytes) }).boxed(),
            ),
            meta: self.meta.clone(),
            range: 0..self.bytes.len() as u64,
            attributes: self.attributes.clone(),
        }
    }

    /// Whether a listing's entry for the same path still describes this read.
    fn agrees_with(&self, listed: &ObjectMeta) -> bool {
        if listed.size != self.meta.size {
            return false;
        }
        match (&listed.e_tag, &self.meta.e_tag) {
            (Some(listed), Some(kept)) => listed == kept,
            // a listing and a GET give the modification time at different precisions on S3
            _ => listed.last_modified.timestamp() == self.meta.last_modified.timestamp(),
        }
    }
}

/// The process's capacity, fixed by the first [`set_log_read_cache`] or the first table opened.
static CAPACITY: OnceLock<u64> = OnceLock::new();

/// Sets the bytes of log files the process keeps (0: none, every read goes to storage). The
/// first call, or the first table opened (which takes [`DEFAULT_LOG_READ_CACHE`]), fixes it;
/// returns `false` when it was fixed already at another figure.
pub fn set_log_read_cache(bytes: u64) -> bool {
    *CAPACITY.get_or_init(|| bytes) == bytes
}

/// Whether tables are opened with the layer: the capacity is not 0.
pub(crate) fn enabled() -> bool {
    *CAPACITY.get_or_init(|| DEFAULT_LOG_READ_CACHE) > 0
}

/// Keyed by the store's scheme and authority, then the path inside it.
static KEPT: LazyLock<Cache<String, Arc<Kept>>> = LazyLock::new(|| {
    Cache::builder()
        .name("tablekeeper-log-reads")
        .max_capacity(*CAPACITY.get_or_init(|| DEFAULT_LOG_READ_CACHE))
        .weigher(|key: &String, kept: &Arc<Kept>| {
            u32::try_from(key.len() + kept.bytes.len() + 256).unwrap_or(u32::MAX)
        })
        .time_to_idle(IDLE)
        .eviction_policy(EvictionPolicy::lru())
        .build()
});

/// The failure of a read some other caller started; the waiting caller reads for itself.
#[derive(Debug)]
struct ReadByAnother;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct SharedReads {
    inner: Arc<dyn ObjectStore>,
    /// `scheme://authority` of the store, so that two buckets' files never share a key.
    scope: String,
}

impl SharedReads {
    pub(crate) fn new(inner: Arc<dyn ObjectStore>, table: &url::Url) -> Self {
        Self {
            inner,
            scope: table[..url::Position::BeforePath].to_owned(),
        }
    }

    fn key(&self, location: &Path) -> String {
        key(&self.scope, location)
    }

    async fn forget(&self, location: &Path) {
        if is_immutable_log_file(location) {
            KEPT.invalidate(&self.key(location)).await;
        }
    }

    /// Drops kept files a listing contradicts, as the listing is read.
    fn checked_listing(
        &self,
        listing: BoxStream<'static, Result<ObjectMeta>>,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let scope = self.scope.clone();
        listing
            .then(move |entry| {
                let scope = scope.clone();
                async move {
                    if let Ok(listed) = &entry {
                        check_listed(&scope, listed).await;
                    }
                    entry
                }
            })
            .boxed()
    }

    async fn read(&self, location: &Path) -> Result<Kept> {
        let got = self.inner.get_opts(location, GetOptions::default()).await?;
        let meta = got.meta.clone();
        let attributes = got.attributes.clone();
        let bytes = got.bytes().await?;
        Ok(Kept {
            bytes,
            meta,
            attributes,
        })
    }
}

/// The cache key of `location` in the store of `scope`.
fn key(scope: &str, location: &Path) -> String {
    format!("{scope}/{location}")
}

async fn check_listed(scope: &str, listed: &ObjectMeta) {
    if !is_immutable_log_file(&listed.location) {
        return;
    }
    let key = key(scope, &listed.location);
    if let Some(kept) = KEPT.get(&key).await {
        if !kept.agrees_with(listed) {
            tracing::debug!(file = %key, "log file changed since it was read; reading it again");
            KEPT.invalidate(&key).await;
        }
    }
}

/// A commit (`<version>.json`) or checksum (`<version>.crc`) file directly under a
/// `_delta_log` directory, as the log's reader names them ([`classify_log_file`]).
fn is_immutable_log_file(location: &Path) -> bool {
    let mut parts = location.parts().rev();
    let (Some(name), Some(parent)) = (parts.next(), parts.next()) else {
        return false;
    };
    parent.as_ref() == "_delta_log"
        && matches!(
            classify_log_file(name.as_ref()),
            Some(LogFile::Commit(_) | LogFile::Checksum(_))
        )
}

/// A plain read of the whole object, the only kind answered from memory.
fn is_whole_read(options: &GetOptions) -> bool {
    options.range.is_none()
        && !options.head
        && options.version.is_none()
        && options.if_match.is_none()
        && options.if_none_match.is_none()
        && options.if_modified_since.is_none()
        && options.if_unmodified_since.is_none()
}

impl fmt::Display for SharedReads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SharedReads({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for SharedReads {
    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if !is_immutable_log_file(location) || !is_whole_read(&options) {
            return self.inner.get_opts(location, options).await;
        }
        let key = self.key(location);
        let mut own_failure = None;
        let kept = KEPT
            .try_get_with(key.clone(), async {
                match self.read(location).await {
                    Ok(kept) => Ok(Arc::new(kept)),
                    Err(err) => {
                        own_failure = Some(err);
                        Err(ReadByAnother)
                    }
                }
            })
            .await;
        match kept {
            Ok(kept) => {
                if kept.meta.size > LARGEST {
                    KEPT.invalidate(&key).await;
                }
                Ok(kept.result())
            }
            // this caller's own request failed: its error, as the store gave it
            Err(_) if own_failure.is_some() => Err(own_failure.expect("checked")),
            // another caller's request failed: read for this one
            Err(_) => self.inner.get_opts(location, options).await,
        }
    }

    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let put = self.inner.put_opts(location, payload, opts).await;
        self.forget(location).await;
        put
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.forget(location).await;
        self.inner.put_multipart_opts(location, opts).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let scope = self.scope.clone();
        let forgetting = locations
            .then(move |location| {
                let key = location
                    .as_ref()
                    .ok()
                    .filter(|location| is_immutable_log_file(location))
                    .map(|location| key(&scope, location));
                async move {
                    if let Some(key) = key {
                        KEPT.invalidate(&key).await;
                    }
                    location
                }
            })
            .boxed();
        self.inner.delete_stream(forgetting)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.checked_listing(self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.checked_listing(self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let listed = self.inner.list_with_delimiter(prefix).await?;
        for object in &listed.objects {
            check_listed(&self.scope, object).await;
        }
        Ok(listed)
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        let copied = self.inner.copy_opts(from, to, options).await;
        self.forget(to).await;
        copied
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        let renamed = self.inner.rename_opts(from, to, options).await;
        self.forget(from).await;
        self.forget(to).await;
        renamed
    }
}

#[cfg(test)]
mod tests {
    use deltalake::logstore::object_store::memory::InMemory;
    use deltalake::logstore::object_store::ObjectStoreExt as _;
    use futures::TryStreamExt as _;

    use super::*;
    use crate::cost::{store::MeteredStore, Meter};

    /// A store over `memory` that counts the requests reaching `memory`, in a scope of its own
    /// (each test its own bucket, as the cache is the process's).
    fn layered(memory: &Arc<InMemory>) -> (SharedReads, Arc<Meter>) {
        let meter = Meter::new();
        let metered = MeteredStore::new(Arc::clone(memory) as _, Arc::clone(&meter));
        let bucket = uuid::Uuid::new_v4();
        let url = url::Url::parse(&format!("s3://{bucket}/t")).unwrap();
        (SharedReads::new(Arc::new(metered), &url), meter)
    }

    fn gets(meter: &Meter) -> u64 {
        meter.cost(Duration::ZERO).requests.get
    }

    const COMMIT: &str = "t/_delta_log/00000000000000000003.json";

    /// Writes `bytes` as [`COMMIT`], past the layer.
    async fn put(memory: &InMemory, bytes: &'static [u8]) {
        memory
            .put(&Path::from(COMMIT), Bytes::from_static(bytes).into())
            .await
            .unwrap();
    }

    /// Reads [`COMMIT`] whole through the layer.
    async fn read(store: &SharedReads) -> Bytes {
        store
            .get(&Path::from(COMMIT))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_commit_file_is_read_once_however_many_read_it() {
        let memory = Arc::new(InMemory::new());
        put(&memory, b"{\"add\":{}}").await;
        let (store, meter) = layered(&memory);
        let store = Arc::new(store);
        let readers = (0..8).map(|_| {
            let store = Arc::clone(&store);
            tokio::spawn(async move { read(&store).await })
        });
        for read in futures::future::join_all(readers).await {
            assert_eq!(read.unwrap().as_ref(), b"{\"add\":{}}");
        }
        let again = store.get(&Path::from(COMMIT)).await.unwrap();
        assert_eq!(again.meta.size, 10);
        assert_eq!(again.range, 0..10);
        assert_eq!(
            gets(&meter),
            1,
            "eight concurrent readers and one later share one GET"
        );
    }

    #[tokio::test]
    async fn other_files_and_other_reads_pass_through() {
        let memory = Arc::new(InMemory::new());
        for path in [
            COMMIT,
            "t/_delta_log/_last_checkpoint",
            "t/_delta_log/00000000000000000002.checkpoint.parquet",
            "t/part-0.parquet",
        ] {
            memory
                .put(&Path::from(path), Bytes::from_static(b"0123456789").into())
                .await
                .unwrap();
        }
        let (store, meter) = layered(&memory);
        for _ in 0..2 {
            for path in [
                "t/_delta_log/_last_checkpoint",
                "t/_delta_log/00000000000000000002.checkpoint.parquet",
                "t/part-0.parquet",
            ] {
                store.get(&Path::from(path)).await.unwrap();
            }
            store.get_range(&Path::from(COMMIT), 0..4).await.unwrap();
        }
        assert_eq!(
            gets(&meter),
            8,
            "mutable files, data files and ranges are not kept"
        );
    }

    #[tokio::test]
    async fn a_listing_that_contradicts_a_kept_file_drops_it() {
        let memory = Arc::new(InMemory::new());
        put(&memory, b"first").await;
        let (store, meter) = layered(&memory);
        store.get(&Path::from(COMMIT)).await.unwrap();
        // the table is recreated at the same path, past this store
        put(&memory, b"second!").await;
        let _: Vec<_> = store
            .list(Some(&Path::from("t/_delta_log")))
            .try_collect()
            .await
            .unwrap();
        let read = read(&store).await;
        assert_eq!(read.as_ref(), b"second!");
        assert_eq!(gets(&meter), 2);
    }

    #[tokio::test]
    async fn a_deleted_commit_is_not_answered_from_memory() {
        let memory = Arc::new(InMemory::new());
        put(&memory, b"gone").await;
        let (store, _) = layered(&memory);
        store.get(&Path::from(COMMIT)).await.unwrap();
        store.delete(&Path::from(COMMIT)).await.unwrap();
        let err = store.get(&Path::from(COMMIT)).await.unwrap_err();
        assert!(
            matches!(err, deltalake::ObjectStoreError::NotFound { .. }),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_failed_read_is_the_callers_own_error_and_is_not_kept() {
        let memory = Arc::new(InMemory::new());
        let (store, meter) = layered(&memory);
        let err = store.get(&Path::from(COMMIT)).await.unwrap_err();
        assert!(
            matches!(err, deltalake::ObjectStoreError::NotFound { .. }),
            "{err}"
        );
        put(&memory, b"late").await;
        let read = read(&store).await;
        assert_eq!(read.as_ref(), b"late");
        assert_eq!(gets(&meter), 2);
    }

    #[test]
    fn only_versioned_commits_and_checksums_are_immutable() {
        for (path, immutable) in [
            ("a/_delta_log/00000000000000000012.json", true),
            ("a/_delta_log/00000000000000000012.crc", true),
            ("00000000000000000012.json", false),
            ("a/_delta_log/_last_checkpoint", false),
            (
                "a/_delta_log/00000000000000000012.checkpoint.parquet",
                false,
            ),
            ("a/_delta_log/00000000000000000012.json.tmp", false),
            (
                "a/_delta_log/_commits/00000000000000000012.uuid.json",
                false,
            ),
            ("a/_delta_log/0000000000000000001x.json", false),
        ] {
            assert_eq!(
                is_immutable_log_file(&Path::from(path)),
                immutable,
                "{path}"
            );
        }
    }
}
