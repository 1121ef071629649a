"""`ferry demo`: two local clusters, sample traffic into A, ferry replicating it to B, explained.

The tour: start clusters A and B, create `orders` and `payments` on A, write a ferry.yaml,
produce keyed records into A at a steady rate for a while, and run the replication engine
(`ferry run`, continuous) with its live progress view meanwhile. Once the traffic has stopped
and B holds every record A does (compared by watermarks, partition by partition), ferry is
stopped after its current batch and the demo shows the counts, one copied record and what it
all means. A demo that cannot show every record on B fails (exit 1) instead of explaining.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from ferry.errors import FerryError
from ferry.kafka import clients
from ferry.kafka.provenance import ORIGIN_HEADER
from ferry.local import clusters as local
from ferry.local.security import SecurityMode
from ferry.secrets import is_secret_key
from ferry.terminal.console import rule, styled

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ferry.engine.flow_query import FlowProgress
    from ferry.engine.runner import Runner
    from ferry.terminal.progress_view import ProgressView

__all__ = ["run_demo"]

TOPICS = {"orders": 3, "payments": 2}  # topic on A: partitions
RATE = 3000  # records per second into A, two orders for each payment
TRAFFIC_SECONDS = 15.0
# Seconds of traffic instead of TRAFFIC_SECONDS: the test suite runs a shorter demo.
TRAFFIC_SECONDS_ENV = "FERRY_DEMO_TRAFFIC_SECONDS"
CATCH_UP_SECONDS = 45.0  # after the traffic stops; more means ferry is broken, not slow
STATUS_EVERY_SECONDS = 5.0


def _traffic_seconds() -> float:
    """How long the demo's producer writes: TRAFFIC_SECONDS, or FERRY_DEMO_TRAFFIC_SECONDS."""
    raw = os.environ.get(TRAFFIC_SECONDS_ENV)
    if raw is None:
        return TRAFFIC_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise FerryError(f"{TRAFFIC_SECONDS_ENV} '{raw}' is not a positive number of seconds")
    return seconds


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value or "")


# --- sample traffic ---------------------------------------------------------------------------


class _Traffic(threading.Thread):
    """Keyed orders and payments into A at a steady rate; counts what A acknowledged."""

    def __init__(self, cluster: dict[str, str], rate: int, seconds: float) -> None:
        super().__init__(name="ferry-demo-traffic", daemon=True)
        self.cluster = cluster
        self.rate = rate
        self.seconds = seconds
        self.acked = dict.fromkeys(TOPICS, 0)
        self.failures: list[str] = []
        self.error: BaseException | None = None
        self.finished = threading.Event()
        self._stop_now = threading.Event()

    @property
    def total(self) -> int:
        return sum(self.acked.values())

    def stop(self) -> None:
        self._stop_now.set()

    def run(self) -> None:
        try:
            self._produce()
        except BaseException as exc:  # reported by the main thread
            self.error = exc
        finally:
            self.finished.set()

    def _on_delivery(self, err: object, msg: Any) -> None:
        if err is None:
            self.acked[msg.topic()] += 1
        elif len(self.failures) < 5:
            self.failures.append(str(err))

    def _produce(self) -> None:

        producer = clients.producer(
            {
                **self.cluster,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 10,
            }
        )
        began = time.monotonic()
        sent = 0
        while not self._stop_now.is_set():
            elapsed = time.monotonic() - began
            due = int(min(elapsed, self.seconds) * self.rate)
            while sent < due:
                topic, key, value = _sample(sent)
                try:
                    producer.produce(
                        topic,
                        key=key,
                        value=value,
                        headers=[("app", b"demo-shop")],
                        on_delivery=self._on_delivery,
                    )
                except BufferError:
                    producer.poll(0.1)
                    continue
                sent += 1
            producer.poll(0)
            if elapsed >= self.seconds:
                break
            self._stop_now.wait(0.05)
        if producer.flush(30) != 0:
            self.failures.append("records still unacknowledged 30 s after the traffic stopped")


