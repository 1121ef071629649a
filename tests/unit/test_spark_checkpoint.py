"""A Spark checkpoint's Kafka offsets parsed and rewritten for another cluster (pure, no I/O),
and the local files of such a checkpoint changed, backed up, or left alone on a dry run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ferry.offsets.spark_checkpoint import (
    Answer,
    CheckpointContents,
    CheckpointRefused,
    kafka_offsets,
    parse_initial_offsets,
    parse_offset_file,
    plan_rewrite,
    positions,
    render_initial_offsets,
    sink_batches,
)
from ferry.offsets.spark_checkpoint_io import LocalStorage, apply_rewrite, read_checkpoint

META = (
    '{"batchWatermarkMs":0,"batchTimestampMs":1700000000000,'
    '"conf":{"spark.sql.shuffle.partitions":"2"}}'
)


def offsets_file(*sources: str, version: str = "v1") -> bytes:
    return "\n".join([version, META, *sources]).encode()


def initial(offsets: dict[str, dict[str, int]]) -> bytes:
    return b"\x00v1\n" + json.dumps(offsets, separators=(",", ":")).encode()


def contents(
    offsets: dict[int, bytes],
    commits: list[int],
    *,
    start: dict[str, dict[str, int]] | None = None,
    sink: frozenset[int] | None = None,
) -> CheckpointContents:
    first = initial(start or {"orders": {"0": 0, "1": 0}})
    return CheckpointContents("/cp", offsets, sorted(offsets), commits, {"0": first}, sink)


def copy(topic: str, shift: int = 100) -> dict[tuple[str, int, int], Answer | str]:
    """Every offset of `topic` up to 50 replicated to A.<topic> at offset + shift."""
    answers: dict[tuple[str, int, int], Answer | str] = {}
    for p in (0, 1):
        for o in range(0, 51):
            answers[(topic, p, o)] = Answer(f"A.{topic}", o + shift, "exact", "A->B")
        for o in range(51, 200):
            answers[(topic, p, o)] = (
                f"offset {o} of {topic} partition {p} on A is beyond what flow A->B has "
                "replicated (replicated position 51); run ferry until it has caught up"
            )
    return answers


def clamped(topic: str) -> dict[tuple[str, int, int], Answer | str]:
    return {
        (topic, p, o): Answer(f"A.{topic}", 151, "clamped", "A->B", 51)
        for p in (0, 1)
        for o in range(51, 200)
    }


def lines(data: bytes | None) -> list[str]:
    assert data is not None
    return data.decode().split("\n")


def test_parses_the_offsets_log_and_the_kafka_source_line() -> None:
    f = parse_offset_file("offsets/3", 3, offsets_file('{"orders":{"1":7,"0":5}}', "-"))
    assert f.version == 1 and f.metadata == META
    assert [s.text for s in f.sources] == ['{"orders":{"1":7,"0":5}}', "-"]
    assert kafka_offsets(f.sources[0].text) == {"orders": {0: 5, 1: 7}}
    assert kafka_offsets("-") is None
    assert kafka_offsets('{"logOffset":3}') is None  # a file source's
    assert parse_initial_offsets("sources/0/0", initial({"t": {"0": 4}})) == {"t": {0: 4}}
    assert render_initial_offsets({"t": {1: 2, 0: 1}}) == b'\x00v1\n{"t":{"0":1,"1":2}}'
    assert sink_batches(["0", "1", "9.compact", ".1.crc", "10"]) == {0, 1, 9, 10}


def test_committed_batch_is_translated_and_the_subscription_named() -> None:
    cp = contents({4: offsets_file('{"orders":{"0":10,"1":20}}')}, [3, 4])
    assert positions(cp) == [
        ("orders", 0, 10),
        ("orders", 1, 20),
        ("orders", 0, 0),
        ("orders", 1, 0),
    ]
    rewrite = plan_rewrite(cp, "A", "B", copy("orders"), {}, stamp="S")
    assert rewrite.committed == 4 and rewrite.planned is None
    assert rewrite.planned_action == "none"
    assert rewrite.subscribe == "A.orders"
    assert rewrite.subscribe_pattern == r"A\.orders"
    by_path = {c.path: c for c in rewrite.changes}
    assert lines(by_path["offsets/4"].after) == ["v1", META, '{"A.orders":{"0":110,"1":120}}']
    assert by_path["sources/0/0"].after == b'\x00v1\n{"A.orders":{"0":100,"1":100}}'
    assert rewrite.backup == "ferry-backup/A-to-B-S"
    assert rewrite.as_json()["files"] == [
        {"path": "offsets/4", "action": "rewritten"},
        {"path": "sources/0/0", "action": "rewritten"},
    ]


def test_planned_batch_whose_ends_all_map_is_translated() -> None:
    cp = contents(
        {
            4: offsets_file('{"orders":{"0":10,"1":20}}'),
            5: offsets_file('{"orders":{"0":30,"1":50}}'),
        },
        [4],
    )
    rewrite = plan_rewrite(cp, "A", "B", copy("orders"), {}, stamp="S")
    assert (rewrite.committed, rewrite.planned, rewrite.planned_action) == (4, 5, "translated")
    by_path = {c.path: c for c in rewrite.changes}
    assert lines(by_path["offsets/5"].after)[2] == '{"A.orders":{"0":130,"1":150}}'
    assert lines(by_path["offsets/4"].after)[2] == '{"A.orders":{"0":110,"1":120}}'


def test_planned_batch_beyond_the_copies_needs_the_sink_log() -> None:
    batches = {
        4: offsets_file('{"orders":{"0":10,"1":20}}'),
        5: offsets_file('{"orders":{"0":30,"1":80}}'),
    }
    with pytest.raises(CheckpointRefused) as refused:
        plan_rewrite(contents(batches, [4]), "A", "B", copy("orders"), clamped("orders"), stamp="S")
    message = str(refused.value)
    assert message.startswith("the checkpoint cannot be moved exactly; nothing was changed: ")
    assert "offsets/5: batch 5 was planned but not committed" in message
    assert "--sink-log <output>/_spark_metadata" in message
    assert "offset 80 of orders partition 1 on A is beyond" in message


def test_planned_batch_beyond_the_copies_without_a_sink_entry_is_removed() -> None:
    batches = {
        4: offsets_file('{"orders":{"0":10,"1":20}}'),
        5: offsets_file('{"orders":{"0":30,"1":80}}'),
    }
    cp = contents(batches, [4], sink=frozenset({3, 4}))
    rewrite = plan_rewrite(cp, "A", "B", copy("orders"), clamped("orders"), stamp="S")
    assert rewrite.planned_action == "removed"
    by_path = {c.path: c for c in rewrite.changes}
    assert by_path["offsets/5"].after is None
    assert by_path["offsets/5"].before == batches[5]
    assert lines(by_path["offsets/4"].after)[2] == '{"A.orders":{"0":110,"1":120}}'
    assert any("plans it again from the committed offsets" in n for n in rewrite.notes)


def test_planned_batch_beyond_the_copies_the_sink_holds_is_clamped() -> None:
    batches = {
        4: offsets_file('{"orders":{"0":10,"1":20}}'),
        5: offsets_file('{"orders":{"0":30,"1":80}}'),
    }
    cp = contents(batches, [4], sink=frozenset({4, 5}))
    rewrite = plan_rewrite(cp, "A", "B", copy("orders"), clamped("orders"), stamp="S")
    assert rewrite.planned_action == "clamped"
    by_path = {c.path: c for c in rewrite.changes}
    assert lines(by_path["offsets/5"].after)[2] == '{"A.orders":{"0":130,"1":151}}'
    note = next(n for n in rewrite.notes if n.startswith("offsets/5: the query read records"))
    assert "orders partition 1: offsets 51 to 79 (up to 80, exclusive)" in note


def test_unknown_format_version_is_refused_naming_the_file() -> None:
    cp = contents({4: offsets_file('{"orders":{"0":10}}', version="v9")}, [4])
    with pytest.raises(CheckpointRefused) as refused:
        positions(cp)
    assert str(refused.value) == (
        "offsets/4: offsets log format v9, which ferry does not know (it knows v1, v2); "
        "nothing was changed"
    )


def test_v2_names_each_source() -> None:
    cp = contents({0: offsets_file('0:{"orders":{"0":10,"1":20}}', version="v2")}, [0])
    rewrite = plan_rewrite(cp, "A", "B", copy("orders"), {}, stamp="S")
    after = next(c.after for c in rewrite.changes if c.path == "offsets/0")
    assert lines(after) == ["v2", META, '0:{"A.orders":{"0":110,"1":120}}']


def test_a_source_that_is_not_kafka_is_refused_naming_the_file() -> None:
    cp = CheckpointContents("/cp", {2: offsets_file('{"logOffset":2}')}, [2], [2], {}, None)
    with pytest.raises(CheckpointRefused) as refused:
        positions(cp)
    assert str(refused.value).startswith("offsets/2: no source of this query is Kafka")


def test_more_than_one_uncommitted_batch_is_refused() -> None:
    batches = {5: offsets_file('{"orders":{"0":1}}'), 6: offsets_file('{"orders":{"0":2}}')}
    with pytest.raises(CheckpointRefused, match=r"^offsets/6: the latest planned batch"):
        positions(contents(batches, [4]))


def test_an_offset_past_the_copies_in_the_committed_batch_is_clamped_and_said() -> None:
    cp = contents({4: offsets_file('{"orders":{"0":10,"1":60}}')}, [4])
    rewrite = plan_rewrite(cp, "A", "B", copy("orders"), clamped("orders"), stamp="S")
    after = next(c.after for c in rewrite.changes if c.path == "offsets/4")
    assert lines(after)[2] == '{"A.orders":{"0":110,"1":151}}'
    assert any("offsets 51 to 59" in n for n in rewrite.notes)


def write_checkpoint(root: Path) -> None:
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "sources" / "0").mkdir(parents=True)
    (root / "metadata").write_text('{"id":"q"}')
    (root / "offsets" / "4").write_bytes(offsets_file('{"orders":{"0":10,"1":20}}'))
    (root / "offsets" / ".4.crc").write_bytes(b"stale")
    (root / "offsets" / "5").write_bytes(offsets_file('{"orders":{"0":30,"1":80}}'))
    (root / "commits" / "4").write_text("v1\n{}")
    (root / "sources" / "0" / "0").write_bytes(initial({"orders": {"0": 0, "1": 0}}))


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_dry_run_writes_nothing_and_a_rewrite_keeps_the_originals(tmp_path: Path) -> None:
    root = tmp_path / "cp"
    sink = tmp_path / "out" / "_spark_metadata"
    sink.mkdir(parents=True)
    (sink / "4").write_text("v1")
    write_checkpoint(root)
    before = tree(root)
    storage = LocalStorage(f"file://{root}")
    cp = read_checkpoint(storage, LocalStorage(sink))
    assert cp.sink == {4} and cp.batches == [4, 5] and cp.commits == [4]
    rewrite = plan_rewrite(cp, "A", "B", copy("orders"), clamped("orders"), stamp="S")
    assert tree(root) == before  # planning is the dry run: nothing written
    apply_rewrite(storage, rewrite)
    after = tree(root)
    assert (
        "offsets/5" not in after and "offsets/.4.crc" not in after
    )  # removed; stale checksum gone
    assert after["ferry-backup/A-to-B-S/offsets/4"] == before["offsets/4"]
    assert after["ferry-backup/A-to-B-S/offsets/5"] == before["offsets/5"]
    assert after["ferry-backup/A-to-B-S/sources/0/0"] == before["sources/0/0"]
    assert lines(after["offsets/4"])[2] == '{"A.orders":{"0":110,"1":120}}'
    assert read_checkpoint(storage).batches == [4]  # the backup is not a batch Spark sees


def test_a_missing_checkpoint_or_sink_log_is_named(tmp_path: Path) -> None:
    with pytest.raises(CheckpointRefused, match="it does not exist"):
        read_checkpoint(LocalStorage(tmp_path / "nowhere"))
    write_checkpoint(tmp_path / "cp")
    with pytest.raises(CheckpointRefused, match="no such directory"):
        read_checkpoint(LocalStorage(tmp_path / "cp"), LocalStorage(tmp_path / "no-sink"))
