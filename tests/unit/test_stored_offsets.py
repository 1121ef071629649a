"""Stored offsets (an application's own offset store) translated exactly: parsing the JSON
lines, composing hops over the pure offset index, and what each refusal says."""

from __future__ import annotations

import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig, PolicySpec
from ferry.kafka.offset_runs import OffsetRun, runs_from_pairs
from ferry.offsets.application_offsets import (
    Leg,
    StoredOffset,
    Translated,
    Untranslatable,
    carry,
    parse_line,
    parse_lines,
    translate_stored,
)
from ferry.offsets.index import Match, OffsetIndex

# --- parsing ---------------------------------------------------------------------------


def test_a_line_with_the_three_fields_parses_and_other_fields_are_ignored() -> None:
    line = json.dumps({"topic": "orders", "partition": 3, "offset": 1234, "sink": "pg"})
    assert parse_line(1, line) == StoredOffset("orders", 3, 1234)


def test_a_line_that_is_not_json_says_its_number_and_keeps_the_input_verbatim() -> None:
    bad = parse_line(7, "orders,3,[bold]1234")
    assert isinstance(bad, Untranslatable)
    assert bad.error.startswith("line 7: not JSON")
    assert bad.as_json()["input"] == "orders,3,[bold]1234"
    assert bad.line == 7


def test_a_missing_or_mistyped_field_is_named_with_the_line() -> None:
    cases = {
        '{"topic": "orders", "offset": 5}': 'line 2: no field "partition"',
        '{"partition": 0, "offset": 5}': 'line 2: no field "topic"',
        '{"topic": "orders", "partition": 0}': 'line 2: no field "offset"',
        '{"topic": "orders", "partition": "0", "offset": 5}': 'line 2: field "partition" must',
        '{"topic": "orders", "partition": true, "offset": 5}': 'line 2: field "partition" must',
        '{"topic": 7, "partition": 0, "offset": 5}': 'line 2: field "topic" must be a string',
        '{"topic": "orders", "partition": 0, "offset": -1}': 'line 2: field "offset" must not',
        '{"topic": "", "partition": 0, "offset": 1}': 'line 2: field "topic" is empty',
        "[1, 2, 3]": "line 2: not a JSON object",
    }
    for text, reason in cases.items():
        bad = parse_line(2, text)
        assert isinstance(bad, Untranslatable), text
        assert bad.error.startswith(reason), (text, bad.error)
    # The fields given come back as given, beside the error.
    bad = parse_line(2, '{"topic": "orders", "offset": 5}')
    assert bad.as_json() == {
        "topic": "orders",
        "offset": 5,
        "error": 'line 2: no field "partition"',
    }


def test_blank_lines_are_skipped_but_count_for_the_line_numbers() -> None:
    parsed = parse_lines(['{"topic": "a", "partition": 0, "offset": 1}', "", "  ", "x"])
    assert parsed[0] == StoredOffset("a", 0, 1)
    assert len(parsed) == 2
    assert isinstance(parsed[1], Untranslatable) and parsed[1].error.startswith("line 4:")


# --- composing hops over the pure index -------------------------------------------------


def leg(flow: str, topic: str, runs: list[OffsetRun] | None, inverse: bool = False) -> Leg:
    index = None if runs is None else OffsetIndex(runs)
    return Leg(flow, flow.split("->")[0 if not inverse else 1], topic, index, inverse)


def test_one_hop_exact_gap_end_and_beyond() -> None:
    # A's 0..9 and 15..19 copied to B's 100..109 and 110..114 (10..14 aborted on A).
    hop = [leg("A->B", "orders", [OffsetRun(0, 100, 10), OffsetRun(15, 110, 5)])]
    assert carry(3, 0, hop) == (103, Match.EXACT)
    assert carry(12, 0, hop) == (110, Match.GAP)  # the copy of 15, the next record
    assert carry(20, 0, hop) == (115, Match.END)  # everything consumed: B's end of the copy
    beyond = carry(23, 0, hop)
    assert beyond == (
        "offset 23 of orders partition 0 on A is beyond what flow A->B has replicated "
        "(replicated position 20); run ferry until it has caught up"
    )


def test_a_partition_without_runs_is_refused_naming_the_flow() -> None:
    assert carry(0, 4, [leg("A->B", "orders", None)]) == (
        "nothing of orders partition 4 on A has been replicated by flow A->B yet"
    )


def test_two_hops_compose_and_the_second_hop_refuses_with_its_own_position() -> None:
    legs = [
        leg("A->B", "orders", [OffsetRun(10, 0, 50)]),
        leg("B->C", "A.orders", [OffsetRun(0, 3, 20), OffsetRun(25, 23, 25)]),
    ]
    assert carry(12, 0, legs) == (5, Match.EXACT)  # A 12 -> B 2 -> C 5
    assert carry(31, 0, legs) == (23, Match.GAP)  # A 31 -> B 21, a gap on B -> copy of B 25
    assert carry(60, 0, legs) == (48, Match.END)
    short = [legs[0], leg("B->C", "A.orders", [OffsetRun(0, 3, 20)])]
    assert carry(40, 0, short) == (
        "offset 30 of A.orders partition 0 on B is beyond what flow B->C has replicated "
        "(replicated position 20); run ferry until it has caught up"
    )


