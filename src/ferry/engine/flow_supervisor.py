"""What `ferry run` does when a flow's query stops: start it again later, keep it failed, or
stop the run. Pure: no Spark, no clients; the clock and the console are passed in.

- A cluster that does not answer (`KafkaUnavailableError`) is retried: the query starts again
  after the `Backoff` delay (1 s, doubling to 60 s), and the delays start over once a restarted
  query copied a batch or ran `HEALTHY_AFTER_SECONDS` without failing, so a blip after a long
  outage waits a second, not a minute. The outage is said once (a `Reachability` shared with
  the rest of the run), and so is the cluster answering again.
- A `--once` run gives up on a cluster that has not answered for `once_max_wait` seconds and
  says which: a cron job must end.
- Any other error stops the run (raised), unless the run keeps failed flows for the control
  API (`keep_failed`, never with `--once`): the flow is then `failed` with its error until
  `restart`, the other flows copy on, and the kept error is still the run's exit.
- While the run stops, nothing is retried: the error is raised.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ferry.errors import FerryError, KafkaUnavailableError
from ferry.flows.status import Condition
from ferry.kafka.reachability import Reachability
from ferry.kafka.retry import Backoff

__all__ = ["HEALTHY_AFTER_SECONDS", "FlowSupervisor", "gave_up"]

# A restarted query that has run this long without failing counts as a success (a query that
# has nothing to copy reports no progress to tell by).
HEALTHY_AFTER_SECONDS = 30.0


def gave_up(error: KafkaUnavailableError, waited: float) -> FerryError:
    """The error a `--once` run ends with when a cluster has not answered for `waited` s."""
    return FerryError(
        f"{error}; gave up after {waited:.0f}s without an answer "
        "(ferry.once.max.wait.seconds bounds how long a --once run waits)"
    )


class FlowSupervisor:
    """One flow's query: when to start it again, whether it waits for a cluster or failed."""

    def __init__(
        self,
        name: str,
        *,
        notice: Callable[[str], None],
        reach: Reachability | None = None,
        once: bool = False,
        keep_failed: bool = False,
        once_max_wait: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
        healthy_after: float = HEALTHY_AFTER_SECONDS,
    ) -> None:
        self.name = name
        self._notice = notice
        self._reach = reach or Reachability()
        self._once = once
        self._keep_failed = keep_failed and not once  # a --once run must end
        self._once_max_wait = once_max_wait
        self._clock = clock
        self._healthy_after = healthy_after
        self._backoff = Backoff()
        self._healthy_at: float | None = None  # when a restarted query counts as working
        self._down_since = 0.0
        self.retry_at: float | None = None  # when to start the query again (None: not to)
        self.down: KafkaUnavailableError | None = None  # why the flow waits
        self.failed: FerryError | None = None  # why the flow stopped for good (`keep_failed`)
        self.restarts = 0  # queries started again after a cluster did not answer
        self.errors: dict[str, int] = {}  # failures by kind (unavailable, fatal), for metrics

    def condition(self) -> Condition:
        """Why the flow does not copy now, as the API says it."""
        return Condition(
            unavailable=str(self.down) if self.down else None,
            failed=str(self.failed) if self.failed else None,
        )

    def due(self) -> bool:
        """The flow has no query and its restart is due."""
        return self.retry_at is not None and self._clock() >= self.retry_at

    def started(self) -> None:
        """A query of the flow started (first or again)."""
        self.retry_at = None
        self._healthy_at = self._clock() + self._healthy_after

    def running(self, *, progressed: bool) -> None:
        """The flow's query is active; `progressed`: it has copied a batch. A restarted query
        that copied, or ran long enough without failing, starts the backoff over, and the
        cluster it waited for is said to answer again."""
        if self._backoff.failures == 0:
            return
        if not progressed and (self._healthy_at is None or self._clock() < self._healthy_at):
            return
        self._backoff.reset()
        self._healthy_at = None
        if self.down is not None:
            line = self._reach.answered(self.down.cluster)
            if line is not None:
                self._notice(line)
            self.down = None

    def stopped(self, error: FerryError, *, stopping: bool) -> None:
        """The flow's query stopped with `error`: retried later (`retry_at`), kept as
        `failed`, or raised (the run stops). `stopping`: the run is stopping."""
        retry = isinstance(error, KafkaUnavailableError) and not stopping
        kind = "unavailable" if retry else "fatal"
        self.errors[kind] = self.errors.get(kind, 0) + 1
        if not retry and self._keep_failed and not stopping:
            self._fail(error)
            return
        if not retry:
            raise error
        assert isinstance(error, KafkaUnavailableError)
        self._unavailable(error)

    def restart(self) -> bool:
        """Start a failed flow again at the next look (from its position, as any restart);
        False if it has not failed. Safe from another thread (the API's)."""
        if self.failed is None:
            return False
        self._backoff.reset()
        self.retry_at = self._clock()
        self.failed = None
        self._notice(f"flow {self.name}: restarted over the API")
        return True

    def raise_failure(self) -> None:
        """Raise the failure kept for the API, if any: a run that kept one still exits with
        it when stopped."""
        if self.failed is not None:
            raise self.failed

    def _unavailable(self, error: KafkaUnavailableError) -> None:
        now = self._clock()
        if self.down is None:
            self._down_since = now
        self.down = error
        line = self._reach.failed(error, f"flow {self.name}")
        if line is not None:
            self._notice(line)
        if self._once and now - self._down_since >= self._once_max_wait:
            raise gave_up(error, now - self._down_since)
        self.retry_at = now + self._backoff.next_delay()
        self.restarts += 1

    def _fail(self, error: FerryError) -> None:
        self.failed = error
        self.retry_at = None
        self.down = None
        self._notice(
            f"flow {self.name} failed: {error}. The other flows go on; restart it over the "
            "API once the cause is fixed (ferry run exits 1 with this error when stopped)"
        )
