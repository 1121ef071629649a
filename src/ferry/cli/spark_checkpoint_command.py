"""`ferry failover spark-checkpoint DIR`: a Spark Structured Streaming query whose source is
Kafka, moved to another cluster by rewriting its checkpoint (see ferry.offsets.spark_checkpoint).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ferry.terminal.console import err, out

if TYPE_CHECKING:
    from ferry.config.model import FerryConfig
    from ferry.flows.override import FlowControl
    from ferry.offsets.spark_checkpoint import CheckpointRewrite

__all__ = ["spark_checkpoint_failover"]


def spark_checkpoint_failover(
    cfg: FerryConfig,
    checkpoint: str,
    from_alias: str,
    to_alias: str,
    *,
    sink_log: str | None = None,
    dry_run: bool = False,
    as_json: bool = False,
) -> None:
    """Rewrite (or, `dry_run`, show) the checkpoint for `to_alias` and print what the restarted
    query must subscribe to. A checkpoint that cannot be moved exactly raises
    `CheckpointRefused` (a FerryError: one line, exit 1) and nothing is changed."""
    from ferry.engine.spark.checkpoint_files import checkpoint_storage, session_for
    from ferry.offsets.spark_checkpoint import positions
    from ferry.offsets.spark_checkpoint_io import fail_over_spark_checkpoint, read_checkpoint

    spark = session_for(cfg)
    storage = checkpoint_storage(checkpoint, spark)
    sink = checkpoint_storage(sink_log, spark) if sink_log is not None else None
    # A checkpoint ferry cannot move is refused before any cluster is asked anything.
    positions(read_checkpoint(storage, sink))
    control = _recorded_control(cfg, from_alias, to_alias)
    rewrite = fail_over_spark_checkpoint(
        cfg, storage, from_alias, to_alias, sink=sink, dry_run=dry_run, control=control
    )
    if as_json:
        print(json.dumps({**rewrite.as_json(), "dry_run": dry_run}))
        return
    _print(rewrite, storage.where(rewrite.backup), dry_run)


def _recorded_control(cfg: FerryConfig, from_alias: str, to_alias: str) -> FlowControl | None:
    """Topics added or removed over the API for the flow, when its target says; else None."""
    from ferry.control.log import recorded_control
    from ferry.errors import FerryError, KafkaUnavailableError

    try:
        return recorded_control(cfg, from_alias, to_alias)
    except KafkaUnavailableError as exc:
        if exc.cluster == to_alias:
            raise  # its offset runs cannot be read either
        note = str(exc)
    except FerryError as exc:
        note = str(exc)
    err.print(
        f"note: could not read the control state ({note}); topics added or removed over the "
        "API count as the config file says",
        highlight=False,
        markup=False,
    )
    return None


def _print(rewrite: CheckpointRewrite, backup: str, dry_run: bool) -> None:
    from rich.table import Table
    from rich.text import Text

    planned = (
        "none"
        if rewrite.planned is None
        else f"{rewrite.planned} ({rewrite.planned_action}; not committed)"
    )
    table = Table(
        title=Text(
            f"spark checkpoint {rewrite.checkpoint}: {rewrite.from_alias} -> {rewrite.to_alias}"
        )
    )
    for column in ("file", "topic", "partition", "offset", "to topic", "to offset", "how"):
        table.add_column(column, justify="right" if column in ("partition", "offset") else "left")
    for m in rewrite.moved:
        cells = [m.file, m.topic, m.partition, m.offset, m.remote_topic, m.remote_offset, m.how]
        table.add_row(*(Text(str(c)) for c in cells))
    out.print(table)
    for note in rewrite.notes:
        err.print(f"note: {note}", highlight=False, markup=False)
    lines = [
        f"committed batch: {'none' if rewrite.committed is None else rewrite.committed}",
        f"planned batch: {planned}",
    ]
    for change in rewrite.changes:
        lines.append(f"{'rewritten' if change.after is not None else 'removed'}: {change.path}")
    lines.append(f"subscribe: {rewrite.subscribe}")
    lines.append(f"subscribePattern: {rewrite.subscribe_pattern}")
    if dry_run:
        lines.append("dry run: nothing was written")
    else:
        lines.append(f"backup: {backup}")
        lines.append(
            f"restart the query against {rewrite.to_alias} with its Kafka source's subscribe "
            "(or subscribePattern) above"
        )
    for line in lines:
        out.print(Text(line))
