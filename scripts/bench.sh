#!/usr/bin/env bash
# tablekeeper benchmarks against their reference points (see BENCHMARKS.md):
#   jobs     job table claim+complete throughput vs pgbench TPS on the same Postgres;
#   compact  compaction and Z-order time vs python deltalake's optimize.compact/z_order and
#            compaction throughput vs a cold-cache `cp -r` of the same table bytes, on a table
#            of small row groups (decoded) and one of large row groups (copied);
#   rewrite  peak RSS of `tablekeeper maintain` compacting and Z-ordering one ~2 GB partition;
#   growth   30 simulated days: scheduled compaction, whole-table compaction, scoped and
#            whole-table Z-order and VACUUM, day-30 cost / day-1 cost;
#   probe    probing a 100k-file, 10k-commit table cold and incrementally vs python
#            deltalake's DeltaTable() load and update_incremental();
#   fleet    the real `tablekeeper run` with 10, 1,000 and 10,000 tables: validate time,
#            start-up, RSS, /metrics scrape, enqueue of one job per table;
#   codecs   the output codec's size/time trade-off of a decoded compaction, python deltalake
#            and `tablekeeper maintain` side by side per codec and level, beside the floor:
#            arrow-rs alone decoding and re-encoding the same files (`tk-bench floor`;
#            scripts/bench-codecs.py);
#   tasks    one compaction of a 12-partition table as tasks on 3 replicas of the real binary
#            (2 planning, 1 worker) vs python deltalake's optimize.compact on a copy: per-task
#            time and job-store overhead, tasks per replica, estimated wall time for N pods.
# Usage: scripts/bench.sh [--smoke]
#   --smoke      tiny inputs (CI: well under 2 minutes once the binaries are built)
# Environment:
#   TABLEKEEPER_TEST_DATABASE_URL  Postgres server (default postgres://postgres@127.0.0.1:5432/postgres);
#                                  the script creates and drops tk_bench_pgbench and tk_test_* databases
#   BENCH_SKIP_BUILD=1             use the binaries already built (CI after its own cargo build)
#   BENCH_PROFILE                  debug (default) or release build of tk-bench and tablekeeper
#   BENCH_TK_BENCH                 another tk-bench binary to drive the runs (e.g. a debug one beside a release tablekeeper)
#   BENCH_ONLY                     space-separated subset of "jobs compact codecs rewrite growth probe fleet tasks"
#   BENCH_FLEET_REPLICAS           replicas of `tablekeeper run` in the fleet section, on one job store (default 1)
#   BENCH_FLEET_SIZES              its table counts, comma-separated (default 10,1000,10000; smoke 10,100)
#   BENCH_COMPACT_ROWS             rows per file of the decoded compaction table (default 20000: 400 files,
#                                  about 113 MB); BENCH_COMPACT_COPIED_ROWS the copied one's (default 100000)
#   BENCH_COMPACT_VARIANTS         which compaction tables to run (default "decoded copied")
#   CARGO_TARGET_DIR               default /root/.cache/tablekeeper-target (the team's shared target dir)
# Writes bench-results/*.json (smoke: bench-results/smoke/, release: bench-results/release/;
# summary.json holds the ratios and goal verdicts) and prints markdown tables.
set -euo pipefail

cd "$(dirname "$0")/.."

SMOKE=""
for arg in "$@"; do
  case "$arg" in
    --smoke) SMOKE="--smoke" ;;
    *) echo "usage: scripts/bench.sh [--smoke]  (env: BENCH_ONLY, BENCH_PROFILE, BENCH_SKIP_BUILD)" >&2; exit 2 ;;
  esac
done

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/root/.cache/tablekeeper-target}"
PG_URL="${TABLEKEEPER_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
PROFILE="${BENCH_PROFILE:-debug}"
# pinned: the python engine we compare against (latest on PyPI when this was written)
PY_DELTALAKE_VERSION="1.6.6"
# the codecs section builds its table with pyarrow (as scripts/test-env.sh pins it)
PY_PYARROW_VERSION="26.0.1"
ONLY="${BENCH_ONLY:-jobs compact codecs rewrite growth probe fleet tasks}"
# smoke and release figures go to their own folders so they never overwrite or mix with
# the full debug run's (the one BENCHMARKS.md quotes)
RESULTS=bench-results
if [[ "$PROFILE" == "release" ]]; then RESULTS="$RESULTS/release"; fi
if [[ -n "$SMOKE" ]]; then RESULTS="$RESULTS/smoke"; fi
DATA=bench-data/compact
VENV=.venv-bench
PGBENCH_DB=tk_bench_pgbench
PGBENCH_URL="${PG_URL%/*}/${PGBENCH_DB}"
if [[ -n "$SMOKE" ]]; then
  PGBENCH_SECONDS=3
  PGBENCH_SCALE=1
else
  PGBENCH_SECONDS=20
  PGBENCH_SCALE=10
fi

for section in $ONLY; do
  case "$section" in
    jobs|compact|codecs|rewrite|growth|probe|fleet|tasks) ;;
    *) echo "BENCH_ONLY: unknown section '$section' (use jobs compact codecs rewrite growth probe fleet tasks)" >&2; exit 2 ;;
  esac
