"""The steady-rate sweep's chart (bench.sweep): latency and CPU share against rate.

Top panel: p50, p99 and p99.9 latency (ms, log scale) per replicator; bottom panel: CPU share
(1.0 = one core). Rates on a log scale, ticks at the rates measured. Drawn with matplotlib's
object API and the Agg canvas (no display, no pyplot state).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, LogFormatter, NullLocator

COLOURS = {"ferry": "tab:blue", "mm2": "tab:orange"}
LABELS = {"ferry": "ferry", "mm2": "MirrorMaker 2"}
PERCENTILES = (("p50_ms", "p50", ":"), ("p99_ms", "p99", "-"), ("p999_ms", "p99.9", "--"))


def series(
    runs: Iterable[Mapping[str, Any]], replicator: str, field: str
) -> tuple[list[float], list[float]]:
    """(rates, values of `field`) of one replicator's runs, by ascending rate."""
    mine = sorted((r for r in runs if r["replicator"] == replicator), key=lambda r: r["rate"])
    return [float(r["rate"]) for r in mine], [float(r[field]) for r in mine]


def chart_path(out: Path, name: str) -> Path:
    """`sweep.png` next to latest.json; `<name>-sweep.png` next to any other results name."""
    return out / ("sweep.png" if name == "latest" else f"{name}-sweep.png")


def sweep_chart(sweep: Mapping[str, Any], path: Path) -> Path:
    """Draw the sweep's runs into a PNG at `path`."""
    figure = Figure(figsize=(8, 8), layout="constrained")
    latency, cpu = figure.subplots(2, 1, sharex=True)
    runs = list(sweep["runs"])
    for name in sorted({str(r["replicator"]) for r in runs}):
        colour, label = COLOURS.get(name), LABELS.get(name, name)
        for field, which, style in PERCENTILES:
            rates, values = series(runs, name, field)
            latency.plot(rates, values, style, marker="o", color=colour, label=f"{label} {which}")
        rates, shares = series(runs, name, "cpu_share")
        cpu.plot(rates, shares, "-", marker="o", color=colour, label=label)
    settings = sweep["settings"]
    latency.set_title(
        f"Steady rate: {settings['value_bytes']:,} B records, {settings['partitions']} "
        f"partitions, {settings['seconds']:.0f} s timed per rate"
    )
    latency.set_yscale("log")
    latency.yaxis.set_major_formatter(LogFormatter())  # 10, 100, not 10^1, 10^2
    latency.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False))
    latency.set_ylabel("latency, ms (target append - source timestamp)")
    latency.grid(True, which="both", alpha=0.3)
    latency.legend(fontsize="small", ncols=2)
    cpu.set_ylabel("CPU share (1.0 = one core)")
    cpu.set_ylim(bottom=0)
    cpu.grid(True, alpha=0.3)
    cpu.legend(fontsize="small")
    cpu.set_xscale("log")
    cpu.set_xlabel("rate, records/s")
    all_rates = sorted({float(r["rate"]) for r in runs})
    cpu.xaxis.set_major_locator(FixedLocator(all_rates))
    cpu.xaxis.set_minor_locator(NullLocator())
    cpu.set_xticklabels([f"{r:,.0f}" for r in all_rates])
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    return path
