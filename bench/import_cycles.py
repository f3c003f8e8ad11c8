"""File-level import cycles of a Rust crate (issue #17: "no circle remains").

An edge a.rs -> b.rs when a.rs names, through `use crate::...` or a
`crate::...` path outside comments, an item that b.rs defines (resolved
through re-exports to the defining file). Prints the number of files, edges
and strongly connected components with more than one file; `-v` lists the
edges inside each.

Run: `python3 bench/import_cycles.py tinyagents/src [-v]`.
"""
import os, re, sys
from collections import defaultdict

root = sys.argv[1]  # e.g. tinyagents/src
files = []
for d, _, fs in os.walk(root):
    for f in fs:
        if f.endswith('.rs'):
            files.append(os.path.join(d, f))

def mod_dir(parts):
    return os.path.join(root, *parts)

defs = {}
for f in files:
    s = open(f).read()
    s = re.sub(r'#\[cfg\(test\)\]\s*mod tests\s*\{.*', '', s, flags=re.S)
    names = set(re.findall(r'^\s*(?:pub(?:\([^)]*\))?\s+)?(?:struct|enum|trait|type|static|union)\s+(\w+)', s, re.M))
    names |= set(re.findall(r'^(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:fn|const)\s+(\w+)', s, re.M))
    names |= set(re.findall(r'^\s*macro_rules!\s+(\w+)', s, re.M))
    defs[f] = names

def definer(modparts, name):
    base = mod_dir(modparts)
    cands = []
    if os.path.isdir(base):
        for f in files:
            if f.startswith(base + os.sep) and name in defs[f]:
                cands.append(f)
    for f in (base + '.rs',):
        if os.path.exists(f) and name in defs[f]:
            cands.append(f)
    return cands

edges = defaultdict(set)
for f in files:
    s = open(f).read()
    s = re.sub(r'#\[cfg\(test\)\]\s*mod tests\s*\{.*', '', s, flags=re.S)
    s = re.sub(r'^\s*//.*$', '', s, flags=re.M)
    for m in re.finditer(r'\buse\s+crate::([\w:]+)(?:::\{([^;]*)\})?\s*;', s):
        path = m.group(1).split('::')
        group = m.group(2)
        if group:
            items = []
            for part in re.split(r',(?![^{]*\})', group):
                part = part.strip()
                if not part:
                    continue
                sub = part.split('::')
                items.append((path + sub[:-1], sub[-1].split(' as ')[0].strip('{} ')))
        else:
            items = [(path[:-1], path[-1])]
        for modparts, name in items:
            if name in ('self', '*'):
                continue
            for c in definer(modparts, name):
                if c != f:
                    edges[f].add(c)
    # inline paths crate::a::b::Item in code
    for m in re.finditer(r'crate::((?:\w+::)+)(\w+)', s):
        modparts = m.group(1).rstrip(':').split('::')
        for c in definer(modparts, m.group(2)):
            if c != f:
                edges[f].add(c)

# Tarjan
index = {}; low = {}; stack = []; on = set(); sccs = []; i = [0]
sys.setrecursionlimit(10000)
def visit(v):
    index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
    for w in edges[v]:
        if w not in index:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1: sccs.append(comp)
for f in files:
    if f not in index: visit(f)
print(f"{len(files)} files, {sum(len(e) for e in edges.values())} file-level import edges, {len(sccs)} cycles")
for c in sorted(sccs, key=len, reverse=True):
    print(len(c), sorted(os.path.relpath(x, root) for x in c)[:40])
if '-v' in sys.argv:
    for c in sccs:
        cs = set(c)
        for a in sorted(c):
            for b in sorted(edges[a] & cs):
                print('  ', os.path.relpath(a, root), '->', os.path.relpath(b, root))
