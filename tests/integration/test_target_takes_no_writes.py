"""A target that never answers, in both copy loops, reading a real source.

The target is a listener on 127.0.0.1 that accepts connections and reads them but never
answers (a black-holed link; a 3-node target with 2 nodes down answers writes with
NOT_ENOUGH_REPLICAS instead, which the fault suite covers). librdkafka never times a copy out
(`message.timeout.ms = 0`: a copy given up on would let later copies of its partition land
first); the loop gives the whole batch up, after the acknowledgement timeout or, sooner, once
ferry stops, and reports nothing of it copied. Then the same range copied to the real B lands
once, in order.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, Producer

from ferry.config import load_config
from ferry.engine.copy.client_settings import consumer_settings, producer_settings
from ferry.engine.copy.deliveries import DeliveryTracker
from ferry.engine.copy.native_loop import NativeCopier, copy_bin_native, native_module
from ferry.engine.copy.python_loop import copy_bin
from ferry.engine.copy.types import CopyContext, CopyRange, PartitionResult
from ferry.errors import KafkaUnavailableError
from ferry.kafka.provenance import ORIGIN_HEADER, Origin
from ferry.local.cluster import LocalCluster
from tests.integration.kafka_helpers import Rec, create_topic, produce, read_offsets
from tests.integration.replication_setup import write_config

SOURCE_ID, TARGET_ID = "source-id", "target-id"
RECORDS = 50
Settings = tuple[dict[str, str], dict[str, str]]
Copy = Callable[[list[CopyRange], CopyContext], list[PartitionResult]]


def _python_copy(settings: Settings) -> Copy:
    consumer, producer = Consumer(settings[0]), Producer(settings[1])
    return lambda ranges, ctx: copy_bin(consumer, producer, DeliveryTracker(), ranges, ctx)


def _native_copy(settings: Settings) -> Copy:
    copier = NativeCopier(*settings)
    return lambda ranges, ctx: copy_bin_native(copier, ranges, ctx)


LOOPS = [
    pytest.param(_python_copy, id="python"),
    pytest.param(
        _native_copy,
        id="native",
        marks=pytest.mark.skipif(native_module() is None, reason="native copier not built"),
    ),
]


@pytest.fixture
def silent_target() -> Iterator[str]:
    """host:port of a listener that takes every connection and never answers."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                connection, _ = server.accept()
                held.append(connection)  # read by nobody: the bytes stay in its buffer

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for connection in held:
            connection.close()
        server.close()


@pytest.mark.parametrize("ended_by", ["stop", "timeout"])
@pytest.mark.parametrize("loop", LOOPS)
def test_a_batch_the_target_does_not_acknowledge_is_given_up_whole(
    kafka_clusters: dict[str, LocalCluster],
    topic_name: str,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    silent_target: str,
    loop: Callable[[Settings], Copy],
    ended_by: str,
) -> None:
    timeout = 600.0 if ended_by == "stop" else 5.0  # the stop's test must not time out first
    for module in ("native_loop", "ack_wait"):
        monkeypatch.setattr(f"ferry.engine.copy.{module}.STOP_GRACE_SECONDS", 1.0)
        monkeypatch.setattr(f"ferry.engine.copy.{module}.ACK_TIMEOUT_SECONDS", timeout)
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    remote = f"A.{topic_name}"
    create_topic(a, topic_name, 1)
    create_topic(b, remote, 1)
    records = [
        Rec(0, f"k{i}".encode(), f"v{i}".encode(), (), 1_700_000_000_000 + i)
        for i in range(RECORDS)
    ]
    produce(a, topic_name, records)
    config = load_config(write_config(tmp_path_factory.mktemp("cfg"), kafka_clusters, topics="x"))
    source = consumer_settings(config.clusters["A"], config.flow("A", "B"))
    target = producer_settings(config.clusters["B"])
    stop = threading.Event()
    ranges = [CopyRange(topic_name, 0, 0, RECORDS, remote, 1_000_000)]
    silent = CopyContext(
        "A", a, SOURCE_ID, "B", silent_target, TARGET_ID, stall_timeout=60, stopping=stop.is_set
    )
    outcome: list[BaseException | list[PartitionResult]] = []

    def copy() -> None:
        try:
            outcome.append(
                loop((source, {**target, "bootstrap.servers": silent_target}))(ranges, silent)
            )
        except BaseException as exc:
            outcome.append(exc)

    copying = threading.Thread(target=copy, daemon=True)
    copying.start()
    if ended_by == "stop":
        stop.set()
    copying.join(120)

    assert not copying.is_alive(), f"the wait for acknowledgements did not end ({ended_by})"
    [gave_up] = outcome
    assert isinstance(gave_up, KafkaUnavailableError), gave_up
    why = "ferry run is stopping and " if ended_by == "stop" else ""
    assert str(gave_up).startswith(
        f"cluster B ({silent_target}) did not acknowledge copies: {why}{RECORDS} copies got no "
        "acknowledgement"
    ), gave_up
    assert str(gave_up).endswith("copied again from the last committed position, in order")

    # Copied again, to a target that answers: every record once, in order.
    answering = CopyContext("A", a, SOURCE_ID, "B", b, TARGET_ID, stall_timeout=60)
    [result] = loop((source, target))(ranges, answering)
    assert result.copied == RECORDS
    copied = read_offsets(b, remote, 1, RECORDS)[0]
    origins = [
        Origin.from_bytes(dict(rec.headers)[ORIGIN_HEADER]).offset  # type: ignore[arg-type]
        for _offset, rec in copied
    ]
    assert origins == list(range(RECORDS))
