#!/usr/bin/env bash
# The Python side of the tests: a virtualenv with python deltalake (the independent reader
# and writer every maintenance test checks rows with) and moto's S3 server (the
# S3-compatible object store the object-store tests run against).
#
# Idempotent and quick once done; the tests run it themselves when the venv is missing, and
# .ci/run runs it up front. Prints the venv's python on stdout.
#
#   scripts/test-env.sh            # create or update ~/.cache/tablekeeper-venv
#   TABLEKEEPER_TEST_VENV=DIR scripts/test-env.sh
set -euo pipefail

VENV="${TABLEKEEPER_TEST_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tablekeeper-venv}"
# pinned: the reader the tests compare with (the version the hazards in DESIGN.md were
# measured with) and the S3 server
PACKAGES=("deltalake==1.6.6" "pyarrow==26.0.1" "moto[server]==5.2.5")

lock="$VENV.lock"
mkdir -p "$(dirname "$VENV")"
exec 9>"$lock"
flock 9

if [[ ! -x "$VENV/bin/python" ]]; then
  python3 -m venv "$VENV" >&2
fi
if ! "$VENV/bin/python" - "${PACKAGES[@]}" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
for spec in sys.argv[1:]:
    name, wanted = spec.split("==")
    name = name.split("[")[0]
    if version(name) != wanted:
        sys.exit(1)
PY
then
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "${PACKAGES[@]}" >&2
fi
echo "$VENV/bin/python"
