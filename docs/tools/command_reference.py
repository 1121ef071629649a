"""Write docs/operations/command-reference.md from ferry's command line (the typer app).

Every command and subcommand, its help, its options (type, default, help) and arguments come
from `ferry.cli.app.app` as `ferry COMMAND --help` shows them; only the exit codes live here
(EXIT_CODES), each naming the code that chooses it, and `check()` reads that code: a documented
code the code no longer exits with, or a command or reference that is gone, stops the build.
`make docs` runs this before building the site: it writes the page and exits 1 when the page
it found differed (an out-of-date page was committed), so CI fails until the new one is.

    .venv/bin/python docs/tools/command_reference.py [--check]
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import re
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

OUT = Path(__file__).resolve().parents[1] / "operations" / "command-reference.md"


@dataclass(frozen=True)
class ExitCode:
    """An exit code of a command and when it happens. `where` names what picks it, as
    `module:qualified.name`: a function (or property, or class) whose code exits with the
    number (`typer.Exit(n)`, `sys.exit(n)`, `return n`, `exit_code = n`) or a constant (or a
    class's `exit_code`) equal to it. Every one must hold the code (`code_in`)."""

    code: int
    when: str
    where: tuple[str, ...] = ()


# Exit codes every command has; typer's own (2, 130) and ferry's main() (1).
COMMON: tuple[ExitCode, ...] = (
    ExitCode(0, "done"),
    ExitCode(
        1,
        "an error ferry explains, printed as one line `error: ...` on stderr saying what, "
        "where (file and key, or cluster, topic, partition, offset) and the fix: a config "
        "that does not load, a cluster that did not answer in time, a refusal, a copy or "
        "step that failed ([Troubleshooting](troubleshooting.md))",
        ("ferry.cli.app:main",),
    ),
    ExitCode(
        2,
        "wrong options: a required option missing, an unknown option, a value of the wrong "
        "type, or options that do not go together (the usage and the reason are printed)",
        ("typer:BadParameter",),
    ),
    ExitCode(
        130,
        "interrupted (Ctrl-C). `ferry run` and `ferry monitor` take a first Ctrl-C or SIGTERM "
        "as a request to finish the step under way and end with their usual code; a second "
        "one interrupts them",
        ("typer.core:_main",),
    ),
)

# Per command (its path after `ferry`): codes it adds, or what a code means for it.
EXIT_CODES: dict[str, tuple[ExitCode, ...]] = {
    "validate": (
        ExitCode(
            1,
            "also when a route of the flows would copy records twice or forever (each route "
            "is printed first)",
            ("ferry.cli.common:check_topology",),
        ),
    ),
    "run": (
        ExitCode(
            0,
            "`--once` copied everything available at start; a continuous run stopped by "
            "SIGINT or SIGTERM after finishing its current batch",
        ),
        ExitCode(
            1,
            "also when a route of the flows would copy records twice or forever (nothing "
            "starts), and when an error stops a flow (with `--api-port` a failed flow stays "
            "`failed` instead until restarted); `--once` gives up on a cluster that does not "
            "answer after `ferry.once.max.wait.seconds`",
            ("ferry.cli.common:check_topology",),
        ),
    ),
    "topology": (
        ExitCode(
            1,
            "a route would copy records twice or forever (the graph and its errors are "
            "printed first)",
            ("ferry.cli.config_commands:topology",),
        ),
    ),
    "translate": (
        ExitCode(
            1,
            "also, with `--offsets`, when any line could not be translated (every line is "
            "answered, in order)",
            ("ferry.cli.offsets_commands:_translate_stored",),
        ),
    ),
    "failover group": (
        ExitCode(0, "the group's offsets were committed on `--to` (with `--dry-run`: shown)"),
    ),
    "failover flow": (
        ExitCode(
            0,
            "every group moved (with `--dry-run`: would move) or was already there",
        ),
        ExitCode(
            1,
            "also when a group failed (the others are still moved)",
            ("ferry.offsets.flow_failover:FlowFailover.exit_code",),
        ),
        ExitCode(
            3,
            "some group was skipped, left where it was (the reason is in the report)",
            ("ferry.offsets.flow_failover:EXIT_SKIPPED",),
        ),
    ),
    "failover spark-checkpoint": (
        ExitCode(
            1,
            "also when the checkpoint cannot be moved exactly (nothing is changed)",
            ("ferry.cli.app:main",),
        ),
    ),
    "reconcile": (
        ExitCode(0, "nothing is stranded, or the policy was applied"),
        ExitCode(
            2,
            "also when none or several of `--report-only`, `--replay`, `--divert`, `--export` "
            "are given, or `--divert` names no topic",
            ("typer:BadParameter",),
        ),
        ExitCode(
            3,
            "`--report-only` found stranded records",
            ("ferry.cli.reconcile_command:reconcile",),
        ),
    ),
    "switchover": (
        ExitCode(
            1,
            "also when the switchover is refused (the sentence says why), a step fails, or "
            "the proof finds a record of the window missing on the target",
            (
                "ferry.control.switchover:SwitchoverReport.exit_code",
                "ferry.cli.switchover_command:switchover",
            ),
        ),
    ),
    "status": (
        ExitCode(
            1,
            "a cluster did not answer (its figures are missing), or a flow is behind while "
            "its target cannot take writes (partitions below `min.insync.replicas` or without "
            "a leader, brokers that do not answer); each is said per flow",
            ("ferry.cli.ops_commands:status",),
        ),
    ),
    "audit": (
        ExitCode(0, "nothing is missing"),
        ExitCode(3, "records are missing on the target", ("ferry.cli.audit_command:audit",)),
    ),
    "doctor": (
        ExitCode(0, "nothing stops or weakens replication (notes do not count)"),
        ExitCode(
            1,
            "a finding stops replication (an error)",
            ("ferry.ops.durability:EXIT_ERRORS",),
        ),
        ExitCode(
            2,
            "findings only weaken replication (warnings); wrong options exit 2 as well, so a "
            "deploy gate should check the options once by hand",
            ("ferry.ops.durability:EXIT_WARNINGS",),
        ),
    ),
    "monitor": (
        ExitCode(
            1,
            "`--once`: a flow could not be sampled (a cluster did not answer)",
            ("ferry.cli.ops_commands:monitor",),
        ),
        ExitCode(
            130,
            "a second Ctrl-C or SIGTERM while a sample waited on a cluster",
            ("ferry.cli.ops_commands:monitor",),
        ),
    ),
    "demo": (
        ExitCode(
            130,
            "interrupted by a second Ctrl-C, after the demo cleaned up",
            ("ferry.cli.local_commands:demo",),
        ),
    ),
}

# Modules whose codes count for every command.
COMMON_MODULES = ("ferry.cli.app", "ferry.cli.common", "typer", "typer.core")


# --- walking the app ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """A command or group of the app: its words after `ferry`, the click command and context."""

    path: tuple[str, ...]
    command: Any
    context: Any

    @property
    def name(self) -> str:
        return " ".join(self.path)

    @property
    def is_group(self) -> bool:
        return hasattr(self.command, "list_commands")

    @property
    def function(self) -> Any:
        """The Python function the command runs (None for a group)."""
        callback = getattr(self.command, "callback", None)
        return getattr(callback, "__wrapped__", callback)


def commands(app: typer.Typer | None = None) -> Iterator[Command]:
    """The app's root, then every command and group in the order `--help` lists them, each
    group followed by its own commands."""
    if app is None:
        from ferry.cli.app import app as ferry_app

        app = ferry_app
    root = typer.main.get_command(app)
    context = typer.Context(root, info_name="ferry")
    yield from _walk(root, context, ())


def _walk(command: Any, context: Any, path: tuple[str, ...]) -> Iterator[Command]:
    yield Command(path, command, context)
    if not hasattr(command, "list_commands"):
        return
    for name in command.list_commands(context):
        sub = command.get_command(context, name)
        if sub is None or sub.hidden:
            continue
        yield from _walk(sub, typer.Context(sub, info_name=name, parent=context), (*path, name))


def _params(cmd: Command) -> list[Any]:
    """Options and arguments as --help lists them, without --help itself."""
    return [
        p
        for p in cmd.command.get_params(cmd.context)
        if not getattr(p, "hidden", False) and p.name != "help"
    ]


# --- exit codes in the code ----------------------------------------------------------------------


def resolve(ref: str) -> Any:
    """`module:qualified.name` as the object it names."""
    module_name, _, qualname = ref.partition(":")
    found: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        found = inspect.getattr_static(found, part)
    if isinstance(found, property):
        found = found.fget
    if isinstance(found, staticmethod | classmethod):
        found = found.__func__
    return found


def _exit_numbers(tree: ast.AST) -> set[int]:
    """Integer exit codes a piece of code chooses: `typer.Exit(n)`, `Exit(n)`, `sys.exit(n)`,
    `return n`, `exit_code = n`."""
    found: set[int] = set()

    def literal(node: ast.AST | None) -> int | None:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        return None

    for node in ast.walk(tree):
        value: int | None = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("Exit", "exit"):
                value = literal(node.args[0])
        elif isinstance(node, ast.Return):
            value = literal(node.value)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any("exit_code" in ast.unparse(t) for t in targets):
                value = literal(node.value)
        if value is not None:
            found.add(value)
    return found


def code_in(ref: str, code: int) -> bool:
    """Whether what `ref` names exits with `code` (see ExitCode)."""
    found = resolve(ref)
    if isinstance(found, int) and not isinstance(found, bool):
        return found == code
    if isinstance(found, type) and isinstance(getattr(found, "exit_code", None), int):
        return bool(found.exit_code == code)
    source = textwrap.dedent(inspect.getsource(found))
    return code in _exit_numbers(ast.parse(source))


def literal_exit_codes(module: str) -> set[int]:
    """The nonzero exit codes a module's code chooses literally."""
    tree = ast.parse(inspect.getsource(importlib.import_module(module)))
    return {code for code in _exit_numbers(tree) if code}


def _related(ref_module: str, cmd: Command) -> bool:
    """A reference belongs to a command when it is in the command's module, in a module every
    command shares, or in one the command's module imports (names)."""
    if ref_module in COMMON_MODULES:
        return True
    own = cmd.function.__module__
    return ref_module == own or ref_module in inspect.getsource(sys.modules[own])


def check(app: typer.Typer | None = None) -> list[str]:
    """What the exit codes written here and the code disagree on."""
    problems = []
    found = {c.name: c for c in commands(app) if not c.is_group and c.path}
    for name in EXIT_CODES.keys() - found.keys():
        problems.append(f"{__file__}: exit codes of 'ferry {name}', which is no command")
    for exit_code in COMMON:
        for ref in exit_code.where:
            if not code_in(ref, exit_code.code):
                problems.append(f"exit code {exit_code.code} (every command) is not in {ref}")
    for name, codes in EXIT_CODES.items():
        cmd = found.get(name)
        if cmd is None:
            continue
        for exit_code in codes:
            if exit_code.code and not exit_code.where:
                problems.append(f"ferry {name}: exit code {exit_code.code} names no code")
            for ref in exit_code.where:
                if not _related(ref.partition(":")[0], cmd):
                    problems.append(f"ferry {name}: {ref} is not the command's code")
                elif not code_in(ref, exit_code.code):
                    problems.append(f"ferry {name}: exit code {exit_code.code} is not in {ref}")
    return problems


def exit_codes_of(name: str) -> dict[int, ExitCode]:
    """The codes written for a command, every command's first."""
    codes = {c.code: c for c in COMMON}
    codes.update({c.code: c for c in EXIT_CODES.get(name, ())})
    return codes


# --- Markdown ------------------------------------------------------------------------------------

_CODE_SPAN = re.compile(r"(`[^`]*`)")
_DEFAULT_IN_HELP = re.compile(r"\s*\[default: ([^\]]*)\]\s*$")


def _text(text: str) -> str:
    """Help text as Markdown: code spans kept, everything else taken literally."""
    parts = []
    for i, part in enumerate(_CODE_SPAN.split(text)):
        if i % 2 == 0:
            part = re.sub(r"([\\*_{}\[\]])", r"\\\1", part).replace("<", "&lt;")
        parts.append(part)
    return "".join(parts)


def _cell(text: str) -> str:
    """Text for a table cell: a `|` outside code spans escaped (the table does not split on
    one inside a code span, where a backslash would show)."""
    parts = _CODE_SPAN.split(text)
    return "".join(p if i % 2 else p.replace("|", "\\|") for i, p in enumerate(parts))


def _code(text: object) -> str:
    return f"`{text}`"


def _paragraphs(text: str | None) -> list[str]:
    """A docstring's paragraphs, each on one line."""
    if not text:
        return []
    text = inspect.cleandoc(text)
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]


