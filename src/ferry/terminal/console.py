"""The consoles the command line prints on: user text verbatim, style only where ferry adds it.

Topic regexes, group names, file paths and error messages are data. Rich would read
`orders-[a-z]+` as markup (and print `orders-+`) or refuse `orders[/x](` outright, so these
consoles parse no markup and highlight nothing; ferry's own emphasis is built as `Text` with an
explicit style (`styled`), never spelled inside a string.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

__all__ = ["err", "make_console", "out", "styled"]


def make_console(*, stderr: bool = False) -> Console:
    # soft_wrap: paths and keys stay on one line, so logs and tests can grep them.
    return Console(stderr=stderr, soft_wrap=True, markup=False, highlight=False)


out = make_console()
err = make_console(stderr=True)


def styled(*parts: str | tuple[str, str]) -> Text:
    """Text from plain parts and (text, style) pairs; no part is parsed as markup."""
    return Text.assemble(*parts)
