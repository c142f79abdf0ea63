#!/usr/bin/env python3
"""doctest.py - runs the examples of one markdown document and compares what they print with
what the document shows. Every example in README.md and docs/*.md is either run, checked by
other means, or marked as not runnable with a reason (a block nobody checks fails the test).

    doctest.py --source DIR --build DIR DOC.md

The markup (README.md and docs/ follow it):

  Sessions. A fenced block whose first non-blank line starts with "$ " is a terminal session:
  each "$ " line is a command (it goes on in the lines after it that start with "> ", the
  shell's second prompt, or after a line ending in "\\"), and the lines after it, up to the
  next "$ " line, are what it prints: stdout and stderr as a terminal shows them. A command
  must exit 0, unless the command after it is `echo $?`, which shows its status. A "$ # ..."
  line is a comment to the reader: nothing is run, nothing is printed.

  Where commands run. One bash per document, its output a terminal (so programs print what a
  person sees: redis-cli's "1) (integer) 1", line-buffered stdout), in a fresh directory holding
  examples/, include/ and src/ (the source tree's), a copy of its bindings/ (a package built there
  writes nothing into the source tree: a document that leaves the source tree's bindings/ other
  than it found it, by git status, fails), build/ (the build tree) and a bin/ on PATH with `sluice`
  and `sluiced`. Each document runs in a network namespace of its own, so its servers listen on
  their documented ports (sluiced 6390 and 8390, redis-server 6379, nginx or caddy 80,
  PostgreSQL 5432) on 127.0.0.1 and
  documents run side by side. State carries over from one command to the next within a
  document; every document starts with fresh servers: sluiced with `--rules
  examples/rules.yaml`, as `make run` starts it.

  Directives. HTML comments, not shown when the markdown is rendered:
      <!-- doctest: WORD ARGS -->
  (several lines of directives may share one comment). They apply to the next fenced block,
  except start, which acts where it stands:
      skip REASON            the next block is neither run nor checked; REASON is required
      file NAME              the next block's text is written to NAME in the document's directory
                             (its directories made as needed)
      status N               commands of the next session may exit N as well as 0 (a list of
                             failures, each of which would otherwise need an `echo $?`)
      vary REGEX             in the next session's output, text matching REGEX may differ from
                             what is shown (a time, a date): every match is replaced by <...> in
                             the shown and the actual output alike; a value that must fall in a
                             range is written as a REGEX for that range
      same REGEX             like vary, but the matches are names: each distinct one becomes
                             <1>, <2>, ... in order of first appearance, so a value shown twice
                             must be one value twice in the output too (a SHA1 printed by two
                             commands), and values shown different must differ
      c PRELUDE              the next C block is compiled with tests/docs/PRELUDE put before it
      envoy FILE             the next block, an Envoy configuration (Envoy is not run), is checked
                             against FILE, a rules file of the document (tests/docs/envoy_check.py)
      start sluiced ARGS     stops sluiced and starts it with ARGS (the same store: ./sluice.db)
      start redis [ARGS]     starts redis-server on 6379 (no persistence)
      start redis-module [ARGS]   the same, loading the built sluice.so (ARGS follow its path:
                             the module's arguments)
      start postgres         PostgreSQL on 5432 (a cluster made with initdb in the document's
                             directory on first use, run as nobody when the harness is root;
                             trust authentication, user and database `sluice`), so examples
                             use postgresql://sluice@127.0.0.1:5432/sluice
      start nginx FILE       nginx with FILE, a whole nginx.conf (from a `file` directive), run
                             as it is; the harness adds only what runs it in the sandbox, on the
                             command line: `daemon off`, its pid file, its error log (and `user
                             root` when the harness is root, whose workers would otherwise be
                             nobody, who cannot read the sandbox). Its ports are the `listen`
                             ports of FILE.
      start caddy FILE       caddy in place of nginx (one of them at a time: both serve port 80)
                             with FILE, a whole Caddyfile, run as it is (its data and autosaved
                             configuration in the sandbox); its ports are those of FILE's sites
      start traefik FILE     Traefik's recipe, FILE its static configuration (YAML, or TOML for
                             a .toml name) naming its dynamic configuration with the file
                             provider. Always checked by reading the files: the entry points,
                             the routers' entry points, middlewares and services all defined,
                             a router passing through a forwardAuth middleware, whose address
                             is a rule's GET /v1/auth URL on the document's sluiced, the rule
                             defined there. Then, when a `traefik` binary is on PATH, run as
                             `traefik --configFile=FILE` in place of nginx or caddy, its ports
                             those of its entry points. Traefik is not packaged for Debian:
                             without it, the sessions marked `needs traefik` are not run.
      needs traefik          the next session runs only when `traefik` is on PATH (after `start
                             traefik`); otherwise it is reported as not run, with the reason

  Blocks checked by their language. ```c: compiled with the built libraries (libsluice, and
  libsluice-client when it includes sluice/client.h) and run, in the document's directory with
  its servers up; a fragment without main() is put into one. ```yaml with a top-level `rules:`
  (or envoyproxy/ratelimit's `domain:`): read by sluiced's rules-file parser. ```json: read as a rule by the parser SL.RULE SET uses
  (tests/docs/doc_check.c). Any other block needs `skip REASON` or `file NAME`.

Exit status: 0 when every example is as shown, 1 otherwise (each difference printed with its
line in the document), 77 (skipped) when no network namespace can be made (unshare --net, as
root or in a user namespace) or a program the document needs is not installed.
"""
import argparse
import ctypes
import difflib
import fcntl
import os
import re
import secrets
import select
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import time
import urllib.error
import urllib.parse
import urllib.request

