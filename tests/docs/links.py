#!/usr/bin/env python3
"""links.py - every relative link in README.md, docs/**/*.md and the packages' READMEs
(bindings/*/README.md) leads somewhere: the file or
directory exists, and an #anchor names a heading of the target markdown file (GitHub's rule: the
heading's text lowercased, punctuation other than "-" and "_" dropped, spaces made "-", a repeat
suffixed -1, -2, ...) or an explicit <a name=...>/id=... there. External links (http, https,
mailto) are not fetched: they are listed as skipped. Links inside code (fenced blocks, `spans`)
are not links.

Every user page (README.md, docs/*.md, bindings/*/README.md) longer than TOC_MIN_LINES lines, about a screen and a
half, and every page of docs/dev/ longer than DEV_TOC_MIN_LINES, has a table of contents: the
lines between "<!-- toc -->" and "<!-- /toc -->", a list of links to its headings (levels 1 to 3
but the title), which must be exactly what toc() makes of the page as it stands, so it cannot go
stale. --write-toc writes it (before the page's first section heading when it has none yet; in
README.md, below the opening commands, where it stands).

User pages (README.md, docs/*.md and the packages' READMEs, not docs/dev/) speak to users: their prose (code aside)
cites no section of the specification (SPEC, §) and no tracker number (#123, issue 123).

    links.py --source DIR        check the source tree's docs; exit 0 when all resolve and every
                                 table of contents is current, 1 if not
    links.py --source DIR --write-toc   (re)write the tables of contents, then check
    links.py --source DIR --outside PATH..   the same, but a link to PATH (a file or folder
                                 relative to DIR, e.g. the source tree's src/ where DIR is the
                                 docs a package installs) is listed as outside, not followed
    links.py --self-test         a broken file link, a broken anchor and a stale table of
                                 contents are each caught, and good links of each kind pass
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
TOC_MIN_LINES = 80
DEV_TOC_MIN_LINES = 200
TOC_BEGIN = "<!-- toc -->"
TOC_END = "<!-- /toc -->"
INTERNAL_REF = re.compile(r"\bSPEC(\.md)?\b|§|\bissues?\s+#?\d+|(?<![\w&/])#\d+\b")


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


def headings(text):
    """(level, text, anchor) of each heading outside fenced code, anchors as GitHub makes them."""
    seen, out = {}, []
    for _, raw, _ in prose_lines(text):
        m = HEADING.match(raw)
        if not m:
            continue
        base = slug(m.group(2))
        k = seen.get(base, 0)
        seen[base] = k + 1
        out.append((len(m.group(1)), m.group(2), base if k == 0 else "%s-%d" % (base, k)))
    return out


def toc(text):
    """The table of contents of a page, markers included: every heading of levels 1 to 3 but
    the first (the title), indented by level (by level - 2 when the page has one title only)."""
    hs = headings(text)[1:]
    hs = [h for h in hs if h[0] <= 3]
    top = 1 if any(h[0] == 1 for h in hs) else 2
    lines = [TOC_BEGIN]
    for level, title, anchor in hs:
        title = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", title)
        lines.append("%s- [%s](#%s)" % ("  " * (level - top), title, anchor))
    lines.append(TOC_END)
    return "\n".join(lines)


def toc_span(text):
    """(start, end) offsets of the page's table of contents, markers included, or None."""
    a = text.find(TOC_BEGIN)
    if a < 0:
        return None
    b = text.find(TOC_END, a)
    return None if b < 0 else (a, b + len(TOC_END))


def toc_min_lines(doc, root):
    """The length past which the page needs a table of contents, or None: it never does."""
    name = os.path.relpath(doc, root)
    if name.startswith(os.path.join("docs", "dev") + os.sep):
        return DEV_TOC_MIN_LINES
    if name == "README.md" or name.startswith("docs" + os.sep) or name.startswith(
            "bindings" + os.sep):
        return TOC_MIN_LINES
    return None


