#!/usr/bin/env python3
"""manpages.py - the man pages (docs/man/) say what the programs' help says, so neither can
change without the other:

  sluiced(8)  every option of `sluiced --help` has an item under OPTIONS, with the same VALUE
              word (`--port PORT`), and the page has no item and names no --option that the
              help does not list;
  sluice(1)   the sections under COMMANDS are the commands of `sluice --help`; the items under
              CONNECTION OPTIONS are its connection options; each command's section names every
              option of `sluice COMMAND --help` and no option that neither it nor the connection
              options have.

Both pages are also rendered by man(1) with its warnings on, when man is installed: a warning
fails the test.

    manpages.py --source DIR --build DIR
    manpages.py --self-test      shows that a page missing an option, naming a stale one or
                                 with a wrong VALUE word fails

Exit status 0 when the pages agree with the help, 1 otherwise (every difference printed).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
ALWAYS = {"-h", "--help"}  # every command takes them; no page needs to repeat them


def unroff(text):
    """The text of roff source as a reader sees it (escapes and fonts out)."""
    text = re.sub(r"\\f[BIRP]", "", text)
    return text.replace("\\-", "-").replace("\\(aq", "'").replace("\\e", "\\")


def sections(page, macro):
    """{heading: body} for each `.SH`/`.SS` heading of the page (macro "SH" or "SS")."""
    out, name = {}, None
    for line in page.split("\n"):
        if line.startswith("." + macro + " "):
            name = line[len(macro) + 2:].strip().strip('"')
            out[name] = []
        elif line.startswith(".SH ") and macro == "SS":
            name = None
        elif name is not None:
            out[name].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def items(body):
    """[(option, value word or None)] of the `.TP` items of a section body."""
    lines, out = body.split("\n"), []
    for i, line in enumerate(lines[:-1]):
        if line.strip() != ".TP":
            continue
        tag = unroff(lines[i + 1])
        m = re.match(r'^\.(?:BI|B|BR)\s+(\S+)(?:\s+"\s*([^"]*)")?', tag)
        if m and m.group(1).startswith("-"):
            out.append((m.group(1), m.group(2) or None))
    return out


def help_options(text):
    """[(option, value word or None)] of help lines '  --name VALUE   text'."""
    out = []
    for line in text.split("\n"):
        m = re.match(r"^  (-[-\w]+)(?:,\s*(--[-\w]+))?(?: ([A-Z][A-Z|]*))?(?:\s{2,}|$)", line)
        if m:
            out.append((m.group(2) or m.group(1), m.group(3)))
    return out


def tokens(text):
    return set(OPTION.findall(text))


def check_sluiced(page, helptext):
    errors = []
    opts = sections(page, "SH").get("OPTIONS", "")
    documented = dict(items(opts))
    listed = dict(help_options(helptext))
    for opt, value in listed.items():
        if opt not in documented:
            errors.append("sluiced(8): no item for %s under OPTIONS" % opt)
        elif documented[opt] != value:
            errors.append("sluiced(8): %s takes %s, the page says %s" % (opt, value, documented[opt]))
    for opt in documented:
        if opt not in listed:
            errors.append("sluiced(8): an item for %s, which sluiced --help does not list" % opt)
    for opt in sorted(t for t in tokens(unroff(page)) if t.startswith("--")):
        if opt not in listed:
            errors.append("sluiced(8): names %s, which sluiced --help does not list" % opt)
    return errors


def help_block(text, title):
    """The lines of a help text from the one starting with title to the next blank line."""
    out, on = [], False
    for line in text.split("\n"):
        if line.startswith(title):
            on = True
        elif on and not line.strip():
            break
        elif on:
            out.append(line)
    return "\n".join(out)


def check_sluice(page, main_help, command_helps):
    errors = []
    top = sections(page, "SH")
    commands = [m.group(1) for m in re.finditer(r"^  (\w+)\s{2,}", help_block(main_help, "Commands:"), re.M)]
    conn = dict(help_options(help_block(main_help, "Connection options")))
    documented = dict(items(top.get("CONNECTION OPTIONS", "")))
    for opt, value in conn.items():
        if documented.get(opt, "missing") != value:
            errors.append("sluice(1): CONNECTION OPTIONS: %s %s is %s" % (
                opt, value or "", "missing" if opt not in documented else "given as %s" % documented[opt]))
    for opt in documented:
        if opt not in conn:
            errors.append("sluice(1): CONNECTION OPTIONS has %s, which sluice --help does not list" % opt)
    subs = sections(page, "SS")
    pages = {name.split()[1]: body for name, body in subs.items() if name.startswith("sluice ")}
    for name in commands:
        if name not in pages:
            errors.append("sluice(1): no section for the command %s" % name)
    for name in pages:
        if name not in commands:
            errors.append("sluice(1): a section for %s, which sluice --help does not list" % name)
    for name in commands:
        if name not in pages or name not in command_helps:
            continue
        own = tokens(command_helps[name]) - set(conn) - ALWAYS
        shown = tokens(unroff(pages[name]))
        for opt in sorted(own - shown):
            errors.append("sluice(1): the section of %s does not name %s (sluice %s --help does)" % (name, opt, name))
        for opt in sorted(shown - own - set(conn) - ALWAYS):
            errors.append("sluice(1): the section of %s names %s, which sluice %s --help does not" % (name, opt, name))
    return errors


def render_warnings(path):
    """man's warnings rendering the page (empty when man is not installed)."""
    if shutil.which("man") is None:
        print("manpages: man is not installed; rendering not checked")
        return []
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8")
    r = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l", path], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    out = r.stderr.strip()
    return ["%s: man: %s" % (os.path.basename(path), out)] if r.returncode != 0 or out else []


