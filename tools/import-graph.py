#!/usr/bin/env python3
"""The runtime crate's import graph, file by file, against its declared layers.

Usage: tools/import-graph.py [--src runtime/src] [--doc docs/architecture.md]
                             [--max-up N] [--arrows]

How it counts (the rule docs/architecture.md quotes):
- A node is a file under the source folder; its module path follows from
  its place (`lib.rs` is the crate, `a/mod.rs` is `a`, `a/b.rs` is `a::b`).
- Comments, string literals and `#[cfg(test)]` modules are left out: they
  name paths without depending on them.
- There is an arrow A -> B when file A names a module path that resolves
  to file B: `use crate::x::y::{..}` (trees expanded), `crate::x::y::Z` in
  code, `super::` and `self::` paths, and paths that begin with a name A
  brought in by `use` or declared with `mod` (`tcp::serve::f`). A path is
  resolved to the longest prefix that is a file's module. Arrows to
  itself and `mod x;` declarations are not counted; several names from
  one file to another are one arrow.
- Each file's floor is the floor of the longest matching path prefix in
  the layer table of docs/architecture.md (rows `| floor | layer | `paths` |`).
- A circle is a strongly connected set of two or more files; an arrow runs
  back up when it goes from a file on a lower floor to one on a higher floor.

Exits 1 when there is a circle or more back-up arrows than --max-up (10),
or a file has no floor.
"""

import argparse
import os
import re
import sys


def module_of(rel):
    parts = rel[:-3].split("/")
    if parts == ["lib"]:
        return ()
    if parts[-1] == "mod":
        parts = parts[:-1]
    return tuple(parts)