def _first_sentence(text: str | None) -> str:
    paragraphs = _paragraphs(text)
    if not paragraphs:
        return ""
    first = paragraphs[0]
    end = first.find(". ")
    return first if end < 0 else first[: end + 1]


def _anchor(cmd: Command) -> str:
    return "-".join(("ferry", *cmd.path))


def _usage(cmd: Command) -> str:
    words = ["ferry", *cmd.path, "[OPTIONS]"]
    for p in _params(cmd):
        if p.param_type_name == "argument":
            metavar = (p.metavar or p.name).upper()
            if p.nargs < 0:
                metavar += "..."
            words.append(metavar if p.required else f"[{metavar}]")
    if cmd.is_group:
        words.append("COMMAND [ARGS]...")
    return " ".join(words)


def _value(param: Any, context: Any) -> str:
    """What an option takes: its metavar, else its type."""
    if getattr(param, "is_flag", False):
        return "flag"
    if param.metavar:
        return _code(param.metavar)
    if hasattr(param, "display_type"):
        kind = param.display_type(context).strip("<>")
    else:
        kind = param.type.name
    kind = kind.removesuffix(" range")
    if kind.startswith("list[") and kind.endswith("]"):
        kind = kind[5:-1]
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if low is not None and high is not None:
        kind += f", {low} to {high}"
    elif low is not None:
        kind += f", {low} or more"
    elif high is not None:
        kind += f", at most {high}"
    if getattr(param, "multiple", False):
        kind += ", repeatable"
    return kind