done
wants() { [[ " $ONLY " == *" $1 "* ]]; }

mkdir -p "$RESULTS"
# figures of sections not run this time must not leak into the summary
for section in $ONLY; do
  case "$section" in
    jobs) rm -f "$RESULTS/jobs.json" "$RESULTS/pgbench.json" "$RESULTS/pgbench.txt" ;;
    compact) rm -f "$RESULTS"/compact*.json ;;
    *) rm -f "$RESULTS/$section"*.json ;;
  esac
done
now() { date +%s.%N; }
BENCH_STARTED=$(now)
# the machine may be shared: record how busy it was around the run
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")

echo "== building tk-bench and tablekeeper ($PROFILE)" >&2
if [[ "${BENCH_SKIP_BUILD:-0}" == "1" ]]; then
  echo "BENCH_SKIP_BUILD=1: using the binaries already built" >&2
elif [[ "$PROFILE" == "release" ]]; then
  # no debug artifacts to share: build only what the chosen sections run
  if wants fleet || wants tasks; then
    nice -n 19 cargo build --workspace --bins --release >&2
  else
    nice -n 19 cargo build -p tablekeeper-tests --bin tk-bench --release >&2
  fi
else
  # workspace-wide on purpose: a per-package build unifies features differently and
  # rebuilds DataFusion (10+ minutes) instead of reusing the workspace's artifacts
  nice -n 19 cargo build --workspace --bins >&2
fi
TK_BENCH="${BENCH_TK_BENCH:-$CARGO_TARGET_DIR/$PROFILE/tk-bench}"
TABLEKEEPER="$CARGO_TARGET_DIR/$PROFILE/tablekeeper"
NEEDED=("$TK_BENCH")
if wants fleet || wants tasks; then NEEDED+=("$TABLEKEEPER"); fi
for bin in "${NEEDED[@]}"; do
  if [[ ! -x "$bin" ]]; then
    echo "$bin is missing: build it with scripts/bench.sh without BENCH_SKIP_BUILD, or cargo build --workspace --bins (add --release for BENCH_PROFILE=release)" >&2
    exit 1
  fi
done

echo "== python venv ($VENV, deltalake==$PY_DELTALAKE_VERSION)" >&2
if [[ ! -x "$VENV/bin/python" ]]; then
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import deltalake, pyarrow, sys; sys.exit(deltalake.__version__ != '$PY_DELTALAKE_VERSION' or pyarrow.__version__ != '$PY_PYARROW_VERSION')" 2>/dev/null; then
  "$VENV/bin/pip" install -q "deltalake==$PY_DELTALAKE_VERSION" "pyarrow==$PY_PYARROW_VERSION" >&2
fi
PY="$VENV/bin/python"


# jobs: job table vs pgbench ----------------------------------------------------------------
drop_pgbench_db() { psql -q "$PG_URL" -c "DROP DATABASE IF EXISTS $PGBENCH_DB WITH (FORCE)" >/dev/null 2>&1 || true; }
if wants jobs; then
  trap drop_pgbench_db EXIT
  drop_pgbench_db
  psql -q "$PG_URL" -c "CREATE DATABASE $PGBENCH_DB" >/dev/null
  echo "== pgbench -i -s $PGBENCH_SCALE; pgbench -c 4 -j 2 -T $PGBENCH_SECONDS" >&2
  pgbench -q -i -s "$PGBENCH_SCALE" "$PGBENCH_URL" >/dev/null 2>&1
  pgbench -c 4 -j 2 -T "$PGBENCH_SECONDS" "$PGBENCH_URL" >"$RESULTS/pgbench.txt" 2>&1
  PGBENCH_TPS=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$RESULTS/pgbench.txt" | head -1)
  if [[ -z "$PGBENCH_TPS" ]]; then
    echo "could not read TPS from pgbench output:" >&2
    cat "$RESULTS/pgbench.txt" >&2
    exit 1
  fi
  printf '{"tps": %s, "clients": 4, "threads": 2, "seconds": %s, "scale": %s}\n' \
    "$PGBENCH_TPS" "$PGBENCH_SECONDS" "$PGBENCH_SCALE" >"$RESULTS/pgbench.json"
  drop_pgbench_db

  echo "== tk-bench jobs" >&2
  TABLEKEEPER_TEST_DATABASE_URL="$PG_URL" "$TK_BENCH" jobs $SMOKE --out "$RESULTS/jobs.json" >/dev/null
fi

