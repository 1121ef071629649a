"""`ferry topics` and `ferry flows`: change a running `ferry run` through its API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ferry.errors import FerryError
from ferry.terminal.console import out

__all__ = ["flows_app", "topics_app"]

topics_app = typer.Typer(help="Add, remove or list the topics a running flow copies (its API).")
flows_app = typer.Typer(
    help="List, pause, resume or restart the flows of a running ferry (its API)."
)

ConfigOption = Annotated[Path, typer.Option("--config", "-c", help="ferry.yaml or MM2 .properties")]
FlowOption = Annotated[str, typer.Option("--flow", help="The flow, as SOURCE->TARGET")]
UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url", help="The API's address (default: as `ferry run` recorded it in the state dir)"
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON")]


def _client(config: Path, url: str | None) -> Any:
    from ferry.api.api_client import ApiClient
    from ferry.config import load_config

    return ApiClient.of(load_config(config), url)


def _flow_path(flow: str) -> str:
    source, arrow, target = flow.partition("->")
    if not arrow or not source or not target:
        raise FerryError(f"--flow '{flow}': write it as SOURCE->TARGET, e.g. A->B")
    return f"/flows/{source}/{target}"


def _say(flow: str, control: dict[str, Any]) -> None:
    parts = ["paused" if control["paused"] else "running"]
    if control["added"]:
        parts.append("added " + ", ".join(control["added"]))
    if control["removed"]:
        parts.append("removed " + ", ".join(control["removed"]))
    out.print(f"flow {flow}: {'; '.join(parts)}")


@topics_app.command("add")
def topics_add(config: ConfigOption, flow: FlowOption, topic: str, url: UrlOption = None) -> None:
    """Start copying a source topic (created on the target as usual), without a restart."""
    path = _flow_path(flow)
    _say(flow, _client(config, url).call("POST", f"{path}/topics", {"topic": topic}))


@topics_app.command("remove")
def topics_remove(
    config: ConfigOption, flow: FlowOption, topic: str, url: UrlOption = None
) -> None:
    """Stop copying a topic; its copy on the target and the data in it stay."""
    path = _flow_path(flow)
    _say(flow, _client(config, url).call("DELETE", f"{path}/topics/{topic}"))


@topics_app.command("list")
def topics_list(
    config: ConfigOption, flow: FlowOption, url: UrlOption = None, as_json: JsonOption = False
) -> None:
    """The topics the flow copies now."""
    path = _flow_path(flow)
    summary = _client(config, url).call("GET", path)
    if as_json:
        print(json.dumps(summary["topics"]))
        return
    for topic in summary["topics"]:
        out.print(topic)


@flows_app.command("list")
def flows_list(config: ConfigOption, url: UrlOption = None, as_json: JsonOption = False) -> None:
    """Every running flow: state, lag, records copied, mean latency."""
    flows = _client(config, url).call("GET", "/flows")
    if as_json:
        print(json.dumps(flows))
        return
    for f in flows:
        latency = "-" if f["latency_ms"] is None else f"{f['latency_ms']} ms"
        error = f" ({f['error']})" if f["error"] else ""
        out.print(
            f"{f['name']}: {f['state']}{error}, lag {f['lag']}, {f['records']} records, "
            f"latency {latency}, {len(f['topics'])} topic(s)"
        )


@flows_app.command("pause")
def flows_pause(config: ConfigOption, flow: FlowOption, url: UrlOption = None) -> None:
    """Copy nothing until resumed; the flow keeps its position."""
    path = _flow_path(flow)
    _say(flow, _client(config, url).call("POST", f"{path}/pause"))


@flows_app.command("resume")
def flows_resume(config: ConfigOption, flow: FlowOption, url: UrlOption = None) -> None:
    """Copy again, from where the flow stopped."""
    path = _flow_path(flow)
    _say(flow, _client(config, url).call("POST", f"{path}/resume"))


@flows_app.command("restart")
def flows_restart(config: ConfigOption, flow: FlowOption, url: UrlOption = None) -> None:
    """Start a failed flow again, from its position on the target."""
    path = _flow_path(flow)
    summary = _client(config, url).call("POST", f"{path}/restart")
    out.print(f"flow {flow}: {summary['state']}")
