//! [`MeteredStore`]: the object store under every table tablekeeper opens while a meter is
//! current, counting each request it forwards by kind and the bytes it moves.
//!
//! How a call becomes requests, as S3, Azure and GCS receive them:
//! - `get` (a whole object or a range) is one GET, its bytes the range returned; a `head`
//!   option makes it one HEAD. Reading several ranges of one file goes through the trait's
//!   own coalescing ([`ObjectStore::get_ranges`]'s default), so each coalesced range is one
//!   counted GET, as it is on those stores;
//! - `put` is one PUT; a multipart upload is one PUT to start it, one per part and one to
//!   complete it (an abort is one DELETE); `copy` is one PUT (S3's CopyObject); `rename` is
//!   a PUT and a DELETE (copy then delete, as object stores rename);
//! - `list` is one LIST per page of up to 1,000 objects (S3's and GCS's page size; Azure
//!   pages 5,000, so a long Azure listing counts more pages than it sent), at least one;
//! - `delete` is one DELETE per object. S3's bulk delete removes up to 1,000 objects in one
//!   POST, so a VACUUM on S3 sends fewer requests than it counts here (README says so).
//!
//! Requests the store retries underneath (timeouts, 5xx) count once.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use deltalake::logstore::object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result, UploadPart,
};
use deltalake::Path;
use futures::stream::BoxStream;
use futures::StreamExt;
use tablekeeper_vocab::RequestKind;

use super::Meter;

/// Objects one LIST page returns on S3 and GCS.
const LIST_PAGE: u64 = 1_000;

#[derive(Debug)]
pub(crate) struct MeteredStore {
    inner: Arc<dyn ObjectStore>,
    meter: Arc<Meter>,
}

impl MeteredStore {
    pub(crate) fn new(inner: Arc<dyn ObjectStore>, meter: Arc<Meter>) -> Self {
        Self { inner, meter }
    }

    /// Counts a listing's pages as they are fetched: the first when the listing is first
    /// polled (the request goes out then, however little of it the caller reads), one more
    /// each time an object beyond a full page is read.
    fn counted_list(
        &self,
        listing: BoxStream<'static, Result<ObjectMeta>>,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let meter = Arc::clone(&self.meter);
        let mut seen = 0u64;
        let mut started = false;
        futures::stream::poll_fn({
            let mut listing = listing;
            move |cx| {
                if !started {
                    started = true;
                    meter.count(RequestKind::List, 1);
                }
                let next = listing.poll_next_unpin(cx);
                if let std::task::Poll::Ready(Some(Ok(_))) = &next {
                    // this object opens a page of its own
                    if seen > 0 && seen.is_multiple_of(LIST_PAGE) {
                        meter.count(RequestKind::List, 1);
                    }
                    seen += 1;
                }
                next
            }
        })
        .boxed()
    }
}

impl fmt::Display for MeteredStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MeteredStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for MeteredStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.meter.count(RequestKind::Put, 1);
        self.meter.written(payload.content_length() as u64);
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.meter.count(RequestKind::Put, 1);
        let upload = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(MeteredUpload {
            inner: upload,
            meter: Arc::clone(&self.meter),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if options.head {
            self.meter.count(RequestKind::Head, 1);
            return self.inner.get_opts(location, options).await;
        }
        self.meter.count(RequestKind::Get, 1);
        let got = self.inner.get_opts(location, options).await?;
        self.meter
            .read(got.range.end.saturating_sub(got.range.start));
        Ok(got)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let meter = Arc::clone(&self.meter);
        let counted = locations.inspect(move |location| {
            if location.is_ok() {
                meter.count(RequestKind::Delete, 1);
            }
        });
        self.inner.delete_stream(counted.boxed())
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.counted_list(self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.counted_list(self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let listed = self.inner.list_with_delimiter(prefix).await?;
        let entries = (listed.objects.len() + listed.common_prefixes.len()) as u64;
        self.meter
            .count(RequestKind::List, entries.div_ceil(LIST_PAGE).max(1));
        Ok(listed)
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.meter.count(RequestKind::Put, 1);
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.meter.count(RequestKind::Put, 1);
        self.meter.count(RequestKind::Delete, 1);
        self.inner.rename_opts(from, to, options).await
    }
}

/// A multipart upload counting its parts, completion and abort.
#[derive(Debug)]
struct MeteredUpload {
    inner: Box<dyn MultipartUpload>,
    meter: Arc<Meter>,
}

#[async_trait]
impl MultipartUpload for MeteredUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.meter.count(RequestKind::Put, 1);
        self.meter.written(data.content_length() as u64);
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        self.meter.count(RequestKind::Put, 1);
        self.inner.complete().await
    }

    async fn abort(&mut self) -> Result<()> {
        self.meter.count(RequestKind::Delete, 1);
        self.inner.abort().await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use deltalake::logstore::object_store::memory::InMemory;
    use deltalake::logstore::object_store::ObjectStoreExt as _;
    use futures::TryStreamExt as _;

    use super::*;

    #[tokio::test]
    async fn every_call_counts_as_the_requests_it_sends() {
        let meter = Meter::new();
        let store = MeteredStore::new(Arc::new(InMemory::new()), Arc::clone(&meter));
        for i in 0..1_001 {
            store
                .put(&Path::from(format!("t/f{i}")), vec![0u8; 10].into())
                .await
                .unwrap();
        }
        let got = store.get(&Path::from("t/f1")).await.unwrap();
        assert_eq!(got.bytes().await.unwrap().len(), 10);
        store.head(&Path::from("t/f2")).await.unwrap();
        let listed: Vec<_> = store
            .list(Some(&Path::from("t")))
            .try_collect()
            .await
            .unwrap();
        assert_eq!(listed.len(), 1_001);
        let mut upload = store.put_multipart(&Path::from("t/big")).await.unwrap();
        upload.put_part(vec![1u8; 5].into()).await.unwrap();
        upload.put_part(vec![1u8; 5].into()).await.unwrap();
        upload.complete().await.unwrap();
        store.delete(&Path::from("t/f3")).await.unwrap();
        let cost = meter.cost(Duration::ZERO);
        assert_eq!(cost.requests.put, 1_001 + 4);
        assert_eq!(cost.requests.get, 1);
        assert_eq!(cost.requests.head, 1);
        assert_eq!(cost.requests.list, 2, "1,001 objects are two pages");
        assert_eq!(cost.requests.delete, 1);
        assert_eq!(cost.bytes_read, 10);
        assert_eq!(cost.bytes_written, 10_010 + 10);
    }

    #[tokio::test]
    async fn an_empty_listing_is_one_request() {
        let meter = Meter::new();
        let store = MeteredStore::new(Arc::new(InMemory::new()), Arc::clone(&meter));
        let listed: Vec<_> = store.list(None).try_collect().await.unwrap();
        assert!(listed.is_empty());
        assert_eq!(meter.cost(Duration::ZERO).requests.list, 1);
        // a listing read only in part was still sent
        store.put(&Path::from("a"), vec![1u8].into()).await.unwrap();
        let mut listing = store.list(None);
        assert!(futures::StreamExt::next(&mut listing).await.is_some());
        drop(listing);
        assert_eq!(meter.cost(Duration::ZERO).requests.list, 2);
    }
}
