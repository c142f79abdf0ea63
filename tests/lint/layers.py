#!/usr/bin/env python3
"""layers.py - checks the shape of src/: the layers, loops between files, long files.

    python3 tests/lint/layers.py --source DIR --build DIR [--report]

The layers, each allowed to include and call only the layers before it (docs/dev/design.md, "The
layers"):

    core     src/core, include/sluice   pure algorithms and the per-key table
    proto    src/proto                  wire codecs and byte-level text
    rules    src/rules                  rule definitions, key templates, config stores
    remote   src/remote                 hiredis on libuv, the over-limit cache (store and client)
    store    src/store                  request stores and the Redis client
    client   src/client                 libsluice-client
    engine   src/engine                 rules in force, overrides, decisions, snapshots, events
    top      src/server, src/module, src/cli   sluiced, sluice.so, sluice: never each other

A file is a module: src/engine/engine.c and src/engine/engine.h are one (a header with no source
of its name, such as a group's private header, holds no code and is left out). Two modules may not
depend on each other in a loop, within a layer too: a dependency is an #include "..." of the
other's header, or a call or data reference found in the compiled objects (nm: a symbol one
object leaves undefined and another defines). Loops are broken with function pointers set by the
caller, which neither the includes nor the symbols show.

Also checked: a file in src/ over LONG_LINES lines says why at its top (a comment line holding
"long because"), and so does a function whose body is over LONG_FUNCTION lines, in the comment
above it; the median function length is printed, and must stay at most MEDIAN_MAX lines.

Exits 0 when everything holds, 1 with every finding listed.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

LAYERS = {"core": 0, "sluice": 0, "proto": 1, "rules": 2, "remote": 3, "store": 4, "client": 5,
          "engine": 6, "server": 7, "module": 7, "cli": 7}
TOP = 7  # the top layer's parts never use each other
LONG_LINES = 800
LONG_FUNCTION = 60
MEDIAN_MAX = 15
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module_of(path):
    """'src/engine/engine.c' -> 'engine/engine'; include/sluice/x.h -> 'sluice/x'."""
    path = path.replace(os.sep, "/")
    for root in ("src/", "include/"):
        at = path.rfind(root)
        if at >= 0:
            rest = path[at + len(root):]
            return os.path.splitext(rest)[0]
    return None


def layer_of(module):
    return module.split("/", 1)[0]


def source_files(src_root):
    for d, _, names in os.walk(src_root):
        for n in sorted(names):
            if n.endswith((".c", ".h")):
                yield os.path.join(d, n)


def include_edges(source):
    """{module: {module it includes}} over src/ and include/sluice/."""
    edges = {}
    files = list(source_files(os.path.join(source, "src")))
    files += list(source_files(os.path.join(source, "include", "sluice")))
    for f in files:
        m = module_of(os.path.relpath(f, source))
        with open(f, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for inc in INCLUDE.findall(text):
            target = os.path.splitext(inc)[0]
            if layer_of(target) in LAYERS and target != m:
                edges.setdefault(m, set()).add(target)
    return edges, files


def symbol_edges(source, build):
    """{module: {module whose symbols it uses}} from the objects of src/ in the build."""
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as fh:
        commands = json.load(fh)
    objects = {}
    src_root = os.path.join(os.path.realpath(source), "src") + os.sep
    for c in commands:
        path = os.path.realpath(os.path.join(c["directory"], c["file"]))
        if not path.startswith(src_root):
            continue
        out = c.get("output")
        if out is None:
            m = re.search(r"-o\s+(\S+)", c.get("command", ""))
            out = m.group(1) if m else None
        if out is None:
            continue
        obj = os.path.join(c["directory"], out)
        if os.path.exists(obj):
            objects.setdefault(module_of(os.path.relpath(path, source)), obj)
    defined, used = {}, {}
    for m, obj in objects.items():
        nm = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
        for line in nm.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "U":
                used.setdefault(m, set()).add(parts[1])
            elif len(parts) == 3 and parts[1] in "TDBRCVW" and parts[1].isupper():
                defined.setdefault(parts[2], m)
    edges = {}
    for m, syms in used.items():
        for s in syms:
            d = defined.get(s)
            if d is not None and d != m:
                edges.setdefault(m, set()).add(d)
    return edges, len(objects)


def loops(edges):
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    nodes = set(edges) | {t for ts in edges.values() for t in ts}
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
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
    return out


def layer_findings(edges, kind):
    found = []
    for m, targets in sorted(edges.items()):
        lm = layer_of(m)
        for t in sorted(targets):
            lt = layer_of(t)
            if lm not in LAYERS or lt not in LAYERS:
                continue
            if LAYERS[lt] > LAYERS[lm] or (LAYERS[lt] == LAYERS[lm] == TOP and lt != lm):
                found.append(f"layer: {m} ({lm}) {kind} {t} ({lt}), a layer it may not use")
    return found


FUNC_START = re.compile(r"^[A-Za-z_][^;=]*\)\s*$")


def function_lengths(path):
    """(body length, signature line, comment above) of the functions defined at column 0 (a
    signature line, then '{' alone); the comment is the block of lines right above the
    signature that are part of a comment."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = fh.read().split("\n")
    out = []
    for i, line in enumerate(lines[:-1]):
        if FUNC_START.match(line) and lines[i + 1] == "{":
            k = i
            while k > 0 and lines[k - 1].lstrip().startswith(("/*", "*", "//")):
                k -= 1
            for j in range(i + 2, len(lines)):
                if lines[j] == "}":
                    out.append((j - i - 1, line, "\n".join(lines[k:i])))
                    break
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--report", action="store_true", help="print the dependency graph too")
    a = ap.parse_args()

    inc, files = include_edges(a.source)
    sym, nobj = symbol_edges(a.source, a.build)
    if nobj == 0:
        print(f"layers.py: no objects of src/ in {a.build}: build it first", file=sys.stderr)
        return 1
    # A header with no source of its name (engine_impl.h, core.h) holds no code: it is never
    # part of a loop itself; what the files behind it call is in the symbols.
    coded = {module_of(os.path.relpath(f, a.source)) for f in files if f.endswith(".c")}
    both = {m: (set(inc.get(m, ())) | set(sym.get(m, ()))) & coded
            for m in (set(inc) | set(sym)) & coded}
    findings = layer_findings(inc, "includes") + layer_findings(sym, "calls")
    for comp in loops(both):
        detail = []
        for m in comp:
            for t in sorted(both.get(m, ())):
                if t in comp:
                    how = "+".join(k for k, e in (("includes", inc), ("calls", sym))
                                   if t in e.get(m, ()))
                    detail.append(f"{m} {how} {t}")
        findings.append("loop: " + " <-> ".join(comp) + "\n    " + "\n    ".join(detail))

    lengths = []
    for f in files:
        rel = os.path.relpath(f, a.source)
        with open(f, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        n = text.count("\n")
        head = "\n".join(text.split("\n")[:40])
        if n > LONG_LINES and "long because" not in head:
            findings.append(f"long: {rel} has {n} lines and no reason at its top "
                            f"(a comment line holding 'long because ...')")
        if f.endswith(".c"):
            for n_body, sig, above in function_lengths(f):
                lengths.append(n_body)
                if n_body > LONG_FUNCTION and "long because" not in above:
                    findings.append(f"long: {rel}: '{sig.strip()[:60]}' has a body of {n_body} "
                                    f"lines and no reason in the comment above it (a line "
                                    f"holding 'long because ...')")
    median = statistics.median(lengths) if lengths else 0
    print(f"layers.py: {len(both)} modules, {nobj} objects, {len(lengths)} functions, "
          f"median function body {median} lines")
    if median > MEDIAN_MAX:
        findings.append(f"functions: the median body is {median} lines (at most {MEDIAN_MAX})")
    if a.report:
        for m in sorted(both):
            print(f"  {m} -> {', '.join(sorted(both[m]))}")
    for f in findings:
        print(f)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
