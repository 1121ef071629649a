"""`ferry validate -c FILE`: what it prints for a good file, and how it refuses a bad one."""

from __future__ import annotations

from pathlib import Path

from tests.ferry_cli import FerryResult, run_ferry

BASE = "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"


def _validate(path: Path) -> FerryResult:
    return run_ferry("validate", "-c", str(path), timeout=60)


def test_a_valid_file_is_summarised_with_its_flows_and_ignored_keys(tmp_path: Path) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(BASE + "A->B.enabled = true\nA->B.topics = orders\ntasks.max = 8\n")
    result = _validate(config)
    assert result.returncode == 0, result.stderr
    assert f"{config}: valid" in result.stdout
    assert "flow A->B: enabled, policy prefix, topics ['orders']" in result.stdout
    assert "flow B->A: disabled" in result.stdout
    assert "key 'tasks.max' only matters to MirrorMaker" in result.stderr


def test_an_unsafe_file_is_refused_with_exit_1_and_one_line(tmp_path: Path) -> None:
    config = tmp_path / "ferry.yaml"
    config.write_text(
        "clusters:\n  A:\n    bootstrap.servers: 127.0.0.1:1\n    producer:\n      acks: 1\n"
    )
    result = _validate(config)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert f"error: {config}:5, key 'A.producer.acks': '1' is refused" in result.stderr


def test_mm2_settings_ferry_has_no_use_for_are_named_with_the_reason(tmp_path: Path) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(
        BASE + "A->B.enabled = true\noffset.lag.max = 50\nA->B.refresh.groups.enabled = false\n"
        "refresh.groups.interval.seconds = 30\n"
    )
    result = _validate(config)
    assert result.returncode == 0, result.stderr
    assert (
        f"note: {config}: key 'offset.lag.max': ferry records the target offset of "
        "every copied record, so offset translation is exact" in result.stderr
    )
    for key in ("A->B.refresh.groups.enabled", "refresh.groups.interval.seconds"):
        assert f"key '{key}': ferry lists the source's consumer groups" in result.stderr


def test_a_bad_value_of_a_setting_ferry_does_not_need_is_still_an_error(tmp_path: Path) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(BASE + "offset.lag.max = lots\n")
    result = _validate(config)
    assert result.returncode == 1
    assert f"error: {config}:4, key 'offset.lag.max': 'lots' is not allowed" in result.stderr
