#!/usr/bin/env python3
"""Checks that every rule the repository cites exists in docs/protocol.md.

Scans the `.rs` and `.md` files of the repository (not `target/`, not `docs/protocol.md`
itself) for rule numbers (`R13`, `C18`, ranges such as `R30-R32` or `C17-C21`) and section
references (`§5.4`, `§3.6`, `§5.9 (7)`, `§7 item 10`), and fails, naming file and line,
for any number that docs/protocol.md does not define: a rule is defined by a line that
starts with `**R13**`, a section by a heading `## 5.` / `### 5.4`, a numbered item of a
section (`§3.6`, `§7 item 10`, `§5.9 (7)`) by the heading or by the `N.` item of that
section. `PEERS.md §N` and `RFC 6750 §3.1` name other documents and are skipped.

It also fails when user-facing documentation speaks the repository's internal language: a doc
comment (`///` or `//!`) in `mcp-tasks/src` or `mcp-tasks-macros/src` that cites a rule
(`R21`, `C9`, `§2.8`) or names `protocol.md`, which is not in the published package (a dead
link on docs.rs). Doc comments are what docs.rs renders and, for the command-line client,
what `--help` may show, so they say what happens and what to do in plain words; a maintainer's
citation goes in a plain `//` comment. Tests keep their citations: `#[cfg(test)]` modules
(inline, or a file a `#[cfg(test)] mod x;` loads) are not scanned, nor are the files listed
in `EXEMPT` (each with its reason). Files listed in `STILL_TO_CLEAN` are reported but do not
fail the check; an entry that no longer offends fails it, so the list only shrinks.

    python3 docs/check_citations.py            # from anywhere inside the repository
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTOCOL = ROOT / "docs" / "protocol.md"
SKIP_DIRS = {"target", ".git", "node_modules"}

# Where public doc comments may not cite rules, and the files that may.
PUBLIC_SOURCES = ("mcp-tasks/src", "mcp-tasks-macros/src")
EXEMPT = {
    # A private module (`mod errors;` in lib.rs, nothing re-exported from it): its docs are
    # never rendered, and each error names the rule it implements for the maintainers.
    "mcp-tasks/src/errors.rs",
    # Crate-private modules (`pub(crate) mod call;` in runtime, `pub(crate) mod record;` in
    # store, nothing re-exported from them): never rendered, and their numbered invariants,
    # which tests cite ("store invariant 9"), name the rules they keep.
    "mcp-tasks/src/runtime/call/mod.rs",
    "mcp-tasks/src/runtime/call/state.rs",
    "mcp-tasks/src/store/record.rs",
}
# Files whose doc comments still cite rules and are yet to be rewritten in plain words: none
# now. Kept for a large rewrite done in steps; an entry fails the check once its file is clean.
STILL_TO_CLEAN: set[str] = set()

RULE = re.compile(r"\b([RC])(\d+)(?:\s*[-–]\s*(?:[RC])?(\d+))?\b")
SECTION = re.compile(r"(PEERS\.md\s+|RFC\s*\d+\s+)?§(\d+)(?:\.(\d+))?(?:\s+item\s+(\d+)|\s+\((\d+)\))?")


def defined(text: str) -> tuple[set[str], set[str]]:
    """Rule numbers and section keys (`5`, `5.4`, `7#10`, `5.9#7`) defined in `text`."""
    rules = set(re.findall(r"^\*\*([RC]\d+)\*\*", text, re.M))
    sections: set[str] = set()
    current = None
    for line in text.splitlines():
        heading = re.match(r"^#{2,3} (\d+)(?:\.(\d+))?[. ]", line)
        if heading:
            current = heading.group(1) + (f".{heading.group(2)}" if heading.group(2) else "")
            sections.add(current)
            continue
        item = re.match(r"^(\d+)\. ", line)
        if item and current:
            sections.add(f"{current}#{item.group(1)}")
    return rules, sections


def cited(path: Path):
    """(line number, citation) pairs of one file."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for match in RULE.finditer(line):
            kind, first, last = match.group(1), int(match.group(2)), match.group(3)
            for n in range(first, int(last) + 1 if last else first + 1):
                yield number, ("rule", f"{kind}{n}")
        for match in SECTION.finditer(line):
            if match.group(1):
                continue
            key = match.group(2) + (f".{match.group(3)}" if match.group(3) else "")
            item = match.group(4) or match.group(5)
            yield number, ("section", f"{key}#{item}" if item else key)


