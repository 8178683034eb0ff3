#!/usr/bin/env python3
"""Socket-audit test helper (Python), same protocol as helper.c.

Usage: helper.py PORT FASTOPEN_QLEN all|nodelay
Listens on 127.0.0.1:PORT with TCP_FASTOPEN, connects four clients to itself
(nagle, nodelay, cork, sndbuf=65536), prints "NAME LOCALPORT" per client,
"pid PID" and "ready"; "talk N" on stdin runs N write-write-read exchanges of 100-byte
messages on the nagle and nodelay connections and prints "done".
"""
import os
import socket
import sys


def full_read(s, n):
    got = b""
    while len(got) < n:
        b = s.recv(n - len(got))
        if not b:
            sys.exit("read: connection closed")
        got += b
    return got


def main():
    port, qlen, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    allnd = mode == "nodelay"
    l = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.setsockopt(socket.IPPROTO_TCP, socket.TCP_FASTOPEN, qlen)
    l.bind(("127.0.0.1", port))
    l.listen(64)
    names = ["nagle", "nodelay", "cork", "sndbuf"]
    clients, servers = [], []
    for i, name in enumerate(names):
        c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if i == 1 or allnd:
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if i == 2 and not allnd:
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        if i == 3:
            c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
        c.connect(("127.0.0.1", port))
        s, _ = l.accept()
        if allnd:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        clients.append(c)
        servers.append(s)
        print(name, c.getsockname()[1])
    print("pid", os.getpid())
    print("ready", flush=True)
    msg = b"x" * 100
    for line in sys.stdin:
        parts = line.split()
        if len(parts) != 2 or parts[0] != "talk":
            continue
        for _ in range(int(parts[1])):
            for i in range(2):
                clients[i].sendall(msg)
                clients[i].sendall(msg)
                full_read(servers[i], 200)
                servers[i].sendall(msg)
                full_read(clients[i], 100)
        print("done", flush=True)


if __name__ == "__main__":
    main()