def test_an_inverse_hop_reads_the_runs_backwards() -> None:
    back = [leg("A->B", "A.orders", [OffsetRun(10, 0, 50)], inverse=True)]
    assert carry(7, 0, back) == (17, Match.EXACT)
    assert isinstance(carry(51, 0, back), str)


def _copy(kept: list[int], first: int, rng: random.Random) -> tuple[list[OffsetRun], list[int]]:
    """`kept` upstream offsets copied in order from downstream offset `first`, the target
    holding other offsets between (its own transaction markers): the runs and the copies."""
    pairs, at = [], first
    for upstream in kept:
        at += rng.choice((0, 0, 0, 1))  # sometimes a marker before the copy
        pairs.append((upstream, at))
        at += 1
    return list(runs_from_pairs(pairs)), [d for _, d in pairs]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 3))
def test_composed_hops_point_at_the_copy_of_the_first_record_at_or_after(
    seed: int, hops: int
) -> None:
    """Invariant: for every stored offset within the replicated range, the translation over
    any number of hops is the last hop's copy of the first source record at or after it."""
    rng = random.Random(seed)
    records = sorted(rng.sample(range(200), rng.randint(1, 80)))  # a source log with gaps
    copy_of = {r: r for r in records}  # each source record -> its copy on this hop's side
    legs, kept = [], records
    for n in range(hops):
        runs, copies = _copy(kept, rng.randint(0, 30), rng)
        legs.append(leg(f"{'ABCD'[n]}->{'ABCD'[n + 1]}", f"t{n}", runs))
        landed = dict(zip(kept, copies, strict=True))
        copy_of = {r: landed[copy_of[r]] for r in records}
        kept = copies
    for stored in range(records[-1] + 1):
        first = next(r for r in records if r >= stored)
        result = carry(stored, 0, legs)
        assert isinstance(result, tuple), result
        assert result[0] == copy_of[first], (stored, first, result)
        assert result[1] is (Match.EXACT if stored in records else Match.GAP)


# --- routes and refusals through translate_stored ---------------------------------------

PREFIX = PolicySpec(kind="prefix")


def _config(*flows: str) -> FerryConfig:
    return FerryConfig(
        clusters={a: ClusterConfig(alias=a, bootstrap_servers=f"{a}:9092") for a in "ABC"},
        flows=tuple(
            FlowConfig(source=f[0], target=f[-1], enabled=True, policy=PREFIX) for f in flows
        ),
    )


class _Runs:
    def __init__(self, runs: dict[tuple[str, int], list[OffsetRun]]) -> None:
        self._indexes = {tp: OffsetIndex(rs) for tp, rs in runs.items()}

    def has(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self._indexes

    def index(self, topic: str, partition: int) -> OffsetIndex:
        return self._indexes.get((topic, partition)) or OffsetIndex()


def test_a_chain_is_translated_hop_by_hop_with_one_answer_per_position_in_order() -> None:
    cfg = _config("A->B", "B->C")
    stores = {
        "A->B": _Runs({("orders", 0): [OffsetRun(10, 0, 50)]}),
        "B->C": _Runs({("A.orders", 0): [OffsetRun(0, 3, 50)]}),
    }
    bad_line = parse_line(2, "nope")
    answers = translate_stored(
        cfg,
        "A",
        "C",
        [StoredOffset("orders", 0, 12), bad_line, StoredOffset("payments", 0, 1)],
        runs=lambda flow: stores[flow.name],
    )
    first, second, third = answers
    assert first == Translated("orders", 0, 12, "B.A.orders", 0, 5, "A->B, B->C", "exact")
    assert first.as_json() == {
        "topic": "orders",
        "partition": 0,
        "offset": 12,
        "remote_topic": "B.A.orders",
        "remote_partition": 0,
        "remote_offset": 5,
    }
    assert second is bad_line
    assert isinstance(third, Untranslatable)
    assert third.as_json() == {
        "topic": "payments",
        "partition": 0,
        "offset": 1,
        "error": ("nothing of payments partition 0 on A has been replicated by flow A->B yet"),
    }


def test_a_topic_no_flow_carries_is_not_replicated() -> None:
    cfg = FerryConfig(
        clusters={a: ClusterConfig(alias=a, bootstrap_servers=f"{a}:9092") for a in "AB"},
        flows=(FlowConfig(source="A", target="B", enabled=True, policy=PREFIX, topics=("pay.*",)),),
    )
    (answer,) = translate_stored(
        cfg, "A", "B", [StoredOffset("orders", 0, 1)], runs=lambda _f: _Runs({})
    )
    assert isinstance(answer, Untranslatable)
    assert answer.error == (
        "topic orders is not replicated from A to B (no flow, or chain of flows, copies it there)"
    )
