"""mkdocs hooks: the benchmark results under bench/results/ become pages of the site.

The pages link them as `../bench/results/<file>` (relative to docs/, so the same links work when
reading the repository); here each such file joins the site under `bench/results/`, so
`mkdocs build --strict` checks those links like any other and the tables are never copied.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files, InclusionLevel

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"


def on_files(files: Files, config: Any) -> Files:
    for path in sorted(RESULTS.iterdir()):
        if not path.is_file() or path.suffix == ".tmp":
            continue
        if path.suffix == ".md":
            dest = f"bench/results/{path.stem}/index.html"
        else:
            dest = f"bench/results/{path.name}"
        files.append(
            File(
                f"../bench/results/{path.name}",
                src_dir=config["docs_dir"],
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
                dest_uri=dest,
                inclusion=InclusionLevel.NOT_IN_NAV,
            )
        )
    return files


def on_pre_build(config: Any) -> None:
    """The README is not part of the site, but its links point into it: each must exist."""
    import re

    from mkdocs.exceptions import PluginError

    root = RESULTS.parents[1]
    readme = root / "README.md"
    missing = []
    for target in re.findall(r"\]\(([^)\s]+)\)", readme.read_text(encoding="utf-8")):
        path = target.split("#", 1)[0]
        if not path or "://" in path:
            continue
        if not (root / path).exists():
            missing.append(target)
    if missing:
        raise PluginError(f"README.md links to files that do not exist: {', '.join(missing)}")
