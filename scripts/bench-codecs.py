"""The output codec's size/time trade-off of a decoded compaction (scripts/bench.sh `codecs`).

Writes one table like `tk-bench compact`'s decoded table (4 partitions x 100 files of one
row group of 20,000 rows: id, day, user_id, amount, payload), then compacts fresh copies of
it once per codec: with python deltalake's `optimize.compact` under `WriterProperties` of
that codec, and, given `--tablekeeper BIN`, with `tablekeeper maintain --operation compact`
under the inventory's `layout.compression` of the same codec and level, and, given `--floor
TK_BENCH`, with `tk-bench floor` (arrow-rs alone decoding each partition and encoding it into
one file under that codec, on every core: no Delta log, no guard; the physical limit of a
decoded rewrite with the Parquet library both engines use), once with a dictionary on every
column as python deltalake writes, and once with `id` and `payload` plain, the encoding
tablekeeper chooses for this table's two columns of unique values (each tablekeeper result
names the columns its files hold without a dictionary, read by pyarrow). Prints one JSON
object: per codec and engine the wall time, the output bytes and the rows read back (python
deltalake reads every Delta output, pyarrow the floor's files; a row count that differs from
the input's fails the run).
zstd level 4 is the default of both engines. Page cache dropped before each timed run when
run as root.

usage: bench-codecs.py DIR [--smoke] [--tablekeeper BIN] [--floor TK_BENCH]
"""

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, WriterProperties, write_deltalake

CODECS = [
    ("UNCOMPRESSED", None),
    ("SNAPPY", None),
    ("LZ4_RAW", None),
    ("ZSTD", 1),
    ("ZSTD", 3),
    ("ZSTD", 4),
    ("ZSTD", 9),
    ("GZIP", 6),
]
TARGET = 64 * 1024 * 1024

# python deltalake's codec names as `layout.compression` spells them
INVENTORY_CODECS = {
    "UNCOMPRESSED": "uncompressed",
    "SNAPPY": "snappy",
    "LZ4_RAW": "lz4",
    "ZSTD": "zstd",
    "GZIP": "gzip",
}


def table_batch(first, rows_per_file, partitions):
    rows = rows_per_file * partitions
    ids = list(range(first, first + rows))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "day": pa.array([f"2026-01-{(i % partitions) + 1:02}" for i in range(rows)]),
            "user_id": pa.array([(i * 7919) % 1000 for i in ids], pa.int64()),
            "amount": pa.array([(i % 10_000) / 100.0 for i in ids], pa.float64()),
            "payload": pa.array([f"{i}:{'x' * 16}" for i in ids]),
        }
    )


def drop_caches():
    subprocess.run(["sync"], check=False)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def data_bytes(root):
    total = 0
    for dirpath, _, names in os.walk(root):
        if "_delta_log" in dirpath:
            continue
        total += sum(os.path.getsize(os.path.join(dirpath, n)) for n in names if n.endswith(".parquet"))
    return total


def delta_read_back(uri):
    """Rows python deltalake reads from the table, and the bytes of its active files."""
    table = DeltaTable(uri)
    actions = pa.table(table.get_add_actions(flatten=True))
    return table.to_pyarrow_table().num_rows, sum(actions.column("size_bytes").to_pylist())


def plain_columns(uri):
    """The columns of the table's active files that no file holds with a dictionary page."""
    table = DeltaTable(uri)
    seen, dictionary = set(), set()
    for path in pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist():
        meta = pq.ParquetFile(os.path.join(uri, urllib.parse.unquote(path))).metadata
        for g in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                chunk = meta.row_group(g).column(c)
                seen.add(chunk.path_in_schema)
                if chunk.has_dictionary_page:
                    dictionary.add(chunk.path_in_schema)
    return sorted(seen - dictionary)


def floor_read_back(copy):
    """Rows pyarrow reads from the files `tk-bench floor` wrote, and their bytes."""
    floor = os.path.join(copy, "_floor")
    written = [os.path.join(floor, n) for n in os.listdir(floor)]
    rows = sum(pq.ParquetFile(f).metadata.num_rows for f in written)
    return rows, sum(os.path.getsize(f) for f in written)