# compact: compaction (and Z-order) vs python deltalake vs a cold-cache cp -r ---------------
# Two tables of 400 files each: "decoded" files of one small row group (20,000 rows, about
# 0.28 MB; 113 MB in all) that compaction must decode and merge, and "copied" files whose row
# group is over the copy path's 1 MiB (100,000 rows, about 1.4 MB; 566 MB in all). The page cache is dropped before every
# timed step when the script runs as root (each JSON says whether it could).
drop_caches() { sync; if [[ -w /proc/sys/vm/drop_caches ]]; then echo 3 > /proc/sys/vm/drop_caches; echo true; else echo false; fi; }
if wants compact; then
  for variant in ${BENCH_COMPACT_VARIANTS:-decoded copied}; do
    case "$variant" in
      decoded) ROWS="${BENCH_COMPACT_ROWS:-20000}"; ZORDER="--zorder" ;;
      copied) ROWS="${BENCH_COMPACT_COPIED_ROWS:-100000}"; ZORDER="" ;;
      *) echo "BENCH_COMPACT_VARIANTS: unknown variant '$variant' (use decoded copied)" >&2; exit 2 ;;
    esac
    OUT="$RESULTS/compact-$variant"
    echo "== tk-bench compact ($variant: $ROWS rows per file)" >&2
    "$TK_BENCH" compact $SMOKE $ZORDER --rows-per-file "$ROWS" --dir "$DATA-$variant" --out "$OUT.json" >/dev/null
    field() { "$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]] or '')" "$OUT.json" "$1"; }
    SOURCE=$(field source)
    COPY_B=$(field copy_b)
    COPY_D=$(field copy_d)
    ZCOL=$(field zorder_column)

    echo "== python deltalake optimize.compact ($variant)" >&2
    COLD=$(drop_caches)
    "$PY" - "$COPY_B" "$COLD" >"$OUT-python.json" <<'PY_COMPACT'
import json, sys, time
import deltalake
from deltalake import DeltaTable

started = time.perf_counter()
# opening is timed too: tablekeeper's figure includes reading the log
table = DeltaTable(sys.argv[1])
metrics = table.optimize.compact(target_size=64 * 1024 * 1024)
seconds = time.perf_counter() - started
print(json.dumps({
    "engine": "python-deltalake",
    "version": deltalake.__version__,
    "cold_cache": sys.argv[2] == "true",
    "seconds": seconds,
    "files_removed": metrics.get("numFilesRemoved"),
    "files_added": metrics.get("numFilesAdded"),
}))
PY_COMPACT

    if [[ -n "$COPY_D" ]]; then
      echo "== python deltalake optimize.z_order ($variant)" >&2
      COLD=$(drop_caches)
      "$PY" - "$COPY_D" "$ZCOL" "$COLD" >"$OUT-python-zorder.json" <<'PY_ZORDER'
import json, sys, time
import deltalake
from deltalake import DeltaTable

started = time.perf_counter()
table = DeltaTable(sys.argv[1])
metrics = table.optimize.z_order([sys.argv[2]], target_size=64 * 1024 * 1024)
seconds = time.perf_counter() - started
print(json.dumps({"engine": "python-deltalake", "version": deltalake.__version__,
                  "cold_cache": sys.argv[3] == "true", "seconds": seconds,
                  "files_removed": metrics.get("numFilesRemoved"),
                  "files_added": metrics.get("numFilesAdded")}))
PY_ZORDER
    fi

    echo "== cp -r (physical floor, cold cache) ($variant)" >&2
    FLOOR="$DATA-$variant/floor"
    rm -rf "$FLOOR"
    COLD=$(drop_caches)
    started=$(now)
    cp -r "$SOURCE" "$FLOOR"
    sync
    finished=$(now)
    # %f: bc prints ".5" without the leading zero JSON needs
    printf '{"engine": "cp -r + sync", "cold_cache": %s, "seconds": %f}\n' "$COLD" "$(echo "$finished - $started" | bc -l)" \
      >"$OUT-cp.json"
    rm -rf "$FLOOR"
  done
fi

# codecs: the output codec's size/time trade-off of one decoded compaction ------------------
if wants codecs; then
  echo "== python deltalake optimize.compact, tablekeeper maintain and the arrow-rs floor per output codec (scripts/bench-codecs.py)" >&2
  "$PY" scripts/bench-codecs.py bench-data/codecs $SMOKE --tablekeeper "$CARGO_TARGET_DIR/$PROFILE/tablekeeper" \
    --floor "$TK_BENCH" >"$RESULTS/codecs.json"
  rm -rf bench-data/codecs
fi

# rewrite: peak RSS of `tablekeeper maintain` rewriting one ~2 GB partition -----------------
# Three runs, each on a fresh table under the default 512 MiB budget: compaction of files whose
# row groups are copied, compaction of the same rows in row groups of 5,000 rows (under 1 MiB,
# so decoded), and Z-order of the latter.
if wants rewrite; then
  TK="$CARGO_TARGET_DIR/$PROFILE/tablekeeper"
  for run in copied:compact decoded:compact decoded:zorder; do
    layout="${run%%:*}"; op="${run##*:}"
    OUT="$RESULTS/rewrite-$layout-$op"
    ROW_GROUPS=""
    # 20,000-row groups came out at 1.14 MB, over the copy path's 1 MiB: 5,000 stay under it
    [[ "$layout" == "decoded" ]] && ROW_GROUPS="--rows-per-row-group 5000"
    echo "== tk-bench partition ($layout) for $op" >&2
    "$TK_BENCH" partition $SMOKE $ROW_GROUPS --dir "bench-data/rewrite" --out "$OUT-table.json" >/dev/null
    INV=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['inventory'])" "$OUT-table.json")
    COLD=$(drop_caches)
    echo "== tablekeeper maintain --operation $op ($layout), peak RSS" >&2
    "$PY" - "$TK" "$INV" "$op" "$layout" "$COLD" "$OUT-report.json" >"$OUT.json" <<'PY_RSS'
