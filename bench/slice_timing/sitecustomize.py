"""Times the steps of ferry's exactly-once slices, in every Python process that copies.

Python imports `sitecustomize` at start-up from the first directory of `sys.path` that holds
one, so with this directory on PYTHONPATH (which Spark passes on to its Python workers) and
FERRY_SLICE_TIMING naming a file, every process that runs an exactly-once lease appends one
line per step to that file: `<pid> <wall s> <step> <seconds> [<count>]`. The steps:

- `copy`: a slice's copy loop, until every copy is acknowledged (count: records copied);
- `wait`: the slice waiting for the previous slice's commit before handing its own over;
- `commit`: one slice's commit, all of its partitions at once (count: partitions);
- `offsets`: one partition's position added to its transaction (AddOffsetsToTxn, then
  TxnOffsetCommit to the group coordinator);
- `end`: one partition's commit_transaction (the offset-run record flushed, EndTxn).

`python -m bench.slice_timing FILE` summarises the file. Without FERRY_SLICE_TIMING nothing
is patched. A benchmark tool only: ferry itself has no such hook.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import Any

PATH = os.environ.get("FERRY_SLICE_TIMING", "")


def _record(step: str, seconds: float, count: int | None = None) -> None:
    tail = "" if count is None else f" {count}"
    with open(PATH, "a") as out:
        out.write(f"{os.getpid()} {time.time():.3f} {step} {seconds:.4f}{tail}\n")


def _timed(step: str, call: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.monotonic()
        result = call(*args, **kwargs)
        _record(step, time.monotonic() - began)
        return result

    return wrapper


def _install() -> None:
    from ferry.engine.copy import commit_pipeline, exactly_once

    module = exactly_once.__dict__  # patched where the lease's code looks its names up
    copy_ranges = module["copy_ranges"]

    def copy(*args: Any, **kwargs: Any) -> Any:
        if len(args) < 6 and "slice" not in kwargs:  # a bounded batch, not a lease's slice
            return copy_ranges(*args, **kwargs)
        began = time.monotonic()
        results = copy_ranges(*args, **kwargs)
        _record("copy", time.monotonic() - began, sum(r.copied for r in results))
        return results

    module["copy_ranges"] = copy
    module["_send_offsets"] = _timed("offsets", module["_send_offsets"])
    module["_commit"] = _timed("end", module["_commit"])

    submit = commit_pipeline.CommitPipeline.submit

    def timed_submit(self: Any, commit: Callable[[], None]) -> None:
        def job() -> None:
            began = time.monotonic()
            commit()
            _record("commit", time.monotonic() - began)

        began = time.monotonic()
        submit(self, job)
        _record("wait", time.monotonic() - began)

    commit_pipeline.CommitPipeline.submit = timed_submit  # type: ignore[method-assign]


if PATH:
    # A Python without ferry (a JVM tool's helper) has nothing to time.
    with contextlib.suppress(ImportError):
        _install()
