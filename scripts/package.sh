#!/usr/bin/env bash
# The published crates (mcp-tasks-macros, mcp-tasks) as crates.io would take them: `cargo
# package` builds each from its packaged files alone (so a file outside the package, like a
# test that includes `../../examples`, fails here), then a dry-run publish of the workspace
# checks the upload itself. Nothing is published: `--dry-run` only. Needs the crates.io
# index. `--allow-dirty`: a workstation run packages the files as they are, committed or not.
# Run from anywhere: bash scripts/package.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

PUBLISHED=(mcp-tasks-macros mcp-tasks)
PACKAGES=()
for crate in "${PUBLISHED[@]}"; do PACKAGES+=(-p "$crate"); done

echo "-- cargo package: ${PUBLISHED[*]}"
cargo package --locked --allow-dirty "${PACKAGES[@]}"

# What each package holds: the README, the license and the guide must be in it.
for crate in "${PUBLISHED[@]}"; do
  files="$(cargo package --locked --allow-dirty --list -p "$crate" 2>/dev/null)"
  for needed in README.md LICENSE Cargo.toml; do
    if ! grep -qx "$needed" <<< "$files"; then
      echo "the $crate package has no $needed" >&2; exit 1
    fi
  done
done
files="$(cargo package --locked --allow-dirty --list -p mcp-tasks 2>/dev/null)"
for page in docs/guide/*.md; do
  if ! grep -qx "guide/$(basename "$page")" <<< "$files"; then
    echo "the mcp-tasks package lacks guide/$(basename "$page") (mcp-tasks/guide links docs/guide)" >&2
    exit 1
  fi
done

# `cargo package` builds the library and the binary. The packaged crate's integration test
# (tests/cli.rs, which must not reach outside the package) is built here, from a copy of the
# package's files outside the workspace (mcp-tasks-macros by path, as it is not on crates.io
# yet), with the features the workspace builds mcp-tasks with.
VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
UNPACKED="$(mktemp -d /tmp/mcp-tasks-package.XXXXXX)"
trap 'rm -rf "$UNPACKED"' EXIT
tar -xzf "${CARGO_TARGET_DIR:-$ROOT/target}/package/mcp-tasks-$VERSION.crate" -C "$UNPACKED"
# A .crate stores one fixed mtime for every file, and the copy's build is fingerprinted as the
# last one's (same relative paths, same target dir): without a fresh mtime, cargo would take
# the files as unchanged since that build and compile nothing.
find "$UNPACKED" -type f -exec touch {} +
echo "-- the packaged mcp-tasks $VERSION: its tests/cli.rs builds from the package's own files"
(
  cd "$UNPACKED/mcp-tasks-$VERSION"
  CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}" cargo build --quiet --test cli \
    --features http,stdio,sqlite,postgres,client,cli \
    --config "patch.crates-io.mcp-tasks-macros.path='$ROOT/mcp-tasks-macros'"
)

echo "-- cargo publish --dry-run (the workspace; unpublished packages are skipped)"
# The packages were verified (built from their files) just above.
cargo publish --locked --allow-dirty --dry-run --workspace --no-verify
echo "package: ${PUBLISHED[*]} package, build from their files, and pass a dry-run publish"
