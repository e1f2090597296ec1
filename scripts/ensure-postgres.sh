#!/usr/bin/env bash
# Makes sure a PostgreSQL server answers on 127.0.0.1:5432 for the tests: starts the
# machine's cluster if it is installed but stopped. Prints what it found or did.
set -euo pipefail
host=127.0.0.1 port=5432
if pg_isready -h "$host" -p "$port" -q 2>/dev/null; then
  echo "postgres: ready on $host:$port"
  exit 0
fi
if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  echo "postgres: not answering; starting cluster $version/main"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
else
  echo "postgres: not installed; installing Debian's postgresql"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  # Tests connect as `postgres` over TCP without a password.
  sed -i 's/^\(host.*127.0.0.1\/32\s*\)\S*$/\1trust/' "/etc/postgresql/$version/main/pg_hba.conf"
  pg_ctlcluster --skip-systemctl-redirect "$version" main reload
fi
for _ in $(seq 1 30); do
  if pg_isready -h "$host" -p "$port" -q; then echo "postgres: ready"; exit 0; fi
  sleep 1
done
echo "postgres: still not ready on $host:$port after 30s" >&2
exit 1
