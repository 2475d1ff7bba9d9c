#!/usr/bin/env bash
# The test stage of CI (.ci/run): every test of the workspace under cargo-nextest's profile
# `ci` (.config/nextest.toml), so that a hung test fails the run by name instead of hanging
# it and process-heavy tests do not overlap; a check that every test binary was built,
# listed and ran; the doc tests (nextest does not run them); the library's tests under a
# subset of its features (the `cfg(not(feature = ..))` tests); the interop workspace.
# A newcomer's command stays the README's `cargo test --workspace`: the same tests.
# Run from anywhere: bash scripts/tests.sh (needs what .ci/run sets up: Postgres, nginx, ...)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! cargo nextest --version >/dev/null 2>&1; then
  echo "-- cargo-nextest: installing it (cargo install cargo-nextest --locked)"
  cargo install cargo-nextest --locked
fi
cargo nextest --version | head -n 1

TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
WORK="$(mktemp -d /tmp/mcp-tasks-tests.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
# The subset: a stdio server on the durable stores, without HTTP, TLS or OpenTelemetry.
SUBSET=(-p mcp-tasks --no-default-features --features stdio,sqlite,postgres --lib)

echo "-- tests: every test binary of the workspace is built and listed"
cargo nextest list --workspace --locked --profile ci --message-format json >"$WORK/list.json"
python3 scripts/test_binaries.py listed "$WORK/list.json"

echo "-- tests: cargo nextest run --workspace --profile ci (a time limit per test)"
# nextest keeps its reports under the workspace's target/ whatever CARGO_TARGET_DIR says.
JUNIT="$PWD/target/nextest/ci/junit.xml"
rm -f "$JUNIT"
cargo nextest run --workspace --locked --profile ci --no-tests=fail
python3 scripts/test_binaries.py ran "$WORK/list.json" "$JUNIT"

echo "-- tests: the doc tests (the README's and the guide's code blocks among them)"
cargo test --workspace --locked --doc

echo "-- tests: mcp-tasks's own tests under the features ${SUBSET[*]:4:1}"
cargo nextest list "${SUBSET[@]}" --locked --profile ci --message-format json >"$WORK/subset.json"
python3 scripts/test_binaries.py subset "$WORK/list.json" "$WORK/subset.json"
cargo nextest run "${SUBSET[@]}" --locked --profile ci --no-tests=fail

echo "-- tests: the interop workspace (tower-mcp's client against our server)"
# Its own profile `ci` (interop/.config/nextest.toml): the root's names the root's binaries.
CARGO_TARGET_DIR="$TARGET_DIR" cargo nextest run --locked --manifest-path interop/Cargo.toml \
  --profile ci --no-tests=fail
