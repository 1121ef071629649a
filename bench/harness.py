"""What every benchmark shares: local clusters, topics, preloading, counting, process trees.

Rates count MB as 1e6 bytes of key + value. CPU and memory are those of a measured process
and every process it starts (its whole tree: a JVM, Spark's Python workers), read from /proc;
the Kafka brokers are never included.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

VALUE_POOL_BYTES = 4 * 1024 * 1024
SAMPLE_INTERVAL = 0.25
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def compile_ferry() -> None:
    """Byte-compile ferry's modules, as installing a wheel does. With an editable install and
    PYTHONDONTWRITEBYTECODE set (as on the machine these figures come from), every Spark
    Python worker would otherwise compile ferry from source again."""
    import compileall

    import ferry

    compileall.compile_dir(Path(ferry.__file__).parent, quiet=1)


def in_own_process(target: Callable[..., None], args: tuple[Any, ...], timeout: float) -> Any:
    """`target(*args, queue)` in a spawned process of its own (nothing of this process's
    threads or clients in it); what it put on the queue, waited for up to `timeout`."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    worker = context.Process(target=target, args=(*args, queue))
    worker.start()
    outcome = queue.get(timeout=timeout)
    worker.join(30)
    return outcome


def write_report(out: Path, stem: str, report: Mapping[str, Any], text: str) -> None:
    """A benchmark's results as `<stem>.json` and `<stem>.md` under `out`, and the table on
    standard output."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / f"{stem}.md").write_text(text)
    print(text)


# --- clusters and topics ----------------------------------------------------------------------


def ferry_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "ferry", *args]


def ferry_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


@contextmanager
def local_clusters(
    directory: Path, heap: str = "1g", aliases: tuple[str, ...] = ("A", "B")
) -> Iterator[tuple[str, ...]]:
    """Fresh single-broker clusters (A and B by default), their bootstraps in the aliases'
    order; always stopped again (even if `up` failed)."""
    try:
        up = subprocess.run(
            [
                *ferry_command(
                    "local",
                    "up",
                    "--clusters",
                    ",".join(aliases),
                    "--dir",
                    str(directory),
                    "--json",
                ),
                "--heap",
                heap,
            ],
            capture_output=True,
            text=True,
            check=False,
            env=ferry_env(),
        )
        if up.returncode != 0:
            raise RuntimeError(f"ferry local up failed:\n{up.stderr[-3000:]}")
        bootstraps = json.loads(up.stdout)
        for alias in aliases:
            delete_logs_at_once(bootstraps[alias])
        yield tuple(bootstraps[alias] for alias in aliases)
    finally:
        subprocess.run(
            ferry_command("local", "down", "--dir", str(directory)),
            capture_output=True,
            check=False,
            env=ferry_env(),
        )


# A broker deletes a deleted topic's log files `log.segment.delete.delay.ms` after the deletion
# (60 s by default). A benchmark deletes each run's topics when the run ends, so by default the
# files of a run (1.2 GB at 20,000 records/s for 75 s) went 60 s later, in the middle of the
# next run's timed window: both brokers' scheduler threads took a third of a core each for
# about a second, and every partition's copies waited (measured: an episode of up to 100 ms
# at 37 s into the timed window, 60 s after the previous run's cleanup). With no delay the
# files go while the next replicator starts, before anything is timed.
def delete_logs_at_once(bootstrap: str) -> None:
    """Set `log.segment.delete.delay.ms` of every broker of a benchmark's own cluster to 0."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry(
        "log.segment.delete.delay.ms", "0", incremental_operation=AlterConfigOpType.SET
    )
    resources = [
        ConfigResource(ResourceType.BROKER, str(node), incremental_configs=[entry])
        for node in admin.list_topics(timeout=30).brokers
    ]
    for future in admin.incremental_alter_configs(resources).values():
        future.result(timeout=30)


