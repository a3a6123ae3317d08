#!/usr/bin/env bash
# check_include_cycles.sh — the include graph of hm's libraries and tools has
# no cycle, and no folder of libconvert/ holds more than 12 files.
#
#   tools/check_include_cycles.sh [SOURCE_DIR]     (default: this script's ../)
#
# A module is a file name without its extension: X.c and X.h are module X; a
# header without a .c (mixer.h, tokenizer_internal.h) or a .c without a header
# (mixer_softmax.c) is a module of its own. Module X depends on module Y when
# X.c or X.h has `#include "Y.h"` (bare names: CMake puts every folder on the
# include path) and Y.h is one of the scanned files; system and generated
# headers are not. The graph must be acyclic: no two modules include each
# other, directly or in a ring. Scanned: errors/ formats/ kernels/ libconvert/
# tools/. Exit 0 clean, 1 with each cycle and each overfull folder on stderr.
#
set -euo pipefail
root=${1:-"$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"}
exec python3 - "$root" <<'PY'
import os, re, sys

root = sys.argv[1]
MAX_FILES = 12
inc_re = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
files = []
for top in ("errors", "formats", "kernels", "libconvert", "tools"):
    for d, _, names in os.walk(os.path.join(root, top)):
        files += [os.path.join(d, n) for n in names if n.endswith((".c", ".h"))]

def module(path):
    return os.path.splitext(os.path.basename(path))[0]

KNOWN = set()  # (module, the module it includes) let through: none

fail = 0
where = {}  # module -> its files
for f in files:
    where.setdefault(module(f), []).append(os.path.relpath(f, root))
for m, fs in sorted(where.items()):
    dirs = sorted({os.path.dirname(f) for f in fs})
    if len(dirs) > 1:
        print(f"check_include_cycles: module '{m}' is in {len(dirs)} folders: "
              f"{', '.join(sorted(fs))} (bare includes are ambiguous)", file=sys.stderr)
        fail = 1
headers = {module(f) for f in files if f.endswith(".h")}

deps = {m: {} for m in where}  # module -> {dep: "file that includes it"}
for f in files:
    m = module(f)
    with open(f, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            hit = inc_re.match(line)
            if not hit:
                continue
            name = os.path.basename(hit.group(1))
            dep = os.path.splitext(name)[0]
            if name.endswith(".h") and dep in headers and dep != m:
                deps[m].setdefault(dep, os.path.relpath(f, root))
for m, d in sorted(KNOWN):
    if d in deps.get(m, {}):
        print(f"check_include_cycles: note: known ring let through: {deps[m][d]} "
              f"includes {d}.h (kernels/, fixed on its own branch)", file=sys.stderr)
        del deps[m][d]

# Tarjan's strongly connected components (iterative); a component of two or
# more modules holds a cycle.
index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]
for start in sorted(deps):
    if start in index:
        continue
    work = [(start, iter(sorted(deps[start])))]
    index[start] = low[start] = counter[0]; counter[0] += 1
    stack.append(start); on.add(start)
    while work:
        v, it = work[-1]
        w = next(it, None)
        if w is not None:
            if w not in index:
                index[w] = low[w] = counter[0]; counter[0] += 1
                stack.append(w); on.add(w)
                work.append((w, iter(sorted(deps[w]))))
            elif w in on:
                low[v] = min(low[v], index[w])
            continue
        work.pop()
        if work:
            low[work[-1][0]] = min(low[work[-1][0]], low[v])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

def one_cycle(comp):
    """A shortest ring through comp[0] inside the component (BFS)."""
    inside, s = set(comp), comp[0]
    prev, queue = {s: None}, [s]
    for v in queue:
        for w in sorted(deps[v]):
            if w == s:
                ring = [v]
                while prev[ring[-1]] is not None:
                    ring.append(prev[ring[-1]])
                return list(reversed(ring)) + [s]
            if w in inside and w not in prev:
                prev[w] = v
                queue.append(w)
    return comp

for comp in comps:
    ring = one_cycle(comp)
    steps = ", ".join(f"{deps[a][b]} includes {b}.h" for a, b in zip(ring, ring[1:]))
    print(f"check_include_cycles: include cycle {' -> '.join(ring)} ({steps})", file=sys.stderr)
    fail = 1

for d, _, names in os.walk(os.path.join(root, "libconvert")):
    n = sum(1 for x in names if os.path.isfile(os.path.join(d, x)))
    if n > MAX_FILES:
        print(f"check_include_cycles: folder '{os.path.relpath(d, root)}' holds {n} files "
              f"(at most {MAX_FILES})", file=sys.stderr)
        fail = 1

if not fail:
    print(f"check_include_cycles: {len(deps)} modules, "
          f"{sum(len(v) for v in deps.values())} dependencies, no cycle")
sys.exit(fail)
PY
