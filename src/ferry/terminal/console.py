"""The consoles the command line prints on: user text verbatim, style only where ferry adds it.

Topic regexes, group names, file paths and error messages are data. Rich would read
`orders-[a-z]+` as markup (and print `orders-+`) or refuse `orders[/x](` outright, so these
consoles parse no markup and highlight nothing; ferry's own emphasis is built as `Text` with an
explicit style (`styled`), never spelled inside a string.

Where the output is not a terminal (a pipe, a log file, a script's capture) there is no width
to fit: Rich would take 80 columns and shorten a long topic name in a table to `orders-…`, so
these consoles are as wide as any line ferry prints there. On a terminal they fit its width.
"""

from __future__ import annotations

from rich.console import Console, ConsoleDimensions
from rich.rule import Rule
from rich.text import Text

__all__ = ["err", "make_console", "out", "rule", "styled"]

# Wider than any table of Kafka names (a topic name is at most 249 characters).
UNBOUNDED_WIDTH = 1000
RULE_WIDTH = 80


class _FerryConsole(Console):
    @property
    def size(self) -> ConsoleDimensions:
        # Asked at each print, not when the console is made: the same console prints to a
        # terminal or, under a test's runner or a redirect, to something else, and COLUMNS
        # may be set (or change) after import.
        height = super().size.height
        columns = self._environ.get("COLUMNS", "")
        if columns.isdigit():
            return ConsoleDimensions(int(columns), height)
        if self.is_terminal:
            return super().size
        return ConsoleDimensions(UNBOUNDED_WIDTH, height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]  # mypy: no fset on a class property


def make_console(*, stderr: bool = False) -> Console:
    # soft_wrap: paths and keys stay on one line, so logs and tests can grep them.
    return _FerryConsole(stderr=stderr, soft_wrap=True, markup=False, highlight=False)


def rule(console: Console, title: Text) -> None:
    """A heading line: the terminal's width, at most RULE_WIDTH columns."""
    console.print(Rule(title), width=min(console.width, RULE_WIDTH))


out = make_console()
err = make_console(stderr=True)


def styled(*parts: str | tuple[str, str]) -> Text:
    """Text from plain parts and (text, style) pairs; no part is parsed as markup."""
    return Text.assemble(*parts)
