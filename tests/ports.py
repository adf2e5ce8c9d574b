"""Free TCP ports on loopback for the servers a test starts, without the usual race.

Binding port 0, reading the port and closing the socket hands out a port of the kernel's
ephemeral range, and the kernel hands the same ports to every outgoing connection: with
several xdist workers, a client socket (or another worker's server) took the port between
the test closing it and its server binding it ("Address already in use", seen in CI). These
ports come from below the ephemeral range, where no outgoing connection is given a port, in a
slice of their own for each worker, each one tried before it is handed out and not handed out
again by this process until the slice has gone round.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading

#: below Linux's default ephemeral range (32768-60999): never an outgoing connection's port
LOW, HIGH = 20000, 32768
#: ports per xdist worker (gw0 gets the first slice, and so on)
SLICE = 1500

_lock = threading.Lock()


def _slice() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) if worker.isdigit() else 0
    start = LOW + (index * SLICE) % (HIGH - LOW - SLICE)
    return range(start, start + SLICE)


def _ports() -> itertools.cycle[int]:
    ports = _slice()
    offset = os.getpid() % len(ports)  # processes of one worker start apart
    return itertools.cycle([*ports[offset:], *ports[:offset]])


_next = _ports()


def free_port() -> int:
    """A loopback port nothing listens on now, and that no other worker is handed."""
    with _lock:
        for _ in range(SLICE):
            port = next(_next)
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
    raise OSError(f"no free port in {_slice()}")