import json, resource, subprocess, sys, time
tk, inventory, op, layout, cold, report = sys.argv[1:]
started = time.perf_counter()
with open(report, "w") as out:
    subprocess.run([tk, "maintain", "--inventory", inventory, "--table", "bench.big",
                    "--operation", op], stdout=out, check=True)
seconds = time.perf_counter() - started
# the largest resident set of any child this process waited for: the one run above
peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"layout": layout, "operation": op, "cold_cache": cold == "true",
                  "seconds": seconds, "peak_rss_kib": peak_kib}))
PY_RSS
  done
  rm -rf bench-data/rewrite
fi

# growth: 30 days of new data, maintained every day -----------------------------------------
if wants growth; then
  echo "== tk-bench growth" >&2
  "$TK_BENCH" growth $SMOKE --dir bench-data/growth --out "$RESULTS/growth.json" >/dev/null
fi

# probe: a 100k-file table, tablekeeper's probe vs python deltalake's load -----------------
if wants probe; then
  echo "== tk-bench probe" >&2
  "$TK_BENCH" probe $SMOKE --dir bench-data/probe --out "$RESULTS/probe.json" >/dev/null
  echo "== python deltalake DeltaTable() load and update_incremental()" >&2
  "$PY" - "$RESULTS/probe.json" >"$RESULTS/probe-python.json" <<'PY_PROBE'
import json, sys, time
import deltalake
from deltalake import DeltaTable

rust = json.load(open(sys.argv[1]))
path, before, after = rust["table"], rust["version_before"], rust["version_after"]
clock = time.perf_counter
# warm the page cache as tk-bench did: one untimed load
DeltaTable(path, version=before)

started = clock()
table = DeltaTable(path, version=before)
load = clock() - started
started = clock()
files = table.get_add_actions(flatten=True).num_rows
add_actions = clock() - started
if files != rust["files"]:
    sys.exit(f"python sees {files} files at version {before}, tk-bench wrote {rust['files']}")

started = clock()
table.update_incremental()
incremental = clock() - started
if table.version() != after:
    sys.exit(f"update_incremental() reached version {table.version()}, expected {after}")
started = clock()
DeltaTable(path)
reload = clock() - started
print(json.dumps({
    "engine": "python-deltalake",
    "version": deltalake.__version__,
    "files": files,
    "load_seconds": load,
    "add_actions_seconds": add_actions,
    "update_incremental_seconds": incremental,
    "reload_seconds": reload,
}))
PY_PROBE
fi

# fleet: the real binary with growing inventories --------------------------------------------
if wants fleet; then
  echo "== tk-bench fleet (tablekeeper run, $PROFILE build)" >&2
  FLEET_ARGS=(--replicas "${BENCH_FLEET_REPLICAS:-1}")
  [[ -n "${BENCH_FLEET_SIZES:-}" ]] && FLEET_ARGS+=(--sizes "$BENCH_FLEET_SIZES")
  TABLEKEEPER_TEST_DATABASE_URL="$PG_URL" "$TK_BENCH" fleet $SMOKE --dir bench-data/fleet \
    --tablekeeper "$TABLEKEEPER" "${FLEET_ARGS[@]}" --out "$RESULTS/fleet.json" >/dev/null
  # peak memory of loading each inventory alone (GNU time's %M, in KB), when installed
  if [[ -x /usr/bin/time ]]; then
    echo "== tablekeeper validate peak RSS (/usr/bin/time)" >&2
    {
      echo "{"
      first=1
      for inv in bench-data/fleet/inventory-*.yaml; do
        n=${inv##*inventory-}; n=${n%.yaml}
        kb=$(/usr/bin/time -f '%M' "$TABLEKEEPER" validate "$inv" 2>&1 >/dev/null | tail -1)
        [[ $first == 1 ]] || echo ","
        first=0
        printf '"%s": %s' "$n" "$kb"
      done
      echo "}"
    } >"$RESULTS/fleet-validate-rss.json"
  fi
fi

# tasks: one compaction spread over replicas, vs python deltalake on a copy ---------------------
if wants tasks; then
  echo "== tk-bench tasks (3 replicas of tablekeeper run, $PROFILE build)" >&2
  TABLEKEEPER_TEST_DATABASE_URL="$PG_URL" "$TK_BENCH" tasks $SMOKE --dir bench-data/tasks \
    --tablekeeper "$TABLEKEEPER" --replicas "${BENCH_TASKS_REPLICAS:-3}" --out "$RESULTS/tasks.json" >/dev/null
  TASKS_COPY=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['python_copy'])" "$RESULTS/tasks.json")
  echo "== python deltalake optimize.compact (tasks table)" >&2
  "$PY" - "$TASKS_COPY" >"$RESULTS/tasks-python.json" <<'PY_TASKS'
import json, sys, time
import deltalake
from deltalake import DeltaTable

started = time.perf_counter()
table = DeltaTable(sys.argv[1])
metrics = table.optimize.compact(target_size=256 * 1024 * 1024)
print(json.dumps({"engine": "python-deltalake", "version": deltalake.__version__,
                  "seconds": time.perf_counter() - started,
                  "files_removed": metrics.get("numFilesRemoved"),
                  "files_added": metrics.get("numFilesAdded")}))
