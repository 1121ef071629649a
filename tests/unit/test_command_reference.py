"""docs/tools/command_reference.py: the command reference is the typer app's, every command and
option of it (a command added to the app appears without a change to the generator), and every
exit code it documents is one the command's code exits with."""

from __future__ import annotations

import ast
import copy
import importlib
import importlib.util
import inspect
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import pytest
import typer

from ferry.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs" / "tools" / "command_reference.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("command_reference", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["command_reference"] = module
    spec.loader.exec_module(module)
    return module


reference = _load()


def _paths(command: Any, context: Any, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every command and group under `command`, found through click's own API."""
    found = {path: (command, context)}
    for name in getattr(command, "list_commands", lambda _ctx: [])(context):
        sub = command.get_command(context, name)
        sub_context = typer.Context(sub, info_name=name, parent=context)
        found.update(_paths(sub, sub_context, (*path, name)))
    return found


def _sections(page: str) -> dict[str, str]:
    """The page's command sections by heading (`ferry local up`), each with its text."""
    parts = re.split(r"^## `(ferry[^`]*)` \{ #[^}]+ \}$", page, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _check_every_command_and_option(application: typer.Typer) -> dict[str, str]:
    root = typer.main.get_command(application)
    sections = _sections(reference.render(application))
    for path, (command, context) in _paths(root, typer.Context(root, info_name="ferry")).items():
        heading = " ".join(("ferry", *path))
        assert heading in sections, f"{heading} has no section"
        for param in command.get_params(context):
            if param.name == "help" or getattr(param, "hidden", False):
                continue  # hidden: kept for an old spelling, not to be shown (ferry failover)
            for name in (*param.opts, *param.secondary_opts):
                argument = (param.metavar or name).upper()  # as the page shows it
                shown = f"`{argument}`" if param.param_type_name == "argument" else f"`{name}`"
                assert shown in sections[heading], f"{heading}: {name} is not on the page"
    return sections


def test_every_command_group_and_option_of_the_app_has_its_place_on_the_page() -> None:
    sections = _check_every_command_and_option(app)
    assert "ferry local spark up" in sections and "ferry flows restart" in sections
    assert "`--secure` / `--no-secure`" in sections["ferry demo"]
    assert "`--flow`" not in sections["ferry failover"]  # the old spelling's hidden options
    assert "`A->B`" in sections["ferry failover flow"]


def test_a_command_added_to_the_app_appears_with_its_options() -> None:
    extended = copy.copy(app)
    extended.registered_commands = list(app.registered_commands)

    def replay_window(
        config: Annotated[Path, typer.Option("--config", "-c", help="the config")],
        window: Annotated[int, typer.Option(help="Seconds to replay")] = 30,
    ) -> None:
        """Replay a window of records (a command added for this test)."""

    extended.command("replay-window")(replay_window)
    sections = _check_every_command_and_option(extended)
    section = sections["ferry replay-window"]
    assert "Replay a window of records" in section
    assert "| `--window` | int | `30` | Seconds to replay |" in section
    assert "[those of every command](#exit-codes)" in section
    assert "ferry replay-window" not in _sections(reference.render())  # the app is unchanged


def test_defaults_that_matter_are_shown_as_the_code_has_them() -> None:
    sections = _sections(reference.render())
    run, monitor = sections["ferry run"], sections["ferry monitor"]
    assert "| `--metrics-port` | int | unset |" in run  # off unless given
    assert "| `--metrics-port` | int | `9464` |" in monitor
    assert "| `--metrics-host` | str | `127.0.0.1` |" in run
    assert "| `--metrics-host` | str | `127.0.0.1` |" in monitor


@pytest.mark.parametrize(
    ("command", "exit_code", "ref"),
    [
        (name, code.code, ref)
        for name, codes in reference.EXIT_CODES.items()
        for code in codes
        for ref in code.where
    ]
    + [("", code.code, ref) for code in reference.COMMON for ref in code.where],
)
def test_each_documented_exit_code_is_in_the_code_it_names(
    command: str, exit_code: int, ref: str
) -> None:
    assert reference.code_in(ref, exit_code), f"ferry {command}: {exit_code} is not in {ref}"


def test_every_documented_nonzero_code_names_the_code_that_exits_with_it() -> None:
    assert reference.check() == []
    for name, codes in reference.EXIT_CODES.items():
        for code in codes:
            assert code.code == 0 or code.where, f"ferry {name}: {code.code} names no code"


def test_the_check_finds_a_code_the_command_never_exits_with(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wrong = reference.ExitCode(4, "never", ("ferry.cli.audit_command:audit",))
    monkeypatch.setitem(reference.EXIT_CODES, "audit", (wrong,))
    monkeypatch.setitem(reference.EXIT_CODES, "no-such-command", ())
    problems = reference.check()
    assert any("ferry audit: exit code 4 is not in" in p for p in problems), problems
    assert any("'ferry no-such-command'" in p for p in problems), problems


def test_every_code_a_command_module_exits_with_is_documented_for_its_commands() -> None:
    by_module: dict[str, set[int]] = {}
    for cmd in reference.commands():
        if cmd.is_group:
            continue
        codes = set(reference.exit_codes_of(cmd.name))
        by_module.setdefault(cmd.function.__module__, set()).update(codes)
    for module, documented in by_module.items():
        undocumented = reference.literal_exit_codes(module) - documented
        assert not undocumented, f"{module} exits with {undocumented}, not in the reference"
    every = set().union(*by_module.values())
    for path in (ROOT / "src" / "ferry" / "cli").glob("*.py"):  # the modules commands share
        module = f"ferry.cli.{path.stem}".removesuffix(".__init__")
        undocumented = reference.literal_exit_codes(module) - every
        assert not undocumented, f"{module} exits with {undocumented}, not in the reference"


def test_every_exit_code_constant_in_ferry_is_named_by_the_reference() -> None:
    named = {
        ref.partition(":")[2]
        for codes in (reference.COMMON, *reference.EXIT_CODES.values())
        for code in codes
        for ref in code.where
    }
    constants = set()
    for path in (ROOT / "src" / "ferry").rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name) and name.id.startswith("EXIT_"):
                            constants.add(name.id)
    assert constants, "no EXIT_ constant found: the scan is broken"
    assert constants <= named, f"not in the reference: {constants - named}"


def test_the_codes_in_the_commands_own_help_agree_with_the_reference() -> None:
    """Where a command's help says `exits N` (or `exit N`), N is among its documented codes."""
    for cmd in reference.commands():
        if cmd.is_group or not cmd.path:
            continue
        help_text = inspect.cleandoc(cmd.command.help or "")
        said = {int(n) for n in re.findall(r"\bexits? (\d+)", help_text)}
        said |= {int(n) for n in re.findall(r", (\d+) when", help_text)}
        said |= {int(n) for n in re.findall(r", (\d+) on ", help_text)}
        assert said <= set(reference.exit_codes_of(cmd.name)), (cmd.name, said)
