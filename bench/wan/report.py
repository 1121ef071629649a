"""The WAN benchmark's results as markdown and as a chart (matplotlib's object API, Agg)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

__all__ = ["chart", "floors", "markdown", "merge_runs"]

COLOURS = {
    ("ferry", "default"): "tab:cyan",
    ("ferry", "wan"): "tab:blue",
    ("mm2", "default"): "tab:olive",
    ("mm2", "wan"): "tab:orange",
    ("consumer", "wan"): "black",
}


def floors(rtt_ms: float) -> dict[str, float]:
    """Latency floors with one fetch in flight per connection: a record waits for the next
    fetch to reach the broker (uniform over one round trip) and then for the response (half a
    round trip), so p50 is about one RTT and p99 about 1.5 RTT (local append left out)."""
    return {"p50_floor_ms": rtt_ms, "p99_floor_ms": 1.49 * rtt_ms}


def merge_runs(old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Runs of an earlier results file that this run did not repeat, then this run's."""
    repeated = {(r["link"], r["label"]) for r in new}
    return [r for r in old if (r["link"], r["label"]) not in repeated] + list(new)


def _settings(run: Mapping[str, Any]) -> str:
    variant = run.get("variant")
    return f"{run['settings']} + {variant}" if variant else str(run["settings"])


def _fmt(value: Any, pattern: str = "{:,.1f}") -> str:
    return "" if value is None else pattern.format(value)


