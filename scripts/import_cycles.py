#!/usr/bin/env python3
"""Import cycles between the source files of a Rust crate.

File A depends on file B when A names an item of B: a `use crate::…`, `use super::…`,
`use self::…` or `use <child module>::…` path, or such a path written in the code
(`crate::errors::error_chain(…)`). A `pub use` is a re-export, an edge only when the file
itself uses the name it brings in. A path is followed through `pub use` re-exports to the file
that defines the name, so `use super::Thing` in `a/b.rs` points at the file that defines
`Thing`, not at `a/mod.rs` that only re-exports it. A `mod child;` declaration alone is not a
use. `#[cfg(test)]` modules are left out (they may use anything). Prints every cycle (file A
uses B and B uses A, directly or around a loop) and exits 1 when there is one.

    python3 scripts/import_cycles.py [SRC_DIR]   # default mcp-tasks/src
    python3 scripts/import_cycles.py --edges     # also print every edge
    python3 scripts/import_cycles.py --why       # and the paths behind each edge of a cycle
"""

import os
import re
import sys

ITEM = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:(?:async|unsafe|const|extern\s+\"C\")\s+)*"
    r"(?:fn|struct|enum|trait|type|const|static|union|mod)\s+(r#)?([A-Za-z_]\w*)"
)
MACRO = re.compile(r"^\s*macro_rules!\s+([A-Za-z_]\w*)")
MOD_DECL = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([A-Za-z_]\w*)\s*;")
INLINE_MOD = re.compile(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?mod\s+([A-Za-z_]\w*)\s*\{")
USE_START = re.compile(r"^\s*(pub(?:\([^)]*\))?\s+)?use\s+")
PATH_IN_CODE = re.compile(r"(?<![\w:])((?:crate|super|self)(?:::[A-Za-z_]\w*)+)")
CHILD_PATH_IN_CODE = re.compile(r"(?<![\w:])([a-z_]\w*(?:::[A-Za-z_]\w*)+)")


def strip_comments(line):
    """The line without a `//` comment and without string literals (roughly)."""
    line = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
    cut = line.find("//")
    return line if cut < 0 else line[:cut]


def expand_use(tree):
    """`a::{b, c::{d, e as f}, self}` -> [(['a','b'], 'b'), (['a','c','d'], 'd'), …]."""
    tree = re.sub(r"\s*([{},]|::)\s*", r"\1", re.sub(r"\s+", " ", tree)).strip()
    out = []

    def walk(prefix, text):
        depth, start, parts = 0, 0, []
        for i, ch in enumerate(text):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(text[start:i])
                start = i + 1
        parts.append(text[start:])
        for part in filter(None, parts):
            brace = part.find("{")
            if brace >= 0 and part.endswith("}"):
                head = [s for s in part[:brace].split("::") if s]
                walk(prefix + head, part[brace + 1 : -1])
                continue
            alias = None
            if " as " in part:
                part, alias = (x.strip() for x in part.rsplit(" as ", 1))
            segments = [s for s in part.split("::") if s]
            if segments and segments[-1] == "self":
                segments = segments[:-1]
            full = prefix + segments
            if full:
                out.append((full, alias or full[-1]))

    walk([], tree)
    return out


class Crate:
    def __init__(self, src, root_file, skip_dirs=()):
        self.src = src
        self.files = {}  # module path tuple -> file (relative to src)
        self.module_of = {}  # file -> module path tuple
        self.items = {}  # module path -> set of names defined there
        self.reexports = {}  # module path -> {name: (path segments, from module)}
        self.globs = {}  # module path -> [path segments of `pub use x::*`]
        self.children = {}  # module path -> set of child module names
        self.uses = {}  # file -> list of (module path of the use site, segments)
        self.skip_dirs = skip_dirs
        self.load((), root_file)

    def child_file(self, parent_file, name, is_root_like):
        base = os.path.dirname(parent_file) if is_root_like else os.path.splitext(parent_file)[0]
        for candidate in (os.path.join(base, name + ".rs"), os.path.join(base, name, "mod.rs")):
            if os.path.exists(os.path.join(self.src, candidate)):
                return candidate
        return None

    def load(self, module, rel):
        self.files[module] = rel
        self.module_of[rel] = module
        name = os.path.basename(rel)
        root_like = name in ("mod.rs", "lib.rs", "main.rs")
        with open(os.path.join(self.src, rel), encoding="utf-8") as f:
            lines = f.read().split("\n")
        # Leave out `#[cfg(test)]` modules: the attribute line and the module after it.
        stack = []  # (indent, module path) of inline modules
        skip_indent = None
        pending_test = False
        use_buf = None
        reexported = []
        code = []  # the lines outside `use` items, for the names a re-export brings in
        for raw in lines:
            line = strip_comments(raw)
            indent = len(raw) - len(raw.lstrip())
            if skip_indent is not None:
                if raw.strip() == "}" and indent == skip_indent:
                    skip_indent = None
                continue
            while stack and raw.strip() == "}" and indent == stack[-1][0]:
                stack.pop()
                line = ""
            here = stack[-1][1] if stack else module
            if re.match(r"^\s*#\[cfg\(test\)\]", raw):
                pending_test = True
                continue
            m = INLINE_MOD.match(line)
            if m:
                if pending_test:
                    skip_indent = len(m.group(1))
                    pending_test = False
                    continue
                inner = here + (m.group(2),)
                self.items.setdefault(here, set()).add(m.group(2))
                self.children.setdefault(here, set()).add(m.group(2))
                self.files[inner] = rel
                stack.append((len(m.group(1)), inner))
                continue
            if pending_test and line.strip() and not line.strip().startswith("#["):
                # `#[cfg(test)]` on a single item (a `mod tests;` or a fn): skip that line.
                pending_test = False
                continue
            m = MOD_DECL.match(line)
            if m and here == module:
                child = self.child_file(rel, m.group(1), root_like)
                if child and not any(child.startswith(d) for d in self.skip_dirs):
                    self.items.setdefault(module, set()).add(m.group(1))
                    self.children.setdefault(module, set()).add(m.group(1))
                    self.load(module + (m.group(1),), child)
                continue
            if use_buf is None and USE_START.match(line):
                use_buf = (here, bool(USE_START.match(line).group(1)), "")
                line = USE_START.sub("", line, count=1)
            if use_buf is not None:
                site, public, text = use_buf
                text += line
                if ";" in line:
                    text = text[: text.index(";")]
                    for segments, alias in expand_use(text):
                        if not public:
                            self.uses.setdefault(rel, []).append((site, segments))
                        else:
                            # a re-export is an edge only when the file itself uses the name
                            reexported.append((site, segments, alias))
                        if public:
                            if alias == "*":
                                self.globs.setdefault(site, []).append(segments[:-1])
                            else:
                                self.reexports.setdefault(site, {})[alias] = segments
                        else:
                            # a private `use` is visible to child modules through `super::`
                            self.reexports.setdefault(site, {}).setdefault(alias, segments)
                    use_buf = None
                else:
                    use_buf = (site, public, text)
                continue
            code.append(line)
            m = ITEM.match(line) or MACRO.match(line)
            if m:
                self.items.setdefault(here, set()).add(m.groups()[-1])
            for path in PATH_IN_CODE.findall(line):
                self.uses.setdefault(rel, []).append((here, path.split("::")))
            for path in CHILD_PATH_IN_CODE.findall(line):
                segments = path.split("::")
                if segments[0] in self.children.get(here, ()):  # `child::item`
                    self.uses.setdefault(rel, []).append((here, segments))
        text = "\n".join(code)
        for site, segments, alias in reexported:
            if alias != "*" and re.search(r"(?<![\w:])" + re.escape(alias) + r"\b", text):
                self.uses.setdefault(rel, []).append((site, segments))

    def absolute(self, site, segments):
        """The path from the crate root, or None for an external crate."""
        first = segments[0]
        if first == "crate":
            return list(segments[1:])
        if first in ("self", "super"):
            base = list(site)
            rest = list(segments)
            while rest and rest[0] in ("self", "super"):
                if rest.pop(0) == "super" and base:
                    base.pop()
            return base + rest
        if first in self.children.get(site, ()):  # a child module, named relatively
            return list(site) + list(segments)
        if first in self.reexports.get(site, {}) and site:
            return None  # an alias of a use; that use is an edge of its own
        return None

    def resolve(self, path, depth=0):
        """The file that defines the item at absolute `path` (a module's own file for a module)."""
        if depth > 20:
            return None
        module = ()
        for i, seg in enumerate(path):
            if module + (seg,) in self.files:
                module = module + (seg,)
                continue
            rest = path[i:]
            name = rest[0]
            if name in self.items.get(module, set()):
                return self.files[module]
            target = self.reexports.get(module, {}).get(name)
            if target is not None and target != rest[:1]:
                absolute = self.absolute(module, target)
                if absolute is None:
                    return None  # re-exported from another crate
                return self.resolve(absolute + rest[1:], depth + 1)
            for glob in self.globs.get(module, []):
                absolute = self.absolute(module, glob)
                if absolute is not None:
                    found = self.resolve(absolute + rest, depth + 1)
                    if found:
                        return found
            return self.files[module]
        return self.files.get(module)

    def edges(self, why):
        graph = {rel: set() for rel in self.module_of}
        for rel, uses in self.uses.items():
            for site, segments in uses:
                absolute = self.absolute(site, segments)
                if absolute is None:
                    continue
                target = self.resolve(absolute)
                if target and target != rel:
                    graph[rel].add(target)
                    why.setdefault((rel, target), set()).add("::".join(segments))
        return graph


def cycles(graph, limit=500):
    """Every elementary cycle (each once, from its smallest file), up to `limit`."""
    found = []
    nodes = sorted(graph)
    index = {n: i for i, n in enumerate(nodes)}
    for start in nodes:
        # cycles whose smallest node is `start`
        stack = [(start, iter(sorted(graph[start])))]
        path = [start]
        on_path = {start}
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                on_path.discard(path.pop())
                continue
            if nxt == start:
                found.append(path + [start])
                if len(found) >= limit:
                    return found
            elif index[nxt] > index[start] and nxt not in on_path:
                path.append(nxt)
                on_path.add(nxt)
                stack.append((nxt, iter(sorted(graph[nxt]))))
    return found


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    src = args[0] if args else "mcp-tasks/src"
    graph, why = {}, {}
    crates = [("lib.rs", ("bin/",))]
    for entry in sorted(os.listdir(os.path.join(src, "bin"))) if os.path.isdir(os.path.join(src, "bin")) else []:
        main_rs = os.path.join("bin", entry, "main.rs")
        if os.path.exists(os.path.join(src, main_rs)):
            crates.append((main_rs, ()))
    for root, skip in crates:
        graph.update(Crate(src, root, skip).edges(why))
    if "--edges" in sys.argv:
        for rel in sorted(graph):
            for target in sorted(graph[rel]):
                print(f"edge {rel} -> {target}")
    found = cycles(graph)
    for cycle in found:
        print("cycle: " + " -> ".join(cycle))
        if "--why" in sys.argv:
            for a, b in zip(cycle, cycle[1:]):
                print(f"    {a} -> {b}: {', '.join(sorted(why[(a, b)]))}")
    edges = sum(len(t) for t in graph.values())
    print(f"{len(found)} import cycles among {len(graph)} files ({edges} edges)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
