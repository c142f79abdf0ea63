"""resp_client.py - a small pipelining RESP2 client for the integration tests' Python drivers
(tests/integration/lua/lua_equiv.py, the equivalence checks in test_module.sh): enc() encodes
one command, Conn talks to a server on 127.0.0.1."""
import socket


def enc(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    """A small pipelining RESP2 client; error replies come back as str starting with '-'."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def _fill(self, n):
        while len(self.buf) < n:
            data = self.s.recv(1 << 16)
            if not data:
                raise SystemExit("redis closed the connection")
            self.buf += data

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill(len(self.buf) + 1)
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self):
        line = self._line()
        t, rest = line[:1], line[1:].decode()
        if t == b"+":
            return rest
        if t == b"-":
            return "-" + rest
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            self._fill(n + 2)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise SystemExit("unexpected reply %r" % line)

    def call(self, *args):
        self.s.sendall(enc(args))
        return self.reply()

    def pipeline(self, cmds, chunk=1000):
        out = []
        for i in range(0, len(cmds), chunk):
            part = cmds[i:i + chunk]
            self.s.sendall(b"".join(enc(c) for c in part))
            out.extend(self.reply() for _ in part)
        return out
