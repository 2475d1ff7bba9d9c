#!/usr/bin/env bash
# Each feature of mcp-tasks builds on its own, with none, and with all of them (a feature
# that forgets to enable what it uses fails here and nowhere else: the workspace build unifies
# every feature), without a single warning (`-D warnings`: a user's build with one feature
# sees no dead code of the others). `cargo check --all-targets`: the library, the binary and
# the tests each set of features allows; no codegen.
# Run from anywhere: bash scripts/features.sh
#
# RUSTFLAGS is part of every crate's fingerprint: the checks use a target dir of their own
# (FEATURES_TARGET_DIR, default target/features) so that the usual builds keep their cache.
set -euo pipefail
cd "$(dirname "$0")/.."

FEATURES=(stdio http sqlite postgres postgres-tls client https cli admin opentelemetry prometheus)
# Combinations built beyond single features. None today: no code is gated on a combination
# (`cfg(all(feature = ..))`), so each feature alone, none and all cover every build. Code that
# adds such a gate must list its combination here (e.g. `http,sqlite`); the guard below
# fails until it does. It reads attributes on code only: a doctest's hidden `# #[cfg(..)]`
# line gates an example, not the library.
COMBINATIONS=()
if [ "${#COMBINATIONS[@]}" -eq 0 ] &&
  grep -rqE '^\s*#!?\[cfg(_attr)?\(all\(feature' mcp-tasks/src --include='*.rs' --exclude=guide.rs; then
  echo "mcp-tasks/src gates code on a combination of features: list it in COMBINATIONS" >&2
  grep -rnE '^\s*#!?\[cfg(_attr)?\(all\(feature' mcp-tasks/src --include='*.rs' --exclude=guide.rs >&2
  exit 1
fi

export CARGO_TARGET_DIR="${FEATURES_TARGET_DIR:-$PWD/target/features}"
export RUSTFLAGS="-D warnings"

check() { # check LABEL CARGO-ARGS...
  local label="$1"; shift
  echo "-- mcp-tasks: $label"
  cargo check --locked --quiet --all-targets -p mcp-tasks "$@"
}

check "no features" --no-default-features
for feature in "${FEATURES[@]}" "${COMBINATIONS[@]}"; do
  check "--features $feature" --no-default-features --features "$feature"
done
check "all features" --all-features
cargo check --locked --quiet --all-targets -p mcp-tasks-macros
echo "features: each feature alone, the listed combinations, none and all build without a warning"