def create_topic(
    bootstrap: str, topic: str, partitions: int, config: Mapping[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(
        topic, num_partitions=partitions, replication_factor=1, config=dict(config or {})
    )
    admin.create_topics([new])[topic].result(30)


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics(topics, operation_timeout=30).values():
        future.result(60)


def cleanup_topics(bootstrap: str, topics: list[str]) -> None:
    """Delete topics, one by one; a topic that is not there (a failed run) is only noted."""
    for topic in topics:
        try:
            delete_topics(bootstrap, [topic])
        except Exception as exc:
            print(f"note: could not delete {topic} on {bootstrap}: {exc}", file=sys.stderr)


def make_values(value_bytes: int) -> list[bytes]:
    """Distinct random values, at least 4 MiB in all: lz4 finds nothing to compress."""
    count = max(1, -(-VALUE_POOL_BYTES // max(1, value_bytes)))
    return [os.urandom(value_bytes) for _ in range(count)]


def preload(bootstrap: str, topic: str, partitions: int, records: int, values: list[bytes]) -> int:
    """Produce `records` records (keys `k<i>`, round-robin over partitions), wait for every
    ack; returns the key + value bytes."""
    failures: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failures.append(err)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "compression.type": "lz4",
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "on_delivery": on_delivery,
        }
    )
    produce = producer.produce
    pool = len(values)
    total = 0
    for i in range(records):
        key = f"k{i}".encode()
        value = values[i % pool]
        while True:
            try:
                produce(topic, value, key, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.1)
        total += len(key) + len(value)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(300) > 0 or failures:
        raise RuntimeError(f"preloading {topic} failed: {failures[:1] or 'flush timed out'}")
    return total


def warm_up(bootstrap: str) -> None:
    """Have a fresh cluster hand out its first producer id before anything is timed.

    A new KRaft cluster answers the first InitProducerId with COORDINATOR_LOAD_IN_PROGRESS for
    a while; without this the first measured run would pay for it and later ones would not.
    """
    topic = f"bench-warmup-{uuid.uuid4()}"
    create_topic(bootstrap, topic, 1)
    try:
        preload(bootstrap, topic, 1, 1, [b"warm-up"])
    finally:
        cleanup_topics(bootstrap, [topic])


# A fresh cluster's transaction paths, exercised before the first timed exactly-once run:
# measured, the first run after the clusters started had p99 376 ms (ferry) and 678 ms (MM2)
# where the later runs of the same sittings had 97-180 and 135.
TRANSACTION_WARM_UP_SECONDS = 60.0


def warm_transaction_paths(
    bootstrap: str, seconds: float = TRANSACTION_WARM_UP_SECONDS, partitions: int = 8
) -> int:
    """Transactions of 125 records of 1 KiB one after another for `seconds` (at most 5,000
    records/s; about 3,500 on the 2-core machine the benchmarks run on), each committing a
    group offset beside its records, read by a read_committed consumer: the transaction and group
    coordinators, the markers and the read_committed fetch path of a fresh cluster run for a
    while before anything is timed, so that neither replicator's first run pays for their
    warm-up (no replicator takes part). Returns the records the consumer read."""
    name = f"bench-warm-txn-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, name, partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": name, "linger.ms": 0})
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": name,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(name, p, 0) for p in range(partitions)])
    value, per_transaction, read = b"w" * 1024, 125, 0  # 125 per 25 ms: 5,000/s
    try:
        producer.init_transactions(60)
        sent = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            producer.begin_transaction()
            for i in range(per_transaction):
                producer.produce(name, value, partition=i % partitions)
            sent += per_transaction
            positions = [TopicPartition(name, p, sent // partitions) for p in range(partitions)]
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata())
            producer.commit_transaction(60)
            read += len(consumer.consume(1000, 0.025))  # paces the transactions, too
    finally:
        consumer.close()
        cleanup_topics(bootstrap, [name])
    return read


class TopicCounter:
    """Counts what a topic holds (sum of high minus low watermarks) with one cached client."""

    def __init__(self, bootstrap: str) -> None:
        self._consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}"}
        )
        self._partitions: dict[str, int] = {}
        self._last: dict[str, int] = {}

    def count(self, topic: str) -> int:
        """Records in `topic` now; 0 while it does not exist yet."""
        partitions = self._partitions.get(topic)
        if partitions is None:
            metadata = self._consumer.list_topics(topic, timeout=10).topics.get(topic)
            if metadata is None or metadata.error is not None or not metadata.partitions:
                return 0
            if any(p.leader < 0 for p in metadata.partitions.values()):
                return 0  # just created: not every partition has a leader yet
            partitions = len(metadata.partitions)
            self._partitions[topic] = partitions
        total = 0
        for partition in range(partitions):
            try:
                low, high = self._consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=10
                )
            except KafkaException:
                # A partition just created (or moving): its leader is not known everywhere
                # yet. Count what was seen last time; the next poll asks again.
                return self._last.get(topic, 0)
            total += high - low
        self._last[topic] = total
        return total

    def close(self) -> None:
        self._consumer.close()


