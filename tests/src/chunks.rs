//! The column chunks of a table's active files, as pyarrow reads them from the Parquet footers:
//! what the encoding tests (`tests/compression.rs`, `tests/dictionaries.rs`) check of the files
//! tablekeeper writes, read by a reader other than the one that wrote them, and the maintenance
//! run those tests make.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use tablekeeper_delta::fixtures::both_readers;
use tablekeeper_delta::fixtures::peers::run_python;

use crate::maintained;
use crate::setup::InventoryFile;

/// Every active file's column chunks (row group by row group), keyed by the file's path as the
/// log names it.
const CHUNKS: &str = r#"
import json, os, sys, urllib.parse
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable
uri = sys.argv[1]
out = {}
for action in pa.table(DeltaTable(uri).get_add_actions(flatten=True)).to_pylist():
    meta = pq.ParquetFile(os.path.join(uri, urllib.parse.unquote(action["path"]))).metadata
    out[action["path"]] = [
        {"column": chunk.path_in_schema, "compression": chunk.compression,
         "dictionary": chunk.has_dictionary_page}
        for chunk in (meta.row_group(g).column(c)
                      for g in range(meta.num_row_groups) for c in range(meta.num_columns))
    ]
print(json.dumps(out))
sys.stdout.flush()
os._exit(0)
"#;

/// One column chunk of a data file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Chunk {
    /// The column's path in the file's schema (dotted for nested columns).
    pub column: String,
    /// The codec, as pyarrow names it (`ZSTD`, `SNAPPY`, `LZ4` for Parquet's LZ4_RAW...).
    pub compression: String,
    /// Whether the chunk starts with a dictionary page.
    pub dictionary: bool,
}

/// The column chunks of every active file of the table at `uri`, by file path.
///
/// # Panics
/// When python deltalake or pyarrow cannot read the table: the tests cannot go on.
pub fn column_chunks(uri: &str) -> BTreeMap<String, Vec<Chunk>> {
    serde_json::from_str(
        run_python(CHUNKS, &[uri])
            .expect("pyarrow reads the files")
            .trim(),
    )
    .expect("column chunk JSON")
}

/// Runs `tablekeeper maintain --operation <operation>` on `table`, alone in an inventory with
/// the YAML lines `extra` (indented four spaces), and returns the column chunks of every file it
/// added. Fails unless it added a file and deltalake and python deltalake read the same rows
/// after as before.
///
/// # Panics
/// On any of those failures.
pub async fn chunks_of_new_files(
    dir: &Path,
    table: &Path,
    extra: &str,
    operation: &str,
) -> Vec<Vec<Chunk>> {
    let uri = table.to_str().expect("a UTF-8 table path");
    let before = column_chunks(uri);
    let (rust_before, python_before) = both_readers(uri).await.expect("both readers read");
    let inventory = InventoryFile::one(dir, "t", table, extra);
    let result = maintained(&inventory.path, "t", operation);
    let (rust_after, python_after) = both_readers(uri).await.expect("both readers read");
    assert!(rust_after == rust_before, "deltalake reads other rows");
    assert!(
        python_after == python_before,
        "python deltalake reads other rows"
    );
    let added: Vec<Vec<Chunk>> = column_chunks(uri)
        .into_iter()
        .filter(|(path, _)| !before.contains_key(path))
        .map(|(_, chunks)| chunks)
        .collect();
    assert!(!added.is_empty(), "{operation} wrote nothing: {result:#}");
    added
}