COMMAND_TIMEOUT_S = 60  # one command, start to finish
PORT_TIMEOUT_S = 15  # a server's port accepting connections
NETNS_MARK = "SLUICE_DOCTEST_NETNS"


# ---- the markdown ------------------------------------------------------------------------------

class Block:
    def __init__(self, line, lang, lines, directives):
        self.line = line  # 1-based line of the opening fence
        self.lang = lang
        self.lines = lines  # the body
        self.directives = directives  # [(word, args, line)]

    def directive(self, word):
        return [d for d in self.directives if d[0] == word]

    def is_session(self):
        first = next((l for l in self.lines if l.strip()), "")
        return first.startswith("$ ")


class Step:
    """Something to do in document order: a block, or a `start` directive."""

    def __init__(self, block=None, start=None):
        self.block = block
        self.start = start  # (args, line)


DIRECTIVE_WORDS = {"skip", "file", "vary", "same", "status", "c", "start", "needs", "envoy"}


def parse_directives(text, line, errors):
    out = []
    for i, raw in enumerate(text.split("\n")):
        raw = raw.strip()
        if not raw:
            continue
        word, _, args = raw.partition(" ")
        if word not in DIRECTIVE_WORDS:
            errors.append("%d: unknown doctest directive '%s'" % (line + i, word))
            continue
        if not args.strip():
            errors.append("%d: doctest '%s' needs an argument%s" %
                          (line + i, word, " (the reason)" if word == "skip" else ""))
            continue
        out.append((word, args.strip(), line + i))
    return out


def parse_markdown(text, errors):
    lines = text.split("\n")
    steps = []
    pending = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^\s*<!--\s*doctest:(.*)$", line)
        if m:
            start = i
            body = m.group(1)
            while "-->" not in body and i + 1 < len(lines):
                i += 1
                body += "\n" + lines[i]
            body = body.split("-->", 1)[0]
            for d in parse_directives(body, start + 1, errors):
                if d[0] == "start":
                    steps.append(Step(start=(d[1], d[2])))
                else:
                    pending.append(d)
            i += 1
            continue
        m = re.match(r"^(\s*)(```+|~~~+)\s*([\w+-]*)", line)
        if m:
            indent, fence, lang = m.groups()
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(fence):
                j += 1
            if j >= len(lines):
                errors.append("%d: a fence that is never closed" % (i + 1))
                break
            body = [l[len(indent):] if l.startswith(indent) else l.lstrip() for l in lines[i + 1:j]]
            steps.append(Step(block=Block(i + 1, lang, body, pending)))
            pending = []
            i = j + 1
            continue
        i += 1
    if pending:
        errors.append("%d: doctest directives with no block after them" % pending[0][2])
    return steps


def parse_session(block, errors):
    """[(command, [expected lines], line of the command)]"""
    out = []
    lines = block.lines
    i = 0
    while i < len(lines):
        l = lines[i]
        if not l.startswith("$ "):
            if l.strip():
                errors.append("%d: output before the first command" % (block.line + 1 + i))
            i += 1
            continue
        at = block.line + 1 + i
        cmd = l[2:]
        i += 1
        # continuation lines: after a line ending in "\\", or shown with the shell's "> "
        while i < len(lines) and (cmd.endswith("\\") or lines[i].startswith("> ")):
            nxt = lines[i]
            cmd += "\n" + (nxt[2:] if nxt.startswith("> ") else nxt)
            i += 1
        expected = []
        while i < len(lines) and not lines[i].startswith("$ "):
            expected.append(lines[i])
            i += 1
        while expected and not expected[-1].strip():
            expected.pop()
        out.append((cmd, expected, at))
    return out


