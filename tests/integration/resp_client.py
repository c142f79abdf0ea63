"""resp_client.py - a small pipelining RESP2 client for the tests' Python drivers
(tests/integration/lua/lua_equiv.py, the equivalence checks in test_module.sh, the soak and the
fault runs' recording client): enc() encodes one command, Reader decodes replies from a socket,
Conn talks to a server on 127.0.0.1."""
import socket


def enc(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Reader:
    """Replies from a socket: +simple and -errors as str (an error starts with '-'), integers as
    int, bulk strings as bytes (str when text=True), arrays as lists (nested at most 32 deep).
    Raises ConnectionError when the server closes the connection or sends what is not RESP."""

    text = False

    def __init__(self, sock, text=False):
        self.s, self.buf, self.text = sock, b"", text

    def _fill(self, n):
        while len(self.buf) < n:
            data = self.s.recv(1 << 16)
            if not data:
                raise ConnectionError("closed by the server")
            self.buf += data

    def _line(self):
        for _ in range(1 << 20):
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            self._fill(len(self.buf) + 1)
        raise ConnectionError("a line without end")

    def reply(self, depth=0):
        line = self._line()
        t, rest = line[:1], line[1:].decode("utf-8", "replace")
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
            return data.decode("utf-8", "replace") if self.text else data
        if t == b"*" and depth < 32:
            n = int(rest)
            return None if n < 0 else [self.reply(depth + 1) for _ in range(n)]
        raise ConnectionError("not RESP: %r" % line[:40])


class Conn(Reader):
    """A small pipelining RESP2 client over one connection to 127.0.0.1:port (bulk strings as
    bytes)."""

    def __init__(self, port):
        Reader.__init__(self, socket.create_connection(("127.0.0.1", port)))

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
