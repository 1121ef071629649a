"""The fault suite's harness: two 3-node clusters behind link proxies, ferry copying between
them in both delivery modes, steady traffic with record ids, the target read and judged.

Two `ferry run` processes copy A to B for the whole session, one per delivery mode: the
exactly-once flow `A->B` copies topics `eos-*`, the at-least-once flow `S->T` (the same two
clusters under other aliases, so the flows keep apart every name they own on the clusters)
copies `alos-*`. ferry reaches both clusters through their link proxies, as a replicator
across datacenters does; the test's own producers and readers do not. A test creates its
topics (found by ferry within `refresh.topics.interval.seconds`), starts traffic into both,
does its fault, and hands the records to the one checker (`tests/faults/invariants.py`).
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from ferry.kafka.log import quiet
from ferry.kafka.provenance import ORIGIN_HEADER
from ferry.local import clusters as local
from ferry.local.cluster import LocalCluster
from tests.chaos.faults import FerryProcess
from tests.faults.invariants import Copy, Mode, Verdict, check

MODES: dict[Mode, tuple[str, str, str]] = {
    # mode: (flow's source alias, target alias, topic prefix)
    "exactly-once": ("A", "B", "eos-"),
    "at-least-once": ("S", "T", "alos-"),
}
PARTITIONS = 3
# Records per second into each flow's topic. Every acknowledged record is judged, so a few
# thousand per fault are enough; a higher rate mostly buys the six brokers' request handling
# CPU, which on two cores slows every restart and election the fault tests wait for.
TRAFFIC_RATE = 50.0
RESULTS = Path("artifacts/faults/results.jsonl")
log = logging.getLogger(__name__)


def wait_for(
    condition: Callable[[], bool],
    timeout: float,
    what: str | Callable[[], str],
    poll: float = 0.2,
) -> None:
    """Poll `condition` until it holds; fail naming `what` did not happen (a callable is asked
    at the deadline, so counts in it are the final ones)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"{said} did not happen within {timeout:.0f}s")
        time.sleep(poll)


