#!/usr/bin/env python3
"""exports.py - checks what each shared object exports: exactly its public interface.

    exports.py LIB:SPEC [LIB:SPEC ...]

SPEC is either HEADER@MACRO (the functions a header declares with MACRO, e.g.
include/sluice/sluice.h@SL_API) or a linker version script (its `global:` names). A library
fails when `nm -D --defined-only` lists a symbol the SPEC does not name (an internal function
that leaked) or misses one it names (a public function not exported). --self-test checks the
comparison on made-up lists. Exits 77 when nm is missing.
"""
import re
import shutil
import subprocess
import sys


def declared(header, macro):
    """Names of the functions `header` declares with `macro` in front."""
    text = open(header, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"^\s*#.*$", " ", text, flags=re.M)  # the macro's own #define
    names = set()
    for decl in re.findall(r"\b%s\b([^;{]*?)\(" % re.escape(macro), text):
        m = re.search(r"(\w+)\s*$", decl)
        if m:
            names.add(m.group(1))
    return names


def version_script(path):
    """The names a linker version script makes global."""
    text = re.sub(r"/\*.*?\*/", " ", open(path, encoding="utf-8").read(), flags=re.S)
    m = re.search(r"global:(.*?)(local:|})", text, flags=re.S)
    return {n.strip() for n in m.group(1).split(";") if n.strip()} if m else set()


def exported(lib):
    """Defined dynamic symbols of lib (names only, versions dropped)."""
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True,
                         capture_output=True, text=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}


def compare(lib, have, want):
    """Messages for what lib exports but should not, and what it should but does not."""
    msgs = ["%s: exports %s, which is not public" % (lib, n) for n in sorted(have - want)]
    msgs += ["%s: does not export %s" % (lib, n) for n in sorted(want - have)]
    return msgs


def self_test():
    want = {"sl_decide", "sl_strerror"}
    assert compare("x", {"sl_decide", "sl_strerror"}, want) == []
    assert compare("x", want | {"gcra_decide"}, want) == ["x: exports gcra_decide, which is not public"]
    assert compare("x", {"sl_decide"}, want) == ["x: does not export sl_strerror"]
    print("exports.py self-test: ok")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    if shutil.which("nm") is None:
        print("SKIP: needs nm (binutils)")
        return 77
    failures = []
    for arg in argv[1:]:
        lib, spec = arg.split(":", 1)
        if "@" in spec:
            header, macro = spec.rsplit("@", 1)
            want = declared(header, macro)
        else:
            want = version_script(spec)
        if not want:
            failures.append("%s: %s names no symbol" % (lib, spec))
            continue
        have = exported(lib)
        msgs = compare(lib, have, want)
        failures += msgs
        if not msgs:
            print("%s: exports its %d public symbols and nothing else" % (lib, len(want)))
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