def _names(param: Any) -> str:
    shorts = sorted((o for o in param.opts if not o.startswith("--")), key=len)
    longs = [o for o in param.opts if o.startswith("--")]
    names = ", ".join(_code(o) for o in (*shorts, *longs))
    if param.secondary_opts:
        names += " / " + ", ".join(_code(o) for o in param.secondary_opts)
    return names


def _help_and_default(param: Any) -> tuple[str, str]:
    """The option's help and its default as the page shows them."""
    help_text = " ".join((param.help or "").split())
    written = _DEFAULT_IN_HELP.search(help_text)
    if written:  # a default the help states itself (the option's value is None)
        help_text = help_text[: written.start()]
    if param.required:
        return help_text, "required"
    default = param.default
    if getattr(param, "is_flag", False):
        on = bool(default)
        if param.secondary_opts:
            return help_text, _code(param.opts[0] if on else param.secondary_opts[0])
        return help_text, "on" if on else "off"
    if written:
        return help_text, _text(written.group(1))
    if default is None or default == ():
        return help_text, "unset"
    if isinstance(default, list | tuple):
        return help_text, ", ".join(_code(v) for v in default)
    return help_text, _code(default)


def _command_section(cmd: Command) -> list[str]:
    out = [f"## `{' '.join(('ferry', *cmd.path))}` {{ #{_anchor(cmd)} }}\n"]
    out.append(f"```\n{_usage(cmd)}\n```\n")
    for paragraph in _paragraphs(cmd.command.help):
        out.append(_text(paragraph) + "\n")
    params = _params(cmd)
    arguments = [p for p in params if p.param_type_name == "argument"]
    options = [p for p in params if p.param_type_name != "argument"]
    if arguments:
        out.append("| argument | value | what it is |")
        out.append("|---|---|---|")
        for p in arguments:
            metavar = (p.metavar or p.name).upper()
            required = "" if p.required else " (optional)"
            value = _value(p, cmd.context)
            what = _text(" ".join((p.help or "").split())) or "(no help text)"
            out.append(f"| `{metavar}`{required} | {_cell(value)} | {_cell(what)} |")
        out.append("")
    if options:
        out.append("| option | value | default | what it does |")
        out.append("|---|---|---|---|")
        for p in options:
            help_text, default = _help_and_default(p)
            value = _value(p, cmd.context)
            out.append(
                f"| {_cell(_names(p))} | {_cell(value)} | {_cell(default)} "
                f"| {_cell(_text(help_text))} |"
            )
        out.append("")
    if cmd.is_group and cmd.path:  # the root's commands are the index at the top
        out.append("| command | what it does |")
        out.append("|---|---|")
        for name in cmd.command.list_commands(cmd.context):
            sub = cmd.command.get_command(cmd.context, name)
            if sub is None or sub.hidden:
                continue
            anchor = "-".join(("ferry", *cmd.path, name))
            words = " ".join(("ferry", *cmd.path, name))
            out.append(f"| [`{words}`](#{anchor}) | {_cell(_text(_first_sentence(sub.help)))} |")
        out.append("")
    elif cmd.path:
        own = EXIT_CODES.get(cmd.name, ())
        if own:
            out.append("Exit codes (besides [those of every command](#exit-codes)):\n")
            out.append("| code | when |")
            out.append("|---|---|")
            for exit_code in own:
                out.append(f"| {exit_code.code} | {_cell(exit_code.when)} |")
            out.append("")
        else:
            out.append("Exit codes: [those of every command](#exit-codes).\n")
    return out


