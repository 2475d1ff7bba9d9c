#!/usr/bin/env bash
# Each feature of mcp-tasks builds on its own, with none, and with all of them (a feature
# that forgets to enable what it uses fails here and nowhere else: the workspace build unifies
# every feature). `cargo check` of the library and the binary: no codegen, no tests.
# Run from anywhere: bash scripts/features.sh
set -euo pipefail
cd "$(dirname "$0")/.."

FEATURES=(stdio http sqlite postgres client https cli)
# Combinations a server is likely to be built with, beyond single features.
COMBINATIONS=(http,sqlite http,postgres stdio,sqlite)

check() { # check LABEL CARGO-ARGS...
  local label="$1"; shift
  echo "-- mcp-tasks: $label"
  cargo check --locked --quiet -p mcp-tasks "$@"
}

check "no features" --no-default-features
for feature in "${FEATURES[@]}" "${COMBINATIONS[@]}"; do
  check "--features $feature" --no-default-features --features "$feature"
done
check "all features" --all-features
cargo check --locked --quiet -p mcp-tasks-macros
echo "features: every feature, the listed combinations, none and all build"