def write_flow_config(
    directory: Path, clusters: dict[str, LocalCluster], mode: Mode, **extra: Any
) -> Path:
    """ferry.yaml of one mode's flow, through the link proxies, RF 3."""
    source, target, prefix = MODES[mode]
    directory.mkdir(parents=True, exist_ok=True)
    values: dict[str, Any] = {
        "topics": f"{prefix}.*",
        "exactly.once.source.support": "enabled" if mode == "exactly-once" else "disabled",
        "replication.factor": 3,
        "offset-syncs.topic.replication.factor": 3,
        "checkpoints.topic.replication.factor": 3,
        "heartbeats.topic.replication.factor": 3,
        "emit.heartbeats.enabled": "false",
        "refresh.topics.interval.seconds": 2,
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": 2,
        "emit.checkpoints.interval.seconds": 2,
        "groups": f"{prefix}.*",
        "ferry.head.start.enabled": "false",
        "ferry.state.dir": directory / "state",
        **extra,
    }
    lines = [
        "clusters:",
        f"  {source}: {{bootstrap.servers: '{clusters['A'].link_bootstrap}'}}",
        f"  {target}: {{bootstrap.servers: '{clusters['B'].link_bootstrap}'}}",
        f"{source}->{target}.enabled: true",
        *(f"{key}: '{value}'" for key, value in values.items()),
    ]
    path = directory / "ferry.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class Traffic:
    """A steady producer (acks=all, idempotent) writing record ids into one source topic; every
    delivery report kept: acknowledged (partition, offset, id) or indefinite (no answer)."""

    bootstrap: str
    topic: str
    rate: float = TRAFFIC_RATE
    generation: int = 1  # of the topic: a re-created topic's records get ids of their own
    acknowledged: dict[int, list[tuple[int, str]]] = field(default_factory=dict)
    indefinite: set[str] = field(default_factory=set)
    unplaced: set[str] = field(default_factory=set)
    # Acknowledged without an offset and then not found on the source: the source cluster (or
    # the client's acknowledgement) lost them before ferry could read them. Judged as
    # indefinite (ferry cannot copy what the source does not hold) and counted apart.
    not_on_source: set[str] = field(default_factory=set)
    unplaced_at: dict[str, float] = field(default_factory=dict)  # id -> seconds after start
    began: float = field(default_factory=time.monotonic)
    sent: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Traffic:
        self._thread = threading.Thread(target=self._run, name=f"traffic-{self.topic}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 240.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            assert not self._thread.is_alive(), f"producer of {self.topic} did not flush"

    @property
    def acked(self) -> int:
        with self._lock:
            return sum(map(len, self.acknowledged.values()))

    def ends(self) -> dict[int, int]:
        """Per partition, one past the highest acknowledged offset."""
        with self._lock:
            return {p: max(o for o, _ in recs) + 1 for p, recs in self.acknowledged.items() if recs}

    def _on_delivery(self, err: Any, msg: Any) -> None:
        record_id = msg.key().decode()
        with self._lock:
            if err is not None:
                self.indefinite.add(record_id)
            elif msg.offset() is None or msg.offset() < 0:
                # Acknowledged without an offset: an idempotent retry the broker already held
                # (DUPLICATE_SEQUENCE_NUMBER, seen across leader moves). `resolve` finds it.
                self.unplaced.add(record_id)
                self.unplaced_at[record_id] = round(time.monotonic() - self.began, 1)
            else:
                self.acknowledged.setdefault(msg.partition(), []).append((msg.offset(), record_id))

    def resolve(self) -> None:
        """Place the records acknowledged without an offset by reading the source topic; those
        the source does not hold are `not_on_source` (and indefinite)."""
        if not self.unplaced:
            return
        found = source_positions(self.bootstrap, self.topic, self.unplaced)
        self.not_on_source = self.unplaced - set(found)
        self.indefinite |= self.not_on_source
        if self.not_on_source:
            log.warning(
                "%d records of %s acknowledged without an offset are not on the source "
                "(id: seconds after the traffic began): %s",
                len(self.not_on_source),
                self.topic,
                {i: self.unplaced_at.get(i) for i in sorted(self.not_on_source)[:10]},
            )
        for record_id, (partition, offset) in found.items():
            self.acknowledged.setdefault(partition, []).append((offset, record_id))
        for records in self.acknowledged.values():
            records.sort()
        self.unplaced.clear()

    def _run(self) -> None:
        producer = Producer(
            quiet(
                {
                    "bootstrap.servers": self.bootstrap,
                    "acks": "all",
                    "enable.idempotence": True,
                    "linger.ms": 5,
                    # Long: a partition without a leader or below min.insync.replicas keeps
                    # its records queued until it is writable again, as a real app would.
                    "message.timeout.ms": 300_000,
                    "on_delivery": self._on_delivery,
                }
            )
        )
        self.began = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - self.began) * self.rate) - self.sent
            for _ in range(max(0, min(due, 1000))):
                record_id = f"{self.topic}-g{self.generation}-{self.sent}"
                try:
                    producer.produce(
                        self.topic,
                        key=record_id.encode(),
                        value=b"v" * 100,
                        partition=self.sent % PARTITIONS,
                    )
                except BufferError:
                    break
                self.sent += 1
            producer.poll(0.02)
        deadline = time.monotonic() + 200
        while producer.flush(1.0) > 0 and time.monotonic() < deadline:
            pass


def create_topics(bootstrap: str, *names: str, **config: str) -> None:
    admin = AdminClient(quiet({"bootstrap.servers": bootstrap}))
    futures = admin.create_topics(
        [
            NewTopic(name, PARTITIONS, 3, config={"min.insync.replicas": "2", **config})
            for name in names
        ]
    )
    for future in futures.values():
        future.result(60)


