"""netlab.py - the fault harness: nodes in network namespaces of their own, and the faults a
fleet meets, each bounded in time and undone by the harness.

A Lab makes, as root, a hub namespace holding a bridge and one namespace per node, each joined
to the bridge by a veth pair whose both ends are created inside namespaces (nothing is added
to the host's namespace), the node's end 10.77.0.N/24. Every address a test uses is inside
these namespaces. Processes run in a node's namespace (`ip netns exec`, which execs: the PID
recorded is the program's) and are stopped by that PID.

Faults (each returns after undoing itself when given a duration, or hands back an undo):
  partition(a, b)        nftables rules in every node of a and of b drop (or reset: TCP RST /
                         ICMP unreachable) what goes between the two sets
  loss(node, percent)    nftables drops that share of the node's packets, both ways
  proxy delay/reset/hang the FaultProxy (faultproxy.py) between a client and a server: tc's
                         netem is not in every kernel (not in this one), so a slow link is a
                         proxy of ours that holds each chunk for a delay
  pause(proc)            SIGSTOP, then SIGCONT
  clock(proc)            the process runs under libfaketime with a timestamp file; stepping it
                         writes an offset ("-3600", "+1d"); FAKETIME_DONT_FAKE_MONOTONIC keeps
                         CLOCK_MONOTONIC real (event loops' timers)
  small_fs(dir, bytes)   a tmpfs of that size mounted at dir; fill() takes every free byte,
                         the undo frees them
  restart(proc)          stop (SIGINT for PostgreSQL's fast shutdown) and start again on the
                         same address

Everything the Lab made is undone by close() (a context manager, atexit, and SIGTERM/SIGINT):
faults undone, processes stopped by PID (TERM, then KILL after 10 s), mounts unmounted,
namespaces deleted. Every wait is bounded.
"""
import atexit
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
NET = "10.77.0."


def run(cmd, check=True, inp=None):
    """Runs a command (a list), output captured; raises with its stderr when check fails."""
    r = subprocess.run(cmd, input=inp, capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(map(shlex.quote, cmd)), r.stderr.strip()))
    return r


def mono():
    return time.monotonic()


