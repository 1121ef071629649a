"""More local clusters than the session's A and B, started once per test module.

Tests of topologies with three or four clusters need them; each is one broker, stopped by pid
when the module ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ferry.local import clusters as local
from ferry.local.broker import BrokerProcess


def module_clusters(*aliases: str) -> Callable[..., Any]:
    """A module-scoped fixture starting `aliases`: `more = module_clusters("C", "D")`."""

    @pytest.fixture(scope="module")
    def fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, BrokerProcess]]:
        directory = tmp_path_factory.mktemp("kafka-" + "".join(aliases).lower())
        brokers = local.up(list(aliases), directory)
        try:
            yield brokers
        finally:
            local.down(directory)

    return fixture
