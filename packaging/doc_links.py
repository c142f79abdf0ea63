#!/usr/bin/env python3
"""doc_links.py - makes the links of the packaged documentation work in the package.

    doc_links.py SOURCE DOCDIR

DOCDIR is the documentation as the package installs it (/usr/share/doc/sluiced in the package's
staging tree: README.md, docs/, examples/, copyright). A relative link of a markdown file there
that leads to nothing in DOCDIR leads into the source tree; each is made to work:

  - LICENSE: the package's `copyright` file, which holds the licence (links rewritten);
  - include/...: the header as libsluice-dev installs it, PREFIX/include/... (links rewritten,
    relative, so they resolve in any root the packages are unpacked into);
  - anything else (the benchmarks' README and scripts, the Lua scripts' sources, the gRPC .proto,
    the language packages' READMEs, the client case table): the file, or the folder's files,
    copied from SOURCE to the same place under DOCDIR, where the link finds it; a copied markdown
    file's own links are made to work in turn.

Links in code (fenced blocks, `spans`) are not links. Exit status 0, or 1 naming a link whose
target is in neither DOCDIR nor SOURCE. tests/deb/deb.sh checks every link of the packaged
documentation afterwards (tests/docs/links.py).
"""
import os
import re
import shutil
import sys

LINK = re.compile(r"(!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?)([^)\s>#]*)(#[^)\s>]*)?(>?(?:\s+\"[^\"]*\")?\s*\))")
FENCE = re.compile(r"^\s*(```+|~~~+)")
EXTERNAL = ("http://", "https://", "mailto:", "ftp://")
SPAN = re.compile(r"(`+).*?\1")


def rewrite_line(line, fix):
    """line with fix(target) applied to each link target; links are found with the line's `code
    spans` blanked (a span in a link's text is part of the link, a link in a span is none)."""
    blanked = SPAN.sub(lambda m: " " * len(m.group(0)), line)
    out, last = [], 0
    for m in LINK.finditer(blanked):
        out.append(line[last:m.start(2)])
        out.append(fix(line[m.start(2):m.end(2)]))
        last = m.end(2)
    out.append(line[last:])
    return "".join(out)


def copy_in(source, docdir, rel, queue):
    """Copies SOURCE/rel (a file, or a folder's files) to DOCDIR/rel; markdown joins the queue."""
    src = os.path.join(source, rel)
    files = [src] if os.path.isfile(src) else [
        os.path.join(d, f) for d, _, fs in os.walk(src) for f in sorted(fs)]
    for f in files:
        dest = os.path.join(docdir, os.path.relpath(f, source))
        if os.path.exists(dest):
            continue
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(f, dest)
        os.chmod(dest, 0o644)
        if dest.endswith(".md"):
            queue.append(dest)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: doc_links.py SOURCE DOCDIR")
    source, docdir = (os.path.abspath(a) for a in sys.argv[1:])
    prefix = os.path.normpath(os.path.join(docdir, "..", "..", ".."))  # DOCDIR = PREFIX/share/doc/PKG
    queue = [os.path.join(d, f) for d, _, fs in os.walk(docdir) for f in fs if f.endswith(".md")]
    failed = []
    while queue:
        md = queue.pop()
        here = os.path.dirname(md)

        def fix(target):
            if not target or target.startswith(EXTERNAL) or ":" in target.split("/")[0]:
                return target
            dest = os.path.normpath(os.path.join(here, target))
            rel = os.path.relpath(dest, docdir)
            if os.path.isfile(dest) or (os.path.isdir(dest) and rel.split(os.sep)[0] in
                                        (".", "docs", "examples")):
                return target  # the package's own
            if os.path.isdir(dest):
                copy_in(source, docdir, rel, queue)  # a folder partly copied for another link
                return target
            if rel == "LICENSE":
                return os.path.relpath(os.path.join(docdir, "copyright"), here)
            if rel.startswith("include" + os.sep):
                return os.path.relpath(os.path.join(prefix, rel), here)
            if rel.startswith(".." + os.sep) or not os.path.exists(os.path.join(source, rel)):
                failed.append("%s: %s: in neither the package nor the source tree" %
                              (os.path.relpath(md, docdir), target))
                return target
            copy_in(source, docdir, rel, queue)
            return target

        with open(md, encoding="utf-8") as f:
            lines = f.read().split("\n")
        fence = None
        for i, line in enumerate(lines):
            m = FENCE.match(line)
            if fence is None and m:
                fence = m.group(1)[0] * 3
                continue
            if fence is not None:
                if line.strip().startswith(fence):
                    fence = None
                continue
            lines[i] = rewrite_line(line, fix)
        with open(md, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
    for f in failed:
        print("doc_links.py: " + f, file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