def can_run():
    """Why this machine cannot run the lab (None when it can): root, ip, nft, libfaketime."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return "needs %s (Debian's %s)" % (tool, "iproute2" if tool == "ip" else "nftables")
    if not os.path.exists(FAKETIME_LIB):  # a missing preload is ignored: no step would happen
        return "needs %s (Debian's faketime)" % FAKETIME_LIB
    return None


class Proc:
    """A process the lab started: its node, argv, log, PID; restart() starts the same argv."""

    def __init__(self, lab, node, name, argv, env, log):
        self.lab, self.node, self.name, self.argv, self.env, self.log = \
            lab, node, name, argv, env, log
        self.popen = None
        self.start()

    def start(self):
        full = ["ip", "netns", "exec", self.node.ns, "env"] + \
            ["%s=%s" % kv for kv in self.env.items()] + self.argv
        logf = open(self.log, "ab")
        self.popen = subprocess.Popen(full, stdout=logf, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL)
        logf.close()
        self.lab.events.append((mono(), "start", self.name, self.popen.pid))

    @property
    def pid(self):
        return self.popen.pid

    def alive(self):
        return self.popen is not None and self.popen.poll() is None

    def stop(self, sig=signal.SIGTERM, wait_s=10.0):
        """Sends sig to our PID, waits up to wait_s, then KILLs; returns the exit status."""
        if self.popen is None:
            return None
        if self.popen.poll() is None:
            try:
                os.kill(self.popen.pid, signal.SIGCONT)  # a paused process cannot exit
                os.kill(self.popen.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.popen.wait(wait_s)
            except subprocess.TimeoutExpired:
                os.kill(self.popen.pid, signal.SIGKILL)
                self.popen.wait(10)
        self.lab.events.append((mono(), "stop", self.name, self.popen.returncode))
        return self.popen.returncode


class Node:
    def __init__(self, lab, name, index):
        self.lab, self.name, self.index = lab, name, index
        self.ns = "%s-%s" % (lab.prefix, name)
        self.addr = NET + str(index)


class Lab:
    def __init__(self, keep=False):
        why = can_run()
        if why:
            raise RuntimeError(why)
        self.prefix = "slf%d" % os.getpid()
        self.dir = tempfile.mkdtemp(prefix="sluice-fault.")
        self.keep = keep
        self.nodes = {}
        self.procs = []
        self.undos = []      # [(label, fn)], undone last first
        self.mounts = []
        self.events = []     # (monotonic, kind, what, detail): the run's own record
        self.closed = False
        self.hub = self.prefix + "-hub"
        run(["ip", "netns", "add", self.hub])
        run(["ip", "-n", self.hub, "link", "add", "br0", "type", "bridge"])
        run(["ip", "-n", self.hub, "link", "set", "br0", "up"])
        atexit.register(self.close)
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, self._on_signal)

    def _on_signal(self, signum, frame):
        self.close()
        sys.exit(128 + signum)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # ---- nodes and processes ------------------------------------------------------------------
    def node(self, name):
        """A node namespace joined to the hub (10.77.0.N/24, loopback up)."""
        if name in self.nodes:
            return self.nodes[name]
        n = Node(self, name, len(self.nodes) + 2)
        run(["ip", "netns", "add", n.ns])
        veth = "v%d" % n.index
        run(["ip", "-n", self.hub, "link", "add", veth, "type", "veth", "peer", "name", "eth0",
             "netns", n.ns])
        run(["ip", "-n", self.hub, "link", "set", veth, "master", "br0", "up"])
        run(["ip", "-n", n.ns, "addr", "add", n.addr + "/24", "dev", "eth0"])
        run(["ip", "-n", n.ns, "link", "set", "eth0", "up"])
        run(["ip", "-n", n.ns, "link", "set", "lo", "up"])
        self.nodes[name] = n
        return n

    def spawn(self, node, name, argv, env=None, clock=False):
        """Starts argv in node's namespace, output to DIR/name.log; clock=True runs it under
        libfaketime with DIR/name.faketime as its offset (see step_clock)."""
        env = dict(env or {})
        if clock:
            ts = os.path.join(self.dir, name + ".faketime")
            with open(ts, "w") as f:
                f.write("+0\n")
            env.update(LD_PRELOAD=FAKETIME_LIB, FAKETIME_TIMESTAMP_FILE=ts,
                       FAKETIME_NO_CACHE="1", FAKETIME_DONT_FAKE_MONOTONIC="1")
        p = Proc(self, node, name, argv, env, os.path.join(self.dir, name + ".log"))
        self.procs.append(p)
        return p

    def wait_port(self, node, port, proc=None, secs=20.0):
        """Until something in node's namespace accepts on addr:port (at most secs)."""
        end = mono() + secs
        probe = ("import socket,sys\ns=socket.socket();s.settimeout(0.5)\n"
                 "sys.exit(s.connect_ex((sys.argv[1],int(sys.argv[2]))))")
        while mono() < end:
            if proc is not None and not proc.alive():
                raise RuntimeError("%s exited (see %s)" % (proc.name, proc.log))
            r = subprocess.run(["ip", "netns", "exec", node.ns, sys.executable, "-c", probe,
                                node.addr, str(port)], capture_output=True, timeout=10)
            if r.returncode == 0:
                return
            time.sleep(0.05)
        raise RuntimeError("nothing accepts on %s:%d after %.0f s" % (node.addr, port, secs))

    def nsexec(self, node, argv, check=True, timeout=30):
        r = subprocess.run(["ip", "netns", "exec", node.ns] + argv, capture_output=True,
                           text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError("%s: %s%s" % (" ".join(argv), r.stdout, r.stderr))
        return r

    # ---- faults ---------------------------------------------------------------------------------
    def _fault(self, label, apply, undo, seconds):
        """Applies a fault and records it; with seconds, holds it that long and undoes it (also
        when interrupted); without, returns the undo (which close() also calls)."""
        apply()
        t0 = mono()
        self.events.append((t0, "fault+", label, None))
        done = []

        def undo_once():
            if not done:  # "fault-" when the undo begins: from then on it may be lifted
                done.append(1)
                self.events.append((mono(), "fault-", label, None))
                undo()
                self.events.append((mono(), "undone", label, None))
        self.undos.append((label, undo_once))
        if seconds is None:
            return undo_once
        try:
            time.sleep(seconds)
        finally:
            undo_once()
        return None

    def _nft(self, node, script):
        run(["ip", "netns", "exec", node.ns, "nft", "-f", "-"], inp=script)

    def partition(self, a, b, seconds=None, how="drop"):
        """Cuts every node of a off from every node of b (both directions). how: drop (a cut
        cable: packets vanish) or reject (TCP RST, ICMP unreachable: a refused connection)."""
        a, b = list(a), list(b)
        tag = "cut%d" % len(self.undos)

        def rules(peers):
            addrs = ", ".join(p.addr for p in peers)
            rst = "meta l4proto tcp reject with tcp reset; " if how == "reject" else ""
            return ("table inet %s {\n"
                    "  chain in { type filter hook input priority -10; "
                    "ip saddr { %s } %sip saddr { %s } drop; }\n"
                    "  chain out { type filter hook output priority -10; "
                    "ip daddr { %s } %sip daddr { %s } drop; }\n}\n") % (
                        tag, addrs, rst, addrs,
                        addrs, rst, addrs)

        def apply():
            for n in a:
                self._nft(n, rules(b))
            for n in b:
                self._nft(n, rules(a))

        def undo():
            for n in a + b:
                run(["ip", "netns", "exec", n.ns, "nft", "delete", "table", "inet", tag],
                    check=False)
        label = "partition %s | %s (%s)" % (",".join(n.name for n in a),
                                             ",".join(n.name for n in b), how)
        return self._fault(label, apply, undo, seconds)

    def loss(self, node, percent, seconds=None):
        """Drops percent % of node's packets in and out (nftables numgen)."""
        tag = "loss%d" % len(self.undos)
        script = """table inet %s {
  chain in { type filter hook input priority -10; iifname "eth0" numgen random mod 100 < %d drop; }
  chain out { type filter hook output priority -10; oifname "eth0" numgen random mod 100 < %d drop; }
}
""" % (tag, percent, percent)
        return self._fault("loss %s %d%%" % (node.name, percent),
                           lambda: self._nft(node, script),
                           lambda: run(["ip", "netns", "exec", node.ns, "nft", "delete", "table",
                                        "inet", tag], check=False), seconds)

    def pause(self, proc, seconds=None):
        return self._fault("pause %s" % proc.name,
                           lambda: os.kill(proc.pid, signal.SIGSTOP),
                           lambda: proc.alive() and os.kill(proc.pid, signal.SIGCONT), seconds)

    def step_clock(self, proc, offset, seconds=None):
        """Steps a process started with clock=True: offset as libfaketime reads it ("-3600",
        "+1d"); undone by "+0"."""
        ts = os.path.join(self.dir, proc.name + ".faketime")

        def put(text):
            with open(ts + ".tmp", "w") as f:
                f.write(text + "\n")
            os.rename(ts + ".tmp", ts)
        return self._fault("clock %s %s" % (proc.name, offset), lambda: put(offset),
                           lambda: put("+0"), seconds)

    def small_fs(self, path, size_bytes):
        """A tmpfs of size_bytes at path (made if missing), unmounted by close()."""
        os.makedirs(path, exist_ok=True)
        run(["mount", "-t", "tmpfs", "-o", "size=%d,mode=0777" % size_bytes, "tmpfs", path])
        self.mounts.append(path)
        return path

    def fill(self, path, seconds=None):
        """Takes every free byte of the file system at path (a filler file, bounded by the
        file system's size); the undo deletes it."""
        filler = os.path.join(path, ".filler")

        def apply():
            chunk = b"\0" * 65536
            with open(filler, "wb") as f:
                for _ in range(1 << 16):  # 4 GiB at most; a small_fs ends far sooner
                    try:
                        f.write(chunk)
                        f.flush()
                    except OSError:
                        break
            fd = os.open(filler, os.O_WRONLY | os.O_APPEND)
            try:
                for _ in range(65536):
                    os.write(fd, b"\0")
            except OSError:
                pass
            finally:
                try:
                    os.close(fd)
                except OSError:
                    pass

        def undo():
            try:
                os.unlink(filler)
            except FileNotFoundError:
                pass
        return self._fault("fill %s" % path, apply, undo, seconds)

    def restart(self, proc, down_s, sig=signal.SIGTERM):
        """Stops proc (sig), keeps it down for down_s, starts the same argv again."""
        def apply():
            proc.stop(sig)

        def undo():
            if not proc.alive():
                proc.start()
        return self._fault("restart %s" % proc.name, apply, undo, down_s)

    # ---- the end ------------------------------------------------------------------------------
    def close(self):
        if self.closed:
            return
        self.closed = True
        for label, undo in reversed(self.undos):
            try:
                undo()
            except Exception as e:  # keep undoing the rest
                print("netlab: undoing %s: %s" % (label, e), file=sys.stderr)
        for p in reversed(self.procs):
            try:
                p.stop()
            except Exception as e:
                print("netlab: stopping %s: %s" % (p.name, e), file=sys.stderr)
        for m in reversed(self.mounts):
            run(["umount", "-l", m], check=False)
        for n in self.nodes.values():
            run(["ip", "netns", "del", n.ns], check=False)
        run(["ip", "netns", "del", self.hub], check=False)
        if self.keep:
            print("netlab: kept %s" % self.dir, file=sys.stderr)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


def free_port_hint(base, i):
    """Ports inside a node's namespace are its own: fixed ones are free by construction."""
    return base + i


if __name__ == "__main__":
    # A smoke run: two nodes, a partition, its undo.
    with Lab() as lab:
        a, b = lab.node("a"), lab.node("b")
        srv = lab.spawn(b, "srv", [sys.executable, "-m", "http.server", "--bind", b.addr, "8000"])
        lab.wait_port(b, 8000, srv)
        ok = lab.nsexec(a, [sys.executable, "-c", "import socket; socket.create_connection(("
                            "'%s', 8000), 2)" % b.addr], check=False).returncode
        undo = lab.partition([a], [b])
        cut = lab.nsexec(a, [sys.executable, "-c", "import socket; socket.create_connection(("
                             "'%s', 8000), 1)" % b.addr], check=False).returncode
        undo()
        back = lab.nsexec(a, [sys.executable, "-c", "import socket; socket.create_connection(("
                              "'%s', 8000), 2)" % b.addr], check=False).returncode
        print("connect before %d, cut %d, after %d" % (ok, cut, back))
        sys.exit(0 if (ok, back) == (0, 0) and cut != 0 else 1)
