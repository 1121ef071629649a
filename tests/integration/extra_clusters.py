"""More local clusters than the session's A and B.

Tests of topologies with three or four clusters start theirs once per test module; each is one
broker, stopped by pid when the module ends. The session's SASL pair, S and T (SASL/PLAIN and
an ACL authorizer, the broker settings below), is started once, when a test first asks for it
(the `secured_pair` fixture of tests/integration/conftest.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ferry.local import clusters as local
from ferry.local.cluster import LocalCluster

# The `ferry` user's password, which ferry itself uses: no output or file of ferry may hold it.
FERRY_PASSWORD = "ferry-pw-5b1e9d7c"
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    'user_admin="admin-secret" user_alice="alice-secret" '
    f'user_ferry="{FERRY_PASSWORD}";'
)
# A SASL/PLAIN broker with an ACL authorizer, from `ferry local up --set` overrides alone.
SASL_BROKER = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
    "advertised.listeners": "SASL_PLAINTEXT://127.0.0.1:{port}",
    "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN",
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    # ANONYMOUS is the broker talking to its own controller over the PLAINTEXT listener.
    "super.users": "User:admin;User:ANONYMOUS;User:ferry",
}
SASL_ADMIN_CLIENT = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "admin",
    "sasl.password": "admin-secret",
}


def module_clusters(*aliases: str) -> Callable[..., Any]:
    """A module-scoped fixture starting `aliases`: `more = module_clusters("C", "D")`."""

    @pytest.fixture(scope="module")
    def fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LocalCluster]]:
        directory = tmp_path_factory.mktemp("kafka-" + "".join(aliases).lower())
        brokers = local.up(list(aliases), directory)
        try:
            yield brokers
        finally:
            local.down(directory)

    return fixture