def needs_toc(doc, text, root):
    least = toc_min_lines(doc, root)
    return least is not None and text.count("\n") > least


def toc_problem(doc, text, root):
    """None when the page's table of contents is current (or it needs none), else a message."""
    if not needs_toc(doc, text, root):
        return None
    span = toc_span(text)
    name = os.path.relpath(doc, root)
    if span is None:
        return "%s: over %d lines and no table of contents (%s ... %s)" % (
            name, toc_min_lines(doc, root), TOC_BEGIN, TOC_END)
    if text[span[0]:span[1]] != toc(text):
        return "%s: its table of contents is not its headings' (links.py --write-toc rewrites it)" % name
    return None


def write_toc(doc, root):
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    if not needs_toc(doc, text, root):
        return
    span = toc_span(text)
    if span is None:
        lines = text.split("\n")
        first = next((n for n, raw, _ in prose_lines(text) if n > 1 and HEADING.match(raw)), None)
        at = len("\n".join(lines[:first - 1])) + 1 if first else len(text)
        text = text[:at] + toc(text) + "\n\n" + text[at:]
    else:
        text = text[:span[0]] + toc(text) + text[span[1]:]
    span = toc_span(text)  # the links of a new table of contents are not headings: one pass
    text = text[:span[0]] + toc(text) + text[span[1]:]
    with open(doc, "w", encoding="utf-8") as f:
        f.write(text)


def internal_refs(doc, text, root):
    """'file:line: message' for each citation of the specification or a tracker number in a user
    page's prose (link targets and HTML tags aside)."""
    name = os.path.relpath(doc, root)
    if name.startswith(os.path.join("docs", "dev") + os.sep):
        return []
    out = []
    for n, _, line in prose_lines(text):
        line = re.sub(r"<[^>]+>", "", re.sub(r"\]\([^)]*\)", "](x)", line))
        for m in INTERNAL_REF.finditer(line):
            out.append("%s:%d: '%s': a user page cites the specification or a tracker number" %
                       (name, n, m.group(0)))
    return out


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