def wait_for_count(
    counter: TopicCounter, topic: str, expected: int, timeout: float, what: str
) -> None:
    """Poll until `topic` holds at least `expected` records; raise after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        held = counter.count(topic)
        if held >= expected:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: {topic} holds {held} of {expected} after {timeout:.0f}s")
        time.sleep(0.2)


# --- measured processes -----------------------------------------------------------------------


def read_stat(pid: int) -> tuple[int, int, int, int] | None:
    """(ppid, start time, utime + stime in ticks, rss in pages) of a live process, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[19]), int(fields[11]) + int(fields[12]), int(fields[21])


def process_tree(root: int) -> dict[int, tuple[int, int, int]]:
    """Every live descendant of `root` (and root): pid -> (start time, cpu ticks, rss pages)."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = read_stat(int(entry))
            if stat is not None:
                stats[int(entry)] = stat
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_rest) in stats.items():
        children.setdefault(ppid, []).append(pid)
    tree = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            tree[pid] = stats[pid][1:]
            todo.extend(children.get(pid, []))
    return tree


class TreeSampler:
    """Polls /proc for the CPU ticks and total RSS of a process tree.

    A process's CPU counts as of its last sample (a process that exits between samples loses
    at most one interval). Peak RSS: the largest sum over the tree at one sample; pages that
    forked Python workers share with their daemon count once per process, so it overstates
    what the tree really holds.
    """

    def __init__(self, root: int) -> None:
        self.root = root
        self.ticks: dict[tuple[int, int], int] = {}
        self.peak_rss_bytes = 0

    def sample(self) -> None:
        tree = process_tree(self.root)
        for pid, (start, cpu, _rss) in tree.items():
            self.ticks[(pid, start)] = cpu
        rss = sum(pages for _start, _cpu, pages in tree.values()) * PAGE_SIZE
        self.peak_rss_bytes = max(self.peak_rss_bytes, rss)

    @property
    def cpu_seconds(self) -> float:
        return sum(self.ticks.values()) / CLOCK_TICKS

    @property
    def processes(self) -> int:
        return len(self.ticks)


class MeasuredProcess:
    """A process started in its own session (so its whole tree can be signalled), sampled.

    stdout and stderr go to `log`.out and `log`.err. Call `sample()` as often as wanted
    (it samples at most every SAMPLE_INTERVAL seconds); `stop()` ends the tree.
    """

    def __init__(self, command: list[str], log: Path, env: Mapping[str, str] | None = None) -> None:
        self.log = log
        self.load_before = os.getloadavg()[0]  # others' work too: the brokers, other users
        self._out: IO[bytes] = log.with_suffix(".out").open("wb")
        self._err: IO[bytes] = log.with_suffix(".err").open("wb")
        self.began = time.monotonic()
        self.proc = subprocess.Popen(
            command,
            stdout=self._out,
            stderr=self._err,
            env=dict(env) if env is not None else None,
            start_new_session=True,
        )
        self.sampler = TreeSampler(self.proc.pid)
        self._next_sample = 0.0
        self.returncode: int | None = None
        self.ended: float | None = None
        self._reaped_cpu = 0.0

    def sample(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.returncode is None and (force or now >= self._next_sample):
            self.sampler.sample()
            self._next_sample = now + SAMPLE_INTERVAL

    def poll(self) -> int | None:
        """The exit code once the process exited (and was reaped here), else None."""
        if self.returncode is None:
            done, status, rusage = os.wait4(self.proc.pid, os.WNOHANG)
            if done:
                self._reaped(status, rusage)
        return self.returncode

    def _reaped(self, status: int, rusage: Any) -> None:
        self.ended = time.monotonic()
        self.returncode = os.waitstatus_to_exitcode(status)
        self.proc.returncode = self.returncode  # reaped here, not by Popen
        # The kernel's rusage of the reaped tree misses processes orphaned before they exit;
        # polling misses each process's last interval: the larger is closer.
        self._reaped_cpu = rusage.ru_utime + rusage.ru_stime
        self._out.close()
        self._err.close()

    @property
    def cpu_seconds(self) -> float:
        return max(self.sampler.cpu_seconds, self._reaped_cpu)

    def wait(self, timeout: float) -> int:
        """Wait for the process to exit, sampling meanwhile; TimeoutError after `timeout`."""
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.log.name} still running after {timeout:.0f}s")
            self.sample()
            time.sleep(0.02)
        assert self.returncode is not None
        return self.returncode

    def stop(self, grace: float = 30.0) -> int:
        """SIGTERM to the process (it stops its children itself: ferry stops after the running
        batch, MM2 stops its connectors), SIGKILL to the whole session after `grace` seconds
        or once it exited (leftovers); the exit code."""
        if self.poll() is None:
            self.sample(force=True)
            with suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            with suppress(TimeoutError):
                self.wait(grace)
        self.kill()
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        self._signal(signal.SIGKILL)
        if self.returncode is None:
            _pid, status, rusage = os.wait4(self.proc.pid, 0)
            self._reaped(status, rusage)
        self._signal(signal.SIGKILL)  # children that outlived the leader (same session)

    def _signal(self, sig: int) -> None:
        with suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def stderr_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.with_suffix(".err").read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def sample_in_background(proc: MeasuredProcess) -> Callable[[], None]:
    """Sample `proc` every SAMPLE_INTERVAL from a thread (the producer loop is busy); call
    what this returns to stop."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(SAMPLE_INTERVAL):
            proc.sample()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()

    def stopper() -> None:
        stop.set()
        thread.join()

    return stopper