def python_compact(copy, codec, level):
    table = DeltaTable(copy)
    props = WriterProperties(compression=codec, compression_level=level)
    start = time.perf_counter()
    metrics = table.optimize.compact(target_size=TARGET, writer_properties=props)
    return time.perf_counter() - start, metrics["numFilesAdded"]


def tablekeeper_compact(tablekeeper, copy, codec, level):
    compression = INVENTORY_CODECS[codec]
    if level is not None:
        compression = f"{{ codec: {compression}, level: {level} }}"
    inventory = copy + ".yaml"
    with open(inventory, "w") as f:
        f.write(
            "tables:\n"
            "  - name: bench.codecs\n"
            f"    path: \"{os.path.abspath(copy)}\"\n"
            "    owner: bench\n"
            f"    layout: {{ compression: {compression} }}\n"
            f"    maintenance: {{ compaction: {{ target_file_size: {TARGET} }} }}\n"
        )
    start = time.perf_counter()
    out = subprocess.run(
        [tablekeeper, "maintain", "--inventory", inventory, "--table", "bench.codecs",
         "--operation", "compact"],
        check=True, capture_output=True, text=True,
    )
    seconds = time.perf_counter() - start
    os.remove(inventory)
    return seconds, json.loads(out.stdout)["report"]["files_added"]


def floor_rewrite(tk_bench, copy, codec, level, plain=None):
    name = codec.lower() if level is None else f"{codec.lower()}({level})"
    out = subprocess.run(
        [tk_bench, "floor", "--dir", copy, "--codec", name] + (["--plain", plain] if plain else []),
        check=True, capture_output=True, text=True,
    )
    figures = json.loads(out.stdout)
    return figures["seconds"], len(os.listdir(figures["output_dir"]))


def main():
    out_dir = sys.argv[1]
    smoke = "--smoke" in sys.argv
    tablekeeper = None
    if "--tablekeeper" in sys.argv:
        tablekeeper = sys.argv[sys.argv.index("--tablekeeper") + 1]
    tk_bench = None
    if "--floor" in sys.argv:
        tk_bench = sys.argv[sys.argv.index("--floor") + 1]
    partitions, files, rows = (2, 5, 100) if smoke else (4, 100, 20_000)
    shutil.rmtree(out_dir, ignore_errors=True)
    source = os.path.join(out_dir, "source")
    for f in range(files):
        write_deltalake(
            source,
            table_batch(f * rows * partitions, rows, partitions),
            partition_by=["day"],
            mode="append",
        )
    input_bytes = data_bytes(source)
    expected = DeltaTable(source).to_pyarrow_table().num_rows
    # (engine, run(copy, codec, level) -> (seconds, files written), read_back(copy) -> (rows, bytes))
    engines = [("python deltalake", python_compact, delta_read_back)]
    if tablekeeper:
        engines.append(
            ("tablekeeper", lambda copy, c, l: tablekeeper_compact(tablekeeper, copy, c, l),
             delta_read_back)
        )
    if tk_bench:
        engines.append(
            ("arrow-rs floor", lambda copy, c, l: floor_rewrite(tk_bench, copy, c, l),
             floor_read_back)
        )
        engines.append(
            ("arrow-rs floor, id and payload plain",
             lambda copy, c, l: floor_rewrite(tk_bench, copy, c, l, "id,payload"),
             floor_read_back)
        )
    results = []
    for codec, level in CODECS:
        name = codec.lower() if level is None else f"{codec.lower()}({level})"
        for engine, compact, read_back in engines:
            copy = os.path.join(out_dir, name)
            shutil.copytree(source, copy)
            cold = drop_caches()
            seconds, files_added = compact(copy, codec, level)
            read, written = read_back(copy)
            if read != expected:
                raise SystemExit(f"{engine} {name}: {read} rows read back, the table held {expected}")
            result = {
                "codec": name,
                "engine": engine,
                "seconds": seconds,
                "output_bytes": written,
                "files_added": files_added,
                "cold_cache": cold,
            }
            if engine == "tablekeeper":
                result["plain_columns"] = plain_columns(copy)
            results.append(result)
            shutil.rmtree(copy)
    print(
        json.dumps(
            {
                "input_files": files * partitions,
                "input_bytes": input_bytes,
                "rows": expected,
                "codecs": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
