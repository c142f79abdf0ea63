#!/usr/bin/env python3
"""Prints a TCP port free on 127.0.0.1, for tests and benchmarks that start servers.

  free_port.py          a port the kernel picks (bind to port 0)
  free_port.py --bus    a port p in [20000, 45000) with p + 10000 free too (a Redis Cluster
                        node's cluster bus); at most 200 tries, exit status 1 when none is found
"""
import random
import socket
import sys


def free(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def main():
    if sys.argv[1:] == ["--bus"]:
        for _ in range(200):
            p = random.randrange(20000, 45000)
            if free(p) and free(p + 10000):
                print(p)
                return 0
        return 1
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
    s.close()
    return 0


sys.exit(main())
