#!/usr/bin/env bash
# The README's first task tool, in a fresh project outside the workspace, as a new user
# would make it: `cargo new`, the README's `cargo add` lines (mcp-tasks by path), its
# `src/main.rs` block copied from README.md (so the two cannot drift), built with warnings
# denied, served on 127.0.0.1, then one `tools/call` that becomes a task and `tasks/get`
# until it ends, with curl. Then each code block of the guide (docs/guide/*.md) as a binary
# of a second fresh project, built with warnings denied too. Run from anywhere:
# bash scripts/fresh_project.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

# The project lives in a temp dir; its build shares the workspace's target dir so that the
# dependencies already compiled there are reused.
WORK="$(mktemp -d /tmp/mcp-tasks-fresh.XXXXXX)"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
export CARGO_TERM_COLOR=never

# extract MARKER: the fenced block that follows `<!-- fresh-project: MARKER -->` in README.md.
extract() {
  python3 - "$ROOT/README.md" "$1" <<'EOF'
import sys
path, marker = sys.argv[1], sys.argv[2]
lines = open(path, encoding="utf-8").read().split("\n")
tag = f"<!-- fresh-project: {marker} -->"
if tag not in lines:
    sys.exit(f"README.md has no `{tag}` marker")
i = lines.index(tag) + 1
while i < len(lines) and not lines[i].startswith("```"):
    i += 1
if i == len(lines):
    sys.exit(f"no code block after `{tag}` in README.md")
block = []
for line in lines[i + 1:]:
    if line.startswith("```"):
        break
    # rustdoc's hidden lines (`# code`) are part of the program.
    if line == "#" or line.startswith("# "):
        line = line[2:]
    block.append(line)
else:
    sys.exit(f"the code block after `{tag}` in README.md is not closed")
print("\n".join(block))
EOF
}

echo "fresh project in $WORK/fresh"
cd "$WORK"
cargo new --quiet --bin --vcs none fresh
cd fresh
# Outside any workspace: a `[workspace]` table of its own.
printf '\n[workspace]\n' >> Cargo.toml
# The workspace's lock file as a starting point: the same dependency versions, so the
# compiled dependencies in the shared target dir match.
cp "$ROOT/Cargo.lock" Cargo.lock

extract install > install.sh
echo "README install lines:"; sed 's/^/  /' install.sh
while read -r line; do
  [ -z "$line" ] && continue
  read -r -a words <<< "$line"
  if [ "${words[0]} ${words[1]}" != "cargo add" ]; then
    echo "unexpected line in the README's install block: $line" >&2
    exit 1
  fi
  args=("${words[@]:2}")
  if [ "${args[0]}" = "mcp-tasks" ]; then
    # The README's git source, taken from this checkout instead (`--git <url>` dropped).
    rest=()
    for ((i = 1; i < ${#args[@]}; i++)); do
      if [ "${args[$i]}" = "--git" ]; then i=$((i + 1)); continue; fi
      rest+=("${args[$i]}")
    done
    args=(mcp-tasks --path "$ROOT/mcp-tasks" "${rest[@]}")
  fi
  # The local index first (nothing to download when the workspace built already).
  cargo add --quiet --offline "${args[@]}" 2>/dev/null || cargo add --quiet "${args[@]}"
done < install.sh
rm install.sh

extract src/main.rs > src/main.rs

# build_clean [CARGO ARGS]: `cargo build` in the current project, failing on an error or on
# any warning: the project's own (its files say `#![deny(warnings)]`) or the library's,
# which cargo shows (and replays when fresh) for a path dependency such as mcp-tasks.
build_clean() {
  # The local index first (nothing to download when the workspace built already).
  cargo fetch --offline >/dev/null 2>&1 || cargo fetch --quiet
  local log="$WORK/build.log"
  if ! cargo build --offline --keep-going --message-format short "$@" >"$log" 2>&1; then
    grep -vE '^\s*(Compiling|Checking|Fresh|Building|Locking|Adding)' "$log" >&2
    echo "the build failed" >&2
    return 1
  fi
  if grep -qE '^(warning|[^ ]+: warning)' "$log"; then
    grep -E 'warning' "$log" >&2
    echo "the build printed warnings; they are denied here" >&2
    return 1
  fi
}

# Warnings denied in the project's own code: the README's block as it is, after this first
# line (an inner attribute, before the block's `use`s).
{ echo '#![deny(warnings)]'; cat src/main.rs; } > src/main.rs.new && mv src/main.rs.new src/main.rs

echo "building"
build_clean

# Created before the server starts: the loop below may read it before the server's shell
# has opened it.
: > "$WORK/server.log"
ADDRESS=127.0.0.1:0 "$CARGO_TARGET_DIR/debug/fresh" > "$WORK/server.log" 2>&1 &
SERVER_PID=$!
URL=""
for _ in $(seq 1 100); do
  URL="$(sed -n 's/^serving MCP on \(http:[^ ]*\)$/\1/p' "$WORK/server.log")"
  [ -n "$URL" ] && break
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "the server exited:" >&2; cat "$WORK/server.log" >&2; exit 1
  fi
  sleep 0.1
done
if [ -z "$URL" ]; then
  echo "the server printed no address:" >&2; cat "$WORK/server.log" >&2; exit 1
fi
echo "serving on $URL"

META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"fresh-project","version":"0"},"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}'
# rpc METHOD NAME PARAMS: one JSON-RPC request on the 2026-07-28 wire; prints the body.
rpc() {
  curl --silent --show-error --fail-with-body --max-time 10 "$URL" \
    -H 'content-type: application/json' \
    -H 'accept: application/json, text/event-stream' \
    -H 'mcp-protocol-version: 2026-07-28' \
    -H "mcp-method: $1" -H "mcp-name: $2" \
    --data "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$1\",\"params\":{$3,$META}}"
}
# field JSON PYTHON-EXPR: evaluates the expression on the parsed body `r`.
field() { python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2"; }

CREATED="$(rpc tools/call count '"name":"count","arguments":{"to":3}')"
echo "tools/call: $CREATED"
if [ "$(field "$CREATED" 'r["result"].get("resultType")')" != "task" ]; then
  echo "tools/call declaring the extension did not become a task" >&2; exit 1
fi
TASK="$(field "$CREATED" 'r["result"]["taskId"]')"

STATUS=""
for _ in $(seq 1 100); do
  GOT="$(rpc tasks/get "$TASK" "\"taskId\":\"$TASK\"")"
  STATUS="$(field "$GOT" 'r["result"]["status"]')"
  case "$STATUS" in
    working) sleep 0.1 ;;
    *) break ;;
  esac