PY_TASKS
fi

BENCH_SECONDS=$(echo "$(now) - $BENCH_STARTED" | bc -l)
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")

# summary: summary.json and markdown tables of whatever ran ---------------------------------
"$PY" - "$RESULTS" "$PROFILE" "${SMOKE:-full}" "$BENCH_SECONDS" "$LOAD_BEFORE" "$LOAD_AFTER" <<'PY_SUMMARY'
import json, os, sys

results, profile, mode, wall = sys.argv[1], sys.argv[2], sys.argv[3].lstrip("-"), float(sys.argv[4])
load_before, load_after = sys.argv[5], sys.argv[6]


def load(name):
    path = os.path.join(results, name)
    return json.load(open(path)) if os.path.exists(path) else None


ok = lambda b: "met" if b else "**missed**"
summary = {"mode": mode, "build_profile": profile, "wall_seconds": wall,
           "loadavg_before": load_before, "loadavg_after": load_after, "goals_met": {}}
goals = summary["goals_met"]
print(f"\n### tablekeeper benchmarks ({mode}, {profile} build, {wall:.0f} s wall time)\n")
print(f"Load average (1, 5, 15 min) before: {load_before}; after: {load_after}.\n")

pgbench, jobs = load("pgbench.json"), load("jobs.json")
if pgbench and jobs:
    pg_jobs = jobs["postgres"]["jobs_per_sec"]
    sqlite_jobs = jobs["sqlite"]["jobs_per_sec"]
    jobs_ratio = pg_jobs / pgbench["tps"]
    summary.update({"pgbench_tps": pgbench["tps"], "postgres_jobs_per_sec": pg_jobs,
                    "sqlite_jobs_per_sec": sqlite_jobs, "jobs_to_pgbench": jobs_ratio})
    goals["jobs >= 25% of pgbench tps"] = jobs_ratio >= 0.25
    print("| job table | figure | reference | ratio | goal |")
    print("|---|---|---|---|---|")
    print(f"| claim+complete, Postgres, {jobs['postgres']['replicas']} replicas x {jobs['postgres']['workers_per_replica']} workers, {jobs['postgres']['jobs']} jobs | {pg_jobs:.0f} jobs/s | pgbench -c 4 -j 2: {pgbench['tps']:.0f} TPS | {jobs_ratio:.2f} | >= 0.25: {ok(jobs_ratio >= 0.25)} |")
    print(f"| claim+complete, SQLite, 1 replica x {jobs['sqlite']['workers_per_replica']} workers, {jobs['sqlite']['jobs']} jobs | {sqlite_jobs:.0f} jobs/s | - | - | - |")
    print()

for variant in ("decoded", "copied"):
    tk, py, cp = load(f"compact-{variant}.json"), load(f"compact-{variant}-python.json"), load(f"compact-{variant}-cp.json")
    if not (tk and py and cp):
        continue
    time_ratio = tk["seconds"] / py["seconds"]
    copy_share = cp["seconds"] / tk["seconds"]  # tk throughput / copy throughput, same bytes
    mb = tk["data_bytes"] / 1e6
    cold = "cold" if tk["cold_cache"] and py["cold_cache"] and cp["cold_cache"] else "warm"
    summary[f"compact_{variant}"] = {"table_files": tk["files_before"], "table_mb": mb,
        "tablekeeper_secs": tk["seconds"], "python_secs": py["seconds"], "cp_secs": cp["seconds"],
        "tk_to_python_time": time_ratio, "tk_to_cp_throughput": copy_share, "cache": cold}
    goals[f"compact ({variant}) <= 0.5x python time"] = time_ratio <= 0.5
    goals[f"compact ({variant}) >= 0.5 of cold cp throughput"] = copy_share >= 0.5
    print(f"| compaction, {variant} ({tk['rows_per_file']} rows per file, {cold} cache) | figure | reference | ratio | goal |")
    print("|---|---|---|---|---|")
    print(f"| compact {tk['files_before']} files / {mb:.1f} MB to {tk['files_after']} files | {tk['seconds']:.2f} s | python deltalake {py['version']}: {py['seconds']:.2f} s | {time_ratio:.2f}x time | <= 0.5x: {ok(time_ratio <= 0.5)} |")
    print(f"| compact throughput | {mb / tk['seconds']:.1f} MB/s | cp -r + sync: {mb / cp['seconds']:.1f} MB/s | {copy_share:.2f} | >= 0.5: {ok(copy_share >= 0.5)} |")
    pz = load(f"compact-{variant}-python-zorder.json")
    if tk.get("zorder_seconds") and pz:
        z_ratio = tk["zorder_seconds"] / pz["seconds"]
        summary[f"compact_{variant}"].update({"tablekeeper_zorder_secs": tk["zorder_seconds"],
            "python_zorder_secs": pz["seconds"], "zorder_tk_to_python_time": z_ratio})
        goals["zorder <= 0.7x python time"] = z_ratio <= 0.7
        print(f"| Z-order on {tk['zorder_column']}, {mb:.1f} MB | {tk['zorder_seconds']:.2f} s | python deltalake: {pz['seconds']:.2f} s | {z_ratio:.2f}x time | <= 0.7x: {ok(z_ratio <= 0.7)} |")
    print()

