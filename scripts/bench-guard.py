#!/usr/bin/env python3
"""The content guard's cost beside the rewrite it guards (BENCHMARKS.md "The content guard").

Writes two one-partition tables with python deltalake: *decoded* (40 appends of 20,000 rows
of id, user_id, name, amount, payload: files too small to copy, so compaction decodes them)
and *copied* (8 appends of 100,000 rows plus a random hex column: row groups over 1 MiB, so
compaction copies their column chunks). Runs `tablekeeper maintain --operation compact` on a
fresh copy of each, and Z-order of the decoded one, RUNS times, with the delta crate's debug
log, and reads from it what the guard spent (`content guard passed`: `tally_ms`, `check_ms`)
and how long the rewrite took (from `rewriting` to its `... committed` line); and what
measuring the job's cost added to it (`job runtime started and stopped`: the runtime each job
and task runs on, built and stopped so its threads' CPU clocks can be read; README "What
maintenance costs").

usage: scripts/bench-guard.py TABLEKEEPER_BINARY [RUNS]   (python with deltalake and pyarrow)
"""

import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime

import deltalake
import pyarrow as pa


def decoded_table(uri):
    rng = random.Random(7)
    for append in range(40):
        base = append * 20_000
        ids = list(range(base, base + 20_000))
        deltalake.write_deltalake(
            uri,
            pa.table(
                {
                    "id": ids,
                    "user_id": [rng.randrange(10_000) for _ in ids],
                    "name": [f"name-{i % 977}" for i in ids],
                    "amount": [rng.random() * 1000 for _ in ids],
                    "payload": [f"payload-{i}-{rng.getrandbits(64):016x}" for i in ids],
                    "day": ["2026-01-01"] * len(ids),
                }
            ),
            mode="append",
            partition_by=["day"],
        )


def copied_table(uri):
    rng = random.Random(11)
    for append in range(8):
        base = append * 100_000
        ids = list(range(base, base + 100_000))
        deltalake.write_deltalake(
            uri,
            pa.table(
                {
                    "id": ids,
                    "user_id": [rng.randrange(10_000) for _ in ids],
                    "amount": [rng.random() * 1000 for _ in ids],
                    "hex": [f"{rng.getrandbits(128):032x}" for _ in ids],
                    "day": ["2026-01-01"] * len(ids),
                }
            ),
            mode="append",
            partition_by=["day"],
        )


STAMP = re.compile(r"^(\S+Z)")


def seconds(line):
    return datetime.fromisoformat(STAMP.match(line).group(1).replace("Z", "+00:00")).timestamp()


def run(binary, inventory, operation):
    env = dict(os.environ, RUST_LOG="tablekeeper_delta=debug,tablekeeper=debug,info", NO_COLOR="1")
    out = subprocess.run(
        [binary, "--log-format", "text", "maintain", "--inventory", inventory, "--table", "t",
         "--operation", operation],
        capture_output=True, text=True, env=env, check=True,
    )
    log = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in out.stderr.splitlines()]
    started = next(seconds(l) for l in log if "rewriting" in l and "partitions" in l)
    ended = max(seconds(l) for l in log if "committed" in l and ("bin" in l or "z-order" in l))
    tally = sum(float(re.search(r"tally_ms=([\d.]+)", l).group(1)) for l in log if "content guard passed" in l)
    check = sum(float(re.search(r"check_ms=([\d.]+)", l).group(1)) for l in log if "content guard passed" in l)
    metering = sum(
        (float(re.search(r"start_us=(\d+)", l).group(1)) + float(re.search(r"stop_us=(\d+)", l).group(1))) / 1e3
        for l in log if "job runtime started and stopped" in l
    )
    whole = json.loads(out.stdout)["cost"]["wall_seconds"] * 1e3
    return (ended - started) * 1e3, tally, check, metering, whole


def main():
    binary = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    work = tempfile.mkdtemp(prefix="bench-guard-")
    results = {}
    for name, make, operations in [
        ("decoded", decoded_table, ["compact", "zorder"]),
        ("copied", copied_table, ["compact"]),
    ]:
        source = os.path.join(work, f"{name}-source")
        make(source)
        for operation in operations:
            rows = []
            for _ in range(runs):
                copy = os.path.join(work, "t")
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(source, copy)
                inventory = os.path.join(work, "inventory.yaml")
                with open(inventory, "w") as f:
                    f.write(
                        "tables:\n  - name: t\n    path: \"%s\"\n    owner: bench\n"
                        "    layout: { zorder: [user_id] }\n"
                        "    maintenance: { compaction: { min_small_files: 2 } }\n" % copy
                    )
                rows.append(run(binary, inventory, operation))
            rewrite = [r[0] for r in rows]
            guard = [r[1] + r[2] for r in rows]
            share = [g / r for g, r in zip(guard, rewrite)]
            metering = [r[3] / r[4] for r in rows]
            results[f"{name} {operation}"] = {
                "rewrite_ms": [round(x, 1) for x in rewrite],
                "guard_ms": [round(x, 2) for x in guard],
                "median_rewrite_ms": round(statistics.median(rewrite), 1),
                "median_guard_ms": round(statistics.median(guard), 2),
                "median_share": round(statistics.median(share), 4),
                "share_range": [round(min(share), 4), round(max(share), 4)],
                "metering_ms": [round(r[3], 2) for r in rows],
                "median_metering_share": round(statistics.median(metering), 4),
            }
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
