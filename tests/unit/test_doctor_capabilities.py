"""`ferry doctor`'s optional capabilities: what `ferry switchover` and `ferry reconcile
--replay` need beyond the flow, named as notes that leave the exit code alone."""

from __future__ import annotations

from ferry.config.model import ClusterConfig, FlowConfig
from ferry.ops.access import Allowed, _capability_notes
from ferry.ops.durability import Finding, exit_code

SOURCE = ClusterConfig(alias="A", bootstrap_servers="127.0.0.1:1", common={"sasl.username": "dr"})
TARGET = ClusterConfig(alias="B", bootstrap_servers="127.0.0.1:2", common={"sasl.username": "dr"})
FLOW = FlowConfig(source="A", target="B", enabled=True)


def _notes(flow: FlowConfig, cluster: ClusterConfig, side: str, ops: set[str]) -> list[Finding]:
    allowed: Allowed = {("CLUSTER", "kafka-cluster"): frozenset(ops)}
    return list(_capability_notes(flow, cluster, side, allowed))  # type: ignore[arg-type]


def test_switchover_without_acl_rights_on_the_source_is_a_note_naming_the_grant() -> None:
    (note,) = _notes(FLOW, SOURCE, "source", {"DESCRIBE"})
    assert (note.kind, note.cluster, note.severity) == ("capability", "A", "note")
    assert "optional capability `ferry switchover` of flow A->B (as its source)" in note.detail
    assert "may not ALTER on CLUSTER 'kafka-cluster'" in note.detail
    assert "kafka-acls.sh --add --allow-principal User:dr --operation Alter --cluster" in (
        note.detail
    )
    assert exit_code([note]) == 0  # replication is whole: the gate stays open


def test_reconciles_transactional_id_is_named_where_an_authorizer_restricts() -> None:
    notes = _notes(FLOW, TARGET, "target", {"DESCRIBE", "ALTER"})
    assert [n.detail.split(":")[0] for n in notes] == [
        "optional capability `ferry reconcile --replay` of flow A->B (as its target)"
    ] * 2
    assert "TRANSACTIONAL_ID 'ferry-reconcile-A-to-B'" in notes[0].detail
    assert "which Kafka cannot be asked about" in notes[0].detail
    # Without an authorizer the cluster grants everything (CLUSTER_ACTION too): no note.
    everything = {"DESCRIBE", "ALTER", "CLUSTER_ACTION", "CREATE"}
    assert _notes(FLOW, TARGET, "target", everything) == []


def test_a_read_only_source_gets_no_switchover_note() -> None:
    read_only = FlowConfig(source="A", target="B", enabled=True, source_read_only=True)
    assert _notes(read_only, SOURCE, "source", set()) == []
    assert _notes(FLOW, SOURCE, "source", set())  # the same grants, not read-only: noted
