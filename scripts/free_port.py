#!/usr/bin/env python3
"""Ports on 127.0.0.1 for tests and benchmarks that start servers.

  free_port.py          prints a port free now (the kernel picks it: bind to port 0)
  free_port.py --bus    prints a port p in [20000, 45000) with p + 10000 free too (a Redis Cluster
                        node's cluster bus); at most 200 tries, exit status 1 when none is found
  free_port.py --serving PID SECS LOG.. -- PORT..
                        waits (at most SECS seconds) until the process PID, or a process under
                        it, listens on every PORT of 127.0.0.1 and no other process listens on
                        any of them. Exit status 0 when so; 2 when a port is taken (another
                        process listens on it, or a LOG says "Address already in use": the
                        server could not bind it); 1 when PID ended or the time ran out.

A port free when free_port.py looked may be taken before the server binds it, so a caller
starts the server, waits with --serving, and on status 2 stops it and starts it again on new
ports (tests/integration/lib.sh: serve).
"""
import os
import random
import re
import socket
import sys
import time

IN_USE = re.compile(rb"Address already in use|EADDRINUSE")
LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp
LOOPBACK_OR_ANY = ("0100007F", "00000000")  # 127.0.0.1 and 0.0.0.0, as /proc/net/tcp shows them


def free(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def listeners(ports):
    """{port: {socket inode}} of the IPv4 sockets listening on 127.0.0.1 or 0.0.0.0."""
    found = {p: set() for p in ports}
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            addr, port = fields[1].split(":")
            if fields[3] == LISTEN and addr in LOOPBACK_OR_ANY and int(port, 16) in found:
                found[int(port, 16)].add(fields[9])
    return found


def process_tree(pid):
    """pid and every process under it (ended processes included while they are zombies)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(children.get(p, []))
    return tree


def socket_inodes(pids):
    inodes = set()
    for pid in pids:
        fd_dir = "/proc/%d/fd" % pid
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    return inodes


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def logged_in_use(logs):
    for path in logs:
        try:
            with open(path, "rb") as f:
                if IN_USE.search(f.read()):
                    return True
        except OSError:
            pass
    return False


def serving(pid, secs, logs, ports):
    deadline = time.monotonic() + secs
    while True:
        held = listeners(ports)
        ours = socket_inodes(process_tree(pid))
        if any(inodes - ours for inodes in held.values()):
            return 2
        if all(held.values()):
            return 0
        if logged_in_use(logs):
            return 2
        if not alive(pid) or time.monotonic() > deadline:
            return 2 if logged_in_use(logs) else 1
        time.sleep(0.02)


def main():
    args = sys.argv[1:]
    if args == ["--bus"]:
        for _ in range(200):
            p = random.randrange(20000, 45000)
            if free(p) and free(p + 10000):
                print(p)
                return 0
        return 1
    if args[:1] == ["--serving"] and "--" in args:
        sep = args.index("--")
        pid, secs, logs = int(args[1]), float(args[2]), args[3:sep]
        return serving(pid, secs, logs, [int(p) for p in args[sep + 1:]])
    if args:
        print(__doc__, file=sys.stderr)
        return 64
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
    s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
