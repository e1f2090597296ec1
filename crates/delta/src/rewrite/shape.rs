//! The size and encoding of the files a rewrite writes ([`FileShape`]): the target size, the
//! table's `layout.compression` (default zstd level 4, as deltalake's OPTIMIZE writes), and
//! row groups of at most [`ROW_GROUP_BYTES`]; the Parquet writer properties they make. Which
//! columns are written without a dictionary is chosen from the rows (`rewrite::dictionary`).

use std::num::NonZeroU64;

use deltalake::parquet::basic::{self, BrotliLevel, GzipLevel, ZstdLevel};
use deltalake::parquet::file::properties::WriterProperties;
use deltalake::parquet::schema::types::ColumnPath;
use tablekeeper_vocab::{Codec, Compression};

/// The largest row group written (encoded bytes): it bounds what one rewrite holds in memory,
/// and keeps row groups the size Spark writes by default (`parquet.block.size`, 128 MiB) or
/// under.
pub(crate) const ROW_GROUP_BYTES: u64 = 64 * 1024 * 1024;

/// What the files a rewrite writes look like: their size and their encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileShape {
    /// The size files are cut at.
    pub target_size: NonZeroU64,
    /// The codec and level of every column chunk written.
    pub compression: Compression,
}

impl FileShape {
    /// The Parquet writer properties of such files: the compression, and row groups of at most
    /// [`ROW_GROUP_BYTES`].
    pub(crate) fn writer_properties(&self) -> WriterProperties {
        self.writer_properties_plain(&[])
    }

    /// The same, with the top-level columns named in `plain` (file names, physical on a
    /// column-mapped table) written without a dictionary.
    pub(crate) fn writer_properties_plain(&self, plain: &[String]) -> WriterProperties {
        let builder = WriterProperties::builder()
            .set_compression(parquet_compression(self.compression))
            .set_max_row_group_bytes(Some(usize::try_from(ROW_GROUP_BYTES).unwrap_or(usize::MAX)));
        plain
            .iter()
            .fold(builder, |builder, column| {
                builder.set_column_dictionary_enabled(ColumnPath::from(column.as_str()), false)
            })
            .build()
    }
}

/// arrow-rs's form of `compression`. Levels were checked against the codec's range when the
/// inventory was read ([`Compression::new`]), so the fallbacks below are never taken.
fn parquet_compression(compression: Compression) -> basic::Compression {
    let level = compression.level();
    match compression.codec() {
        Codec::Zstd => basic::Compression::ZSTD(
            level
                .and_then(|l| ZstdLevel::try_new(i32::try_from(l).ok()?).ok())
                .unwrap_or_default(),
        ),
        Codec::Gzip => basic::Compression::GZIP(
            level
                .and_then(|l| GzipLevel::try_new(l).ok())
                .unwrap_or_default(),
        ),
        Codec::Brotli => basic::Compression::BROTLI(
            level
                .and_then(|l| BrotliLevel::try_new(l).ok())
                .unwrap_or_default(),
        ),
        Codec::Snappy => basic::Compression::SNAPPY,
        Codec::Lz4 => basic::Compression::LZ4_RAW,
        Codec::Uncompressed => basic::Compression::UNCOMPRESSED,
    }
}
