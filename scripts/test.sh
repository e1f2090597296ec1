#!/usr/bin/env bash
# The README's test command: sets up what the tests need, then runs them. Idempotent and
# quick once done, so it is also what .ci/run calls.
#
#   1. PostgreSQL on 127.0.0.1:5432 (scripts/ensure-postgres.sh starts the machine's cluster);
#   2. Debian packages the tests run: Chromium (the dashboard test), Prometheus and promtool
#      (alert rules in a real Prometheus), npm (for Azurite) and python's venv module. Only
#      the missing ones are installed; that needs root (or password-less sudo), and without
#      it the script stops, naming the packages and the command that installs them;
#   3. the test peers (scripts/test-env.sh): python deltalake, moto, Azurite and the rest;
#   4. `cargo test --workspace --locked`, with this script's arguments appended
#      (`scripts/test.sh --no-fail-fast`, `scripts/test.sh -p tablekeeper-tests --test azure`).
#
# CARGO_TARGET_DIR is left as the caller has it: cargo's `./target` by default, so the test
# build reuses what `cargo run -p tablekeeper -- demo` built; .ci/run sets its own.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> test.sh: %s\n' "$*" >&2; }

# Each command the tests run, and the Debian package that provides it.
missing_packages() {
    command -v chromium >/dev/null || echo chromium
    command -v prometheus >/dev/null || echo prometheus
    command -v promtool >/dev/null || echo prometheus
    command -v npm >/dev/null || echo npm
    python3 -c 'import ensurepip, venv' 2>/dev/null || echo python3-venv
}

install_debian_packages() {
    local packages
    packages=$(missing_packages | sort -u | paste -sd " " -)
    if [ -z "${packages// /}" ]; then
        echo "debian packages: chromium, prometheus, promtool, npm, python3-venv present" >&2
        return 0
    fi
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
            sudo=(sudo -n)
        else
            echo "test.sh: the tests need Debian packages that are missing: $packages" >&2
            echo "test.sh: installing them needs root; run as root, or first:" >&2
            echo "    sudo apt-get update && sudo apt-get install -y --no-install-recommends $packages" >&2
            exit 1
        fi
    fi
    echo "debian packages: installing $packages" >&2
    # shellcheck disable=SC2086 # one word per package
    "${sudo[@]}" apt-get update -qq >&2 &&
        DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends $packages >/dev/null
}

step "postgres"
scripts/ensure-postgres.sh >&2

step "debian packages (chromium, prometheus, promtool, npm, python3-venv)"
install_debian_packages
chromium --version >&2
promtool --version 2>&1 | head -n 1 >&2

step "test peers (scripts/test-env.sh)"
scripts/test-env.sh >/dev/null

step "cargo test --workspace --locked $*"
exec cargo test --workspace --locked "$@"