def render(app: typer.Typer | None = None) -> str:
    every = list(commands(app))
    leaves = [c for c in every if not c.is_group]
    options = sum(1 for c in every for p in _params(c) if p.param_type_name != "argument")
    out: list[str] = []
    add = out.append
    add("# Command reference\n")
    add(
        "<!-- Generated by docs/tools/command_reference.py from ferry's command line "
        "(src/ferry/cli: every command's help, options and arguments) and the exit codes it "
        "keeps; `make docs` writes it. Edit the generator or the commands' help, not this "
        "file. -->\n"
    )
    add(
        f"Every `ferry` command ({len(leaves)}, and {len(every) - len(leaves) - 1} groups "
        f"of them) with its options ({options} in all), as `ferry COMMAND --help` lists "
        "them; every command also takes `--help`. What the commands are for, with the pages "
        "that explain them: [Commands](commands.md). A default of `unset`: the option has no "
        "value unless given (its help says what that means).\n"
    )
    add("## Exit codes\n")
    add("Every command exits with one of these; a command's own are under it.\n")
    add("| code | when |")
    add("|---|---|")
    for exit_code in COMMON:
        add(f"| {exit_code.code} | {_cell(exit_code.when)} |")
    add("")
    add("## Every command\n")
    add("| command | what it does |")
    add("|---|---|")
    for cmd in every[1:]:
        words = " ".join(("ferry", *cmd.path))
        add(f"| [`{words}`](#{_anchor(cmd)}) | {_cell(_text(_first_sentence(cmd.command.help)))} |")
    add("")
    for cmd in every:
        out.extend(_command_section(cmd))
    return "\n".join(out).rstrip("\n") + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="fail if the page is out of date; write nothing"
    )
    args = parser.parse_args()
    problems = check()
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    text = render()
    current = OUT.read_text(encoding="utf-8") if OUT.exists() else None
    if current == text:
        return 0
    if args.check:
        print(f"{OUT} is out of date: run make docs", file=sys.stderr)
        return 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    print(
        f"{OUT} was out of date and is written now from the code: review and commit it, "
        "then run make docs again",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
