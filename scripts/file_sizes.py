#!/usr/bin/env python3
"""Source files of a Rust crate that are too long: more than MAX lines before their tests
(a file's lines up to its first top-level `#[cfg(test)]`). Prints each, and the total of the
crate's lines before the tests; exits 1 when one is over.

    python3 scripts/file_sizes.py [SRC_DIR] [MAX]   # default mcp-tasks/src 600
"""

import os
import sys


def lines_before_tests(path):
    count = 0
    with open(path, encoding="utf-8") as file:
        for line in file:
            if line.startswith("#[cfg(test)]"):
                break
            count += 1
    return count


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "mcp-tasks/src"
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 600
    sizes = []
    for root, _, files in os.walk(src):
        for name in files:
            if name.endswith(".rs"):
                path = os.path.join(root, name)
                sizes.append((lines_before_tests(path), os.path.relpath(path, src)))
    sizes.sort(reverse=True)
    over = [(n, path) for n, path in sizes if n > limit]
    for n, path in over:
        print(f"{path}: {n} lines before its tests (at most {limit})")
    total = sum(n for n, _ in sizes)
    largest = f"{sizes[0][1]} at {sizes[0][0]}" if sizes else "none"
    print(f"{len(sizes)} files, {total} lines before the tests; the largest: {largest}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
