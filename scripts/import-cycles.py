#!/usr/bin/env python3
"""Import cycles between the files of each crate.

Reads every `crates/*/src/**/*.rs` file, finds the crate-internal paths it names
(`use crate::...`, `use super::...`, `use self::...` trees and inline `crate::a::b`
paths in code; comments and string literals are ignored), resolves each path to the
file of the deepest module it reaches, and prints every strongly connected group of
two or more files. A file naming its own parent module (`super::Thing` where `Thing`
lives in `mod.rs`) is an edge like any other: `mod.rs` re-exporting its children and a
child importing back from `mod.rs` is a circle.

Exits 0 when no crate has a cycle, 1 otherwise, 2 on unusable input.

    scripts/import-cycles.py [--crate DIR]... [--graph] [--self-test]

`--graph` prints each crate's edges as `from -> to` lines (for review, not for CI).
`--self-test` first checks the checker on small crates written to a temporary directory
(a circle through `use`, `super::`, an inline path and a `$crate` macro path is found; a
re-export, an inline test module and comments are not mistaken for one).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# `crate::a::b`, `super::super::a`, `self::a`, `child::a` outside `use` statements
INLINE_PATH = re.compile(rf"(?<![A-Za-z0-9_:])({IDENT}(?:::{IDENT})+)")
USE_STMT = re.compile(r"\buse\s+([^;]*);", re.S)
PUB_USE = re.compile(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]*);", re.S)


def strip_comments_and_strings(src: str) -> str:
    """Source with comments, string and char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * src.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', src[i:i + 10]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'r(#*)"', src[i:])
            hashes = m.group(1)
            end = src.find('"' + hashes, i + len(m.group(0)))
            end = n if end < 0 else end + 1 + len(hashes)
            out.append('""' + "\n" * src.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append('""' + "\n" * src.count("\n", i, j))
            i = j + 1
        elif c == "'":
            # char literal ('a', '\n', '\u{1F}') or a lifetime ('a): blank only literals
            m = re.match(r"'(\\.|\\u\{[0-9a-fA-F]+\}|[^\\'])'", src[i:])
            if m:
                out.append("' '")
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def expand_use_tree(tree: str) -> list[str]:
    """`a::{b, c::{d, e}}` -> [`a::b`, `a::c::d`, `a::c::e`] (aliases and globs dropped)."""
    tree = re.sub(rf"\s+as\s+{IDENT}", "", tree)
    tree = re.sub(r"\s+", "", tree)
    paths: list[str] = []

    def walk(prefix: str, s: str) -> None:
        # split s at top-level commas
        depth, start, parts = 0, 0, []
        for k, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(s[start:k])
                start = k + 1
        parts.append(s[start:])
        for part in parts:
            if not part:
                continue
            brace = part.find("{")
            if brace >= 0 and part.endswith("}"):
                head = part[:brace].rstrip(":")
                walk(join(prefix, head), part[brace + 1:-1])
            else:
                part = part.rstrip("*").rstrip(":")
                paths.append(join(prefix, part))

    def join(a: str, b: str) -> str:
        if not a:
            return b
        if not b or b == "self":
            return a
        return a + "::" + b

    walk("", tree)
    return paths


def module_of(src_root: Path, file: Path) -> tuple[str, ...]:
    rel = file.relative_to(src_root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


INLINE_MOD = re.compile(rf"\bmod\s+({IDENT})\s*\{{")


def paths_in(code: str, here: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
    """Every path `code` names, with the module it is named from.

    An inline `mod NAME { ... }` (a `#[cfg(test)] mod tests`) is a module of its own:
    its `super::` is the file's module, not the file's parent.
    """
    found: list[tuple[str, tuple[str, ...]]] = []
    outer, k = [], 0
    for m in INLINE_MOD.finditer(code):
        if m.start() < k:
            continue  # nested inside a block already taken
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        outer.append(code[k:m.start()])
        found.extend(paths_in(code[m.end():j - 1], here + (m.group(1),)))
        k = j
    outer.append(code[k:])
    text = ";".join(outer)
    for m in USE_STMT.finditer(text):
        tree = re.sub(r"^pub(\([^)]*\))?\s+", "", m.group(1).strip())
        if not tree.startswith("::"):
            found.extend((p, here) for p in expand_use_tree(tree))
    for m in INLINE_PATH.finditer(USE_STMT.sub(";", text)):
        found.append((m.group(1), here))
    return found


Reexports = dict[tuple[str, ...], dict[str, str]]


def resolve(path: str, here: tuple[str, ...], modules: dict[tuple[str, ...], Path],
            reexports: Reexports | None = None) -> tuple[str, ...] | None:
    segs = path.split("::")
    if segs[0] not in ("crate", "super", "self"):
        # a relative path (`use child::Thing`) reaches a child module of `here`, or an
        # external crate, which is not an edge
        if here + (segs[0],) not in modules:
            return None
        segs = ["self"] + segs
    if segs[0] == "crate":
        base: list[str] = []
        segs = segs[1:]
    elif segs[0] in ("super", "self"):
        base = list(here)
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                if not base:
                    return None
                base.pop()
            segs = segs[1:]
    else:
        return None
    best = tuple(base)
    cur = list(base)
    rest: list[str] = []
    for k, s in enumerate(segs):
        cur.append(s)
        if tuple(cur) in modules:
            best = tuple(cur)
        else:
            rest = segs[k:]
            break
    if best not in modules:
        return None
    # an item a module re-exports (`pub use child::Thing`) lives in the file that defines it
    if reexports and rest and rest[0] in reexports.get(best, {}):
        return resolve(reexports[best][rest[0]], best, modules, None) or best
    return best


def crate_edges(crate: Path) -> dict[Path, set[Path]]:
    src_root = crate / "src"
    files = sorted(src_root.rglob("*.rs"))
    modules: dict[tuple[str, ...], Path] = {}
    for f in files:
        modules.setdefault(module_of(src_root, f), f)
    edges: dict[Path, set[Path]] = {f: set() for f in files}
    codes = {f: strip_comments_and_strings(f.read_text()) for f in files}
    reexports: Reexports = {}
    for f in files:
        here = module_of(src_root, f)
        for m in PUB_USE.finditer(codes[f]):
            for p in expand_use_tree(m.group(1)):
                reexports.setdefault(here, {})[p.split("::")[-1]] = p
    for f in files:
        for p, here in paths_in(codes[f], module_of(src_root, f)):
            target = resolve(p, here, modules, reexports)
            if target is not None and modules[target] != f:
                edges[f].add(modules[target])
    return edges


def strongly_connected(edges: dict[Path, set[Path]]) -> list[list[Path]]:
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    on_stack: set[Path] = set()
    groups: list[list[Path]] = []
    counter = [0]

    sys.setrecursionlimit(10000)

    def visit(v: Path) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return groups


SELF_TEST_CRATES = {
    # a -> b -> c -> a, through a grouped use, a `super::` path and an inline path
    "circle": {
        "lib.rs": "mod a;\nmod b;\nmod c;\n",
        "a.rs": "use crate::{b::{Thing as T}, c};\n",
        "b.rs": "pub(crate) fn f() { let _ = super::c::g(); }\n",
        "c.rs": "pub(crate) fn g() -> u8 { crate::a::H }\n",
    },
    # a macro in d names an item of e through `$crate`; e imports d
    "macro": {
        "lib.rs": "mod d;\nmod e;\n",
        "d.rs": "macro_rules! m { () => { $crate::e::X }; }\n",
        "e.rs": "use crate::d::m;\n",
    },
    # lib re-exports from a child that imports a sibling; tests and comments import nothing
    "acyclic": {
        "lib.rs": "mod inner;\nmod leaf;\npub use inner::Api;\n",
        "inner.rs": "use crate::leaf::Row; // crate::lib\n"
                    "#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        "leaf.rs": "/// see [`crate::inner`]\npub(crate) struct Row;\n"
                   "const S: &str = \"crate::inner::Api\";\n",
        "folder/mod.rs": "mod child;\npub(crate) use child::Api;\n",
        "folder/child.rs": "use crate::leaf::Row;\n",
    },
}


def self_test() -> bool:
    import tempfile
    expected = {"circle": 1, "macro": 1, "acyclic": 0}
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name, files in SELF_TEST_CRATES.items():
            for rel, text in files.items():
                path = Path(tmp, name, "src", rel)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
            found = len(strongly_connected(crate_edges(Path(tmp, name))))
            if found != expected[name]:
                print(f"import-cycles self-test: crate `{name}`: {found} cycle(s), "
                      f"expected {expected[name]}", file=sys.stderr)
                ok = False
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--crate", action="append", type=Path, help="a crate directory (default: crates/*)")
    ap.add_argument("--graph", action="store_true", help="print every edge")
    ap.add_argument("--self-test", action="store_true", help="check the checker first")
    args = ap.parse_args()
    if args.self_test:
        if not self_test():
            return 2
        print("import-cycles: self-test passed")
    crates = args.crate or sorted(p for p in Path("crates").iterdir() if (p / "src").is_dir())
    if not crates:
        print("import-cycles: no crates found; run from the repository root", file=sys.stderr)
        return 2
    found = 0
    for crate in crates:
        if not (crate / "src").is_dir():
            print(f"import-cycles: {crate}: no src/ directory", file=sys.stderr)
            return 2
        edges = crate_edges(crate)
        if args.graph:
            for f in sorted(edges):
                for t in sorted(edges[f]):
                    print(f"{f.relative_to(crate)} -> {t.relative_to(crate)}")
        for group in strongly_connected(edges):
            found += 1
            names = ", ".join(str(g.relative_to(crate / "src")) for g in group)
            print(f"{crate}: import cycle between {len(group)} files: {names}")
    if found:
        print(f"import-cycles: {found} cycle(s); data and types flow down: move shared types "
              "to a leaf module or pass a value instead of importing the caller", file=sys.stderr)
        return 1
    print(f"import-cycles: no import cycle in {len(crates)} crate(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
