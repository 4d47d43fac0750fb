#!/usr/bin/env python3
"""Forwards TCP connections from one network namespace's loopback interface
to another's, for a controller that runs in a network namespace of its own
(see cluster.sh: start_jailed).

Usage: forward.py LISTEN_NETNS LISTEN_PORT DIAL_NETNS DIAL_PORT
  A NETNS is a namespace file such as /proc/PID/ns/net, or "-" for this
  process's own. Both ends are 127.0.0.1. Runs until killed; needs root.
"""

import ctypes
import os
import socket
import sys
import threading

CLONE_NEWNET = 0x40000000
libc = ctypes.CDLL(None, use_errno=True)


def enter(netns):
    """Moves this thread (and the threads and sockets it creates later) into
    the namespace; sockets created before keep theirs."""
    fd = os.open(netns, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns {netns}: {os.strerror(err)}")
    finally:
        os.close(fd)


def pipe(source, sink):
    """Copies one direction; at its end, half-closes the other side so that
    the peer sees the end too. The sockets close when both directions are
    done and the threads drop them."""
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    try:
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def main():
    listen_ns, listen_port, dial_ns, dial_port = sys.argv[1:5]
    own_ns = f"/proc/self/task/{threading.get_native_id()}/ns/net"
    home = os.open(own_ns, os.O_RDONLY)
    if listen_ns != "-":
        enter(listen_ns)
    listener = socket.create_server(("127.0.0.1", int(listen_port)))
    if dial_ns != "-":
        enter(dial_ns)
    elif listen_ns != "-":
        enter(f"/proc/self/fd/{home}")
    while True:
        client, _ = listener.accept()
        try:
            upstream = socket.create_connection(("127.0.0.1", int(dial_port)))
        except OSError:
            client.close()
            continue
        threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
        threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()


if __name__ == "__main__":
    main()
