#!/usr/bin/env python3
"""algorithms.py - checks that an algorithm is one row: src/ names an algorithm only where the
recipe puts it (docs/dev/design.md, "Adding an algorithm").

    python3 tests/lint/algorithms.py --source DIR             every check below
    python3 tests/lint/algorithms.py --source DIR --recipe NAME
    python3 tests/lint/algorithms.py --self-test

The algorithms are the rows of src/core/algorithms.c (`[SL_X] = {... .name = "x", ...
.ops = &<file>_ops ...}`), which must be the enumerators of sl_algorithm_t in
include/sluice/sluice.h, one each. The checks:

  names     Outside comments (C, JS and CSS /* */ and //, Lua --, CMake, shell and Python #,
            HTML <!-- -->), no file in src/ names an algorithm (its name as a word or as the
            start of an identifier, `gcra` or `gcra_ops`, or its enumerator SL_GCRA) but the
            table (src/core/algorithms.c), the algorithm's own core file (src/core/<file>.c, the
            file of the row's ops), its Lua script (src/store/lua/<name>.lua) and the Lua
            fragments only such scripts include, and the entries of ALLOW below, each with its
            reason. Comments are the code's documentation, which names algorithms freely, as
            docs/ and tests/ do.
  switches  No `switch` in src/, tests/ or bench/ with a `case SL_<ALGORITHM>:` has a
            `default:`, so that -Wswitch names every switch a new enumerator misses.
  recipe    (--recipe NAME) The files of src/ that name NAME (as above, or by their file name)
            are exactly the recipe's: its core file, the table, its Lua script.

Exits 0 when everything holds, 1 with every finding listed. --self-test builds small trees in
a temporary directory and shows that each check fails on what it is meant to find, and that the
build's assembly of the Lua scripts (src/store/lua_scripts.cmake) stops on a row without a
script and on a script without a row.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Files of src/ that may name an algorithm beyond its recipe: (path, algorithm, reason). Keep
# it short: each entry is a place a new algorithm might need editing.
ALLOW = [
    ("src/engine/events.h", "concurrency",
     "--replay-concurrency, the setting: the English word, not the algorithm"),
    ("src/server/http_replay.c", "concurrency",
     "--replay-concurrency, the setting: the English word, not the algorithm"),
    ("src/server/settings.c", "concurrency",
     "replay_concurrency, the setting: the English word, not the algorithm"),
]

TEXT_EXT = (".c", ".h", ".lua", ".js", ".html", ".css", ".txt", ".cmake", ".map", ".in", ".py",
            ".sh", ".svg", ".json", ".yaml", ".md")

ROW = re.compile(r"\[(SL_[A-Z0-9_]+)\]\s*=\s*\{(.*?)\n\s*\},", re.S)
ENUM = re.compile(r"typedef\s+enum\s+sl_algorithm\s*\{(.*?)\}\s*sl_algorithm_t\s*;", re.S)


def table(source):
    """[(enumerator, name, core file)] of the rows of src/core/algorithms.c."""
    with open(os.path.join(source, "src/core/algorithms.c"), encoding="utf-8") as fh:
        text = fh.read()
    rows = []
    for enum, body in ROW.findall(text):
        name = re.search(r'\.name\s*=\s*"([a-z0-9_]+)"', body)
        ops = re.search(r"\.ops\s*=\s*&([a-z0-9_]+)_ops\b", body)
        if name and ops:
            rows.append((enum, name.group(1), "src/core/%s.c" % ops.group(1)))
    return rows


def enumerators(source):
    with open(os.path.join(source, "include/sluice/sluice.h"), encoding="utf-8") as fh:
        m = ENUM.search(fh.read())
    if not m:
        return []
    body = strip(m.group(1), ".c")
    return re.findall(r"\b(SL_[A-Z0-9_]+)\b", body)


# ---- comments out, strings kept ------------------------------------------------------------


def strip(text, ext):
    """text with its comments blanked (newlines kept), its strings kept."""
    if ext in (".c", ".h", ".js", ".css", ".json"):
        return strip_c(text, ext == ".js")
    if ext == ".lua":
        return strip_lua(text)
    if ext in (".html", ".svg", ".md"):
        return re.sub(r"<!--.*?-->", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    if ext in (".cmake", ".txt", ".py", ".sh", ".in", ".yaml", ".map"):
        return "\n".join(strip_hash(line) for line in text.split("\n"))
    return text


def blank(s):
    return re.sub(r"[^\n]", " ", s)


def strip_c(text, js):
    out, i, n = [], 0, len(text)
    quotes = "\"'`" if js else "\"'"
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(blank(text[i:j]))
            i = j
        elif c in quotes:
            j = i + 1
            while j < n and text[j] != c and (c == "`" or text[j] != "\n"):
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_lua(text):
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        m = re.match(r"--\[(=*)\[", text[i:i + 64])
        if m:
            end = "]" + m.group(1) + "]"
            j = text.find(end, i)
            j = n if j < 0 else j + len(end)
            out.append(blank(text[i:j]))
            i = j
        elif text.startswith("--", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            i = j
        elif re.match(r"\[(=*)\[", text[i:i + 64]):
            m = re.match(r"\[(=*)\[", text[i:i + 64])
            end = "]" + m.group(1) + "]"
            j = text.find(end, i)
            j = n if j < 0 else j + len(end)
            out.append(text[i:j])
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_hash(line):
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "#":
            return line[:i]
    return line


# ---- what names what -------------------------------------------------------------------------


def pattern(enum, name):
    return re.compile(r"(?<![A-Za-z0-9_])(?:%s(?:_[A-Za-z0-9_]*)?|%s)(?![A-Za-z0-9_])"
                      % (re.escape(name), re.escape(enum)))


def src_files(source):
    root = os.path.join(source, "src")
    for d, dirs, names in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith("."))
        for n in sorted(names):
            if n.endswith(TEXT_EXT) or n == "CMakeLists.txt":
                yield os.path.relpath(os.path.join(d, n), source)


def code_of(source, rel):
    with open(os.path.join(source, rel), encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    ext = ".cmake" if rel.endswith("CMakeLists.txt") else os.path.splitext(rel)[1]
    return strip(text, ext)


def naming(source, rows):
    """{name: {file: first line naming it}} over src/."""
    found = {name: {} for _, name, _ in rows}
    pats = [(name, pattern(enum, name)) for enum, name, _ in rows]
    for rel in src_files(source):
        code = code_of(source, rel)
        for name, pat in pats:
            m = pat.search(code)
            if m:
                found[name][rel] = code.count("\n", 0, m.start()) + 1
    return found


def fragments_of(source, rows):
    """{fragment path: {names of the algorithms whose scripts include it}}."""
    out = {}
    for _, name, _ in rows:
        script = os.path.join(source, "src/store/lua", name + ".lua")
        if not os.path.exists(script):
            continue
        with open(script, encoding="utf-8") as fh:
            for frag in re.findall(r"^-- include: (lib/\S+\.lua)$", fh.read(), re.M):
                out.setdefault("src/store/lua/" + frag, set()).add(name)
    return out


def recipe(name, core):
    return {core, "src/core/algorithms.c", "src/store/lua/%s.lua" % name}


def check_names(source, rows):
    findings = []
    frags = fragments_of(source, rows)
    allowed = {(p, a) for p, a, _ in ALLOW}
    for name, files in naming(source, rows).items():
        core = [c for _, n, c in rows if n == name][0]
        for rel, line in sorted(files.items()):
            if rel in recipe(name, core) or name in frags.get(rel, ()) or (rel, name) in allowed:
                continue
            findings.append("names: %s:%d names %s, outside its row, its core file (%s) and its "
                            "Lua script" % (rel, line, name, core))
    return findings


def check_enum(source, rows):
    enums = enumerators(source)
    have = [e for e, _, _ in rows]
    findings = []
    if sorted(enums) != sorted(have):
        findings.append("table: sl_algorithm_t's enumerators %s are not the rows of "
                        "src/core/algorithms.c %s" % (enums, have))
    return findings


SWITCH = re.compile(r"\bswitch\s*\(")


def switch_bodies(code):
    """(line, body) of each switch statement in C code (comments out)."""
    for m in SWITCH.finditer(code):
        i = code.find("{", m.end())
        if i < 0:
            continue
        depth, j = 0, i
        while j < len(code):
            if code[j] == "{":
                depth += 1
            elif code[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        yield code.count("\n", 0, m.start()) + 1, code[i:j + 1]


def check_switches(source, rows):
    enums = "|".join(re.escape(e) for e, _, _ in rows)
    case = re.compile(r"\bcase\s+(?:%s)\s*:" % enums)
    findings = []
    for top in ("src", "tests", "bench"):
        for d, dirs, names in os.walk(os.path.join(source, top)):
            dirs[:] = sorted(dirs)
            for n in sorted(names):
                if not n.endswith((".c", ".h")):
                    continue
                rel = os.path.relpath(os.path.join(d, n), source)
                for line, body in switch_bodies(code_of(source, rel)):
                    own = re.sub(r"\bswitch\s*\([^)]*\)\s*\{", "", body[1:])  # nested: rare
                    if case.search(body) and re.search(r"\bdefault\s*:", own):
                        findings.append("switches: %s:%d switches over sl_algorithm_t with a "
                                        "default: (list every algorithm instead)" % (rel, line))
    return findings


def check_recipe(source, rows, name):
    match = [r for r in rows if r[1] == name]
    if not match:
        return ["recipe: no row named %s in src/core/algorithms.c" % name]
    enum, _, core = match[0]
    files = set(naming(source, rows)[name])
    files |= {rel for rel in src_files(source)
              if os.path.splitext(os.path.basename(rel))[0] == name}
    want = recipe(name, core)
    findings = []
    for rel in sorted(files - want):
        findings.append("recipe: %s names %s, and is not in its recipe" % (rel, name))
    for rel in sorted(want - files):
        findings.append("recipe: %s, in the recipe of %s, %s" % (
            rel, name, "is missing" if not os.path.exists(os.path.join(source, rel))
            else "does not name it"))
    return findings


def run(source, recipe_name=None):
    rows = table(source)
    if not rows:
        return ["table: no rows found in src/core/algorithms.c"]
    if recipe_name is not None:
        return check_recipe(source, rows, recipe_name)
    return check_enum(source, rows) + check_names(source, rows) + check_switches(source, rows)


# ---- self-test -----------------------------------------------------------------------------

SELF_FILES = {
    "include/sluice/sluice.h":
        "typedef enum sl_algorithm {\n    SL_ALPHA = 1, /* the first */\n    SL_BETA,\n"
        "} sl_algorithm_t;\n",
    "src/core/algorithms.c":
        "const core_algorithm_t core_algorithms[4] = {\n"
        "    [SL_ALPHA] =\n        {\n            .name = \"alpha\",\n"
        "            .ops = &alpha_ops,\n        },\n"
        "    [SL_BETA] =\n        {\n            .name = \"beta\",\n"
        "            .ops = &beta_ops,\n        },\n};\n",
    "src/core/alpha.c": "const algorithm_ops_t alpha_ops = {0};\n",
    "src/core/beta.c": "/* beta: like alpha */\nconst algorithm_ops_t beta_ops = {0};\n",
    "src/store/lua/alpha.lua": "-- include: row\n-- include: lib/shared.lua\nlocal x = 'alpha'\n",
    "src/store/lua/beta.lua": "-- include: row\n-- include: lib/shared.lua\nlocal x = 'beta'\n",
    "src/store/lua/lib/shared.lua": "-- shared by alpha and beta\nlocal y = 1\n",
    "src/proto/args.c": "/* alpha, beta and SL_ALPHA in a comment are documentation */\n"
                        "static const char *s = \"http://x\"; // beta\nint f(int a)\n{\n"
                        "    switch (a) {\n    case 1:\n        return 0;\n    default:\n"
                        "        return 1;\n    }\n}\n",
    "src/server/ui/page.js": "// alpha\nconst url = \"/v1/algorithms\"; /* beta */\n",
    "src/CMakeLists.txt": "# alpha\nfile(GLOB x core/*.c)\n",
}


def self_test():
    fails = []

    def expect(tree, want, rec=None, what=""):
        got = run(tree, rec)
        ok = (not got) if want is None else any(want in f for f in got)
        if not ok:
            fails.append("%s: wanted %s, got %s" % (what, want or "no finding", got))

    def write(tree, rel, text, mode="w"):
        path = os.path.join(tree, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, mode, encoding="utf-8") as fh:
            fh.write(text)

    with tempfile.TemporaryDirectory() as tmp:
        tree = os.path.join(tmp, "t")
        for rel, text in SELF_FILES.items():
            write(tree, rel, text)
        expect(tree, None, what="a clean tree")
        expect(tree, None, "beta", "the recipe of beta")
        write(tree, "src/proto/args.c", "const char *n = \"beta\";\n", "a")
        expect(tree, "src/proto/args.c:12 names beta", what="a name in a string")
        expect(tree, "recipe: src/proto/args.c names beta", "beta", "the recipe, one file more")
        ALLOW.append(("src/proto/args.c", "beta", "the self-test's"))
        expect(tree, None, what="an allowed name")
        ALLOW.pop()
        write(tree, "src/proto/args.c", SELF_FILES["src/proto/args.c"])
        write(tree, "src/server/ui/page.js", "const a = [`alpha`];\n", "a")
        expect(tree, "page.js:3 names alpha", what="a name in a JS template")
        write(tree, "src/server/ui/page.js", SELF_FILES["src/server/ui/page.js"])
        write(tree, "src/store/lua/lib/shared.lua", "local z = beta_thing\n", "a")
        expect(tree, None, what="a fragment only their scripts include")
        write(tree, "src/store/lua/lib/other.lua", "local z = 'beta'\n")
        expect(tree, "lib/other.lua:1 names beta", what="a fragment no script of beta includes")
        os.remove(os.path.join(tree, "src/store/lua/lib/other.lua"))
        write(tree, "src/engine/e.c", "int g(void)\n{\n    return SL_ALPHA;\n}\n")
        expect(tree, "src/engine/e.c:3 names alpha", what="an enumerator")
        os.remove(os.path.join(tree, "src/engine/e.c"))
        write(tree, "tests/unit/t.c", "int h(sl_algorithm_t a)\n{\n    switch (a) {\n"
              "    case SL_ALPHA:\n        return 1;\n    default:\n        return 0;\n    }\n}\n")
        expect(tree, "switches: tests/unit/t.c:3", what="a switch with a default")
        write(tree, "tests/unit/t.c", "int h(sl_algorithm_t a)\n{\n    switch (a) {\n"
              "    case SL_ALPHA:\n        return 1;\n    case SL_BETA:\n        return 0;\n"
              "    }\n    return 0;\n}\n")
        expect(tree, None, what="a switch that lists every algorithm")
        os.remove(os.path.join(tree, "src/store/lua/beta.lua"))
        expect(tree, "src/store/lua/beta.lua, in the recipe of beta, is missing", "beta",
               "the recipe without its script")
        write(tree, "src/store/lua/beta.lua", SELF_FILES["src/store/lua/beta.lua"])
        write(tree, "include/sluice/sluice.h", "typedef enum sl_algorithm {\n    SL_ALPHA = 1,\n"
              "    SL_BETA,\n    SL_GAMMA,\n} sl_algorithm_t;\n")
        expect(tree, "table: sl_algorithm_t's enumerators", what="an enumerator with no row")
        fails += lua_build_self_test(tmp)
    for f in fails:
        print("self-test: " + f)
    print("algorithms.py self-test: %s" % ("ok" if not fails else "%d failed" % len(fails)))
    return 1 if fails else 0


def lua_build_self_test(tmp):
    """src/store/lua_scripts.cmake stops on a row without a script and a script without a row."""
    here = os.path.dirname(os.path.abspath(__file__))
    script = os.path.join(here, "..", "..", "src", "store", "lua_scripts.cmake")
    cmake = shutil.which("cmake")
    if cmake is None or not os.path.exists(script):
        return []
    lua, rows, out = (os.path.join(tmp, d) for d in ("lua", "rows", "out"))
    for d in (lua, rows, out):
        os.makedirs(d, exist_ok=True)
    fails = []

    def build(names, scripts, want_ok, what):
        for f in os.listdir(lua):
            os.remove(os.path.join(lua, f))
        with open(os.path.join(rows, "names.txt"), "w") as fh:
            fh.write("".join(n + "\n" for n in names))
        for n in names:
            with open(os.path.join(rows, n + ".lua"), "w") as fh:
                fh.write("local ALG = '%s'\n" % n)
        for n in scripts:
            with open(os.path.join(lua, n + ".lua"), "w") as fh:
                fh.write("-- %s\n-- include: row\nreturn 1\n" % n)
        rc = subprocess.run([cmake, "-DSRC=" + lua, "-DROWS=" + rows, "-DOUT=" + out,
                             "-DGENERATED=" + os.path.join(out, "lua_scripts.c"), "-P", script],
                            capture_output=True, text=True).returncode
        if (rc == 0) != want_ok:
            fails.append("lua_scripts.cmake, %s: exit %d" % (what, rc))

    build(["alpha", "beta"], ["alpha", "beta"], True, "a script per row")
    build(["alpha", "beta"], ["alpha"], False, "a row without a script")
    build(["alpha"], ["alpha", "beta"], False, "a script without a row")
    return fails


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source")
    ap.add_argument("--recipe", metavar="NAME")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.source:
        ap.error("--source is required")
    findings = run(a.source, a.recipe)
    for f in findings:
        print(f)
    what = "the recipe of " + a.recipe if a.recipe else "names, switches, the table"
    print("algorithms.py: %s: %s" % (what, "ok" if not findings else
                                      "%d findings" % len(findings)))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
