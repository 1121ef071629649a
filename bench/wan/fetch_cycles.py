"""Where a consumer's time across the link goes, from a link trace (`bench.wan.link.TRACE_ENV`).

A consumer reading across a link loops: its fetch request crosses (half the round trip), the
broker answers (at once when it holds new records), the answer crosses back, and the client
takes a moment before it asks again. A record appended right after a fetch left waits for the
whole loop, so every millisecond the client or the broker adds to it adds to the latency.
Per connection this splits each loop, seen at the proxy, into:

- `client ms`: from the last byte of an answer delivered to the client to its next request;
- `broker ms`: from a request delivered to the broker to the first byte of its answer read;
- `cycle ms`: from one request to the next, and the answer's bytes.

    python -m bench.wan.fetch_cycles TRACE.jsonl [--last 30]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Cycle", "cycles", "summary"]

# (connection, "server" | "client", read from the sender at, delivered at, bytes)
Chunk = tuple[int, str, float, float, int]


@dataclass(frozen=True)
class Cycle:
    connection: int
    client_ms: float  # answer delivered -> next request read
    broker_ms: float  # request delivered -> answer's first chunk read
    cycle_ms: float  # request read -> next request read
    answer_bytes: int


def cycles(chunks: Iterable[Chunk]) -> list[Cycle]:
    """Every request-answer-request loop of every connection: a request is a chunk towards
    the server read after an answer (chunks towards the client) was delivered."""
    by_connection: dict[int, list[Chunk]] = defaultdict(list)
    for chunk in chunks:
        by_connection[chunk[0]].append(chunk)
    found: list[Cycle] = []
    for connection, rows in by_connection.items():
        requests = sorted((r for r in rows if r[1] == "server"), key=lambda r: r[2])
        answers = sorted((r for r in rows if r[1] == "client"), key=lambda r: r[2])
        for request, following in itertools.pairwise(requests):
            between = [a for a in answers if request[3] <= a[2] and a[3] <= following[2]]
            if not between:
                continue
            found.append(
                Cycle(
                    connection,
                    client_ms=(following[2] - between[-1][3]) * 1000,
                    broker_ms=(between[0][2] - request[3]) * 1000,
                    cycle_ms=(following[2] - request[2]) * 1000,
                    answer_bytes=sum(a[4] for a in between),
                )
            )
    return found


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(found: Sequence[Cycle]) -> dict[str, float]:
    """Medians and 90th percentiles over the loops that carried records (answers of 1 KiB or
    more: not metadata or empty fetches)."""
    busy = [c for c in found if c.answer_bytes >= 1024]
    if not busy:
        return {"loops": 0}
    out: dict[str, float] = {
        "loops": len(busy),
        "connections": len({c.connection for c in busy}),
    }
    for name in ("client_ms", "broker_ms", "cycle_ms", "answer_bytes"):
        values = [float(getattr(c, name)) for c in busy]
        out[f"{name} p50"] = round(statistics.median(values), 2)
        out[f"{name} p90"] = round(_quantile(values, 0.9), 2)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("traces", type=Path, nargs="+")
    parser.add_argument("--last", type=float, default=30.0, help="seconds before the last chunk")
    args = parser.parse_args()
    for path in args.traces:
        rows: list[Chunk] = [tuple(json.loads(line)) for line in path.open()]  # type: ignore[misc]
        if not rows:
            continue
        end = max(r[3] for r in rows)
        recent = [r for r in rows if r[2] >= end - args.last]
        print(path.name, json.dumps(summary(cycles(recent))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
