#!/usr/bin/env python3
"""quiet_port.py - scripts/free_port.py for the servers the soak kills and starts again on their
own ports (tests/soak/soak.sh points lib.sh's LIB_FREE_PORT here).

The ports it picks lie below the kernel's ephemeral range (net.ipv4.ip_local_port_range): while
such a server is down, no connect() on the machine can take its port as a source port, which
would keep the server from binding it again. (A client retrying a dead port inside the range
can even be given that port and connect to itself.)

    quiet_port.py          a port below the range, free now
    quiet_port.py --bus    such a port p with p + 10000 below the range and free too
    quiet_port.py --serving ...   as scripts/free_port.py
"""
import os
import random
import sys

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")
FREE_PORT = os.path.join(SCRIPTS, "free_port.py")
LOWEST = 10000

sys.path.insert(0, SCRIPTS)
from free_port import free as bindable  # noqa: E402


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def main():
    args = sys.argv[1:]
    if args and args[0] == "--serving":
        os.execvp(sys.executable, [sys.executable, FREE_PORT] + args)
    bus = args == ["--bus"]
    if args and not bus:
        print(__doc__, file=sys.stderr)
        return 64
    top = ephemeral_low() - (10000 if bus else 0)
    if top - LOWEST < 1000:  # no room below the range: what free_port.py would pick
        os.execvp(sys.executable, [sys.executable, FREE_PORT] + args)
    for _ in range(200):
        p = random.randrange(LOWEST, top)
        if bindable(p) and (not bus or bindable(p + 10000)):
            print(p)
            return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
