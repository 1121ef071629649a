"""Applications that only need failover offsets import ferry without pulling in PySpark."""

from __future__ import annotations

import subprocess
import sys

from tests.ferry_cli import run_ferry


def test_client_modules_do_not_import_spark() -> None:
    code = (
        "import sys, ferry, ferry.config, ferry.policy, ferry.errors, ferry.client\n"
        "import ferry.offsets.consumer_timestamps, ferry.kafka.mm2_records, ferry.offsets.index\n"
        "heavy = [m for m in ('pyspark', 'py4j', 'pyarrow') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_cli_prints_ferry_errors_as_one_message_and_exits_1() -> None:
    result = run_ferry("local", "up", "--clusters", "A", "--set", "oops", timeout=60)
    assert result.returncode == 1
    assert "error: broker setting 'oops' is not KEY=VALUE" in result.stderr
    assert "Traceback" not in result.stderr
