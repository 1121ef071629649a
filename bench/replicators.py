"""The two replicators under test, started the same way: one measured process each.

Each copies A's topic `T` into its own target topic on B, so both can copy the same preloaded
topic: MirrorMaker 2 into `A.T` (its DefaultReplicationPolicy), ferry into `A.ferry.T`
(`topic.rename.format`). Everything else about the flow is each one's default.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from bench import java_tools
from bench.harness import MeasuredProcess, cleanup_topics, ferry_command, ferry_env


class Ferry:
    name = "ferry"

    def __init__(self, bootstraps: tuple[str, str], extra: list[str] | None = None) -> None:
        self.bootstraps = bootstraps
        self.extra = list(extra or [])

    def target(self, topic: str) -> str:
        return f"A.ferry.{topic}"

    def config(self, run_dir: Path, topic: str) -> Path:
        bootstrap_a, bootstrap_b = self.bootstraps
        lines = [
            f"{key.strip()}: {value.strip()}"
            for key, _, value in (s.partition("=") for s in self.extra)
        ]
        path = run_dir / "ferry.yaml"
        # Exactly one topic, not `bench-.*`: deleting a topic is asynchronous, so a pattern
        # could pick up an earlier run's topic (or another user's) and copy it too.
        path.write_text(
            "clusters:\n"
            f'  A: {{bootstrap.servers: "{bootstrap_a}"}}\n'
            f'  B: {{bootstrap.servers: "{bootstrap_b}"}}\n'
            "A->B.enabled: true\n"
            f"A->B.topics: {topic}\n"
            "topic.rename.format: '${source}.ferry.${topic}'\n"
            "replication.factor: 1\n"
            "offset-syncs.topic.replication.factor: 1\n"
            "checkpoints.topic.replication.factor: 1\n"
            "heartbeats.topic.replication.factor: 1\n"
            f"ferry.state.dir: {run_dir / 'state'}\n" + "".join(f"{line}\n" for line in lines)
        )
        return path

    def start(self, run_dir: Path, topic: str, *, once: bool) -> MeasuredProcess:
        run_dir.mkdir(parents=True, exist_ok=True)
        args = ["run", "-c", str(self.config(run_dir, topic)), "--json"]
        if once:
            args.append("--once")
        return MeasuredProcess(ferry_command(*args), run_dir / "ferry", env=ferry_env())

    def cleanup(self, topic: str) -> None:
        cleanup_topics(self.bootstraps[1], [self.target(topic)])

    def steady(self, run_dir: Path) -> bool:
        """Spark's tasks copy: the driver's head start (which copies while Spark starts,
        competing with it for the CPU) is over."""
        return not (run_dir / "state" / "A-to-B" / "head-start").exists()


class MirrorMaker2:
    name = "mm2"

    def __init__(self, bootstraps: tuple[str, str], tasks: int) -> None:
        self.bootstraps = bootstraps
        self.tasks = tasks
        self._run_ids: dict[str, str] = {}

    def target(self, topic: str) -> str:
        return f"A.{topic}"

    def start(self, run_dir: Path, topic: str, *, once: bool = False) -> MeasuredProcess:
        """MM2 has no `--once`: it runs until stopped."""
        run_dir.mkdir(parents=True, exist_ok=True)
        run_id = uuid.uuid4().hex[:12]
        self._run_ids[topic] = run_id
        settings = java_tools.mm2_properties(self.bootstraps, topic, self.tasks, run_id)
        properties = java_tools.write_properties(run_dir / "mm2.properties", settings)
        log_config = java_tools.write_log_config(run_dir, "mm2")
        return MeasuredProcess(java_tools.mm2_command(properties, log_config), run_dir / "mm2")

    def steady(self, run_dir: Path) -> bool:
        return True

    def cleanup(self, topic: str) -> None:
        run_id = self._run_ids.pop(topic, None)
        internal = java_tools.mm2_internal_topics(run_id) if run_id else []
        cleanup_topics(self.bootstraps[1], [self.target(topic), *internal])