def die_with_parent():
    """preexec_fn: the child is killed when the harness dies (a timeout's SIGKILL), so no server
    outlives its test."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


# ---- a terminal session ------------------------------------------------------------------------

class Shell:
    """One bash whose stdout and stderr are a terminal; commands come through a pipe."""

    def __init__(self, cwd, env):
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.ONLCR  # "\n" stays "\n"
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        self.master = master
        self.proc = subprocess.Popen(["bash", "--norc", "--noprofile"], stdin=subprocess.PIPE,
                                     stdout=slave, stderr=slave, cwd=cwd, env=env,
                                     start_new_session=True, preexec_fn=die_with_parent)
        os.close(slave)
        self.buf = b""
        self.send("__dt_rc=0\n")

    def send(self, text):
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()

    def run(self, cmd):
        """Runs cmd; returns (output, exit status), or raises TimeoutError."""
        mark = "__doctest_%s__" % secrets.token_hex(8)
        # $? is restored before each command, so `echo $?` shows the previous command's status;
        # a command reads /dev/null unless it redirects its own input.
        self.send("(exit $__dt_rc)\n{ %s\n} </dev/null\n__dt_rc=$?\nprintf '\\n%s %%d\\n' $__dt_rc\n"
                  % (cmd, mark))
        pattern = re.compile(rb"\n" + mark.encode() + rb" (\d+)\r?\n")
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while True:
            m = pattern.search(self.buf)
            if m:
                out = self.buf[:m.start()]
                self.buf = self.buf[m.end():]
                return out.decode("utf-8", "replace"), int(m.group(1))
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no end after %d s; output so far:\n%s" %
                                   (COMMAND_TIMEOUT_S, self.buf.decode("utf-8", "replace")))
            r, _, _ = select.select([self.master], [], [], min(left, 0.5))
            if r:
                try:
                    data = os.read(self.master, 65536)
                except OSError:
                    data = b""
                if not data:
                    raise TimeoutError("the shell exited; output:\n" +
                                       self.buf.decode("utf-8", "replace"))
                self.buf += data

    def close(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        os.close(self.master)


# ---- servers -----------------------------------------------------------------------------------

class Skip(Exception):
    """A tool the document needs is not installed: the test is skipped (exit 77)."""


def wait_port(port, proc, log):
    deadline = time.monotonic() + PORT_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("exited with %d before listening on %d:\n%s" %
                               (proc.returncode, port, read_tail(log)))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("port %d not open after %d s:\n%s" % (port, PORT_TIMEOUT_S, read_tail(log)))


def read_tail(path, n=4000):
    try:
        with open(path, "rb") as f:
            return f.read()[-n:].decode("utf-8", "replace")
    except OSError:
        return ""


def flag_port(args, flag, default):
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return int(args[i + 1])
        if a.startswith(flag + "="):
            return int(a.split("=", 1)[1])
    return default


class Servers:
    def __init__(self, sandbox, build, env, source):
        self.sandbox = sandbox
        self.build = build
        self.env = env
        self.source = source
        self.procs = {}  # name -> (Popen, log)
        self.sluiced_http = 8390  # the HTTP port of the sluiced running now
        self.have_traefik = False  # after `start traefik`: is it running

    def stop(self, name):
        if name not in self.procs:
            return
        proc, _ = self.procs.pop(name)
        # PostgreSQL's SIGTERM waits for its clients to leave; SIGINT ends their sessions
        proc.send_signal(signal.SIGINT if name == "postgres" else signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def stop_all(self):
        for name in list(self.procs):
            self.stop(name)

    def spawn(self, name, argv, ports, env=None):
        if shutil.which(argv[0], path=self.env["PATH"]) is None:
            raise Skip("%s is not installed" % argv[0])
        self.stop(name)
        log = os.path.join(self.sandbox, ".logs", name + ".log")
        with open(log, "ab") as out:
            proc = subprocess.Popen(argv, cwd=self.sandbox, env=env or self.env, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    preexec_fn=die_with_parent)
        self.procs[name] = (proc, log)
        for port in ports:
            wait_port(port, proc, log)

    def start(self, spec):
        words = spec.split()
        kind, args = words[0], words[1:]
        if kind == "sluiced":
            argv = [os.path.join(self.sandbox, "bin", "sluiced")] + args
            ports = [p for p in (flag_port(args, "--port", 6390), flag_port(args, "--http-port", 8390))
                     if p != 0]
            self.spawn("sluiced", argv, ports)
            self.sluiced_http = flag_port(args, "--http-port", 8390)
        elif kind in ("redis", "redis-module"):
            data = os.path.join(self.sandbox, ".redis")
            os.makedirs(data, exist_ok=True)
            argv = ["redis-server", "--port", "6379", "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--dir", data]
            if kind == "redis-module":
                argv += ["--loadmodule", os.path.join(self.build, "src", "module", "sluice.so")]
            self.spawn("redis", argv + args, [flag_port(args, "--port", 6379)])
        elif kind == "nginx":
            self.start_nginx(args)
        elif kind == "caddy":
            self.start_caddy(args)
        elif kind == "traefik":
            self.start_traefik(args)
        elif kind == "postgres":
            self.start_postgres(args)
        else:
            raise RuntimeError("unknown server '%s' (sluiced, redis, redis-module, nginx, caddy, "
                               "postgres)" % kind)

    def start_postgres(self, args):
        """scripts/postgres.sh (shared with the integration tests) makes and runs the cluster."""
        if args:
            raise RuntimeError("usage: start postgres")
        lib = ". %s && pg_find_bin && " % shlex.quote(
            os.path.join(self.source, "scripts", "postgres.sh"))
        if (subprocess.run(["bash", "-c", lib + "true"], env=self.env).returncode != 0 or
                shutil.which("psql", path=self.env["PATH"]) is None):
            raise Skip("PostgreSQL is not installed")
        d = os.path.join(self.sandbox, ".postgres")
        log = os.path.join(self.sandbox, ".logs", "initdb.log")
        if not os.path.isdir(d) and subprocess.run(
                ["bash", "-c", lib + "pg_initdb %s %s" % (shlex.quote(d), shlex.quote(log))],
                env=self.env).returncode != 0:
            raise RuntimeError("initdb failed:\n" + read_tail(log))
        self.spawn("postgres", ["bash", "-c", lib + "pg_exec_server %s 5432" % shlex.quote(d)],
                   [5432])
        psql = ["psql", "-X", "-q", "-h", "127.0.0.1", "-p", "5432", "-U", "sluice", "-d",
                "postgres", "-c"]
        deadline = time.monotonic() + PORT_TIMEOUT_S
        while subprocess.run(psql + ["SELECT 1"], env=self.env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError("PostgreSQL does not answer:\n" +
                                   read_tail(self.procs["postgres"][1]))
            time.sleep(0.05)
        subprocess.run(psql + ["CREATE DATABASE sluice"], env=self.env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def start_caddy(self, args):
        if len(args) != 1:
            raise RuntimeError("usage: start caddy FILE")
        if shutil.which("caddy", path=self.env["PATH"]) is None:
            raise Skip("caddy is not installed")
        conf = os.path.join(self.sandbox, args[0])
        d = os.path.join(self.sandbox, ".caddy")
        os.makedirs(d, exist_ok=True)
        # certificates and the autosaved configuration go to the sandbox
        env = dict(self.env, XDG_DATA_HOME=os.path.join(d, "data"),
                   XDG_CONFIG_HOME=os.path.join(d, "config"))
        flags = ["--config", conf, "--adapter", "caddyfile"]
        check = subprocess.run(["caddy", "validate"] + flags, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
        if check.returncode != 0:
            raise RuntimeError("caddy validate refuses the configuration:\n" +
                               check.stdout.decode("utf-8", "replace"))
        self.stop("nginx")  # one front proxy at a time: both serve port 80
        self.stop("traefik")
        self.spawn("caddy", ["caddy", "run"] + flags, caddy_ports(conf), env)

    def start_traefik(self, args):
        if len(args) != 1:
            raise RuntimeError("usage: start traefik FILE")
        static = os.path.join(self.sandbox, args[0])
        ports = check_traefik(static, self.sandbox, self.sluiced_http)
        self.have_traefik = shutil.which("traefik", path=self.env["PATH"]) is not None
        if not self.have_traefik:
            return
        for other in ("nginx", "caddy"):  # one front proxy at a time
            self.stop(other)
        self.spawn("traefik", ["traefik", "--configFile=" + static], ports)
        # The entry point listens before the file provider's routers are in place; Traefik
        # reads the file at start, within milliseconds.
        time.sleep(1)

    def start_nginx(self, args):
        if len(args) != 1:
            raise RuntimeError("usage: start nginx FILE")
        if shutil.which("nginx", path=self.env["PATH"]) is None:
            raise Skip("nginx is not installed")
        conf = os.path.join(self.sandbox, args[0])
        d = os.path.join(self.sandbox, ".nginx")
        os.makedirs(d, exist_ok=True)
        # what runs nginx here rather than as a service; the configuration is the file's alone
        glob = "daemon off; pid %s/nginx.pid;" % d
        if os.geteuid() == 0:
            glob += " user root;"
        argv = ["nginx", "-p", self.sandbox, "-c", conf, "-e", os.path.join(d, "error.log"),
                "-g", glob]
        check = subprocess.run(argv + ["-t"], env=self.env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
        if check.returncode != 0:
            raise RuntimeError("nginx -t refuses the configuration:\n" +
                               check.stdout.decode("utf-8", "replace"))
        self.stop("caddy")  # one front proxy at a time: both serve port 80
        self.stop("traefik")
        self.spawn("nginx", argv, nginx_ports(conf))


def nginx_ports(conf):
    """The ports of an nginx.conf's `listen` directives (80 for a listen without one)."""
    with open(conf) as f:
        text = re.sub(r"#.*", "", f.read())
    ports = []
    for m in re.finditer(r"\blisten\s+([^\s;]+)", text):
        p = re.search(r"(?:^|:)(\d+)$", m.group(1))
        ports.append(int(p.group(1)) if p else 80)
    return sorted(set(ports)) or [80]