def read_copies(bootstrap: str, topic: str, committed: bool = True) -> dict[int, list[Copy]]:
    """Every copy in `topic` on the target, per partition in log order, read_committed (or
    read_uncommitted), with its id, origin and own offset."""
    consumer = Consumer(
        quiet(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"fault-reader-{time.monotonic_ns()}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed" if committed else "read_uncommitted",
                "enable.partition.eof": True,
            }
        )
    )
    try:
        metadata = consumer.list_topics(topic, timeout=30).topics[topic]
        partitions = sorted(metadata.partitions)
        ends = {}
        for p in partitions:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        copies: dict[int, list[Copy]] = {p: [] for p in partitions}
        done = {p for p in partitions if ends[p] == 0}
        deadline = time.monotonic() + 120
        while len(done) < len(partitions):
            assert time.monotonic() < deadline, f"reading {topic} on the target did not end"
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    done.add(msg.partition())
                    continue
                raise AssertionError(f"reading {topic}: {msg.error()}")
            origin = dict(msg.headers() or [])[ORIGIN_HEADER]
            assert isinstance(origin, bytes), f"{topic}: origin header {origin!r}"
            copies[msg.partition()].append(
                Copy.from_origin(msg.key().decode(), origin, msg.offset())
            )
        return copies
    finally:
        consumer.close()


def source_positions(bootstrap: str, topic: str, ids: set[str]) -> dict[str, tuple[int, int]]:
    """Where each of `ids` sits in the source topic: id -> (partition, offset)."""
    consumer = Consumer(
        quiet(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"fault-source-{time.monotonic_ns()}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                # From the log start whatever happens: the default (latest) would skip to the
                # end on an out-of-range answer and take held records for missing ones.
                "auto.offset.reset": "earliest",
            }
        )
    )
    found: dict[str, tuple[int, int]] = {}
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        done: set[int] = set()
        deadline = time.monotonic() + 120
        while len(done) < len(partitions) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    done.add(msg.partition())
                continue
            record_id = msg.key().decode()
            if record_id in ids:
                found[record_id] = (msg.partition(), msg.offset())
    finally:
        consumer.close()
    return found