done
echo "tasks/get: $GOT"
if [ "$STATUS" != "completed" ]; then
  echo "the task ended $STATUS, not completed" >&2; exit 1
fi
COUNTED="$(field "$GOT" 'r["result"]["result"]["structuredContent"]["counted"]')"
if [ "$COUNTED" != "3" ]; then
  echo "the task's result is not {\"counted\": 3}" >&2; exit 1
fi
echo "fresh project: the README's task tool built, served, and its task completed"
kill "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""

# The guide: every `rust` block of docs/guide/*.md that rustdoc compiles (all but `ignore`)
# as one binary of a second project, with the dependencies the pages name and the features
# of all the pages (`cargo test --doc` compiles each block with its own page's features, see
# mcp-tasks/src/guide.rs; scripts/features.sh builds the library with each feature alone,
# warnings denied). A block becomes the program rustdoc makes of it: hidden lines (`# code`)
# kept, and a block without `fn main` wrapped in one. A block with its own `fn main` is a
# whole program a reader copies: every warning in it is denied. A fragment wrapped in
# `fn main` gets the `#![allow(unused)]` rustdoc gives every doctest (its items are there to
# be read, not called); every other warning in it is denied.
echo "guide project in $WORK/guide"
cd "$WORK"
cargo new --quiet --bin --vcs none guide
cd guide
printf '\n[workspace]\n' >> Cargo.toml
cp "$ROOT/Cargo.lock" Cargo.lock
mkdir -p src/bin
for args in \
  "mcp-tasks --path $ROOT/mcp-tasks --features http,sqlite,postgres,client,admin,prometheus" \
  "rmcp@3.11 --features server,macros,transport-streamable-http-server" \
  "tokio --features macros,rt-multi-thread,net,time,signal" \
  "serde --features derive" "serde_json" "schemars@1" "axum@0.8" "tracing"; do
  read -r -a words <<< "$args"
  cargo add --quiet --offline "${words[@]}" 2>/dev/null || cargo add --quiet "${words[@]}"
done
python3 - "$ROOT/docs/guide" src/bin <<'PY'
import pathlib, re, sys
pages, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
count = 0
for page in sorted(pages.glob("[0-9]*.md")):
    lines = page.read_text(encoding="utf-8").split("\n")
    i = 0
    while i < len(lines):
        fence = lines[i]
        i += 1
        if not fence.startswith("```rust"):
            continue
        start = i
        block = []
        while not lines[i].startswith("```"):
            line = lines[i]
            # rustdoc's hidden lines (`# code`) are part of the program.
            if line == "#" or line.startswith("# "):
                line = line[2:]
            block.append(line)
            i += 1
        i += 1
        tags = fence[3:].split(",")
        if "ignore" in tags or "compile_fail" in tags:
            continue
        code = "\n".join(block)
        head = f"// {page.name}, the block at line {start}\n"
        if re.search(r"\bfn\s+main\s*\(", code):
            program = head + "#![deny(warnings)]\n" + code + "\n"
        elif code.rstrip().endswith("(())"):
            # rustdoc's wrapping of a fragment that ends `Ok(())`: its `?`s need a Result.
            program = (head + "#![allow(unused)]\n#![deny(warnings)]\nfn main() {\n"
                       "fn _inner() -> Result<(), impl std::fmt::Debug> {\n"
                       + code + "\n}\n_inner().unwrap()\n}\n")
        else:
            program = (head + "#![allow(unused)]\n#![deny(warnings)]\nfn main() {\n"
                       + code + "\n}\n")
        name = re.sub(r"[^a-z0-9]+", "_", page.stem.lower()) + f"_line{start}"
        (out / f"{name}.rs").write_text(program, encoding="utf-8")
        count += 1
if count == 0:
    sys.exit("no rust block found in the guide")
print(f"{count} guide blocks, one binary each")
PY
rm src/main.rs
echo "building the guide's blocks"
build_clean --bins
echo "fresh project: every guide block built without a warning"