def markdown(report: Mapping[str, Any], chart_file: str | None = "wan.png") -> str:
    """The results as markdown; `chart_file`: the chart beside them (None: no chart)."""
    plan = report["plan"]
    lines = [
        "# Across a WAN: ferry and MirrorMaker 2 through a delay-and-bandwidth link",
        "",
        f"{report['date']}, {report['machine']['cpu_count']} CPUs, Kafka "
        f"{report['machine']['kafka']}. Backlog: {plan['records']:,} records of "
        f"{plan['value_bytes']:,} B over {plan['partitions']} partitions; steady: "
        f"{plan['rate']:,.0f} records/s, {plan['warmup']:.0f} s warm-up then "
        f"{plan['seconds']:.0f} s timed. MM2 tasks.max = {plan['mm2_tasks']}. Windows: the "
        "per-connection TCP window each way, from the settings of the client carrying the "
        f"records (this host: net.core.rmem_max {report['os_buffers']['explicit_max']:,}, "
        f"tcp_rmem max {report['os_buffers']['autotune_max']:,}). MB = 1e6 bytes.",
        "",
        "| link | placement | replicator | settings | window to client / server KiB | "
        "first record s | backlog MB/s | share of link | bytes/record over link (to client / "
        "to server) | p50 ms | p99 ms | model floor p50 / p99 ms | steady bytes/record (to client "
        "/ to server) | steady CPU share | peak RSS MB |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["runs"]:
        floor = floors(r["rtt_ms"])
        backlog = _fmt(r.get("backlog_mb_per_s"))
        if r.get("backlog_complete") is False:
            backlog += " (incomplete)"
        if "error" in r:
            backlog = "failed: " + str(r["error"]).splitlines()[0][:120].replace("|", "/")
        lines.append(
            f"| {r['link']} | {r['placement']} | {r['replicator']} | {_settings(r)} | "
            f"{r['window_to_client'] / 1024:,.0f} / {r['window_to_server'] / 1024:,.0f} | "
            f"{_fmt(r.get('first_record_seconds'))} | {backlog} | "
            f"{_fmt(r.get('backlog_link_share'), '{:.0%}')} | "
            f"{_fmt(r.get('backlog_bytes_per_record_to_client'), '{:,.0f}')} / "
            f"{_fmt(r.get('backlog_bytes_per_record_to_server'), '{:,.0f}')} | "
            f"{_fmt(r.get('p50_ms'), '{:,.0f}')} | {_fmt(r.get('p99_ms'), '{:,.0f}')} | "
            f"{floor['p50_floor_ms']:.0f} / {floor['p99_floor_ms']:.0f} | "
            f"{_fmt(r.get('steady_bytes_per_record_to_client'), '{:,.0f}')} / "
            f"{_fmt(r.get('steady_bytes_per_record_to_server'), '{:,.0f}')} | "
            f"{_fmt(r.get('steady_cpu_share'), '{:.2f}')} | "
            f"{_fmt(r.get('peak_rss_mb'), '{:,.0f}')} |"
        )
    ceiling = report.get("proxy_ceiling") or []
    if ceiling:
        lines += [
            "",
            "The link itself (Kafka's ConsumerPerformance reading a preloaded topic, receive "
            "buffer left to the OS, so the window is not the limit):",
            "",
            "| path | MB/s | share of the link's bandwidth |",
            "|---|---:|---:|",
        ]
        for c in ceiling:
            lines.append(
                f"| {c['path']} | {c['mb_per_s']:,.1f} | {_fmt(c.get('link_share'), '{:.0%}')} |"
            )
    lines += [
        "",
        "Settings: " + "; ".join(f"{k}: {v}" for k, v in report["settings"].items()),
        "",
        "Steady CPU share: the replicator's CPU seconds per second while the timed records "
        "were produced (1.00 = one core busy). Peak RSS: the replicator's whole process tree "
        "(JVMs and Python workers), at its largest over the case.",
        "",
        (f"Chart: [{chart_file}]({chart_file}). " if chart_file else "")
        + f"Took {report['seconds']:.0f} s.",
    ]
    return "\n".join(lines) + "\n"


def chart(runs: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Left: the backlog's share of the link per case and link. Right: p50 and p99 against
    RTT per replicator and settings (replicator next to the target), with the floors."""
    figure = Figure(figsize=(12, 5), layout="constrained")
    share_axes, latency_axes = figure.subplots(1, 2)
    near = [r for r in runs if r["placement"] == "near-target"]
    links = sorted({(r["rtt_ms"], r["link"]) for r in runs})
    cases = sorted(
        {
            (r["replicator"], r["settings"], r["placement"])
            for r in runs
            if r.get("backlog_link_share") is not None  # the bare consumer copies no backlog
        }
    )
    width = 0.8 / max(1, len(cases))
    for index, (replicator, settings, placement) in enumerate(cases):
        xs, ys = [], []
        for position, (_rtt, link) in enumerate(links):
            for r in runs:
                if (r["link"], r["replicator"], r["settings"], r["placement"]) == (
                    link,
                    replicator,
                    settings,
                    placement,
                ) and r.get("backlog_link_share") is not None:
                    xs.append(position + (index - (len(cases) - 1) / 2) * width)
                    ys.append(r["backlog_link_share"])
        where = "" if placement == "near-target" else " (next to source)"
        share_axes.bar(
            xs,
            ys,
            width,
            color=COLOURS.get((replicator, settings)),
            hatch="//" if placement == "near-source" else None,
            label=f"{replicator} {settings}{where}",
        )
    share_axes.set_xticks(range(len(links)), [link for _rtt, link in links])
    share_axes.set_ylabel("backlog rate / link bandwidth")
    share_axes.set_ylim(0, 1.45)  # room for the legend above the bars
    share_axes.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    share_axes.set_title("Backlog across the link")
    share_axes.grid(True, axis="y", alpha=0.3)
    share_axes.legend(fontsize="small", ncols=2, loc="upper center")
    for replicator, settings in sorted({(r["replicator"], r["settings"]) for r in near}):
        mine = sorted(
            (
                r
                for r in near
                if (r["replicator"], r["settings"]) == (replicator, settings)
                and r.get("p99_ms") is not None
            ),
            key=lambda r: r["rtt_ms"],
        )
        rtts = [r["rtt_ms"] for r in mine]
        colour = COLOURS.get((replicator, settings))
        label = f"{replicator} {settings}"
        latency_axes.plot(
            rtts, [r["p99_ms"] for r in mine], "-o", color=colour, label=f"{label} p99"
        )
        latency_axes.plot(
            rtts, [r["p50_ms"] for r in mine], ":o", color=colour, label=f"{label} p50"
        )
    rtts = sorted({r["rtt_ms"] for r in near})
    if rtts:
        latency_axes.plot(
            rtts,
            [floors(t)["p99_floor_ms"] for t in rtts],
            "--",
            color="grey",
            label="p99 floor (1.5 RTT)",
        )
        latency_axes.plot(
            rtts,
            [floors(t)["p50_floor_ms"] for t in rtts],
            ":",
            color="grey",
            label="p50 floor (RTT)",
        )
    latency_axes.set_xlabel("round trip, ms")
    latency_axes.set_ylabel("latency, ms (target append - source timestamp)")
    latency_axes.set_ylim(bottom=0)
    latency_axes.set_title("Latency at a steady rate (replicator next to the target)")
    latency_axes.grid(True, alpha=0.3)
    latency_axes.legend(fontsize="small", ncols=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    return path
