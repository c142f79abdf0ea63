"""What the Python package's tests share: the servers the shell script started (from the
environment), a sluiced of a test's own that it may stop and start again, bounded polling, and
named asserts. SLUICE_TEST_STORE ("--store redis://... --store-timeout 10s"), when set, is the
store of the sluiced the script started, and is given to every sluiced a test starts.

Imported by the pytest modules beside it, which tests/integration/test_python_*.sh run with the
venv's python from outside the source tree, so `import sluice` finds the installed wheel.
"""

import importlib.util
import os
import socket
import subprocess
import time

# scripts/free_port.py: whether a process serves on its ports (no other process took one)
_spec = importlib.util.spec_from_file_location(
    "free_port", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                              "free_port.py"))
_free_port = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_free_port)

RESP_PORT = int(os.environ.get("SLUICE_RESP_PORT", "0"))
HTTP_PORT = int(os.environ.get("SLUICE_HTTP_PORT", "0"))
SLUICED = os.environ.get("SLUICED", "")
TMP = os.environ.get("SLUICE_TEST_TMP", "/tmp")
STORE = os.environ.get("SLUICE_TEST_STORE", "").split()  # sluiced's store options; none: memory


def check(name, cond, detail=""):
    """An assert naming the case: a false cond fails the test with name and detail."""
    assert cond, f"{name}: {detail}"


def poll(seconds, fn):
    """fn() every 50 ms until it returns true, for at most `seconds`; its last value."""
    deadline = time.monotonic() + seconds
    for _ in range(int(seconds / 0.05) + 1):
        v = fn()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.05)
    return fn()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_HELD = []  # the sockets holding refused_port()'s ports, open until the process ends


def refused_port():
    """A port whose connections are refused for as long as the tests run: a socket bound to it
    and never listening holds it. (A free_port() is closed at once, and another socket, an app
    server of the test itself, may be given it next.)"""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    _HELD.append(s)
    return s.getsockname()[1]


def _answers(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16)[:1] in (b"+", b"-")  # PONG, or -NOAUTH: it answers
    except OSError:
        return False


class OwnSluiced:
    """A sluiced this test starts (on ports it picks, a few tries; in STORE when set) and stops
    by its PID; start() starts it again on the same ports."""

    def __init__(self, name, *args):
        self.name, self.args, self.starts = name, list(args), 0
        self.args += STORE
        for _ in range(5):
            self.port, self.http_port = free_port(), free_port()
            if self.start():
                return
        raise RuntimeError(f"{name}: sluiced did not start (logs in {TMP})")

    def start(self):
        """Starts it on its ports; False (and stopped) when it did not come up."""
        self.starts += 1
        base = os.path.join(TMP, f"{self.name}.{self.starts}")
        log = open(base + ".log", "wb")
        self.proc = subprocess.Popen(
            [SLUICED, "--port", str(self.port), "--http-port", str(self.http_port),
             "--grpc-port", "0", "--config-store", base + ".db", "--snapshot", "", *self.args],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        # its own listening sockets on both ports (not another process's, which a port chosen
        # free may have become), then a PING answered
        if _free_port.serving(self.proc.pid, 10, [base + ".log"], [self.port, self.http_port]) == 0 \
                and poll(10, lambda: _answers(self.port) or self.proc.poll() is not None) \
                and self.proc.poll() is None:
            return True
        self.stop()
        return False

    def stop(self):
        """SIGTERM, then waits for it (60 s at most, then SIGKILL)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self):
        """SIGKILL, as a crash: nothing drained, no connection closed in order."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