def _sample(n: int) -> tuple[str, bytes, bytes]:
    """Record n of the traffic: two orders, then a payment; keyed by customer."""
    number, kind = divmod(n, 3)
    customer = f"customer-{n * 7 % 40:02d}"
    if kind == 2:
        body: dict[str, object] = {"payment": number, "customer": customer, "amount": 19.9}
        return "payments", customer.encode(), json.dumps(body).encode()
    body = {"order": number * 2 + kind, "customer": customer, "item": f"sku-{n % 97}", "qty": 1}
    return "orders", customer.encode(), json.dumps(body).encode()


# --- looking at the clusters ------------------------------------------------------------------


class _Cluster:
    """Watermarks and single records of one cluster, through one consumer."""

    def __init__(self, cluster: dict[str, str]) -> None:

        from ferry.kafka.log import quiet

        self.consumer = clients.consumer(
            quiet(
                {
                    **cluster,
                    "group.id": f"ferry-demo-{uuid.uuid4().hex[:8]}",
                    "enable.auto.commit": False,
                }
            )
        )

    def partitions(self, topic: str) -> int:
        md = self.consumer.list_topics(topic, timeout=10).topics.get(topic)
        return 0 if md is None or md.error is not None else len(md.partitions)

    def counts(self, topic: str, partitions: int) -> list[int]:
        """Records held per partition (high minus low watermark); 0 for a missing partition."""
        from confluent_kafka import TopicPartition

        present = self.partitions(topic)
        out = []
        for p in range(partitions):
            if p >= present:
                out.append(0)
                continue
            low, high = self._watermarks(TopicPartition(topic, p))
            out.append(high - low)
        return out

    def _watermarks(self, tp: Any) -> tuple[int, int]:
        """Watermarks, waiting out a just-created partition whose leader is not elected yet."""
        from confluent_kafka import KafkaError, KafkaException

        transient = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)
        deadline = time.monotonic() + 30
        while True:
            try:
                low, high = self.consumer.get_watermark_offsets(tp, timeout=10, cached=False)
                return int(low), int(high)
            except KafkaException as exc:  # waits out a leader election, per code
                if exc.args[0].code() not in transient or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def record(self, topic: str, partition: int, offset: int | None = None) -> Any:
        """The record at `offset` (default: the first retained one), or None."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        start = OFFSET_BEGINNING if offset is None else offset
        self.consumer.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + 10
        try:
            while time.monotonic() < deadline:
                msg = self.consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    return msg
            return None
        finally:
            self.consumer.unassign()

    def close(self) -> None:
        self.consumer.close()


def _create_topics(cluster: dict[str, str]) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]  # no __all__: not re-exported

    admin = clients.admin_client(cluster)
    new = [NewTopic(t, num_partitions=n, replication_factor=1) for t, n in TOPICS.items()]
    for future in admin.create_topics(new).values():
        try:
            future.result(30)
        except KafkaException as exc:  # kept clusters (--keep) already have them
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def _write_config(directory: Path, brokers: dict[str, Any]) -> Path:
    path = directory / "ferry.yaml"
    secrets = directory / "secrets.properties"
    kept: list[str] = []
    lines = ["# Written by `ferry demo`: replicate every topic of A to B.", "clusters:"]
    for alias in ("A", "B"):
        settings = []
        for key, value in brokers[alias].client_settings.items():
            if is_secret_key(key):  # kept out of the config, read from a file at load
                kept.append(f"{alias}.{key}={value}")
                value = f"${{file:{secrets}:{alias}.{key}}}"
            settings.append(f'{key}: "{value}"')
        lines.append(f"  {alias}: {{{', '.join(settings)}}}")
    lines += [
        "A->B.enabled: true",
        "replication.factor: 1                       # single-broker clusters",
        "offset-syncs.topic.replication.factor: 1",
        "checkpoints.topic.replication.factor: 1",
        "heartbeats.topic.replication.factor: 1",
        f"ferry.state.dir: {directory / 'state'}",
    ]
    if kept:
        secrets.touch(mode=0o600)
        secrets.write_text("\n".join(kept) + "\n")
    path.write_text("\n".join(lines) + "\n")
    return path


# --- the tour ---------------------------------------------------------------------------------


class _Watch:
    """Called with ferry's progress every 0.25 s once its query runs: starts the traffic then,
    updates the view, prints a status line now and then (logs see no live view), and asks the
    runner to stop once the traffic is over and B holds all of A."""

    def __init__(
        self, console: Console, view: ProgressView, traffic: _Traffic, a: _Cluster, b: _Cluster
    ):
        self.console = console
        self.view = view
        self.traffic = traffic
        self.a = a
        self.b = b
        self.runner: Runner | None = None
        self.began = 0.0
        self.next_status = 0.0
        self.next_check = 0.0
        self.caught_up = False
        self.timed_out = False
        self.traffic_ended: float | None = None

    def _status(self, now: float, text: str) -> None:
        self.console.print(f"  {now - self.began:4.0f} s  {text}", highlight=False)

    def __call__(self, flows: list[FlowProgress]) -> None:
        self.view.update(flows)
        now = time.monotonic()
        if not self.began:
            self.began = now
            self.next_status = now + STATUS_EVERY_SECONDS
            self.traffic.start()
            self._status(now, "ferry is running; the producer starts")
            return
        copied, lag = sum(p.records for p in flows), sum(p.lag for p in flows)
        if now >= self.next_status:
            self.next_status = now + STATUS_EVERY_SECONDS
            self._status(
                now,
                f"producer wrote {self.traffic.total:,} records to A; "
                f"ferry copied {copied:,} to B, lag {lag:,}",
            )
        if self.runner is None or not self.traffic.finished.is_set():
            return
        if self.traffic_ended is None:
            self.traffic_ended = now
            self.next_status = now + STATUS_EVERY_SECONDS
            self._status(now, f"producer done ({self.traffic.total:,}); ferry catches up")
        if self.traffic.error is not None or self.traffic.failures:
            self.runner.request_stop()
        elif lag == 0 and now >= self.next_check:
            self.next_check = now + 0.5
            if all(_holds(self.a, self.b, t, n) for t, n in TOPICS.items()):
                self.caught_up = True
                self._status(now, f"B holds all {self.traffic.total:,}; stopping ferry")
                self.runner.request_stop()
        if not self.caught_up and now - self.traffic_ended > CATCH_UP_SECONDS:
            self.timed_out = True
            self.runner.request_stop()


def _holds(a: _Cluster, b: _Cluster, topic: str, partitions: int) -> bool:
    """B's copy of `topic` has at least as many records as A's, partition by partition."""
    copies = b.counts(f"A.{topic}", partitions)
    return all(c >= s for c, s in zip(copies, a.counts(topic, partitions), strict=True))


def _start_spark(state_dir: Path) -> SparkSession:
    from ferry.config.model import FerryConfig
    from ferry.engine.spark.session import spark_session

    # The demo's config sets no `spark.*` key, so this is the session `ferry run` would build
    # (its log goes to the state dir).
    return spark_session(FerryConfig(clusters={}, state_dir=state_dir))


def run_demo(
    console: Console, directory: Path, *, keep: bool = False, secure: bool = False
) -> None:
    # Spark's Python workers must import ferry: use this interpreter, not the first python3.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    directory = directory.resolve()
    traffic_seconds = _traffic_seconds()  # a bad value is refused before anything starts
    rule(console, styled(("ferry demo", "bold")))
    console.print(
        styled(
            "Starting two independent Apache Kafka clusters, ",
            ("A", "bold"),
            " and ",
            ("B", "bold"),
            " on 127.0.0.1 (each a real KRaft broker+controller JVM, as a datacenter would run), "
            "and Apache Spark, which runs ferry's replication.",
        ),
        soft_wrap=False,
    )
    mode: SecurityMode = "sasl_ssl" if secure else "plaintext"
    if secure:
        console.print(
            "Both clusters are secure, as production runs them: TLS listeners with a fresh CA, "
            "SCRAM-SHA-512 users (an admin, and `ferry` with only the ACLs ferry needs), an ACL "
            "authorizer. ferry's password stays out of its config and of every line it prints.",
            soft_wrap=False,
        )
    kept = local.read_state(directory)
    running = [b.is_running() and b.security == mode for b in kept.values()]
    if not ({"A", "B"} <= kept.keys() and all(running)):
        local.down(directory)  # a half-stopped earlier demo: start both clusters afresh
        shutil.rmtree(directory / "state", ignore_errors=True)  # its progress means nothing now
    started = time.monotonic()
    spark: SparkSession | None = None
    clients: list[_Cluster] = []
    traffic: _Traffic | None = None
    succeeded = False
    try:
        # The brokers start while Spark's JVM does; Spark stays in the main thread, where its
        # session is active (a data source registered from another thread is not found).
        with ThreadPoolExecutor(max_workers=1) as pool:
            brokers_future = pool.submit(local.up, ["A", "B"], directory, security=mode)
            try:
                spark = _start_spark(directory / "state")
            finally:
                brokers = brokers_future.result()
        console.print(
            f"Both clusters answered and Spark started in {time.monotonic() - started:.1f} s:"
        )
        for alias, broker in brokers.items():
            console.print(
                f"  {alias}: {broker.bootstrap} (pid {broker.pid}, data in {broker.directory})"
            )
        # The demo's own clients use the admin principal of a secure cluster; ferry its own.
        traffic = _Traffic(brokers["A"].admin_settings, RATE, traffic_seconds)
        clients = [_Cluster(brokers["A"].admin_settings), _Cluster(brokers["B"].admin_settings)]
        _tour(console, directory, brokers, spark, traffic, *clients)
        succeeded = True
    finally:
        if traffic is not None and traffic.is_alive():
            traffic.stop()
            traffic.join(35)
        for client in clients:
            client.close()
        if spark is not None:
            spark.stop()
        if keep:
            console.print(
                f"Clusters left running (A only if the demo stopped before losing it); stop "
                f"them with: ferry local down --dir {directory}\n"
                f"Replicate again with: ferry run -c {directory / 'ferry.yaml'}"
            )
        else:
            if succeeded:
                (directory / "ferry.yaml").unlink(missing_ok=True)
                (directory / "secrets.properties").unlink(missing_ok=True)
                shutil.rmtree(directory / "state", ignore_errors=True)
            else:
                console.print(f"ferry's state and Spark's log are kept in {directory / 'state'}")
            local.down(directory)
            console.print("Clusters stopped; no process or port left behind.")


def _tour(
    console: Console,
    directory: Path,
    brokers: dict[str, Any],
    spark: SparkSession,
    traffic: _Traffic,
    a: _Cluster,
    b: _Cluster,
) -> None:
    from ferry.config import load_config
    from ferry.demo.failover import failover_act
    from ferry.engine.runner import Runner
    from ferry.terminal.progress_view import ProgressView

    _create_topics(brokers["A"].admin_settings)
    config_path = _write_config(directory, brokers)
    config = load_config(config_path)
    console.print(
        f"\nOn A: topics {', '.join(f'{t} ({n} partitions)' for t, n in TOPICS.items())}. "
        f"ferry's whole config, {config_path}:",
        soft_wrap=False,
    )
    for line in config_path.read_text().splitlines()[1:]:
        console.print(f"  {line}", highlight=False, markup=False)
    console.print(
        f"\nA producer now writes {RATE:,} records/s into A for {traffic.seconds:g} s "
        "(keyed by customer, with a header), while ferry copies them to B as they arrive:",
        soft_wrap=False,
    )
    before = {t: sum(a.counts(t, n)) for t, n in TOPICS.items()}  # kept clusters hold some
    with ProgressView(console) as view:
        watch = _Watch(console, view, traffic, a, b)
        runner = Runner(
            config, spark=spark, on_progress=watch, on_notice=lambda m: console.print(f"  {m}")
        )
        watch.runner = runner
        flows = runner.run()
    if traffic.is_alive():  # Ctrl-C while it still ran
        traffic.stop()
        traffic.join(35)
    if traffic.error is not None:
        raise FerryError(f"the demo's producer failed: {traffic.error}")
    if traffic.failures:
        raise FerryError(f"A refused the demo's records: {'; '.join(traffic.failures)}")
    seconds = max((p.seconds for p in flows), default=0.0)
    console.print(
        f"\nferry ran {seconds:.1f} s and stopped after its last batch; the producer wrote "
        f"{traffic.total:,} records ({', '.join(f'{t} {n:,}' for t, n in traffic.acked.items())}).",
        soft_wrap=False,
    )
    complete = _print_counts(console, a, b, traffic, before)
    interrupted = not (watch.caught_up or watch.timed_out)  # Ctrl-C
    if interrupted and not (complete and traffic.total):
        console.print("Stopped before ferry caught up; the counts above are where it got to.")
        return
    if not complete:
        when = f" {CATCH_UP_SECONDS:.0f} s after the traffic stopped" if watch.timed_out else ""
        raise FerryError(
            f"B does not hold exactly the records of A{when}; "
            f"see the table above and {directory / 'state'}"
        )
    _print_sample(console, a, b)
    _explain(console, config.state_dir)
    failover_act(console, config, brokers)


def _print_counts(
    console: Console, a: _Cluster, b: _Cluster, traffic: _Traffic, before: dict[str, int]
) -> bool:
    """The per-topic table; True if every topic's copy holds all of A, partition by partition."""
    table = Table(title="\nrecords on each cluster, by watermarks", title_justify="left")
    for column in ("on A", "records", "on B", "records", "partitions A/B", "all copied"):
        table.add_column(column, justify="right" if column == "records" else "left")
    complete = True
    for topic, partitions in TOPICS.items():
        remote = f"A.{topic}"
        source, copies = a.counts(topic, partitions), b.counts(remote, partitions)
        produced = before[topic] + traffic.acked[topic]
        ok = copies == source and sum(source) == produced
        complete = complete and ok
        table.add_row(
            topic,
            f"{sum(source):,}",
            remote,
            f"{sum(copies):,}",
            f"{a.partitions(topic)}/{b.partitions(remote)}",
            "yes" if ok else "NO",
        )
    console.print(table)
    return complete


