"""A planned switchover of a flow A->B, as steps: which one comes next (pure, no I/O).

`ferry switchover --flow A->B` moves the writers from A to B with nothing lost:
1. `fence`: the writers of the flow's topics on A may no longer write there (a DENY WRITE
   ACL per principal that holds WRITE or ALL on a topic, ferry's own excepted: ferry only
   reads A's topics, and writes them only as the reversed flow B->A does later);
2. `drain`: every partition of those topics is at lag 0 (the flow's replicated position is
   A's end) and the topics' configs are synced;
3. `groups`: every group the flow syncs is committed on B at its exact position;
4. `reverse`: the fenced writers may write the copies on B, A->B stops and B->A runs (both
   through the control state, in the running `ferry run`).
Each step is recorded when it is done (`SwitchoverRecord`, in the control topic beside the
flow's control record), so a switchover cut short resumes at the first step not done, or is
rolled back (the fence taken back) when run again with `--rollback`. `decide` says what to do
from the record and what is observed now; `writer_fence` builds the fence from A's ACLs;
`proof` counts the window's records on A and their copies on B. The I/O is
control/switchover.py.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "DRAIN",
    "FENCE",
    "GROUPS",
    "REVERSE",
    "STEPS",
    "AclEntry",
    "Decision",
    "FenceAcl",
    "Observed",
    "Owner",
    "SwitchoverRecord",
    "TopicProof",
    "decide",
    "proof",
    "writer_fence",
]

FENCE, DRAIN, GROUPS, REVERSE = "fence", "drain", "groups", "reverse"
STEPS = (FENCE, DRAIN, GROUPS, REVERSE)
TITLES = {
    FENCE: "fence the writers",
    DRAIN: "wait for lag 0 and synced configs",
    GROUPS: "commit the groups' positions",
    REVERSE: "reverse the flow",
}
RUNNING, DONE, ROLLED_BACK = "running", "done", "rolled_back"
WRITE_OPERATIONS = frozenset({"WRITE", "ALL"})
EVERYONE = "User:*"


@dataclass(frozen=True, order=True)
class FenceAcl:
    """One DENY WRITE ACL the fence created: literal, on `topic`, for `principal`, any host."""

    topic: str
    principal: str

    def as_json(self) -> dict[str, str]:
        return {"topic": self.topic, "principal": self.principal}


@dataclass(frozen=True)
class Owner:
    """The process running a switchover, and until when its claim holds (renewed with each
    step): another `ferry switchover` of the flow meanwhile is refused, not run beside it."""

    host: str
    pid: int
    until: float  # epoch seconds

    def as_json(self) -> dict[str, Any]:
        return {"host": self.host, "pid": self.pid, "until": self.until}


@dataclass(frozen=True)
class SwitchoverRecord:
    """What a switchover of `flow` has done so far, kept in the control topic."""

    flow: str  # "A->B"
    started: float  # epoch seconds
    state: str = RUNNING  # running, done, rolled_back
    steps: tuple[tuple[str, float, float], ...] = ()  # each done step: (name, started, ended)
    writers_stopped: bool = False  # no fence: the writers were stopped by hand
    fence: tuple[FenceAcl, ...] = ()  # the DENY WRITE ACLs created on the source
    writers: tuple[tuple[str, str], ...] = ()  # (topic, principal) holding WRITE on the source
    # (topic, partition, start, end): the flow's position when the fence went up, and the
    # source's end once drained (-1 until then). The proof counts what lies between.
    window: tuple[tuple[str, int, int, int], ...] = ()
    owner: Owner | None = None  # the process at work on it; None between runs

    @property
    def done(self) -> tuple[str, ...]:
        return tuple(name for name, _start, _end in self.steps)

    @property
    def next_step(self) -> str | None:
        return next((step for step in STEPS if step not in self.done), None)

    def after(self, step: str, started: float, ended: float, **changes: Any) -> SwitchoverRecord:
        """The record once `step` is done (the switchover is done after its last step)."""
        state = DONE if step == STEPS[-1] else self.state
        return replace(self, steps=(*self.steps, (step, started, ended)), state=state, **changes)

    def rolled_back(self) -> SwitchoverRecord:
        return replace(self, state=ROLLED_BACK)

    def as_json(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "started": self.started,
            "state": self.state,
            "steps": [{"step": s, "started": a, "ended": b} for s, a, b in self.steps],
            "writers_stopped": self.writers_stopped,
            "fence": [f.as_json() for f in self.fence],
            "writers": [{"topic": t, "principal": p} for t, p in self.writers],
            "window": [
                {"topic": t, "partition": p, "start": a, "end": b} for t, p, a, b in self.window
            ],
            "owner": self.owner.as_json() if self.owner else None,
        }

    def to_bytes(self) -> bytes:
        return json.dumps(self.as_json(), sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> SwitchoverRecord:
        """Raises ValueError on anything that is not a switchover record."""
        try:
            d = json.loads(data)
            return cls(
                flow=str(d["flow"]),
                started=float(d["started"]),
                state=str(d["state"]),
                steps=tuple(
                    (str(s["step"]), float(s["started"]), float(s["ended"])) for s in d["steps"]
                ),
                writers_stopped=bool(d["writers_stopped"]),
                fence=tuple(FenceAcl(str(f["topic"]), str(f["principal"])) for f in d["fence"]),
                writers=tuple((str(w["topic"]), str(w["principal"])) for w in d["writers"]),
                window=tuple(
                    (str(w["topic"]), int(w["partition"]), int(w["start"]), int(w["end"]))
                    for w in d["window"]
                ),
                owner=_owner(d.get("owner")),  # absent from records of earlier versions
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a switchover record ({exc})") from None


def _owner(data: Any) -> Owner | None:
    if data is None:
        return None
    return Owner(str(data["host"]), int(data["pid"]), float(data["until"]))


@dataclass(frozen=True)
class Observed:
    """What the clusters say now, before a step."""

    flow_runs: bool  # A->B runs (the file or its control record enables it)
    reverse_runs: bool  # B->A runs
    authorizer: bool  # A has an ACL authorizer
    # Another process at work on this switchover now (its record's owner, alive, its claim
    # not expired), said as "pid 4711 on host dr-1 until ..."; None: nobody else.
    elsewhere: str | None = None


@dataclass(frozen=True)
class Decision:
    """`action`: "step" (do `step` next, with `record`), "refuse" (`sentence`), "done"
    (nothing left: `record` is the finished switchover), "rollback" (take `record`'s fence
    back)."""

    action: str
    record: SwitchoverRecord | None = None
    step: str | None = None
    sentence: str = ""
    resumed: bool = False


def reverse_name(flow: str) -> str:
    source, target = flow.split("->", 1)
    return f"{target}->{source}"


def decide(
    flow: str,
    record: SwitchoverRecord | None,
    observed: Observed,
    *,
    now: float,
    writers_stopped: bool = False,
    rollback: bool = False,
    force: bool = False,
) -> Decision:
    """The next thing to do for a switchover of `flow`, given its record (None: never
    started) and what is observed now. `force`: go on even though another process seems at
    work on it (the operator knows it is gone)."""
    source = flow.split("->", 1)[0]
    reverse = reverse_name(flow)
    under_way = record is not None and record.state == RUNNING
    if under_way and observed.elsewhere and not force:
        return Decision(
            "refuse",
            sentence=f"a switchover of {flow} is under way in another process "
            f"({observed.elsewhere}): wait for it to end, or, if that process is gone, run "
            "again with --force",
        )
    if rollback:
        if record is None or not under_way:
            return Decision("refuse", sentence=f"no switchover of {flow} is under way to roll back")
        return Decision("rollback", record=record)
    if record is not None and under_way:
        step = record.next_step
        if step is None:  # every step recorded, the state not: nothing left to do
            return Decision("done", record=record)
        return Decision("step", record=record, step=step, resumed=True)
    done = record is not None and record.state == DONE
    if done and observed.reverse_runs and not observed.flow_runs:
        return Decision("done", record=record, sentence=f"{flow} was switched over already")
    if not observed.flow_runs:
        return Decision(
            "refuse",
            sentence=f"flow {flow} does not run (neither the config file nor its control "
            "record enables it): nothing to switch over",
        )
    if observed.reverse_runs:
        return Decision(
            "refuse",
            sentence=f"flow {reverse} runs beside {flow}: a switchover needs {reverse} off "
            f"(set {reverse}.enabled = false)",
        )
    if not observed.authorizer and not writers_stopped:
        return Decision(
            "refuse",
            sentence=f"cluster {source} has no ACL authorizer, so ferry cannot fence the "
            f"writers of {flow}'s topics there; stop them yourself and run again with "
            "--writers-stopped",
        )
    fresh = SwitchoverRecord(flow, started=now, writers_stopped=writers_stopped)
    return Decision("step", record=fresh, step=FENCE)


@dataclass(frozen=True)
class AclEntry:
    """One ACL of a cluster on a topic resource, as Kafka names its parts."""

    pattern: str  # LITERAL or PREFIXED
    name: str  # a topic, a prefix, or "*" (literal: every topic)
    principal: str
    operation: str  # READ, WRITE, ALL, ...
    permission: str  # ALLOW or DENY

    def covers(self, topic: str) -> bool:
        if self.pattern == "PREFIXED":
            return topic.startswith(self.name)
        return self.name in (topic, "*")


@dataclass(frozen=True)
class Fence:
    acls: tuple[FenceAcl, ...]  # to create
    writers: tuple[tuple[str, str], ...]  # (topic, principal) that may write now
    refusal: str | None = None


def writer_fence(
    acls: Iterable[AclEntry],
    topics: Iterable[str],
    ferry_principal: str | None,
    cluster: str,
    ours: Iterable[FenceAcl] = (),
) -> Fence:
    """The DENY WRITE ACLs that stop every writer of `topics`, ferry excepted.

    Kafka's authorizer lets a DENY win over any ALLOW, so a DENY for `User:*` would stop ferry
    too; instead each principal holding an ALLOW WRITE or ALL on a topic (by a literal,
    prefixed or `*` ACL) gets a literal DENY WRITE on it, any host. A principal already
    denied WRITE on the topic needs none (and its DENY is not ferry's to take back), unless
    that DENY is in `ours`: recorded by this switchover before a run cut short created it; left
    out, it would never be taken back and the writer would stay fenced after a rollback or
    a switch back. Refused where `User:*` may write a topic: no per-principal DENY covers
    everyone."""
    entries = list(acls)
    mine = set(ours)
    fence: set[FenceAcl] = set()
    writers: set[tuple[str, str]] = set()
    for topic in sorted(set(topics)):
        allowed = {
            e.principal
            for e in entries
            if e.permission == "ALLOW" and e.operation in WRITE_OPERATIONS and e.covers(topic)
        } - {ferry_principal}
        if EVERYONE in allowed:
            return Fence(
                (),
                (),
                f"topic {topic} on {cluster}: every principal may write it (an ALLOW WRITE or "
                f"ALL ACL for {EVERYONE}), which a DENY per principal cannot fence and a DENY "
                f"for {EVERYONE} would fence ferry with; grant WRITE per principal, or stop "
                "the writers and run again with --writers-stopped",
            )
        denied = {
            e.principal
            for e in entries
            if e.permission == "DENY"
            and e.operation in WRITE_OPERATIONS
            and e.pattern == "LITERAL"
            and e.name == topic
        }
        for principal in sorted(allowed):
            writers.add((topic, principal))
            if principal not in denied:
                fence.add(FenceAcl(topic, principal))
        fence |= {f for f in mine if f.topic == topic}
    return Fence(tuple(sorted(fence)), tuple(sorted(writers)))


@dataclass(frozen=True)
class TopicProof:
    """One topic's window: records on A, their copies on B, what is missing."""

    topic: str
    records: int  # on A in the window
    copies: int  # on B, copies of those records (each copy counted)
    missing: int  # records of the window with no copy on B
    duplicates: int  # copies beyond the first of a record
    partitions: list[dict[str, int]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "records": self.records,
            "copies": self.copies,
            "missing": self.missing,
            "duplicates": self.duplicates,
            "partitions": self.partitions,
        }


def proof(
    window: Iterable[tuple[str, int, int, int]],
    on_source: Mapping[tuple[str, int], Iterable[Hashable]],
    copied: Mapping[tuple[str, int], Iterable[Hashable]],
) -> list[TopicProof]:
    """Per topic: `on_source` the ids of the records on A in each partition's window (where
    each came from: its origin header, or its own place), `copied` the ids the records on B
    carry (their origin header); copies of records outside the window are not counted."""
    topics: dict[str, list[dict[str, int]]] = {}
    for topic, partition, start, end in sorted(window):
        records = set(on_source.get((topic, partition), ()))
        copies = [c for c in copied.get((topic, partition), ()) if c in records]
        topics.setdefault(topic, []).append(
            {
                "partition": partition,
                "start": start,
                "end": end,
                "records": len(records),
                "copies": len(copies),
                "missing": len(records - set(copies)),
                "duplicates": len(copies) - len(set(copies)),
            }
        )
    return [
        TopicProof(
            topic,
            sum(p["records"] for p in rows),
            sum(p["copies"] for p in rows),
            sum(p["missing"] for p in rows),
            sum(p["duplicates"] for p in rows),
            rows,
        )
        for topic, rows in topics.items()
    ]
