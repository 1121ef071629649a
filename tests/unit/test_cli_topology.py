"""The replication graph on the command line: `validate` and `run` refuse a bad one, and
`ferry topology` prints and draws it (ferry's entry point, in process; no broker is reached)."""

from __future__ import annotations

from pathlib import Path

from tests.ferry_cli import FerryResult, run_ferry


def clusters(*aliases: str) -> str:
    servers = "".join(f"{a}.bootstrap.servers = 127.0.0.1:{i}\n" for i, a in enumerate(aliases, 1))
    return f"clusters = {', '.join(aliases)}\n" + servers


IDENTITY = "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
DOUBLE_ROUTE = (
    clusters("A", "B", "C") + IDENTITY + "A->B.enabled = true\nA->C.enabled = true\n"
    "C->B.enabled = true\nA->B.topics = orders\n"
)
UNSAFE_CYCLE = (
    clusters("A", "B", "C") + IDENTITY + "A->B.enabled = true\nB->C.enabled = true\n"
    "C->B.enabled = true\n"
)
CHAIN = clusters("A", "B", "C", "D") + "A->B.enabled = true\nB->C.enabled = true\n"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mm2.properties"
    path.write_text(text)
    return path


def _ferry(*args: str) -> FerryResult:
    return run_ferry(*args, timeout=60)


def test_validate_refuses_a_double_route_naming_both_paths(tmp_path: Path) -> None:
    config = _write(tmp_path, DOUBLE_ROUTE)
    result = _ferry("validate", "-c", str(config))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert (
        f"error: {config}: A's topic orders reaches B's topic orders twice: A->B, and A->C->B "
        "(identity policy on A->B, A->C, C->B)" in result.stderr
    )
    assert f"{config}: not valid: 1 route(s) above" in result.stderr
    assert "valid\n" not in result.stdout


def test_validate_refuses_an_identity_cycle_fed_from_outside(tmp_path: Path) -> None:
    config = _write(tmp_path, UNSAFE_CYCLE)
    result = _ferry("validate", "-c", str(config))
    assert result.returncode == 1
    assert "B->C->B copies it back into B" in result.stderr
    assert "its origin A is not on that cycle" in result.stderr


def test_validate_accepts_identity_active_active_and_a_prefix_chain(tmp_path: Path) -> None:
    active = _write(
        tmp_path,
        clusters("A", "B") + IDENTITY + "A->B.enabled = true\nB->A.enabled = true\n",
    )
    result = _ferry("validate", "-c", str(active))
    assert result.returncode == 0, result.stderr
    assert "error" not in result.stderr
    chain = _write(tmp_path, CHAIN)
    result = _ferry("validate", "-c", str(chain))
    assert result.returncode == 0, result.stderr
    assert (
        f"warning: {chain}: cluster D is in no enabled flow: ferry neither reads nor writes it"
        in result.stderr
    )


def test_run_refuses_to_start_before_reaching_any_cluster(tmp_path: Path) -> None:
    config = _write(tmp_path, UNSAFE_CYCLE)
    result = _ferry("run", "-c", str(config), "--once")
    assert result.returncode == 1
    assert f"{config}: not started: 1 route(s) above" in result.stderr
    assert "flow A->B:" not in result.stderr  # nothing was started


def test_topology_prints_clusters_flows_policies_and_regexes_verbatim(tmp_path: Path) -> None:
    config = tmp_path / "ferry.yaml"
    config.write_text(
        "clusters:\n  A: {bootstrap.servers: '127.0.0.1:1'}\n  B: {bootstrap.servers: "
        "'127.0.0.1:2'}\n  C: {bootstrap.servers: '127.0.0.1:3'}\n"
        "A->B:\n  enabled: true\n  topics: ['orders-[a-z]+', '[bold]x']\n"
    )
    result = _ferry("topology", "-c", str(config))
    assert result.returncode == 0, result.stderr
    assert "orders-[a-z]+, [bold]x" in result.stdout
    assert "│ A->B │ prefix" in result.stdout
    assert "cluster C is in no enabled flow" in result.stderr
    assert "0 error(s), 1 warning(s)" in result.stdout


def test_topology_png_is_a_real_png_even_for_a_refused_graph(tmp_path: Path) -> None:
    config = _write(tmp_path, DOUBLE_ROUTE)
    png = tmp_path / "graph.png"
    result = _ferry("topology", "-c", str(config), "--png", str(png))
    assert result.returncode == 1  # the errors still count
    assert f"drawn: {png}" in result.stdout
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 5_000