def _print_sample(console: Console, a: _Cluster, b: _Cluster) -> None:
    copy = b.record("A.orders", 0)
    if copy is None:
        raise FerryError("no record could be read back from A.orders on B")
    headers = list(copy.headers() or [])
    origin = next((_text(v) for k, v in headers if k == ORIGIN_HEADER), "")
    console.print(
        f"\nOne record as copied to B (A.orders, partition {copy.partition()}, "
        f"offset {copy.offset()}):",
        highlight=False,
    )
    stamp = datetime.fromtimestamp(copy.timestamp()[1] / 1000).isoformat(" ", "milliseconds")
    rows = [("key", _text(copy.key())), ("value", _text(copy.value())), ("timestamp", stamp)]
    rows += [("header", f"{k}={_text(v)}") for k, v in headers]
    for name, text in rows:
        console.print(f"  {name:<10} {text}", highlight=False, markup=False)
    try:
        _cluster_id, alias, partition, offset, topic = origin.split("|", 4)
        original = a.record(topic, int(partition), int(offset))
    except ValueError:
        raise FerryError(f"the copy's {ORIGIN_HEADER} header is malformed: {origin!r}") from None
    own_headers = [h for h in headers if h[0] != ORIGIN_HEADER]
    if original is None or (
        original.key(),
        original.value(),
        original.timestamp(),
        original.headers() or [],
    ) != (copy.key(), copy.value(), copy.timestamp(), own_headers):
        raise FerryError(f"the copy differs from {topic} partition {partition} offset {offset}")
    console.print(
        f"  the original: {topic}, partition {partition}, offset {offset} on {alias}\n"
        f"  the copy has its key, value, timestamp and headers, plus {ORIGIN_HEADER}",
        highlight=False,
    )


def _explain(console: Console, state_dir: Path) -> None:
    console.print(
        "\nWhat you saw:\n"
        "- orders on A became A.orders on B: the prefix names where a topic came from.\n"
        "- Each record kept its partition, its place in it, key, value, headers and\n"
        "  timestamp, and gained a ferry.origin header (cluster, topic, partition and\n"
        "  offset on A): every copy traces back to exactly one source record.\n"
        "- How far A has been copied is checkpointed in ferry.state.dir, here\n"
        f"  {state_dir}\n"
        "- A batch is committed there only after B acknowledged every copy in it, so\n"
        "  a stopped or crashed ferry resumes from there and never skips a record.\n",
        highlight=False,
        markup=False,
    )
