"""Exactly-once leases: one slice's transactions commit while the next slice copies.

A transaction's commit (the position added to it, then EndTxn and its markers) takes round
trips to the target's coordinators. If copying waited for them, every record arriving meanwhile
would wait too, and the commit's time would show in replication latency on top of the slice.
So each copy task has two transactional producers (`transactional.task_transactional_id`'s
two parities) and consecutive slices alternate between them: slice k+1 copies with one while
slice k's transaction commits with the other, on this pipeline's thread.

What keeps that exact (each rule is what breaks without it):

- slice k's copies are all acknowledged before slice k+1 writes to the same partition (the
  copy loop waits for its delivery reports before it returns), so the remote partition holds
  them in source order;
- slice k+1's transaction commits only after slice k's committed (`submit` waits for the
  commit before it), so the position committed on the target only ever moves forward and
  never passes copies whose transaction might still abort;
- when slice k's commit fails, slice k+1's transaction is aborted with the rest (the caller
  aborts every open one when `submit` or `wait` raises), so nothing after a gap is visible;
- a lease's last slice is committed before the lease returns (`wait`);
- every slice submits its commit, an idle one's empty commit too: slice k+2 begins on slice
  k's producer, and only slice k+1's `submit` waits for slice k's commit to be through.

A crash at any point leaves at most two open transactions per task; the next lease starts both
producers afresh, which aborts them, and resumes from the last committed position.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["CommitPipeline"]


class CommitPipeline:
    """Runs one commit job at a time, in the background, in submission order."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ferry-commit")
        self._pending: Future[None] | None = None

    def submit(self, commit: Callable[[], None]) -> None:
        """Start `commit` once the previous one finished; raises the previous one's failure
        (then `commit` is not started)."""
        self.wait()
        self._pending = self._pool.submit(commit)

    def wait(self) -> None:
        """Until the submitted commit finished; raises its failure."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        """Waits for a commit still running (its failure is the caller's to have seen or not:
        this is the cleanup path) and ends the thread."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.exception()
        self._pool.shutdown(wait=True)
