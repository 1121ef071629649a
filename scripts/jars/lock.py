"""Write src/ferry/local/jars.lock.json: every jar ferry downloads at run time, pinned.

ferry itself never runs Maven: `ferry local provision` downloads the files this lock names from
a Maven repository by URL and checks each one's SHA-256. This script, run by a developer when a
pinned version changes (Kafka, Spark's connector, Apicurio Registry, Hadoop's minicluster), is
the one place Maven resolves anything: the poms beside it name what ferry needs, Maven resolves
their runtime dependencies, and each resolved file's checksum is computed from Maven's local
repository.

    .venv/bin/python scripts/jars/lock.py        # needs mvn on PATH and the network
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOCK = HERE.parents[1] / "src" / "ferry" / "local" / "jars.lock.json"


def resolved(pom: Path, options: list[str]) -> list[tuple[str, Path]]:
    """The pom's runtime dependencies: (coordinates as `group:artifact:type[:classifier]:version`,
    the file in Maven's local repository)."""
    with tempfile.TemporaryDirectory() as tmp:
        listing = Path(tmp) / "list.txt"
        subprocess.run(
            [
                "mvn",
                "-B",
                "-q",
                "-f",
                str(pom),
                *options,
                "dependency:list",
                "-DincludeScope=runtime",
                "-DoutputAbsoluteArtifactFilename=true",
                "-DoutputScope=false",
                f"-DoutputFile={listing}",
            ],
            check=True,
        )
        lines = [line.strip() for line in listing.read_text().splitlines()]
    found = []
    for line in lines:
        if line.count(":") < 4 or line.startswith("The following"):
            continue
        *parts, path = line.split(":")
        if parts[-1] in {"compile", "runtime"}:  # the scope, when Maven prints it anyway
            parts = parts[:-1]
        found.append((":".join(parts), Path(path)))
    return sorted(found)


def copied(coordinates: str) -> Path:
    """One artifact copied from the repository (resolving it into Maven's local repository)."""
    group, artifact, kind, *classifier, version = coordinates.split(":")
    subprocess.run(
        [
            "mvn",
            "-B",
            "-q",
            "dependency:get",
            "-Dtransitive=false",
            f"-Dartifact={group}:{artifact}:{version}:{kind}"
            + "".join(f":{c}" for c in classifier),
        ],
        check=True,
    )
    name = f"{artifact}-{version}" + "".join(f"-{c}" for c in classifier) + f".{kind}"
    return Path.home() / ".m2" / "repository" / group.replace(".", "/") / artifact / version / name


def entries(files: list[tuple[str, Path]]) -> list[dict[str, str]]:
    names = [path.name for _, path in files]
    duplicated = {n for n in names if names.count(n) > 1}
    if duplicated:  # the cache folder holds them side by side, by file name
        sys.exit(f"two artifacts share a file name: {sorted(duplicated)}")
    return [
        {"coordinates": c, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        for c, path in files
    ]


def main() -> None:
    sys.path.insert(0, str(HERE.parents[1] / "src"))
    from ferry.local.distribution import KAFKA_VERSION, kafka_bundle
    from ferry.local.schema_registry import APICURIO_ARTIFACT, apicurio_bundle
    from ferry.local.spark_kafka import (
        ARTIFACTS,
        SPARK_KAFKA_VERSION,
        scala_binary_version,
        spark_kafka_bundle,
    )
    from ferry.local.yarn import HADOOP_VERSION, minicluster_bundle

    scala = scala_binary_version()
    bundles = {
        kafka_bundle(): entries(
            resolved(HERE / "kafka-runtime.pom.xml", [f"-Dkafka.version={KAFKA_VERSION}"])
        ),
        spark_kafka_bundle(scala): entries(
            resolved(
                HERE / "spark-kafka.pom.xml",
                [
                    f"-Dspark.kafka.version={SPARK_KAFKA_VERSION}",
                    f"-Dscala.binary.version={scala}",
                    "-DincludeArtifactIds=" + ",".join(a.format(scala=scala) for a in ARTIFACTS),
                ],
            )
        ),
        apicurio_bundle(): entries([(APICURIO_ARTIFACT, copied(APICURIO_ARTIFACT))]),
        minicluster_bundle(): entries(
            resolved(HERE / "hadoop-minicluster.pom.xml", [f"-Dhadoop.version={HADOOP_VERSION}"])
        ),
    }
    lock = {
        "about": "Written by scripts/jars/lock.py; `ferry local provision` downloads these "
        "files and checks their SHA-256. Do not edit by hand.",
        "bundles": bundles,
    }
    LOCK.write_text(json.dumps(lock, indent=1) + "\n")
    print(f"{LOCK}: " + ", ".join(f"{name} ({len(v)} files)" for name, v in bundles.items()))


if __name__ == "__main__":
    main()
