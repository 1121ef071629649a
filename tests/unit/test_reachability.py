"""What the console says about a cluster: once when it stops answering, once when it is back."""

from __future__ import annotations

from ferry.errors import KafkaUnavailableError
from ferry.kafka.reachability import Reachability


def _down(alias: str, detail: str = "Connection refused") -> KafkaUnavailableError:
    return KafkaUnavailableError(alias, f"{alias.lower()}:9092", detail)


def test_an_outage_is_said_once_however_often_it_is_met_and_however_worded() -> None:
    reach = Reachability()
    first = reach.failed(_down("A"), "flow A->B")
    assert first == (
        "flow A->B: cluster A (a:9092) is unreachable: Connection refused; "
        "retrying until it answers"
    )
    assert reach.failed(_down("A", "Local: Broker transport failure")) is None
    assert reach.failed(_down("A"), "A->B heartbeats") is None
    assert reach.failed(_down("B")) is not None  # another cluster is news


def test_the_return_is_said_once_and_only_for_a_cluster_that_was_away() -> None:
    reach = Reachability()
    assert reach.answered("A") is None
    reach.failed(_down("A"))
    assert reach.answered("A") == "cluster A answers again"
    assert reach.answered("A") is None
    assert reach.failed(_down("A")) is not None  # the next outage is news again


def test_one_success_that_needed_every_cluster_brings_them_all_back() -> None:
    reach = Reachability()
    reach.failed(_down("B"))
    reach.failed(_down("A"))
    assert reach.answered_all() == ["cluster A answers again", "cluster B answers again"]
    assert reach.answered_all() == []