def caddy_ports(conf):
    """The ports of a Caddyfile's site addresses (top-level lines that open a block)."""
    ports = []
    with open(conf) as f:
        for line in f:
            m = re.match(r"^([^\s{#][^{#]*?)\s*\{\s*$", line)
            if not m:
                continue
            for addr in m.group(1).replace(",", " ").split():
                p = re.search(r":(\d+)$", addr)
                ports.append(int(p.group(1)) if p else 443 if addr.startswith("https") else 80)
    return sorted(set(ports)) or [80]


def load_config(path):
    """A YAML or (by its name) TOML file as Python values; RuntimeError naming what is wrong."""
    try:
        if path.endswith(".toml"):
            import tomllib
            with open(path, "rb") as f:
                return tomllib.load(f)
        import yaml
        with open(path) as f:
            return yaml.safe_load(f)
    except OSError as e:
        raise RuntimeError("cannot read %s: %s" % (os.path.basename(path), e))
    except Exception as e:  # yaml.YAMLError, tomllib.TOMLDecodeError
        raise RuntimeError("%s does not parse: %s" % (os.path.basename(path), e))


def check_traefik(static_path, sandbox, sluiced_http):
    """Reads a Traefik recipe, its static configuration and the dynamic one its file provider
    names, and checks that its parts refer to each other and that a forwardAuth asks sluiced:
    what would make Traefik refuse it, route nothing, or never ask sluiced. Returns the entry
    points' ports; raises RuntimeError naming the first fault."""
    name = os.path.basename(static_path)
    static = load_config(static_path)
    if not isinstance(static, dict):
        raise RuntimeError("%s: not a mapping" % name)
    eps = static.get("entryPoints")
    if not isinstance(eps, dict) or not eps:
        raise RuntimeError("%s: no entryPoints" % name)
    ports = []
    for ep, conf in eps.items():
        m = re.search(r":(\d+)$", str((conf or {}).get("address", "")))
        if not m:
            raise RuntimeError("%s: entry point '%s' has no address [host]:port" % (name, ep))
        ports.append(int(m.group(1)))
    provider = (static.get("providers") or {}).get("file") or {}
    if not provider.get("filename"):
        raise RuntimeError("%s: no providers.file.filename (the dynamic configuration)" % name)
    dyn_name = provider["filename"]
    dyn = load_config(os.path.join(sandbox, dyn_name))
    http = (dyn or {}).get("http") if isinstance(dyn, dict) else None
    if not isinstance(http, dict):
        raise RuntimeError("%s: no http section" % dyn_name)
    routers = http.get("routers") or {}
    middlewares = http.get("middlewares") or {}
    services = http.get("services") or {}
    if not routers:
        raise RuntimeError("%s: no routers" % dyn_name)
    asks = []  # forwardAuth middlewares a router passes through
    for rname, r in routers.items():
        where = "%s: router '%s'" % (dyn_name, rname)
        if not (r or {}).get("rule"):
            raise RuntimeError("%s has no rule" % where)
        for ep in r.get("entryPoints") or []:
            if ep not in eps:
                raise RuntimeError("%s names entry point '%s', which %s does not define" %
                                   (where, ep, name))
        for mw in r.get("middlewares") or []:
            mw = mw.split("@", 1)[0] if str(mw).endswith("@file") else mw
            if mw not in middlewares:
                raise RuntimeError("%s names middleware '%s', which is not defined" % (where, mw))
            if "forwardAuth" in (middlewares[mw] or {}):
                asks.append(mw)
        svc = r.get("service")
        if svc not in services:
            raise RuntimeError("%s names service '%s', which is not defined" % (where, svc))
    for sname, svc in services.items():
        servers = ((svc or {}).get("loadBalancer") or {}).get("servers") or []
        if not servers or not all(re.match(r"^https?://", str(s.get("url", ""))) for s in servers):
            raise RuntimeError("%s: service '%s' has no loadBalancer servers with a url" %
                               (dyn_name, sname))
    if not asks:
        raise RuntimeError("%s: no router passes through a forwardAuth middleware" % dyn_name)
    for mw in asks:
        address = str(middlewares[mw]["forwardAuth"].get("address", ""))
        m = re.match(r"^http://(?:127\.0\.0\.1|localhost):(\d+)/v1/auth/([^/?#]+)(\?.*)?$",
                     address)
        if not m or int(m.group(1)) != sluiced_http:
            raise RuntimeError("%s: middleware '%s': forwardAuth address %r is not sluiced's "
                               "http://127.0.0.1:%d/v1/auth/RULE" % (dyn_name, mw, address,
                                                                   sluiced_http))
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/v1/rules/%s" %
                                   (sluiced_http, urllib.parse.quote(m.group(2))), timeout=5)
        except urllib.error.HTTPError as e:
            raise RuntimeError("%s: middleware '%s' asks about rule '%s', which sluiced does not "
                               "have (GET /v1/rules/%s: %d)" % (dyn_name, mw, m.group(2),
                                                                m.group(2), e.code))
        except OSError as e:
            raise RuntimeError("sluiced does not answer on %d: %s" % (sluiced_http, e))
    return sorted(set(ports))