def strip_code(text):
    """Removes comments, string/char literals and #[cfg(test)] modules."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            i = n if j < 0 else j + len(end)
            out.append('""')
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]) or (c == "'" and text.startswith("'\\", i)):
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\x[0-9a-fA-F]{2}|\\.|[^\\'])'", text[i:])
            if m:
                i += len(m.group(0))
                out.append("' '")
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    code = "".join(out)
    # A test module (`#[cfg(test)] mod x { ... }`): drop it with its braces.
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", code)
        if not m:
            break
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        code = code[: m.start()] + code[j:]
    return code


def use_items(code):
    """The `use` statements of a file: list of (path segments, alias)."""
    out = []
    for m in re.finditer(r"\buse\s+([^;]+);", code):
        raw = re.sub(r"\s+", " ", m.group(1)).strip()
        for path in expand_use_keep_alias(raw):
            out.append(path)
    return out


def expand_use_keep_alias(raw):
    raw = re.sub(r"\s+", " ", raw)
    i = raw.find("{")
    if i < 0:
        m = re.match(r"^(.*?)(?: as (\w+))?$", raw.strip())
        path = m.group(1).strip().replace(" ", "")
        segs = [s for s in path.split("::") if s]
        alias = m.group(2) or (segs[-1] if segs else None)
        return [(segs, alias)]
    prefix = raw[:i].replace(" ", "")
    body = raw[i + 1 : raw.rfind("}")]
    items, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    if cur.strip():
        items.append(cur)
    out = []
    for it in items:
        it = it.strip()
        if not it:
            continue
        for segs, alias in expand_use_keep_alias(it):
            psegs = [s for s in prefix.split("::") if s]
            if segs == ["self"]:
                out.append((psegs, alias if alias != "self" else (psegs[-1] if psegs else None)))
            else:
                out.append((psegs + segs, alias))
    return out


REEXPORTS = {}
EXTERNAL = ("<another crate>",)


def absolute(segs, here):
    """`segs` as written in module `here`, from the crate root; None for
    paths outside the crate."""
    if not segs:
        return None
    if segs[0] == "crate":
        return tuple(segs[1:])
    if segs[0] in ("super", "self"):
        base, rest = list(here), list(segs)
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                if not base:
                    return None
                base.pop()
            rest.pop(0)
        return tuple(base) + tuple(rest)
    return None


def resolve_abs(full, modules, depth=0):
    """The file module that an absolute path names: the longest prefix
    that is a module, through `pub use` re-exports of the rest."""
    for k in range(len(full), -1, -1):
        if full[:k] in modules:
            m, rest = full[:k], full[k:]
            again = REEXPORTS.get(m, {}).get(rest[0]) if rest else None
            if again == EXTERNAL:
                return None
            if again is not None and depth < 8:
                return resolve_abs(again + tuple(rest[1:]), modules, depth + 1)
            return m
    return None


def resolve(segs, here, modules):
    """The file module that `segs`, as written in module `here`, names."""
    full = absolute(segs, here)
    return None if full is None else resolve_abs(full, modules)


def exact(segs, here, modules):
    """Whether `segs` names a module itself (not an item in one)."""
    t = resolve(segs, here, modules)
    if t is None:
        return False
    return resolve(segs + ["__item__"], here, modules) == t and t[-1:] == tuple(segs[-1:])


def read_floors(doc):
    floors = []
    if not os.path.exists(doc):
        return floors
    for line in open(doc, encoding="utf-8"):
        m = re.match(r"^\|\s*(\d+)\s*\|[^|]*\|(.*)\|\s*$", line)
        if not m:
            continue
        for p in re.findall(r"`([^`]+)`", m.group(2)):
            floors.append((p, int(m.group(1))))
    return floors


def floor_of(rel, floors):
    best = None
    for prefix, f in floors:
        if rel == prefix or (prefix.endswith("/") and rel.startswith(prefix)):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, f)
    return None if best is None else best[1]


def circles(nodes, edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default="runtime/src")
    ap.add_argument("--doc", default="docs/architecture.md")
    ap.add_argument("--max-up", type=int, default=10)
    ap.add_argument("--arrows", action="store_true", help="print every arrow")
    args = ap.parse_args()

    files = {}
    for root, _, names in os.walk(args.src):
        for name in names:
            if name.endswith(".rs"):
                rel = os.path.relpath(os.path.join(root, name), args.src).replace(os.sep, "/")
                files[rel] = module_of(rel)
    modules = {m: f for f, m in files.items()}
    codes = {rel: strip_code(open(os.path.join(args.src, rel), encoding="utf-8").read()) for rel in files}
    # `pub use` re-exports, followed when a path names an item through them.
    for rel, here in files.items():
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", codes[rel]):
            for segs, alias in expand_use_keep_alias(m.group(1)):
                full = absolute(segs, here)
                if full is None and segs and (here + (segs[0],)) in modules:
                    full = here + tuple(segs)
                if alias and alias != "*":
                    # Another crate's item re-exported: no file of this one.
                    REEXPORTS.setdefault(here, {})[alias] = full if full is not None else EXTERNAL
        for m in re.finditer(r"^\s*use\s+(\w+)\s+as\s+(\w+)\s*;", codes[rel], re.M):
            if (here + (m.group(1),)) not in modules:
                REEXPORTS.setdefault(here, {})[m.group(2)] = EXTERNAL

    edges = {}
    for rel, here in sorted(files.items()):
        code = codes[rel]
        # Names that stand for modules in this file: children declared with
        # `mod`, and modules brought in by `use`.
        local = {}
        for m in re.finditer(r"^\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code, re.M):
            local[m.group(1)] = here + (m.group(1),)
        targets = set()
        for segs, alias in use_items(code):
            t = resolve(segs, here, modules)
            if t is None and segs and segs[0] in local:
                t = resolve(["crate", *local[segs[0]], *segs[1:]], (), modules)
            if t is not None:
                targets.add(t)
                if alias and alias != "*" and exact(segs, here, modules):
                    local[alias] = t
        body = re.sub(r"\buse\s+[^;]+;", "", code)
        for m in re.finditer(r"\b((?:crate|super|self)(?:::\w+)+)", body):
            t = resolve(m.group(1).split("::"), here, modules)
            if t is not None:
                targets.add(t)
        for m in re.finditer(r"(?<![:\w])(\w+)((?:::\w+)+)", body):
            head = m.group(1)
            if head in local:
                t = resolve(["crate", *local[head], *m.group(2).split("::")[1:]], (), modules)
                if t is not None:
                    targets.add(t)
        for t in targets:
            if t != here:
                edges.setdefault(rel, set()).add(modules[t])

    floors = read_floors(args.doc)
    missing = [f for f in sorted(files) if floor_of(f, floors) is None]
    arrows = [(a, b) for a in sorted(edges) for b in sorted(edges[a])]
    up = [(a, b) for a, b in arrows if floors and None not in (floor_of(a, floors), floor_of(b, floors)) and floor_of(a, floors) < floor_of(b, floors)]
    circ = circles(files, edges)

    print(f"{len(files)} files, {len(arrows)} arrows, {len(circ)} circles, {len(up)} arrows run back up")
    for c in circ:
        print(f"circle of {len(c)} files: {', '.join(c)}")
    for a, b in up:
        print(f"back up: {a} (floor {floor_of(a, floors)}) -> {b} (floor {floor_of(b, floors)})")
    for f in missing:
        print(f"no floor in {args.doc}: {f}")
    if args.arrows:
        for a, b in arrows:
            print(f"{a} -> {b}")
    bad = circ or len(up) > args.max_up or (floors and missing)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
