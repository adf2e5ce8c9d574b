"""``@pytest.mark.xdist_group`` for pytest 9.2 and later.

With ``--dist loadgroup`` pytest-xdist (3.8) sends the tests of one group to one worker by
appending ``@group`` to each item's ``_nodeid``. pytest 9.2 keeps a node's id in ``_id`` (a
structured ``NodeId``) and no longer reads ``_nodeid``, so the group was silently ignored:
the tests of a group ran on every worker, and a module's expensive fixture (the deploy
files' virtualenv, a browser) was built once per worker. This hook, run after xdist's own,
sets the id the way xdist meant it to be, and does nothing where xdist's own change took.
"""

from __future__ import annotations

import pytest


def group_of(item: pytest.Item) -> str | None:
    """The ``xdist_group`` names of an item, joined as xdist joins them (None: no group)."""
    names = {
        str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
        for mark in item.iter_markers("xdist_group")
    }
    return "_".join(sorted(names)) if names else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # on a worker xdist sets ``dist`` to "no" and keeps the choice in ``loadgroup``
    if not hasattr(config, "workerinput") or not getattr(config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # a pytest that still reads _nodeid: xdist's own change holds
        return
    for item in items:
        group = group_of(item)
        if group is None or item.nodeid.endswith(f"@{group}"):
            continue
        item._id = NodeId.parse(f"{item.nodeid}@{group}")  # type: ignore[attr-defined]
