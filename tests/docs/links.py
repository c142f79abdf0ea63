#!/usr/bin/env python3
"""links.py - every relative link in README.md and docs/**/*.md leads somewhere: the file or
directory exists, and an #anchor names a heading of the target markdown file (GitHub's rule: the
heading's text lowercased, punctuation other than "-" and "_" dropped, spaces made "-", a repeat
suffixed -1, -2, ...) or an explicit <a name=...>/id=... there. External links (http, https,
mailto) are not fetched: they are listed as skipped. Links inside code (fenced blocks, `spans`)
are not links.

    links.py --source DIR        check the source tree's docs; exit 0 when all resolve, 1 if not
    links.py --self-test         a broken file link and a broken anchor are each caught, and
                                 good links of each kind pass
"""
import argparse
import glob
import os
import re
import sys
import tempfile

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
HTML_HREF = re.compile(r"<a\s[^>]*href=\"([^\"]+)\"", re.I)
HTML_ANCHOR = re.compile(r"<a\s[^>]*(?:name|id)=\"([^\"]+)\"", re.I)
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```+|~~~+)")
EXTERNAL = ("http://", "https://", "mailto:", "ftp://")


def prose_lines(text):
    """(line number, line, line with its inline code spans blanked), outside fenced code."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * 3
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            continue
        yield n, line, re.sub(r"(`+).*?\1", lambda m: " " * len(m.group(0)), line)


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path, cache):
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        seen = {}
        out = set()
        for _, raw, line in prose_lines(text):
            out.update(HTML_ANCHOR.findall(line))
            m = HEADING.match(raw)
            if not m:
                continue
            base = slug(m.group(2))
            k = seen.get(base, 0)
            seen[base] = k + 1
            out.add(base if k == 0 else "%s-%d" % (base, k))
        cache[path] = out
    return cache[path]


def links(text):
    after_blank = True  # a reference definition cannot interrupt a paragraph
    for n, _, line in prose_lines(text):
        for rx in (LINK, HTML_HREF):
            for m in rx.finditer(line):
                yield n, m.group(1)
        m = REF_DEF.match(line) if after_blank else None
        if m:
            yield n, m.group(1)
        after_blank = not line.strip() or m is not None


def check(docs, root):
    """Returns (broken, skipped, checked): lists of 'file:line: message', and how many relative
    links were followed."""
    broken, skipped, cache, checked = [], [], {}, 0
    for doc in docs:
        with open(doc, encoding="utf-8") as f:
            text = f.read()
        name = os.path.relpath(doc, root)
        for n, target in links(text):
            where = "%s:%d" % (name, n)
            if target.startswith(EXTERNAL):
                skipped.append("%s: %s" % (where, target))
                continue
            checked += 1
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
            if not os.path.exists(dest):
                broken.append("%s: %s: no such file %s" % (where, target,
                                                           os.path.relpath(dest, root)))
                continue
            if not anchor:
                continue
            if not dest.endswith(".md") or os.path.isdir(dest):
                broken.append("%s: %s: an anchor into a file that is not markdown" % (where, target))
            elif anchor not in anchors(dest, cache):
                broken.append("%s: %s: %s has no heading or anchor '%s'" %
                              (where, target, os.path.relpath(dest, root), anchor))
    return broken, skipped, checked


def the_docs(source):
    return [os.path.join(source, "README.md")] + sorted(
        glob.glob(os.path.join(source, "docs", "**", "*.md"), recursive=True))


def self_test():
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "docs"))
        with open(os.path.join(d, "docs", "a.md"), "w") as f:
            f.write("# Page A\n\n## Two words, `code` & more\n\n## Page A\n\n<a name=\"custom\"></a>\n")
        with open(os.path.join(d, "README.md"), "w") as f:
            f.write("""# Readme

[good file](docs/a.md) [good anchor](docs/a.md#two-words-code--more)
[repeat](docs/a.md#page-a-1) [html](docs/a.md#custom) [here](#readme)
[external](https://example.com/nowhere) `[in code](nothing.md)`
[not a definition]: nothing.md

```
[in a fence](nothing.md)
```

[ref]: docs/a.md#custom
[broken file](docs/missing.md)
[broken anchor](docs/a.md#no-such-heading)
""")
        broken, skipped, _ = check(the_docs(d), d)
        want = ["README.md:13: docs/missing.md: no such file docs/missing.md",
                "README.md:14: docs/a.md#no-such-heading: docs/a.md has no heading or anchor "
                "'no-such-heading'"]
        ok = broken == want and skipped == ["README.md:5: https://example.com/nowhere"]
        if not ok:
            print("self-test FAILED\nbroken:\n  %s\nwanted:\n  %s\nskipped: %s" %
                  ("\n  ".join(broken), "\n  ".join(want), skipped))
            return 1
        print("self-test: a broken file link and a broken anchor caught, good links pass")
        return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        sys.exit(self_test())
    if not a.source:
        ap.error("--source DIR or --self-test")
    source = os.path.abspath(a.source)
    docs = the_docs(source)
    broken, skipped, checked = check(docs, source)
    for s in skipped:
        print("skipped (external, not fetched): " + s)
    for b in broken:
        print("BROKEN " + b)
    print("%d files: %d relative links followed, %d broken; %d external links skipped" %
          (len(docs), checked, len(broken), len(skipped)))
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