def run(program, *args):
    r = subprocess.run([program, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit("manpages: %s %s exited %d:\n%s" % (program, " ".join(args), r.returncode, r.stdout))
    return r.stdout


def self_test():
    helptext = "Options:\n  --port PORT      RESP port\n  --quiet          say less\n  --help           help\n"
    good = ".SH OPTIONS\n.TP\n.BI \\-\\-port \" PORT\"\nx\n.TP\n.B \\-\\-quiet\ny\n.TP\n.B \\-\\-help\nz\n"
    cases = {
        "the page agrees": (good, 0),
        "an option missing": (good.replace(".TP\n.B \\-\\-quiet\ny\n", ""), 1),
        "a wrong VALUE word": (good.replace('" PORT"', '" N"'), 1),
        "a stale item": (good + ".TP\n.B \\-\\-loud\nw\n", 1),
        "a stale mention": (good + ".SH NOTES\nSee \\fB\\-\\-verbose\\fR.\n", 1),
    }
    failed = 0
    for name, (page, want) in cases.items():
        got = len(check_sluiced(page, helptext))
        if (got > 0) != (want > 0):
            print("self-test: %s: %d errors, want %s" % (name, got, "some" if want else "none"))
            failed += 1
    main_help = ("Commands:\n  check      ask\n  info       print\n\nConnection options (x):\n"
                 "  -p PORT          port\n  --json           json\n\n")
    helps = {"check": "usage: sluice check RULE KEY [--cost N]\n", "info": "usage: sluice info\n"}
    page = (".SH CONNECTION OPTIONS\n.TP\n.BI \\-p \" PORT\"\nx\n.TP\n.B \\-\\-json\ny\n.SH COMMANDS\n"
            ".SS \"sluice check\"\n[\\fB\\-\\-cost\\fR \\fIN\\fR]\n.SS \"sluice info\"\nprints\n")
    cli_cases = {
        "the page agrees": (page, 0),
        "a command missing": (page.replace('.SS "sluice info"\nprints\n', ""), 1),
        "a command's option missing": (page.replace("[\\fB\\-\\-cost\\fR \\fIN\\fR]", "[N]"), 1),
        "an option the command lacks": (page.replace("prints", "prints \\-\\-all"), 1),
        "a connection option missing": (page.replace(".TP\n.B \\-\\-json\ny\n", ""), 1),
    }
    for name, (p, want) in cli_cases.items():
        got = len(check_sluice(p, main_help, helps))
        if (got > 0) != (want > 0):
            print("self-test (sluice): %s: %d errors, want %s" % (name, got, "some" if want else "none"))
            failed += 1
    print("manpages self-test: %d of %d cases as expected" % (len(cases) + len(cli_cases) - failed,
                                                              len(cases) + len(cli_cases)))
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source")
    ap.add_argument("--build")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    sluiced = os.path.join(a.build, "src", "server", "sluiced")
    sluice = os.path.join(a.build, "src", "cli", "sluice")
    man8 = os.path.join(a.source, "docs", "man", "sluiced.8")
    man1 = os.path.join(a.source, "docs", "man", "sluice.1")
    errors = check_sluiced(open(man8).read(), run(sluiced, "--help"))
    main_help = run(sluice, "--help")
    commands = [m.group(1) for m in re.finditer(r"^  (\w+)\s{2,}", help_block(main_help, "Commands:"), re.M)]
    helps = {c: run(sluice, c, "--help") for c in commands}
    errors += check_sluice(open(man1).read(), main_help, helps)
    errors += render_warnings(man8) + render_warnings(man1)
    for e in errors:
        print(e)
    print("manpages: sluiced(8) and sluice(1) %s" % ("agree with the help" if not errors else
                                                    "differ from the help in %d ways" % len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
