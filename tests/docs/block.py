#!/usr/bin/env python3
"""block.py - prints the text of one example of a document: the block marked
`<!-- doctest: file NAME -->`, as doctest.py writes it. The integration tests run a recipe of
the documentation from its own text this way, so the document and the test cannot drift.

    block.py DOC.md NAME

Exit status: 0, or 1 when DOC has no block for NAME (or more than one).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from doctest import parse_markdown  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: block.py DOC.md NAME")
    doc, name = sys.argv[1:]
    errors = []
    with open(doc) as f:
        steps = parse_markdown(f.read(), errors)
    found = [s.block for s in steps if s.block is not None and
             any(d[1] == name for d in s.block.directive("file"))]
    if errors or len(found) != 1:
        sys.exit("block.py: %s: %s" % (doc, "; ".join(errors) if errors else
                                       "%d blocks for file %s (one wanted)" % (len(found), name)))
    sys.stdout.write("\n".join(found[0].lines) + "\n")


if __name__ == "__main__":
    main()