# ---- checks ------------------------------------------------------------------------------------

def normalise(text, regexes):
    """regexes: [(compiled, named)]. A match of a `vary` regex becomes <...>; each distinct
    match of a `same` regex becomes <k> (<r:k> for the r-th regex), numbered in order of first
    appearance."""
    for r, (rx, named) in enumerate(regexes, 1):
        seen = {}

        def sub(m):
            if not named:
                return "<...>"
            if m.group(0) not in seen:
                k = len(seen) + 1
                seen[m.group(0)] = "<%d>" % k if len(regexes) == 1 else "<%d:%d>" % (r, k)
            return seen[m.group(0)]

        text = rx.sub(sub, text)
    return text


ANSI_SGR = re.compile(r"\x1b\[[0-9;]*m")


def clean(output):
    """What a person reads in a terminal's output, as lines: no CRs, no colours or bold (curl
    prints header names in bold on a terminal), no trailing blanks or blank lines."""
    lines = [l.rstrip() for l in ANSI_SGR.sub("", output.replace("\r", "")).split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


class Doc:
    def __init__(self, path, source, build):
        self.path = path
        inside = os.path.commonpath([path, source]) == source
        self.name = os.path.relpath(path, source) if inside else path
        self.source = source
        self.build = build
        self.failures = []
        self.checked = 0
        self.skipped = None  # why the document could not run
        self.not_run = []  # sessions a missing program kept from running (`needs`)
        self.envoy_blocks = []  # (block, its rules file), checked once the document has run

    def fail(self, line, msg):
        self.failures.append("%s:%d: %s" % (self.name, line, msg))

    # -- sessions --

    def run_session(self, shell, block, errors):
        steps = parse_session(block, errors)
        regexes = []
        for word, args, line in block.directives:
            if word not in ("vary", "same"):
                continue
            try:
                regexes.append((re.compile(args, re.M), word == "same"))
            except re.error as e:
                self.fail(line, "%s: bad regex %r: %s" % (word, args, e))
                return
        allowed = {0}
        for _, args, line in block.directive("status"):
            if not args.isdigit():
                self.fail(line, "status: not an exit status: %r" % args)
                return
            allowed.add(int(args))
        results = []
        for idx, (cmd, expected, line) in enumerate(steps):
            if cmd.lstrip().startswith("#") and "\n" not in cmd:
                results.append((cmd, expected, [], line))  # a comment: nothing runs
                continue
            try:
                out, rc = shell.run(cmd)
            except TimeoutError as e:
                self.fail(line, "`%s`: %s" % (cmd, e))
                return False
            self.checked += 1
            next_is_echo = idx + 1 < len(steps) and steps[idx + 1][0].strip() == "echo $?"
            if rc not in allowed and not next_is_echo:
                self.fail(line, "`%s` exited with status %d (show it with `echo $?` if that is "
                                "what the example means); it printed:\n%s" % (cmd, rc, out))
            results.append((cmd, expected, clean(out), line))
        # one normalisation over the whole session, so a value shown in two commands' outputs
        # must be one value in both
        sep = "\n\x00\n"  # on lines of its own, so ^ and $ work at each output's edges
        shown_all = normalise(sep.join("\n".join(e) for _, e, _, _ in results), regexes)
        actual_all = normalise(sep.join("\n".join(a) for _, _, a, _ in results), regexes)
        shown = shown_all.split(sep)
        actual = actual_all.split(sep)
        for (cmd, _, _, line), s, a in zip(results, shown, actual):
            if s != a:
                diff = "\n".join(difflib.unified_diff(s.split("\n"), a.split("\n"), "shown",
                                                      "printed", lineterm=""))
                self.fail(line, "`%s` printed something else:\n%s" % (cmd, diff))
        return True

    # -- blocks checked by other means --

    def check_c(self, block, sandbox, env):
        text = "\n".join(block.lines) + "\n"
        prelude = ""
        for _, args, line in block.directive("c"):
            with open(os.path.join(self.source, "tests", "docs", args)) as f:
                prelude += f.read()
        includes = [l for l in text.split("\n") if l.startswith("#include")]
        body = [l for l in text.split("\n") if not l.startswith("#include")]
        src = "#include <stdio.h>\n#include <stdlib.h>\n" + "\n".join(includes) + "\n" + prelude
        if re.search(r"\bmain\s*\(", text):
            src += "\n".join(body)
        else:
            src += ("\nint main(void)\n{\n#ifdef DOCTEST_SETUP\n    DOCTEST_SETUP\n#endif\n" +
                    "\n".join(body) + "\n    return 0;\n}\n")
        cfile = os.path.join(sandbox, ".c", "block%d.c" % block.line)
        os.makedirs(os.path.dirname(cfile), exist_ok=True)
        with open(cfile, "w") as f:
            f.write(src)
        exe = cfile[:-2]
        libs = [os.path.join(self.build, "src", "libsluice.a"), "-lpthread", "-lm"]
        if "sluice/client.h" in src:
            libs = [os.path.join(self.build, "src", "client", "libsluice-client.a"), "-lhiredis",
                    "-luv"] + libs
        cc = ["cc", "-std=gnu11", "-Wall", "-Werror", "-Wno-unused-variable",
              "-Wno-unused-function", "-I", os.path.join(self.source, "include"), "-I",
              os.path.join(self.build, "include"), cfile, "-o", exe] + libs
        r = subprocess.run(cc, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            self.fail(block.line, "the C example does not compile (%s):\n%s" %
                      (cfile, r.stdout.decode("utf-8", "replace")))
            return
        r = subprocess.run([exe], cwd=sandbox, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=COMMAND_TIMEOUT_S)
        if r.returncode != 0:
            self.fail(block.line, "the C example exits with %d:\n%s" %
                      (r.returncode, r.stdout.decode("utf-8", "replace")))
        self.checked += 1

    def check_parsed(self, block, sandbox, kind):
        path = os.path.join(sandbox, ".c", "block%d.%s" % (block.line, kind))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("\n".join(block.lines) + "\n")
        tool = os.path.join(self.build, "tests", "doc_check")
        r = subprocess.run([tool, kind, path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            self.fail(block.line, "sluiced's parser refuses this %s:\n%s" %
                      ("rules file" if kind == "rules" else "rule",
                       r.stdout.decode("utf-8", "replace")))
        self.checked += 1

    def check_envoy(self, block, sandbox, name):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import envoy_check  # python3-yaml: only documents with an `envoy` block need it
        for p in envoy_check.check_file("\n".join(block.lines), os.path.join(sandbox, name)):
            self.fail(block.line, "this Envoy configuration: %s" % p)
        self.checked += 1

    # -- the document --

    def run(self):
        errors = []
        with open(self.path) as f:
            steps = parse_markdown(f.read(), errors)
        for e in errors:
            self.failures.append("%s:%s" % (self.name, e))
        if errors:
            return
        tree_before = bindings_state(self.source)
        sandbox = tempfile.mkdtemp(prefix="sluice-doc.")
        env = make_env(sandbox)
        prepare_sandbox(sandbox, self.source, self.build)
        servers = Servers(sandbox, self.build, env, self.source)
        shell = None
        try:
            servers.start("sluiced --rules examples/rules.yaml")
            shell = Shell(sandbox, env)
            for step in steps:
                if step.start is not None:
                    try:
                        servers.start(step.start[0])
                    except RuntimeError as e:
                        self.fail(step.start[1], "start %s: %s" % (step.start[0], e))
                        return
                    continue
                if not self.run_block(step.block, shell, sandbox, env, servers):
                    return
            for block, name in self.envoy_blocks:
                self.check_envoy(block, sandbox, name)
        except RuntimeError as e:
            self.failures.append("%s: %s" % (self.name, e))
        except Skip as e:
            self.skipped = str(e)
        finally:
            if shell is not None:
                shell.close()
            servers.stop_all()
            tree_after = bindings_state(self.source)
            if tree_after != tree_before:
                self.failures.append(
                    "%s: running it changed the source tree's bindings/ (git status --porcelain "
                    "--ignored bindings/):\nbefore:\n%s\nafter:\n%s"
                    % (self.name, tree_before, tree_after))
            if self.failures and os.environ.get("SLUICE_DOCTEST_KEEP"):
                print("kept %s" % sandbox)
            else:
                shutil.rmtree(sandbox, ignore_errors=True)

    def run_block(self, block, shell, sandbox, env, servers):
        """Returns False when the rest of the document cannot go on."""
        skip = block.directive("skip")
        files = block.directive("file")
        if skip:
            if len(block.directives) > 1:
                self.fail(block.line, "a skipped block takes no other directive")
            return True
        for _, name, _ in block.directive("envoy"):
            self.envoy_blocks.append((block, name))  # checked once every file is written
            return True
        for _, name, _ in files:
            os.makedirs(os.path.dirname(os.path.join(sandbox, name)), exist_ok=True)
            with open(os.path.join(sandbox, name), "w") as f:
                f.write("\n".join(block.lines) + "\n")
        errors = []
        for _, what, line in block.directive("needs"):
            if what != "traefik":
                self.fail(line, "needs: only `needs traefik` is known")
                return True
            if not servers.have_traefik:
                self.not_run.append("%s:%d: not run: traefik is not installed" %
                                    (self.name, block.line))
                return True
        if block.is_session():
            ok = self.run_session(shell, block, errors)
            for e in errors:
                self.failures.append("%s:%s" % (self.name, e))
            return ok is not False
        if block.directive("vary") or block.directive("same"):
            self.fail(block.line, "vary and same apply to sessions only")
        if block.lang == "c":
            self.check_c(block, sandbox, env)
        elif block.lang == "yaml" and any(l.startswith(("rules:", "domain:"))
                                           for l in block.lines):
            self.check_parsed(block, sandbox, "rules")
        elif block.lang == "json":
            self.check_parsed(block, sandbox, "rule")
        elif not files:
            self.fail(block.line, "a block that is neither run nor checked: make it a session "
                                  "(\"$ \" commands), or say why not (<!-- doctest: skip REASON -->)")
        return True


def make_env(sandbox):
    env = {k: v for k, v in os.environ.items()
           if k not in ("SLUICE_PASSWORD", "SLUICE_REQUIREPASS", "SLUICE_ADMIN_TOKEN",
                        "REDISCLI_AUTH", "LD_LIBRARY_PATH", "PKG_CONFIG_PATH")}
    env.update({
        "HOME": sandbox,
        # nginx lives in /usr/sbin, which a user's PATH may lack
        "PATH": os.path.join(sandbox, "bin") + ":" + os.environ.get("PATH", "/usr/bin:/bin") +
        ":/usr/sbin:/sbin",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "LC_ALL": "C.UTF-8",
        "REDISCLI_HISTFILE": "/dev/null",
        "REDISCLI_RCFILE": "/dev/null",
    })
    return env


def bindings_state(source):
    """`git status --porcelain --ignored bindings/` of the source tree, or None when it is not a
    git checkout: a document must leave the packages' sources as it found them (a wheel built in
    place leaves build/ and *.egg-info there, which later wheels would pack)."""
    if shutil.which("git") is None or not os.path.exists(os.path.join(source, ".git")):
        return None
    r = subprocess.run(["git", "-C", source, "status", "--porcelain", "--ignored", "bindings/"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True)
    return r.stdout if r.returncode == 0 else None


def prepare_sandbox(sandbox, source, build):
    os.makedirs(os.path.join(sandbox, "bin"))
    os.makedirs(os.path.join(sandbox, ".logs"))
    os.symlink(os.path.join(build, "src", "cli", "sluice"), os.path.join(sandbox, "bin", "sluice"))
    os.symlink(os.path.join(build, "src", "server", "sluiced"),
               os.path.join(sandbox, "bin", "sluiced"))
    os.symlink(os.path.join(source, "examples"), os.path.join(sandbox, "examples"))
    os.symlink(os.path.join(source, "src"), os.path.join(sandbox, "src"))
    os.symlink(os.path.join(source, "include"), os.path.join(sandbox, "include"))
    # a copy, not a link: a document that builds a package (pip wheel bindings/python) writes
    # beside its sources, and must not write into the source tree (what it leaves there, build/
    # and *.egg-info, later wheels would pack)
    shutil.copytree(os.path.join(source, "bindings"), os.path.join(sandbox, "bindings"),
                    symlinks=True, ignore=shutil.ignore_patterns(
                        "node_modules", "build", "dist", "*.egg-info", "__pycache__"))
    os.symlink(build, os.path.join(sandbox, "build"))


def loopback_up():
    """ip link set lo up, without iproute2: SIOCGIFFLAGS, then SIOCSIFFLAGS with IFF_UP."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sh", fcntl.ioctl(s, siocgifflags, struct.pack("16sh", b"lo", 0)))[1]
        fcntl.ioctl(s, siocsifflags, struct.pack("16sh", b"lo", flags | iff_up))


def enter_netns():
    """Re-runs this script in a network namespace of its own, loopback up."""
    if os.environ.get(NETNS_MARK) == "1":
        try:
            loopback_up()
        except OSError as e:
            print("skipped: cannot bring up loopback in the network namespace: %s" % e)
            sys.exit(77)
        return
    for unshare in (["unshare", "--net"], ["unshare", "--user", "--map-root-user", "--net"]):
        if shutil.which("unshare") and subprocess.run(
                unshare + ["true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
            env = dict(os.environ)
            env[NETNS_MARK] = "1"
            os.execvpe(unshare[0], unshare + [sys.executable] + sys.argv, env)
    print("skipped: needs a network namespace of its own (unshare --net, as root or with user "
          "namespaces)")
    sys.exit(77)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("doc")
    a = ap.parse_args()
    for tool in ("bash", "cc", "redis-cli", "curl"):
        if shutil.which(tool) is None:
            print("skipped: %s is not installed" % tool)
            sys.exit(77)
    enter_netns()
    doc = Doc(os.path.abspath(a.doc), os.path.abspath(a.source), os.path.abspath(a.build))
    doc.run()
    if doc.skipped is not None and not doc.failures:
        print("skipped: %s" % doc.skipped)
        sys.exit(77)
    for f in doc.failures:
        print("FAIL " + f + "\n")
    for n in doc.not_run:
        print(n)
    print("%s: %d examples checked, %d failures" % (doc.name, doc.checked, len(doc.failures)))
    sys.exit(1 if doc.failures else 0)


if __name__ == "__main__":
    main()