@dataclass
class CopyTiming:
    """How a replicator copied a preloaded topic, as seen from outside (target watermarks)."""

    seconds: float  # process start until the target held every record
    first_seconds: float  # process start until the first record arrived on the target
    cpu_seconds: float  # of the replicator's process tree until the target held every record
    peak_rss_bytes: int
    processes: int
    load_before: float
    target_records: int

    @property
    def copy_seconds(self) -> float:
        """From the first record on the target to the last: the copy without start-up."""
        return max(1e-3, self.seconds - self.first_seconds)


def time_copy(
    proc: MeasuredProcess,
    counter: TopicCounter,
    target: str,
    expected: int,
    timeout: float,
    *,
    exits: bool,
) -> CopyTiming:
    """Watch the target until it holds `expected` records, sampling the replicator's tree.

    `exits`: the replicator is expected to exit by itself (ferry --once), so an exit code 0
    is not a failure. Any other exit before the target is complete is.
    """
    first: float | None = None
    deadline = proc.began + timeout
    while True:
        proc.sample()
        held = counter.count(target)
        now = time.monotonic()
        if held > 0 and first is None:
            first = now
        if held >= expected:
            proc.sample(force=True)
            return CopyTiming(
                seconds=now - proc.began,
                first_seconds=(first or now) - proc.began,
                cpu_seconds=proc.cpu_seconds,
                peak_rss_bytes=proc.sampler.peak_rss_bytes,
                processes=proc.sampler.processes,
                load_before=proc.load_before,
                target_records=held,
            )
        code = proc.poll()
        if code is not None and (code != 0 or not exits):
            raise RuntimeError(
                f"{proc.log.name} exited {code} with {held} of {expected} records copied:\n"
                f"{proc.stderr_tail()}"
            )
        if code is not None and counter.count(target) < expected:
            raise RuntimeError(
                f"{proc.log.name} exited 0 but {target} holds {held} of {expected} records"
            )
        if now > deadline:
            proc.kill()
            raise TimeoutError(f"{target} holds {held} of {expected} after {timeout:.0f}s")
        time.sleep(0.1)