rewrites = [(layout, op, load(f"rewrite-{layout}-{op}.json"), load(f"rewrite-{layout}-{op}-table.json"))
            for layout, op in (("copied", "compact"), ("decoded", "compact"), ("decoded", "zorder"))]
rewrites = [r for r in rewrites if r[2] and r[3]]
if rewrites:
    print("| rewrite of one partition (`tablekeeper maintain`, default 512 MiB budget) | table | time | peak RSS | goal |")
    print("|---|---|---|---|---|")
    for layout, op, run, table in rewrites:
        mib = run["peak_rss_kib"] / 1024
        summary[f"rewrite_{layout}_{op}"] = {"seconds": run["seconds"], "peak_rss_mib": mib,
                                             "table_bytes": table["bytes"], "files": table["files"]}
        goals[f"{op} ({layout}) of one partition peak RSS <= 512 MiB"] = mib <= 512
        groups = f"row groups of {table['rows_per_row_group']} rows" if table["rows_per_row_group"] else "one row group per file"
        print(f"| {op}, {layout} | {table['files']} files, {table['bytes'] / 1e6:.0f} MB, {groups} | {run['seconds']:.1f} s | {mib:.0f} MiB | <= 512 MiB: {ok(mib <= 512)} |")
    print()

growth = load("growth.json")
if growth:
    days = growth["per_day"]
    first, last = days[0], days[-1]
    r = growth["ratios_last_to_first"]
    m = growth["median_ratios_last3_to_first3"]
    summary["growth_ratios"] = r
    summary["growth_median_ratios"] = m
    # judged on the 3-day medians: one day's run is tens of milliseconds and noisy
    if m["scheduled_compact"] is not None:
        goals["scheduled compaction last/first (3-day medians) <= 1.3"] = m["scheduled_compact"] <= 1.3
    if m["vacuum"] is not None:
        goals["vacuum last/first (3-day medians) <= 1.3"] = m["vacuum"] <= 1.3
    n = growth["days"]
    print(f"| cost growth, {n} days x {growth['files_per_day']} new files/day x {growth['rows_per_file']} rows | day 1 | day {n} | day {n} / day 1 | median days {n-2}-{n} / median days 1-3 | files (MB) rewritten day 1 -> day {n} | goal (on the medians) |")
    print("|---|---|---|---|---|---|---|")
    rows = [
        ("scheduled compaction (tablekeeper, inventory defaults)", "scheduled_compact", True),
        ("whole-table compaction (deltalake OPTIMIZE, naive script)", "whole_compact", False),
        ("Z-order scoped to new partitions (tablekeeper)", "zorder_scoped", False),
        ("Z-order of the whole table (unscoped)", "zorder_whole", False),
        ("VACUUM lite after the day's compaction (tablekeeper; log kept one simulated day)", "vacuum", True),
        ("same, log kept 30 days (the month's commits all in _delta_log)", "vacuum_long_log", False),
    ]
    for label, key, has_goal in rows:
        a, b = first.get(key), last.get(key)
        if a is None or b is None:
            print(f"| {label} | skipped | skipped | - | - | - | - |")
            continue
        ratio, mratio = r.get(key), m.get(key)
        moved = lambda x: f"{x['files_removed']} ({(x['bytes_removed'] or 0) / 1e6:.1f})"
        goal = f"<= 1.3: {ok(mratio <= 1.3)}" if has_goal and mratio is not None else "contrast"
        print(f"| {label} | {a['seconds']:.3f} s | {b['seconds']:.3f} s | {ratio:.2f} | {mratio:.2f} | {moved(a)} -> {moved(b)} | {goal} |")
    failed = [d["day"] for d in days for k in ("vacuum", "vacuum_long_log") if d.get(k) and d[k].get("error")]
    if failed:
        print(f"| VACUUM runs that ended in an error (see BENCHMARKS.md) | {len(failed)} of {n} days | | | | | |")
    pr, mpr = r["scheduled_probe"], m["scheduled_probe"]
    print(f"| probe before the scheduled compaction | {first['scheduled_probe_seconds']:.3f} s | {last['scheduled_probe_seconds']:.3f} s | {pr:.2f} | {mpr:.2f} | - | - |")
    print()