DOC_COMMENT = re.compile(r"^\s*//[/!](?!/)")
INTERNAL = re.compile(r"\b[RC]\d+\b|protocol\.md|§\d")
CFG_TEST = re.compile(r"^\s*#\[cfg\(test\)\]\s*$")
MOD = re.compile(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*(;|\{)\s*$")


def internal_citation(line: str) -> bool:
    """Whether a doc line cites a rule, a section of docs/protocol.md, or the file itself.

    `RFC 9110 §5.6.2` and `PEERS.md §3` name other documents and do not count."""
    line = re.sub(r"(PEERS\.md|RFC\s*\d+)\s+§[\d.]+", "", line)
    return bool(INTERNAL.search(line))


def test_module_file(parent: Path, name: str) -> Path:
    """The file a `mod name;` in `parent` loads."""
    base = parent.parent if parent.name in {"lib.rs", "main.rs", "mod.rs"} else parent.with_suffix("")
    flat = base / f"{name}.rs"
    return flat if flat.exists() else base / name / "mod.rs"


def public_doc_offences() -> dict[str, list[str]]:
    """The offending doc lines (`path:line: text`) of each file that has any."""
    files = sorted(p for root in PUBLIC_SOURCES for p in (ROOT / root).rglob("*.rs"))
    test_files: set[Path] = set()
    offences: dict[str, list[str]] = {}
    for path in files:
        lines = path.read_text(encoding="utf-8").splitlines()
        for at, line in enumerate(lines):
            if CFG_TEST.match(line) and at + 1 < len(lines):
                module = MOD.match(lines[at + 1])
                if module and module.group(3) == ";":
                    test_files.add(test_module_file(path, module.group(2)))
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        if path in test_files or rel in EXEMPT:
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        end_of_test_module = None  # the closing line of the `#[cfg(test)] mod x {` being skipped
        for number, line in enumerate(lines, 1):
            if end_of_test_module is not None:
                if line == end_of_test_module:
                    end_of_test_module = None
                continue
            if CFG_TEST.match(line) and number < len(lines):
                module = MOD.match(lines[number])
                if module and module.group(3) == "{":
                    # rustfmt closes a block at the indentation that opened it.
                    end_of_test_module = module.group(1) + "}"
                    continue
            if DOC_COMMENT.match(line) and internal_citation(line):
                offences.setdefault(rel, []).append(f"{rel}:{number}: {line.strip()}")
    return offences


def check_public_docs() -> int:
    """Prints the offending doc lines of each file not in `STILL_TO_CLEAN` (and fails), one
    line per file in it, and fails for an entry of `STILL_TO_CLEAN` that no longer offends or
    of `EXEMPT` that names no file."""
    offences = public_doc_offences()
    failed = []
    for rel, found in offences.items():
        if rel in STILL_TO_CLEAN:
            print(f"{rel}: {len(found)} doc lines cite rules (listed in STILL_TO_CLEAN)", file=sys.stderr)
        else:
            failed.extend(found)
    for problem in failed:
        print(problem, file=sys.stderr)
    if failed:
        print(
            "public doc comments say what happens and what to do, without rule numbers or links to "
            "docs/protocol.md (not in the package): rewrite them in plain words, and move a "
            "maintainer's citation to a `//` comment",
            file=sys.stderr,
        )
    stale = sorted(STILL_TO_CLEAN - set(offences))
    for rel in stale:
        print(f"{rel}: its doc comments no longer cite rules; remove it from STILL_TO_CLEAN", file=sys.stderr)
    missing = sorted(rel for rel in EXEMPT if not (ROOT / rel).exists())
    for rel in missing:
        print(f"{rel}: listed in EXEMPT but does not exist", file=sys.stderr)
    pending = sum(len(found) for rel, found in offences.items() if rel in STILL_TO_CLEAN)
    print(
        f"public docs: {len(failed)} doc lines cite rules, {pending} more in "
        f"{len(STILL_TO_CLEAN)} files still to clean",
        file=sys.stderr,
    )
    return 1 if failed or stale or missing else 0


def main() -> int:
    rules, sections = defined(PROTOCOL.read_text(encoding="utf-8"))
    # `§3.6` may name subsection 3.6 or item 6 of §3: either defines it.
    sections |= {key.replace("#", ".") for key in sections if key.count("#") == 1 and "." not in key}
    missing = []
    count = 0
    for path in sorted(ROOT.rglob("*")):
        if path.suffix not in {".rs", ".md"} or path == PROTOCOL:
            continue
        if SKIP_DIRS & set(path.relative_to(ROOT).parts):
            continue
        for line, (kind, key) in cited(path):
            count += 1
            if (kind == "rule" and key not in rules) or (kind == "section" and key not in sections):
                missing.append(f"{path.relative_to(ROOT)}:{line}: {key} is not in docs/protocol.md")
    for problem in missing:
        print(problem, file=sys.stderr)
    print(f"{count} citations checked, {len(missing)} unresolved", file=sys.stderr)
    public = check_public_docs()
    return 1 if missing or public else 0


if __name__ == "__main__":
    sys.exit(main())
