"""What ferry ships to a Spark cluster's executors, and when (pure decisions, no I/O).

An executor runs ferry's Python code (the planner's reads, the mirror sink's copy loop, the
worker daemon), so it needs ferry, confluent-kafka, pyspark's Python side and the native copy
loop. On a local master they are this process's own virtualenv. On a cluster ferry ships that
virtualenv as a relocatable archive (`packing.py` builds it with venv-pack): Spark unpacks it
as `ferry-env/` in every executor's working directory (`spark.archives`), and every Python
process Spark starts runs `./ferry-env/bin/python`.

What breaks, and why the rules below:
- venv-pack links the archive's `bin/python` to the interpreter the virtualenv was made from;
  it does not carry the interpreter. A worker without that interpreter cannot start Python at
  all; a worker of another platform would fail importing compiled modules (confluent-kafka's
  librdkafka, the native copy loop) somewhere deep in a task. So the archive records the
  platform it was built on, and the worker daemon compares before anything else (`mismatch`).
- The archive holds only what ferry needs at run time (the closure of its requirements), not
  the tools of a development virtualenv, and no Spark jars (the workers have Spark's own).
- An executor must run the very code the driver runs (Spark pickles ferry's classes), so the
  archive's name is a digest of the interpreter, the platform, every shipped distribution's
  version and ferry's own files (`archive_key`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

__all__ = [
    "ARCHIVE_NAME",
    "MARKER_FILE",
    "PLATFORM_ERROR_PREFIX",
    "PYTHON_IN_ARCHIVE",
    "Platform",
    "archive_key",
    "is_local_master",
    "mismatch",
    "missing_python",
    "requirement_name",
    "runtime_closure",
    "ships_environment",
]

# The directory Spark unpacks the archive into, in each executor's working directory
# (`spark.archives = <archive>#ferry-env`).
ARCHIVE_NAME = "ferry-env"
PYTHON_IN_ARCHIVE = f"./{ARCHIVE_NAME}/bin/python"
# At the archive's root: the platform it was built on (Platform.to_json).
MARKER_FILE = "ferry-environment.json"
# The first words of the worker daemon's error, so the driver can recognise and show it.
PLATFORM_ERROR_PREFIX = "ferry's shipped environment does not fit this worker"


@dataclass(frozen=True)
class Platform:
    """Where an environment was built, or where a worker runs: what compiled code depends on."""

    system: str  # platform.system(): Linux
    machine: str  # platform.machine(): x86_64, aarch64
    python: str  # major.minor: 3.11
    libc: str  # "glibc 2.35", or "" where unknown

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Platform:
        raw = json.loads(text)
        return cls(**{k: str(raw.get(k, "")) for k in ("system", "machine", "python", "libc")})


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


def mismatch(built: Platform, here: Platform, interpreter: str = "") -> str | None:
    """Why an environment built on `built` cannot run on `here`, with the fix; None when it can.

    Compiled modules are built for one system, machine and Python minor version; and for a C
    library at least as new as the build machine's (a worker with an older glibc may lack
    symbols they use), so an older libc on the worker is refused too.
    """
    problems = []
    if (built.system, built.machine) != (here.system, here.machine):
        problems.append(
            f"it was built on {built.system} {built.machine}, this worker is "
            f"{here.system} {here.machine}"
        )
    if built.python != here.python:
        problems.append(f"it was built for Python {built.python}, this worker runs {here.python}")
    built_libc, _, built_ver = built.libc.partition(" ")
    here_libc, _, here_ver = here.libc.partition(" ")
    if built_libc and here_libc and built_libc != here_libc:
        problems.append(f"it was built against {built.libc}, this worker has {here.libc}")
    elif built_libc and here_libc and _version(here_ver) < _version(built_ver):
        problems.append(f"it was built against {built.libc}, this worker has only {here.libc}")
    if not problems:
        return None
    python = f" ({interpreter})" if interpreter else ""
    return (
        f"{PLATFORM_ERROR_PREFIX}: {'; '.join(problems)}. Fix: build it where the workers' "
        f"platform and Python {built.python}{python} are the same (`ferry pack` on such a "
        "machine, then point spark.archives at it), or install ferry on every worker and set "
        "spark.pyspark.python to that Python (ferry then ships nothing)"
    )


def missing_python(spark_error: str, interpreter: str, python: str) -> str | None:
    """The fix, when `spark_error` says an executor could not start the shipped environment's
    Python (its `bin/python` links to `interpreter`, which that worker lacks); else None."""
    if f'Cannot run program "{PYTHON_IN_ARCHIVE}"' not in spark_error:
        return None
    return (
        f"an executor could not start Python from ferry's shipped environment: its "
        f"{PYTHON_IN_ARCHIVE} links to {interpreter}, which that worker does not have (the "
        "archive carries ferry and its packages, not the interpreter). Fix: install Python "
        f"{python} at {interpreter} on every worker, or install ferry on every worker and set "
        "spark.pyspark.python to that Python (ferry then ships nothing)"
    )


def is_local_master(master: str) -> bool:
    """local, local[4], local[*,4], local-cluster[...]: executors share this machine's files."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


def ships_environment(settings: Mapping[str, str]) -> bool:
    """True when ferry must ship its environment: a cluster master, and the user has not said
    which Python the executors run (`spark.pyspark.python`: ferry is installed there)."""
    return not is_local_master(settings.get("spark.master", "local")) and not settings.get(
        "spark.pyspark.python"
    )


_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def requirement_name(requirement: str) -> str:
    """The normalised distribution name of a requirement string (`Foo_Bar[x]>=1` -> foo-bar)."""
    found = _NAME.match(requirement)
    if found is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", found.group(1)).lower()


def runtime_closure(
    root: str, requires: Mapping[str, Iterable[str]], skip: Iterable[str] = ()
) -> list[str]:
    """Every distribution `root` needs at run time: `requires` maps a normalised name to the
    normalised names it needs (markers and extras already evaluated, so development extras are
    not in it). Names not installed are left out, and so are `skip` and what only they need;
    the result is sorted."""
    seen: set[str] = set(skip)
    todo = [requirement_name(root)]
    while todo:
        name = todo.pop()
        if name in seen or name not in requires:
            continue
        seen.add(name)
        todo.extend(requires[name])
    return sorted(seen - set(skip))


def archive_key(
    interpreter: str,
    platform: Platform,
    distributions: Mapping[str, str],
    package_digest: str,
    excluded: Iterable[str] = (),
) -> str:
    """A digest of everything in the archive: a change to any makes a new archive."""
    parts = [
        f"interpreter={interpreter}",
        f"platform={platform.to_json()}",
        *(f"dist={name}=={distributions[name]}" for name in sorted(distributions)),
        f"ferry={package_digest}",
        *(f"exclude={pattern}" for pattern in sorted(excluded)),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
