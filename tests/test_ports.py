"""tests/ports.py: loopback ports below the ephemeral range, a slice per xdist worker."""

import socket
from pathlib import Path

import pytest

from tests import ports


def test_a_port_is_free_bindable_and_not_ephemeral() -> None:
    low, _high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    port = ports.free_port()
    assert ports.LOW <= port < min(ports.HIGH, low)
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_a_port_is_not_handed_out_twice_in_a_row() -> None:
    assert len({ports.free_port() for _ in range(50)}) == 50


def test_a_taken_port_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    free = ports.free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", ports.free_port()))
        busy = taken.getsockname()[1]
        monkeypatch.setattr(ports, "_next", iter([busy, free]))
        assert ports.free_port() == free


def test_workers_get_disjoint_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    slices = []
    for worker in ("gw0", "gw1", "gw2", "gw3"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        slices.append(set(ports._slice()))
    assert all(a.isdisjoint(b) for i, a in enumerate(slices) for b in slices[i + 1 :])