@dataclass
class Tail:
    """A read_committed reader following one remote topic on the target: the ids it has seen
    (what a consumer on B could read by now)."""

    bootstrap: str
    topic: str
    seen: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Tail:
        self._thread = threading.Thread(target=self._run, name=f"tail-{self.topic}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def unseen(self, ids: set[str]) -> int:
        with self._lock:
            return len(ids - self.seen)

    def count(self) -> int:
        with self._lock:
            return len(self.seen)

    def _run(self) -> None:
        consumer = Consumer(
            quiet(
                {
                    "bootstrap.servers": self.bootstrap,
                    "group.id": f"fault-tail-{time.monotonic_ns()}",
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                    "auto.offset.reset": "earliest",
                    "topic.metadata.refresh.interval.ms": 2000,
                }
            )
        )
        try:
            consumer.subscribe([self.topic])
            while not self._stop.is_set():
                for msg in consumer.consume(500, 0.5):
                    if msg.error() is None and msg.key() is not None:
                        with self._lock:
                            self.seen.add(msg.key().decode())
        finally:
            consumer.close()


@dataclass
class FlowRun:
    """One mode's session `ferry run` and its config."""

    mode: Mode
    config: Path
    process: FerryProcess

    @property
    def prefix(self) -> str:
        return MODES[self.mode][2]

    @property
    def remote_prefix(self) -> str:
        return f"{MODES[self.mode][0]}."

    def ensure_running(self) -> None:
        if not self.process.alive():
            self.process.start()


# The session's `ferry run` of each mode, once the first fault has started them (conftest).
SESSION_RUNS: dict[Mode, FlowRun] = {}


def stop_session_runs() -> None:
    """The session's `ferry run`s stopped (SIGTERM); the next fault's `case` starts them
    again."""
    for run in SESSION_RUNS.values():
        if run.process.alive():
            run.process.sigterm(120)


@dataclass
class FaultCase:
    """One fault's traffic in both modes and its verdicts."""

    name: str
    directory: Path  # the clusters' `ferry local` directory
    runs: dict[Mode, FlowRun]
    traffic: dict[Mode, Traffic] = field(default_factory=dict)
    tails: dict[Mode, Tail] = field(default_factory=dict)
    healed_at: float | None = None
    # Per mode and source partition: acknowledged records removed from the source before
    # they were copied (finish(removed=...)).
    gone: dict[Mode, dict[int, int]] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    @property
    def clusters(self) -> dict[str, LocalCluster]:
        return local.read_state(self.directory)

    def kill(self, alias: str, node: int, sig: signal.Signals = signal.SIGKILL) -> None:
        local.kill_node(self.directory, alias, node, sig)
        self.said(f"node {node} of {alias} sent {sig.name}")

    def start(self, alias: str, node: int) -> None:
        local.start_node(self.directory, alias, node)
        self.said(f"node {node} of {alias} started and listed")

    def said(self, what: str) -> None:
        """A phase of the fault, logged with the seconds since the case began (where a slow
        test spends its time)."""
        log.info("%s +%.1fs: %s", self.name, time.monotonic() - self.started, what)

    def link(self, alias: str, command: str) -> dict[str, object]:
        return local.link_command(self.directory, alias, command)

    def under_replicated(self, alias: str) -> int:
        """Partitions of the cluster whose ISR is smaller than their replicas."""
        admin = AdminClient(quiet({"bootstrap.servers": self.clusters[alias].bootstrap}))
        topics = admin.list_topics(timeout=30).topics.values()
        return sum(
            1 for t in topics for p in t.partitions.values() if len(p.isrs) < len(p.replicas)
        )

    def status(self, mode: Mode) -> str:
        """`ferry status` of the mode's flow, as an operator would run it (output and errors)."""
        import subprocess
        import sys

        result = subprocess.run(
            [sys.executable, "-m", "ferry", "status", "-c", str(self.runs[mode].config)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return result.stdout + result.stderr

    def delete_source_topics(self) -> None:
        """The case's topics on A (their copies stay on B)."""
        admin = AdminClient(quiet({"bootstrap.servers": self.clusters["A"].bootstrap}))
        present = set(admin.list_topics(timeout=30).topics)
        names = [self.topic(m) for m in self.runs if self.topic(m) in present]
        if names:
            for future in admin.delete_topics(names).values():
                future.result(60)

    def rpo(self, mode: Mode) -> float | None:
        """The worst `ferry_rpo_seconds` of the mode's topic, as its `ferry run` last measured
        it (its state directory's rpo.json, what the gauge reads); None: not known."""
        return self._measured_rpo(mode)[1]

    def _measured_rpo(self, mode: Mode) -> tuple[float | None, float | None]:
        """When the mode's last RPO measurement began (None: none yet) and its worst figure
        for the mode's topic (None: not known)."""
        from ferry.config import load_config
        from ferry.engine.flow_spec import flow_state_dir
        from ferry.engine.flow_state import FlowState
        from ferry.engine.rpo_watch import read_rpo

        config = load_config(self.runs[mode].config)
        [flow] = config.enabled_flows
        measured = read_rpo(FlowState(flow_state_dir(config.state_dir.resolve(), flow)))
        mine = [v for k, v in measured.partitions.items() if k.startswith(f"{self.topic(mode)}:")]
        if measured.at is None or not mine or any(v is None for v in mine):
            return measured.at, None
        return measured.at, max(v for v in mine if v is not None)

    def rpo_during(self, mode: Mode, seconds: float, *, measured_after: float) -> list[float]:
        """The mode's RPO sampled every second for `seconds` (the fault's length): the known
        values of measurements begun after `measured_after` (seconds since the epoch, when the
        fault began), since one begun before describes the clusters before the fault."""
        samples = []
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            at, value = self._measured_rpo(mode)
            if value is not None and at is not None and at >= measured_after:
                samples.append(value)
            time.sleep(1.0)  # the sampling period, not a wait for a condition
        return samples

    def status_and_rpo_during(
        self, mode: Mode, seconds: float, *, measured_after: float
    ) -> tuple[str, list[float]]:
        """`ferry status` of the mode's flow and its RPO sampled for `seconds`, side by side
        while the fault lasts (a status that waits on an unreachable cluster would otherwise
        lengthen the fault by its own time); returns when both are done."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1, thread_name_prefix="status") as pool:
            said = pool.submit(self.status, mode)
            rpo = self.rpo_during(mode, seconds, measured_after=measured_after)
            return said.result(), rpo

    def assert_rpo_back_to_zero(self, mode: Mode, timeout: float = 120.0) -> None:
        wait_for(lambda: self.rpo(mode) == 0.0, timeout, f"{mode}: ferry_rpo_seconds back to 0")

    def topic(self, mode: Mode) -> str:
        return f"{self.runs[mode].prefix}{self.name}"

    def remote(self, mode: Mode) -> str:
        return f"{self.runs[mode].remote_prefix}{self.topic(mode)}"

    def start_traffic(self, rate: float = TRAFFIC_RATE) -> None:
        a = self.clusters["A"].bootstrap
        create_topics(a, *(self.topic(m) for m in self.runs))
        for mode in self.runs:
            self.traffic[mode] = Traffic(a, self.topic(mode), rate).start()
            self.tails[mode] = Tail(self.clusters["B"].bootstrap, self.remote(mode)).start()
        self.said("topics created, traffic started")

    def copied(self, mode: Mode) -> int:
        """Distinct records of the mode's topic a read_committed reader of B has seen."""
        return self.tails[mode].count()

    def stop(self) -> None:
        for traffic in self.traffic.values():
            traffic.stop()
        for tail in self.tails.values():
            tail.stop()

    def await_copies(self, at_least: int = 200, timeout: float = 300.0) -> None:
        """Both flows copy `at_least` more records than they have now."""
        for mode in self.runs:
            base = self.copied(mode)
            wait_for(
                lambda m=mode, b=base: self.copied(m) >= b + at_least,  # type: ignore[misc]
                timeout,
                lambda m=mode: (  # type: ignore[misc]
                    f"{m} flow copying {at_least} more records of {self.topic(m)}"
                    f" (its ferry run's log ends:\n{self.runs[m].process.log_tail()}\n)"
                ),
                poll=1.0,
            )
        self.said(f"both flows copied {at_least} more records")

    def healed(self) -> None:
        self.healed_at = time.monotonic()
        self.said("healed")

    def finish(
        self,
        catch_up_bound: float = 240.0,
        removed: dict[Mode, dict[int, int]] | None = None,
    ) -> dict[Mode, Verdict]:
        """Stop the traffic, wait until every acknowledged record is copied (the unseen count
        reaches 0 within `catch_up_bound` of the heal), then judge each mode.

        `removed`: per mode, per source partition, the log start offset a deletion moved the
        source to; acknowledged records below it that B never got are `self.gone[mode]`, not
        expected (ferry must report them, which the test checks)."""
        for traffic in self.traffic.values():
            traffic.stop()
            traffic.resolve()
        self.said("traffic stopped, every record acknowledged or indefinite")
        healed = self.healed_at or time.monotonic()
        verdicts: dict[Mode, Verdict] = {}
        recovery: dict[Mode, float] = {}
        for mode, traffic in self.traffic.items():
            tail = self.tails[mode]
            starts = (removed or {}).get(mode, {})
            below = {
                i
                for p, recs in traffic.acknowledged.items()
                for o, i in recs
                if o < starts.get(p, 0)
            }
            want = {i for recs in traffic.acknowledged.values() for _, i in recs} - below
            left = max(1.0, healed + catch_up_bound - time.monotonic())
            wait_for(
                lambda t=tail, w=want: t.unseen(w) == 0,  # type: ignore[misc]
                left,
                lambda t=tail, w=want, m=mode: (  # type: ignore[misc]
                    f"{m}: every one of {len(w)} acknowledged records of {self.topic(m)} "
                    f"readable on B ({t.unseen(w)} unseen; bound {catch_up_bound:.0f}s after "
                    "the fault healed)"
                ),
                poll=0.5,
            )
            recovery[mode] = time.monotonic() - healed
            self.said(f"{mode}: every acknowledged record readable on B")
            copies = read_copies(self.clusters["B"].bootstrap, self.remote(mode))
            seen = {c.id for cs in copies.values() for c in cs}
            self.gone[mode] = {
                p: len({i for o, i in recs if o < starts.get(p, 0)} - seen)
                for p, recs in traffic.acknowledged.items()
            }
            expected = {
                p: [(o, i) for o, i in recs if i not in below or i in seen]
                for p, recs in traffic.acknowledged.items()
            }
            verdicts[mode] = check(expected, (), copies, mode, indefinite=traffic.indefinite)
        for tail in self.tails.values():
            tail.stop()
        not_on_source = {m: len(t.not_on_source) for m, t in self.traffic.items()}
        record(self.name, verdicts, recovery, not_on_source)
        return verdicts


def record(
    name: str,
    verdicts: dict[Mode, Verdict],
    recovery: dict[Mode, float],
    not_on_source: dict[Mode, int],
) -> None:
    """One line per fault and mode for the docs' results table (scripts/fault_table.py)."""
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as out:
        for mode, verdict in verdicts.items():
            row = {
                "fault": name,
                "mode": mode,
                **verdict.to_row(),
                "recovery_seconds": round(recovery[mode], 1),
                "not_on_source": not_on_source.get(mode, 0),
                "ok": verdict.ok(),
            }
            out.write(json.dumps(row) + "\n")


def assert_exact(verdicts: dict[Mode, Verdict]) -> None:
    failures = [v.describe() for v in verdicts.values() if not v.ok()]
    assert not failures, "\n".join(failures)


def leader_of(cluster: LocalCluster, topic: str, partition: int = 0) -> int:
    admin = AdminClient(quiet({"bootstrap.servers": cluster.bootstrap}))
    return int(admin.list_topics(topic, timeout=30).topics[topic].partitions[partition].leader)


def nodes_up(cluster: LocalCluster) -> Iterator[int]:
    return (n.node_id for n in cluster.nodes if n.is_running())


def java_hash(text: str) -> int:
    """Java's String.hashCode, as Kafka places a transactional id or group on a coordinator."""
    h = 0
    for char in text.encode("utf-16-be").decode("utf-16-be"):
        h = (31 * h + ord(char)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def coordinator_of(cluster: LocalCluster, key: str, internal_topic: str) -> int:
    """The broker coordinating `key` (a transactional id in `__transaction_state`, a group in
    `__consumer_offsets`): the leader of the partition Kafka hashes it to."""
    admin = AdminClient(quiet({"bootstrap.servers": cluster.bootstrap}))
    partitions = admin.list_topics(internal_topic, timeout=30).topics[internal_topic].partitions
    index = (java_hash(key) & 0x7FFFFFFF) % len(partitions)
    return int(partitions[index].leader)


def active_controller(cluster: LocalCluster, timeout: float = 120.0) -> int | None:
    """The quorum's leader, as Kafka's own metadata-quorum tool reports it, asked of the nodes
    that run (a killed node in its bootstrap list costs the tool its connection timeouts);
    None when the tool did not answer within `timeout` (a JVM starting beside a loaded
    machine's brokers: a caller polling asks again)."""
    import subprocess

    from ferry.local.distribution import kafka_classpath

    live = ",".join(node.bootstrap for node in cluster.nodes if node.is_running())
    try:
        result = subprocess.run(
            [
                "java",
                "-Xmx128m",
                "-cp",
                kafka_classpath(),
                "org.apache.kafka.tools.MetadataQuorumCommand",
                "--bootstrap-server",
                live or cluster.bootstrap,
                "describe",
                "--status",
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
    except subprocess.TimeoutExpired:
        return None
    for line in result.stdout.splitlines():
        if line.startswith("LeaderId:"):
            return int(line.split(":")[1])
    raise AssertionError(f"no LeaderId in the quorum's status:\n{result.stdout}{result.stderr}")


def known_controller(cluster: LocalCluster, timeout: float = 300.0) -> int:
    """The quorum's leader, asked again until the tool answers within `timeout`."""
    found: list[int | None] = []

    def known() -> bool:
        found.append(active_controller(cluster))
        return found[-1] is not None

    wait_for(
        known,
        timeout,
        f"the active controller of {cluster.alias} known",
    )
    controller = found[-1]
    assert controller is not None
    return controller
