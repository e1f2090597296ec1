//! A table writer that keeps a model of what the table must hold: the set of row ids its
//! committed appends, deletes and overwrites leave. Compared with the ids read back, the
//! model shows any row lost or duplicated by maintenance running at the same time.
//!
//! Rows have the fixture schema of `tablekeeper_delta::fixtures` (id, day, user_id,
//! amount, payload), so the writer can share a table with `write_small_files`.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use deltalake::arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use deltalake::protocol::SaveMode;
use deltalake::DeltaTable;
use tablekeeper_delta::fixtures;

/// Writes to one table and remembers which ids it must hold.
#[derive(Debug)]
pub struct ModelWriter {
    url: url::Url,
    uri: String,
    partitioned: bool,
    days: u32,
    next_id: i64,
    /// Ids the table must hold after the writer's committed operations.
    pub expected: BTreeSet<i64>,
    /// Commits that lost a race and were retried (the writer's side of the conflicts).
    pub retried: u32,
}

fn batch(ids: &[i64], days: u32) -> anyhow::Result<RecordBatch> {
    let day = |id: &i64| format!("2026-01-{:02}", id.rem_euclid(i64::from(days.max(1))) + 1);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids.to_vec())),
        Arc::new(StringArray::from(ids.iter().map(day).collect::<Vec<_>>())),
        Arc::new(Int64Array::from(
            ids.iter()
                .map(|id| id.wrapping_mul(7919).rem_euclid(1000))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Float64Array::from(
            ids.iter()
                .map(|id| (id % 10_000) as f64 / 100.0)
                .collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            ids.iter()
                .map(|id| format!("{id}:model"))
                .collect::<Vec<_>>(),
        )),
    ];
    Ok(RecordBatch::try_new(
        tablekeeper_delta::fixtures::schema(),
        columns,
    )?)
}

/// Whether a deltalake error is a lost commit race worth retrying.
fn is_conflict(err: &deltalake::DeltaTableError) -> bool {
    tablekeeper_delta::classify_delta_error(err) == tablekeeper_delta::ErrorClass::Conflict
}

impl ModelWriter {
    /// Creates the table at `root` (partitioned by `day` into `days` values when
    /// `partitioned`) with `initial` rows, and starts the model from them.
    pub async fn create(
        root: &Path,
        partitioned: bool,
        days: u32,
        initial: i64,
    ) -> anyhow::Result<Self> {
        std::fs::create_dir_all(root)?;
        let url = url::Url::from_directory_path(root)
            .map_err(|()| anyhow::anyhow!("{} is not an absolute path", root.display()))?;
        let mut writer = Self {
            url,
            uri: root.to_string_lossy().into_owned(),
            partitioned,
            days,
            next_id: 1,
            expected: BTreeSet::new(),
            retried: 0,
        };
        writer.append(initial).await?;
        Ok(writer)
    }

    async fn open(&self) -> anyhow::Result<DeltaTable> {
        Ok(DeltaTable::try_from_url(self.url.clone()).await?)
    }

    /// Appends `n` new rows (one small file per partition).
    pub async fn append(&mut self, n: i64) -> anyhow::Result<()> {
        let ids: Vec<i64> = (self.next_id..self.next_id + n).collect();
        self.next_id += n;
        self.write(&ids, SaveMode::Append).await?;
        self.expected.extend(ids);
        Ok(())
    }

    /// Replaces the whole table with `n` new rows.
    pub async fn overwrite(&mut self, n: i64) -> anyhow::Result<()> {
        let ids: Vec<i64> = (self.next_id..self.next_id + n).collect();
        self.next_id += n;
        self.write(&ids, SaveMode::Overwrite).await?;
        self.expected = ids.into_iter().collect();
        Ok(())
    }

    async fn write(&mut self, ids: &[i64], mode: SaveMode) -> anyhow::Result<()> {
        loop {
            let table = self.open().await?;
            let mut write = table
                .write(vec![batch(ids, self.days)?])
                .with_save_mode(mode);
            if self.partitioned {
                write = write.with_partition_columns(["day"]);
            }
            match write.await {
                Ok(_) => return Ok(()),
                Err(e) if is_conflict(&e) => self.retried += 1,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Deletes the rows whose id is a multiple of `k` among the oldest half of the ids.
    pub async fn delete_some(&mut self, k: i64) -> anyhow::Result<()> {
        let Some(&cut) = self.expected.iter().nth(self.expected.len() / 2) else {
            return Ok(());
        };
        let predicate = format!("id < {cut} AND id % {k} = 0");
        loop {
            let table = self.open().await?;
            match table.delete().with_predicate(predicate.as_str()).await {
                Ok(_) => break,
                Err(e) if is_conflict(&e) => self.retried += 1,
                Err(e) => return Err(e.into()),
            }
        }
        self.expected.retain(|id| !(*id < cut && id % k == 0));
        Ok(())
    }

    /// Ids read back from the table: each once per row (duplicates kept), sorted.
    pub async fn ids_in_table(&self) -> anyhow::Result<Vec<i64>> {
        ids_in(&self.uri).await
    }

    /// Fails when the table does not hold exactly the model's ids, once each.
    pub async fn check(&self) -> anyhow::Result<()> {
        let ids = self.ids_in_table().await?;
        let unique: BTreeSet<i64> = ids.iter().copied().collect();
        let duplicated = ids.len() - unique.len();
        let lost: Vec<i64> = self.expected.difference(&unique).copied().take(5).collect();
        let extra: Vec<i64> = unique.difference(&self.expected).copied().take(5).collect();
        anyhow::ensure!(
            duplicated == 0 && lost.is_empty() && extra.is_empty(),
            "table {} diverged from its writer: {duplicated} duplicated row(s), {} lost (first {lost:?}), {} unexpected (first {extra:?})",
            self.uri,
            self.expected.difference(&unique).count(),
            unique.difference(&self.expected).count(),
        );
        Ok(())
    }
}

/// Every row's id, read through the independent fixture reader (rows render their columns
/// in name order: amount|day|id|payload|user_id).
pub async fn ids_in(uri: &str) -> anyhow::Result<Vec<i64>> {
    let rows = fixtures::read_rows_sorted(uri, None).await?;
    let mut ids = rows
        .iter()
        .map(|r| {
            r.split('|')
                .nth(2)
                .and_then(|id| id.parse::<i64>().ok())
                .ok_or_else(|| anyhow::anyhow!("row without an id column: {r}"))
        })
        .collect::<anyhow::Result<Vec<i64>>>()?;
    ids.sort_unstable();
    Ok(ids)
}