codecs = load("codecs.json")
if codecs:
    by = {(c["codec"], c["engine"]): c for c in codecs["codecs"]}
    names = list(dict.fromkeys(c["codec"] for c in codecs["codecs"]))
    floors = ("arrow-rs floor", "arrow-rs floor, id and payload plain")
    print(f"| decoded compaction, {codecs['input_files']} files / {codecs['input_bytes'] / 1e6:.1f} MB, output codec | python deltalake | tablekeeper maintain | arrow-rs floor | floor, id and payload plain | output, python / tablekeeper / floor / floor plain |")
    print("|---|---|---|---|---|---|")
    for name in names:
        py = by.get((name, "python deltalake"))
        cells, sizes = [f"{py['seconds']:.2f} s"], [f"{py['output_bytes'] / 1e6:.1f}"]
        for engine in ("tablekeeper",) + floors:
            c = by.get((name, engine))
            cells.append(f"{c['seconds']:.2f} s ({c['seconds'] / py['seconds']:.2f}x)" if c else "-")
            sizes.append(f"{c['output_bytes'] / 1e6:.1f}" if c else "-")
        print(f"| {name} | {' | '.join(cells)} | {' / '.join(sizes)} MB |")
    py4 = by.get(("zstd(4)", "python deltalake"))
    tk4 = by.get(("zstd(4)", "tablekeeper"))
    if tk4 and "plain_columns" in tk4:
        print(f"tablekeeper's zstd(4) files hold without a dictionary: {', '.join(tk4['plain_columns']) or 'no column'}")
    for engine, key in (("tablekeeper", "tablekeeper"), ("arrow-rs floor", "floor"), (floors[1], "floor_plain")):
        c = by.get(("zstd(4)", engine))
        if py4 and c:
            summary[f"codecs_zstd4_{key}_to_python"] = c["seconds"] / py4["seconds"]
    print()

probe, pyprobe = load("probe.json"), load("probe-python.json")
if probe and pyprobe:
    cold = probe["cold_probe_seconds"] / pyprobe["load_seconds"]
    cold_actions = probe["cold_probe_seconds"] / (pyprobe["load_seconds"] + pyprobe["add_actions_seconds"])
    incr = probe["incremental_probe_seconds"] / pyprobe["update_incremental_seconds"]
    summary.update({"probe_cold_to_python_load": cold, "probe_cold_to_python_load_and_actions": cold_actions,
                    "probe_incremental_to_python_update_incremental": incr})
    print(f"| probe, {probe['files']:,} files, {probe['commits']:,} commits, checkpoint at {probe['checkpoint_version']} | tablekeeper | python deltalake {pyprobe['version']} | ratio |")
    print("|---|---|---|---|")
    print(f"| cold: Prober::probe vs DeltaTable() | {probe['cold_probe_seconds']:.2f} s | {pyprobe['load_seconds']:.2f} s | {cold:.2f}x time |")
    print(f"| cold: vs DeltaTable() + get_add_actions() | {probe['cold_probe_seconds']:.2f} s | {pyprobe['load_seconds'] + pyprobe['add_actions_seconds']:.2f} s | {cold_actions:.2f}x time |")
    if "first_damage_check_ended_seconds" in probe:
        print(f"| (its first damage check, beside the probe: ended at) | {probe['first_damage_check_ended_seconds']:.2f} s | - | - |")
    if "first_history_read_ended_seconds" in probe:
        pending = "history pending" if probe["cold_probe_history_pending"] else "history read inside the probe"
        history_at = probe["first_history_read_ended_seconds"] / pyprobe["load_seconds"]
        print(f"| (its first history read, {pending}: ended at) | {probe['first_history_read_ended_seconds']:.2f} s | {pyprobe['load_seconds']:.2f} s | {history_at:.2f}x time |")
    print(f"| (deltalake's own table load inside tk-bench) | {probe['deltalake_load_seconds']:.2f} s | - | - |")
    print(f"| (floor: one object-store listing of the table root, {probe['objects_listed']:,} objects) | {probe['object_store_listing_seconds']:.2f} s | - | - |")
    print(f"| (floor: reading and parsing every JSON commit) | {probe['read_all_json_commits_seconds']:.2f} s | - | - |")
    print(f"| re-probe after {probe['new_commits']} commits vs update_incremental() | {probe['incremental_probe_seconds']:.3f} s | {pyprobe['update_incremental_seconds']:.3f} s | {incr:.2f}x time |")
    print(f"| (python full reload at the new version) | - | {pyprobe['reload_seconds']:.2f} s | - |")
    print()

