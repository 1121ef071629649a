"""Jars fetched once from Maven Central into a per-user cache folder, by Maven itself.

There is no tarball to download here, only Maven Central, so Kafka's release and Spark's
Kafka connector are assembled from their jars with `mvn dependency:copy-dependencies`, driven
by a small pom shipped in this package. Maven copies into a temporary folder that is renamed
to `libs/` and then marked complete, so an interrupted download is never taken as whole.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

from ferry.errors import LocalClusterError

__all__ = ["COMPLETE_MARK", "copy_dependencies", "is_complete"]

COMPLETE_MARK = ".complete"


def is_complete(home: Path) -> bool:
    return (home / COMPLETE_MARK).exists()


def copy_dependencies(
    home: Path, pom: str, what: str, version: str, options: list[str], *, quiet: bool
) -> Path:
    """Copy the runtime dependencies of the package's `pom` into `home/libs` and mark `home`
    complete. `what` names the download in errors; `options` are Maven's `-D` settings."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LocalClusterError(
            f"Maven (mvn) is not on PATH; it is needed once to fetch {what} from Maven "
            "Central. Install it (apt-get install maven) and rerun."
        )
    home.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="libs-", dir=home))
    with resources.as_file(resources.files("ferry.local").joinpath(pom)) as pom_path:
        command = [
            mvn,
            "-B",
            *(["-q"] if quiet else []),
            "-f",
            str(pom_path),
            *options,
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={staging}",
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-20:])
        raise LocalClusterError(
            f"could not fetch {what} from Maven Central (mvn exit {result.returncode}):\n{tail}"
        )
    libs = home / "libs"
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)
    (home / COMPLETE_MARK).write_text(version + "\n")
    return home
