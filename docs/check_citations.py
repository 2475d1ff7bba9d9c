#!/usr/bin/env python3
"""Checks that every rule the repository cites exists in docs/protocol.md.

Scans the `.rs` and `.md` files of the repository (not `target/`, not `docs/protocol.md`
itself) for rule numbers (`R13`, `C18`, ranges such as `R30-R32` or `C17-C21`) and section
references (`§5.4`, `§3.6`, `§5.9 (7)`, `§7 item 10`), and fails, naming file and line,
for any number that docs/protocol.md does not define: a rule is defined by a line that
starts with `**R13**`, a section by a heading `## 5.` / `### 5.4`, a numbered item of a
section (`§3.6`, `§7 item 10`, `§5.9 (7)`) by the heading or by the `N.` item of that
section. `PEERS.md §N` and `RFC 6750 §3.1` name other documents and are skipped.

    python3 docs/check_citations.py            # from anywhere inside the repository
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTOCOL = ROOT / "docs" / "protocol.md"
SKIP_DIRS = {"target", ".git", "node_modules"}

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
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
