#!/usr/bin/env python3
"""notify_listener.py - plays systemd's side of the readiness protocol for the tests: binds an
AF_UNIX datagram socket at PATH (what $NOTIFY_SOCKET names) and appends each message it
receives to OUT, one line each. On READY=1 it first checks that the server is serving: it reads
PORTS_FILE (the server's ports, RESP first, written before the server started), sends PING on
the RESP port and connects to the others, and appends the result to the line:
    READY=1 PONG 2
(the reply to PING, and how many other ports accepted a connection). Exits after STOPPING=1, or
after 120 s without a message.

    notify_listener.py PATH OUT PORTS_FILE
"""
import socket
import sys


def serving(ports_file):
    with open(ports_file) as f:
        ports = [int(p) for p in f.read().split()]
    with socket.create_connection(("127.0.0.1", ports[0]), timeout=5) as c:
        c.sendall(b"PING\r\n")
        reply = c.recv(64).decode().strip().lstrip("+")
    others = 0
    for p in ports[1:]:
        try:
            socket.create_connection(("127.0.0.1", p), timeout=5).close()
            others += 1
        except OSError:
            pass
    return "%s %d" % (reply, others)


def main():
    path, out, ports_file = sys.argv[1:4]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(120)
    with open(out, "a", buffering=1) as f:
        while True:
            try:
                msg = s.recv(4096).decode()
            except socket.timeout:
                return
            line = msg
            if msg == "READY=1":
                try:
                    line += " " + serving(ports_file)
                except OSError as e:
                    line += " not serving: %s" % e
            f.write(line + "\n")
            if msg == "STOPPING=1":
                return


if __name__ == "__main__":
    main()