def check(docs, root, outside=()):
    """Returns (broken, skipped, checked): lists of 'file:line: message', and how many relative
    links were followed. A link into one of the paths `outside` (relative to root) is skipped."""
    broken, skipped, cache, checked = [], [], {}, 0
    for doc in docs:
        with open(doc, encoding="utf-8") as f:
            text = f.read()
        name = os.path.relpath(doc, root)
        problem = toc_problem(doc, text, root)
        if problem:
            broken.append(problem)
        broken.extend(internal_refs(doc, text, root))
        for n, target in links(text):
            where = "%s:%d" % (name, n)
            if target.startswith(EXTERNAL):
                skipped.append("%s: %s" % (where, target))
                continue
            checked += 1
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
            rel = os.path.relpath(dest, root)
            if any(rel == o or rel.startswith(o.rstrip("/") + "/") for o in outside):
                skipped.append("%s: %s (outside)" % (where, target))
                checked -= 1
                continue
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
        glob.glob(os.path.join(source, "docs", "**", "*.md"), recursive=True)) + sorted(
        glob.glob(os.path.join(source, "bindings", "*", "README.md")))


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
        long_page = "# Long\n\nIntro.\n\n## One\n\n" + "text\n" * TOC_MIN_LINES + \
            "```\n# not a heading\n```\n\n### One, `two`\n\n## One\n"
        for name in ("long.md", "stale.md", "none.md"):
            with open(os.path.join(d, "docs", name), "w") as f:
                f.write(long_page)
        write_toc(os.path.join(d, "docs", "long.md"), d)
        with open(os.path.join(d, "docs", "long.md")) as f:
            written = f.read()
        want_toc = "\n".join([TOC_BEGIN, "- [One](#one)", "  - [One, `two`](#one-two)",
                              "- [One](#one-1)", TOC_END])
        if toc_span(written) is None or written[slice(*toc_span(written))] != want_toc or \
                written.index(TOC_END) > written.index("## One"):
            print("self-test FAILED: the written table of contents:\n" + written[:300])
            return 1
        with open(os.path.join(d, "docs", "stale.md"), "w") as f:
            f.write(written.replace("## One\n", "## Two\n", 1))
        broken, skipped, _ = check(the_docs(d), d)
        want = ["README.md:13: docs/missing.md: no such file docs/missing.md",
                "README.md:14: docs/a.md#no-such-heading: docs/a.md has no heading or anchor "
                "'no-such-heading'",
                "docs/none.md: over %d lines and no table of contents (%s ... %s)" %
                (TOC_MIN_LINES, TOC_BEGIN, TOC_END),
                "docs/stale.md: its table of contents is not its headings' (links.py --write-toc "
                "rewrites it)",
                "docs/stale.md:8: #one-1: docs/stale.md has no heading or anchor 'one-1'"]
        broken.sort()
        want.sort()
        ok = broken == want and skipped == ["README.md:5: https://example.com/nowhere"]
        if not ok:
            print("self-test FAILED\nbroken:\n  %s\nwanted:\n  %s\nskipped: %s" %
                  ("\n  ".join(broken), "\n  ".join(want), skipped))
            return 1
        with open(os.path.join(d, "docs", "cites.md"), "w") as f:
            f.write("# Cites\n\nAs SPEC §5 says, see #1234 and `#99 in code` ([x](a.md#custom)).\n")
        os.makedirs(os.path.join(d, "docs", "dev"))
        with open(os.path.join(d, "docs", "dev", "ok.md"), "w") as f:
            f.write("# Dev\n\nSPEC §5, issue 12.\n")
        broken, _, _ = check(the_docs(d), d)
        cites = [b for b in broken if "a user page cites" in b]
        if [b.split(": ")[1] for b in cites] != ["'SPEC'", "'§'", "'#1234'"] or \
                any("dev/ok.md" in b for b in broken):
            print("self-test FAILED: citations found: %s" % cites)
            return 1
        broken, skipped, _ = check(the_docs(d), d, ("docs/missing.md",))
        if any("missing" in b for b in broken) or \
                "README.md:13: docs/missing.md (outside)" not in skipped:
            print("self-test FAILED: a link outside was followed: %s %s" % (broken, skipped))
            return 1
        # the README counts as a user page; a page of docs/dev/ needs one only past its own length
        with open(os.path.join(d, "README.md"), "a") as f:
            f.write("\n## More\n" + "text\n" * TOC_MIN_LINES)
        with open(os.path.join(d, "docs", "dev", "ok.md"), "a") as f:
            f.write("\n## More\n" + "text\n" * TOC_MIN_LINES)
        broken, _, _ = check(the_docs(d), d)
        tocs = sorted(b for b in broken if "table of contents" in b and "none.md" not in b and
                      "stale.md" not in b)
        if tocs != ["README.md: over %d lines and no table of contents (%s ... %s)" %
                    (TOC_MIN_LINES, TOC_BEGIN, TOC_END)]:
            print("self-test FAILED: tables of contents wanted of a long README only: %s" % tocs)
            return 1
        print("self-test: a broken file link, a broken anchor, a missing and a stale table of "
              "contents (a long README's too), a user page citing the specification or a tracker "
              "number caught; good links, links outside and a written table of contents pass")
        return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--write-toc", action="store_true")
    ap.add_argument("--outside", nargs="*", default=[])
    a = ap.parse_args()
    if a.self_test:
        sys.exit(self_test())
    if not a.source:
        ap.error("--source DIR or --self-test")
    source = os.path.abspath(a.source)
    docs = the_docs(source)
    if a.write_toc:
        for doc in docs:
            write_toc(doc, source)
    broken, skipped, checked = check(docs, source, a.outside)
    for s in skipped:
        print("skipped (external, not fetched): " + s)
    for b in broken:
        print("BROKEN " + b)
    print("%d files: %d relative links followed, %d broken; %d external or outside links skipped" %
          (len(docs), checked, len(broken), len(skipped)))
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
