"""MM2's internal-topic rule on real brokers: `topics = .*` copies no internal topic.

One `ferry run --once` copies everything there is; each rule is then one assertion on the
target. The exclude list is narrowed to this module's topics only (the session clusters hold
other tests' topics), which also drops MM2's default excludes (`__.*`): the policy alone
keeps internal topics home.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from ferry.local.cluster import LocalCluster
from tests.integration.kafka_helpers import RECENT_MS, Rec, create_topic, produce, record_count
from tests.integration.replication_setup import run_once, write_config

TAG = f"rules-{uuid.uuid4().hex[:8]}"
PLAIN = f"{TAG}-plain"
INTERNAL = {
    "dot-internal": f"{TAG}-x.internal",
    "dash-internal": f"{TAG}-x-internal",
    "double-underscore": f"__{TAG}-x",
    "dot-first": f".{TAG}-x",
}
RECORDS = 20


@pytest.fixture(scope="module")
def copied(
    kafka_clusters: dict[str, LocalCluster],
    spark: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> set[str]:
    """Topics on B after one run of A->B with `topics = .*`; the run copied PLAIN only."""
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    for topic in [PLAIN, *INTERNAL.values()]:
        create_topic(a, topic)
        produce(
            a, topic, [Rec(0, b"k", f"{i}".encode(), (), RECENT_MS + i) for i in range(RECORDS)]
        )
    config = write_config(
        tmp_path_factory.mktemp("internal-topics"),
        kafka_clusters,
        topics=".*",
        **{"topics.exclude": f"(?!(__|\\.)?{re.escape(TAG)}-).*"},
    )
    progress = run_once(config, spark)
    assert progress["A->B"].records == RECORDS, "only the plain topic's records were copied"
    assert record_count(b, f"A.{PLAIN}") == RECORDS
    return set(AdminClient({"bootstrap.servers": b}).list_topics(timeout=10).topics)


def test_the_plain_topic_is_copied(copied: set[str]) -> None:
    assert f"A.{PLAIN}" in copied


@pytest.mark.parametrize("rule", INTERNAL)
def test_an_internal_topic_is_never_copied(copied: set[str], rule: str) -> None:
    topic = INTERNAL[rule]
    assert not {name for name in copied if name.endswith(topic)}, f"{topic} reached B"
