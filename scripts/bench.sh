#!/usr/bin/env bash
# tablekeeper benchmarks against their reference points (see BENCHMARKS.md):
#   (a) job table claim+complete throughput vs pgbench TPS on the same Postgres;
#   (b) compaction time vs python deltalake's optimize.compact and vs `cp -r` of the
#       same table bytes.
# Usage: scripts/bench.sh [--smoke]
#   --smoke      tiny inputs (CI: well under a minute once tk-bench is built)
# Environment:
#   TABLEKEEPER_TEST_DATABASE_URL  Postgres server (default postgres://postgres@127.0.0.1:5432/postgres);
#                                  the script creates and drops tk_bench_pgbench and tk_test_* databases
#   BENCH_SKIP_BUILD=1             use the tk-bench already built (CI after its own cargo build)
#   BENCH_PROFILE                  debug (default) or release build of tk-bench
#   CARGO_TARGET_DIR               default /root/.cache/tablekeeper-target (the team's shared target dir)
# Writes bench-results/*.json and prints a markdown table.
set -euo pipefail

cd "$(dirname "$0")/.."

SMOKE=""
for arg in "$@"; do
  case "$arg" in
    --smoke) SMOKE="--smoke" ;;
    *) echo "usage: scripts/bench.sh [--smoke]" >&2; exit 2 ;;
  esac
done

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/root/.cache/tablekeeper-target}"
PG_URL="${TABLEKEEPER_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
PROFILE="${BENCH_PROFILE:-debug}"
# pinned: the python engine we compare against (latest on PyPI when this was written)
PY_DELTALAKE_VERSION="1.6.6"
RESULTS=bench-results
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

mkdir -p "$RESULTS"
now() { date +%s.%N; }

echo "== building tk-bench ($PROFILE)" >&2
if [[ "${BENCH_SKIP_BUILD:-0}" == "1" ]]; then
  echo "BENCH_SKIP_BUILD=1: using the tk-bench already built" >&2
elif [[ "$PROFILE" == "release" ]]; then
  cargo build -p tablekeeper-tests --bin tk-bench --release >&2
else
  cargo build -p tablekeeper-tests --bin tk-bench >&2
fi
TK_BENCH="$CARGO_TARGET_DIR/$PROFILE/tk-bench"

echo "== python venv ($VENV, deltalake==$PY_DELTALAKE_VERSION)" >&2
if [[ ! -x "$VENV/bin/python" ]]; then
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import deltalake, sys; sys.exit(deltalake.__version__ != '$PY_DELTALAKE_VERSION')" 2>/dev/null; then
  "$VENV/bin/pip" install -q "deltalake==$PY_DELTALAKE_VERSION" >&2
fi
PY="$VENV/bin/python"

# (a) job table vs pgbench -----------------------------------------------------------------
drop_pgbench_db() { psql -q "$PG_URL" -c "DROP DATABASE IF EXISTS $PGBENCH_DB WITH (FORCE)" >/dev/null 2>&1 || true; }
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

# (b) compaction vs python deltalake vs cp -r ----------------------------------------------
echo "== tk-bench compact" >&2
"$TK_BENCH" compact $SMOKE --dir "$DATA" --out "$RESULTS/compact.json" >/dev/null
SOURCE=$("$PY" -c "import json; print(json.load(open('$RESULTS/compact.json'))['source'])")
COPY_B=$("$PY" -c "import json; print(json.load(open('$RESULTS/compact.json'))['copy_b'])")

echo "== python deltalake optimize.compact" >&2
sync
"$PY" - "$COPY_B" >"$RESULTS/compact-python.json" <<'EOF'
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
    "seconds": seconds,
    "files_removed": metrics.get("numFilesRemoved"),
    "files_added": metrics.get("numFilesAdded"),
}))
EOF

echo "== cp -r (physical floor)" >&2
FLOOR="$DATA/floor"
rm -rf "$FLOOR"
sync
started=$(now)
cp -r "$SOURCE" "$FLOOR"
sync
finished=$(now)
# %f: bc prints ".5" without the leading zero JSON needs
printf '{"engine": "cp -r + sync", "seconds": %f}\n' "$(echo "$finished - $started" | bc -l)" \
  >"$RESULTS/compact-cp.json"
rm -rf "$FLOOR"

# summary ---------------------------------------------------------------------------------
"$PY" - "$RESULTS" "$PROFILE" "${SMOKE:-full}" <<'EOF'
import json, os, sys

results, profile, mode = sys.argv[1], sys.argv[2], sys.argv[3].lstrip("-")
load = lambda name: json.load(open(os.path.join(results, name)))
pgbench, jobs = load("pgbench.json"), load("jobs.json")
tk, py, cp = load("compact.json"), load("compact-python.json"), load("compact-cp.json")

pg_jobs = jobs["postgres"]["jobs_per_sec"]
sqlite_jobs = jobs["sqlite"]["jobs_per_sec"]
jobs_ratio = pg_jobs / pgbench["tps"]
time_ratio = tk["seconds"] / py["seconds"]
copy_share = cp["seconds"] / tk["seconds"]  # tk throughput / copy throughput, same bytes
mb = tk["data_bytes"] / 1e6
summary = {
    "mode": mode, "build_profile": profile,
    "pgbench_tps": pgbench["tps"], "postgres_jobs_per_sec": pg_jobs,
    "sqlite_jobs_per_sec": sqlite_jobs, "jobs_to_pgbench": jobs_ratio,
    "table_files": tk["files_before"], "table_mb": mb,
    "tablekeeper_compact_secs": tk["seconds"], "python_compact_secs": py["seconds"],
    "cp_secs": cp["seconds"], "tk_to_python_time": time_ratio, "tk_to_cp_throughput": copy_share,
    "goals_met": {
        "jobs >= 25% of pgbench tps": jobs_ratio >= 0.25,
        "compact <= 0.9x python time": time_ratio <= 0.9,
        "compact >= 50% of cp throughput": copy_share >= 0.5,
    },
}
json.dump(summary, open(os.path.join(results, "summary.json"), "w"), indent=2)

ok = lambda b: "met" if b else "**missed**"
g = summary["goals_met"]
print(f"\n### tablekeeper benchmarks ({mode}, tk-bench {profile} build)\n")
print("| measurement | figure | reference | ratio | goal |")
print("|---|---|---|---|---|")
print(f"| job claim+complete, Postgres, {jobs['postgres']['replicas']} replicas x {jobs['postgres']['workers_per_replica']} workers, {jobs['postgres']['jobs']} jobs | {pg_jobs:.0f} jobs/s | pgbench -c 4 -j 2: {pgbench['tps']:.0f} TPS | {jobs_ratio:.2f} | >= 0.25: {ok(g['jobs >= 25% of pgbench tps'])} |")
print(f"| job claim+complete, SQLite, 1 replica x {jobs['sqlite']['workers_per_replica']} workers | {sqlite_jobs:.0f} jobs/s | - | - | - |")
print(f"| compact {tk['files_before']} files / {mb:.1f} MB to {tk['files_after']} files | {tk['seconds']:.2f} s | python deltalake {py['version']}: {py['seconds']:.2f} s | {time_ratio:.2f}x time | <= 0.9x: {ok(g['compact <= 0.9x python time'])} |")
print(f"| compact throughput | {mb / tk['seconds']:.1f} MB/s | cp -r + sync: {mb / cp['seconds']:.1f} MB/s | {copy_share:.2f} | >= 0.5: {ok(g['compact >= 50% of cp throughput'])} |")
EOF