fleet = load("fleet.json")
if fleet:
    sizes = fleet["sizes"]
    summary["fleet"] = [{"tables": s["tables"], "rss_settled_mb": s["replica"]["rss_settled_mb"], "rss_quiet_mb": s["replica"].get("rss_quiet_mb")} for s in sizes]
    biggest = sizes[-1]
    # idle: once the first round's tail is done; a replica that never became quiet is judged
    # by the higher of its two figures
    idle_rss = lambda r: r["rss_quiet_mb"] if r.get("quiet_after_round_seconds") is not None else max(r["rss_settled_mb"], r.get("rss_quiet_mb", 0))
    goals[f"idle RSS <= 150 MB at {biggest['tables']} tables"] = idle_rss(biggest["replica"]) <= 150
    replicas = fleet.get("replicas", 1)
    print(f"| fleet, {replicas} replica(s) (figures of the first) | " + " | ".join(f"{s['tables']:,} tables" for s in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    row = lambda label, f: print(f"| {label} | " + " | ".join(f(s) for s in sizes) + " |")
    row("tablekeeper validate", lambda s: f"{s['validate_seconds']:.2f} s")
    row("start to /readyz 200", lambda s: f"{s['replica']['ready_seconds']:.2f} s")
    row("start to 'tablekeeper started' (schedules registered)", lambda s: f"{s['replica']['started_log_seconds']:.2f} s")
    row("start to every table probed", lambda s: f"{s['replica']['first_probe_round_seconds']:.1f} s")
    row("RSS at ready", lambda s: f"{s['replica']['rss_ready_mb']:.0f} MB")
    row("RSS settled (5 s after the round)", lambda s: f"{s['replica']['rss_settled_mb']:.0f} MB")
    row("idle RSS (quiet: under 5% of a core for 2 s)", lambda s: f"{s['replica']['rss_quiet_mb']:.0f} MB, quiet {s['replica']['quiet_after_round_seconds']:.0f} s after settling" if s['replica'].get('quiet_after_round_seconds') is not None else f"{s['replica']['rss_quiet_mb']:.0f} MB, never quiet")
    if replicas > 1:
        row("idle RSS of each replica", lambda s: ", ".join(f"{m:.0f}" for m in s['replica']['rss_settled_mb_per_replica']) + " MB")
    row("peak RSS", lambda s: f"{s['replica']['rss_peak_mb']:.0f} MB")
    row("idle CPU", lambda s: f"{100 * s['replica']['idle_cpu_seconds'] / s['replica']['idle_window_seconds']:.0f}% of a core")
    row("/metrics scrape (median of 5)", lambda s: f"{s['replica']['metrics_scrape_seconds'] * 1000:.0f} ms")
    row("/metrics size", lambda s: f"{s['replica']['metrics_bytes'] / 1024:.0f} KiB, {s['replica']['metrics_series']:,} series")
    row("/metrics as Prometheus fetches it (gzip, median of 5)", lambda s: f"{s['replica'].get('metrics_gzip_scrape_seconds', 0) * 1000:.0f} ms, {s['replica'].get('metrics_gzip_bytes', 0) / 1024:.0f} KiB")
    row("dashboard front page GET / (median of 5)", lambda s: f"{s['replica']['dashboard_seconds'] * 1000:.0f} ms, {s['replica']['dashboard_bytes'] / 1024:.0f} KiB")
    row("enqueue one job per table, Postgres", lambda s: f"{s['enqueue_postgres']['seconds']:.2f} s ({s['enqueue_postgres']['jobs_per_sec']:.0f}/s)")
    row("enqueue one job per table, SQLite", lambda s: f"{s['enqueue_sqlite']['seconds']:.2f} s ({s['enqueue_sqlite']['jobs_per_sec']:.0f}/s)")
    vrss = load("fleet-validate-rss.json")
    if vrss:
        row("tablekeeper validate peak RSS", lambda s: f"{vrss.get(str(s['tables']), 0) / 1024:.0f} MB")
    pm = fleet["prober_in_process"]
    print(f"\nIn tk-bench's own process, one Prober holding all {pm['tables']:,} tables: RSS {pm['rss_before_mb']:.0f} -> {pm['rss_with_prober_mb']:.0f} MB ({pm['kb_per_table']:.0f} KB per table, a lower bound); {pm['rss_after_drop_mb']:.0f} MB after dropping it.")
    print()

tasks = load("tasks.json")
if tasks:
    job, over, py = tasks["job"], tasks["overhead"], load("tasks-python.json") or {}
    summary["tasks"] = {"wall_seconds": job["wall_seconds"], "tasks": job["tasks"],
                        "per_task_overhead_ms": over["per_task_ms"], "overhead_share": tasks["overhead_share"]}
    print(f"| one compaction as tasks: {tasks['partitions']} partitions, {tasks['files_before']} files, {tasks['mb_before']:.1f} MB, {tasks['replicas']} replicas x 1 worker | figure | reference | ratio |")
    print("|---|---|---|---|")
    if py:
        print(f"| job wall time (trigger to succeeded) | {job['wall_seconds']:.2f} s | python deltalake {py['version']} optimize.compact: {py['seconds']:.2f} s | {job['wall_seconds'] / py['seconds']:.2f}x time |")
    print(f"| planning (job start to first task) | {job['planning_seconds']:.2f} s | - | - |")
    print(f"| task time, median of {job['tasks']} | {tasks['task_median_seconds']:.2f} s | - | - |")
    print(f"| job-store cost per task (claim {over['claim_ms']:.1f} + heartbeat {over['heartbeat_ms']:.1f} + end {over['end_ms']:.1f} ms) | {over['per_task_ms']:.1f} ms | the tasks' rewrite time | {100 * tasks['overhead_share']:.2f}% |")
    print(f"| tasks per replica | " + ", ".join(f"{r}: {n}" for r, n in job["tasks_per_replica"].items()) + " | - | - |")
    print()
    print("| pods (one worker each) | " + " | ".join(str(e["pods"]) for e in tasks["estimates"]) + " |")
    print("|---|" + "---|" * len(tasks["estimates"]))
    print("| estimated wall time (measured task times, longest first, + planning + overhead) | " + " | ".join(f"{e['estimated_seconds']:.1f} s" for e in tasks["estimates"]) + " |")
    print()

json.dump(summary, open(os.path.join(results, "summary.json"), "w"), indent=2)
if goals:
    print("goals: " + "; ".join(f"{k}: {ok(v)}" for k, v in goals.items()))
PY_SUMMARY
