"""deploy/kubernetes: the image definition and the Spark Operator manifests, against ferry itself.

No Kubernetes runs here (docs/operations/kubernetes.md). What can be checked without one: the
manifests parse; every ferry command and option they run is one ferry's command line parses;
the config they mount loads with no unknown or ignored key; and the ports, paths and variables
they name meet where ferry serves, reads and expects them. A second test spoils a copy of the
manifests in several ways and sees each caught.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from unittest import mock

import pytest
import typer
import yaml

from ferry.cli.app import app
from ferry.config import FerryConfig, load_config

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
# The containers Spark builds the driver and executor pods around: the Spark Operator names
# them to Spark as the pod templates' own.
SPARK_CONTAINERS = {"driver": "spark-kubernetes-driver", "executor": "spark-kubernetes-executor"}
LOOPBACK = ("127.0.0.1", "localhost", "::1")
SHELL_OPERATORS = ("&&", "||", ";", "|", "&")
Spec = dict[str, Any]


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    commands: set[str] = field(default_factory=set)  # the ferry commands found: `ferry run`


# --- the Containerfile and ferry's command line ---------------------------------------------


def containerfile(text: str) -> tuple[list[str], dict[str, str]]:
    """The shell commands of the RUN instructions, and the files COPY heredocs write (path ->
    content)."""
    runs: list[str] = []
    files: dict[str, str] = {}
    lines = iter(text.replace("\\\n", " ").splitlines())
    for line in lines:
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        heredoc = re.search(r"<<-?(['\"]?)(\w+)\1", line)
        end = heredoc[2] if heredoc else None
        body = []
        while end is not None and (inner := next(lines, end)) != end:
            body.append(inner)
        if words[0].upper() == "RUN":
            runs.append(line.split(None, 1)[1])
        elif words[0].upper() == "COPY" and heredoc:
            files[words[-1]] = "\n".join(body) + "\n"
    return runs, files


def shell_ferry_argvs(command: str) -> list[list[str]]:
    """The arguments of every `ferry` a shell command line runs."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    argvs, simple = [], []
    for word in [*lexer, ";"]:
        if word not in SHELL_OPERATORS:
            simple.append(word)
            continue
        if simple and os.path.basename(simple[0]) == "ferry":
            argvs.append(simple[1:])
        simple = []
    return argvs


def parse_ferry(argv: list[str]) -> tuple[str, dict[str, Any]]:
    """The command `argv` names and its options, parsed by ferry's own command line (a typer
    app); raises on an unknown command or option, a missing required one or a bad value."""
    command: Any = typer.main.get_command(app)
    path, args = ["ferry"], list(argv)
    while hasattr(command, "commands"):  # a group: the next word names one of its commands
        if not args or args[0] not in command.commands:
            raise ValueError(f"`{' '.join([*path, *args[:1]])}` is no ferry command")
        path.append(args.pop(0))
        command = command.commands[path[-1]]
    return " ".join(path), command.make_context(" ".join(path), args).params


# --- pods of a SparkApplication ---------------------------------------------------------------


def pod_spec(spec: Spec, role: str) -> Spec:
    """The pod template of the driver or the executors (Spark builds the pods from it)."""
    return dict(spec.get(role, {}).get("template", {}).get("spec", {}))


def spark_container(spec: Spec, role: str) -> Spec:
    found = (c for c in pod_spec(spec, role).get("containers", []))
    return next((c for c in found if c["name"] == SPARK_CONTAINERS[role]), {})


def env_names(spec: Spec, role: str) -> set[str]:
    return {e["name"] for e in spark_container(spec, role).get("env", [])}


def mounted(path: str, spec: Spec, role: str, kinds: tuple[str, ...]) -> str | None:
    """The volume of one of the `kinds` (configMap, secret, emptyDir, ...) that the Spark
    container of `role` has mounted where `path` is, or None."""
    volumes = {v["name"]: v for v in pod_spec(spec, role).get("volumes", [])}
    for mount in spark_container(spec, role).get("volumeMounts", []):
        volume = volumes.get(mount["name"], {})
        if PurePosixPath(path).is_relative_to(mount["mountPath"]):
            kind = next((k for k in kinds if k in volume), None)
            if kind is not None:
                return str(volume[kind].get("name") or volume[kind].get("secretName") or kind)
    return None


def port_number(container: Spec, port: int | str) -> int | None:
    """A port a container declares, by number or by name; None if it declares no such one."""
    for declared in container.get("ports", []):
        if port in (declared["containerPort"], declared.get("name")):
            return int(declared["containerPort"])
    return None


def pod_labels(name: str, spec: Spec, role: str) -> dict[str, str]:
    """The labels of a SparkApplication's driver or executor pods: the operator's, Spark's,
    and the spec's own."""
    template = spec.get(role, {}).get("template", {})
    return {
        "sparkoperator.k8s.io/app-name": name,
        "spark-role": role,
        **spec.get(role, {}).get("labels", {}),
        **template.get("metadata", {}).get("labels", {}),
    }


def strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return [value] if isinstance(value, str) else []


# --- the checks -------------------------------------------------------------------------------


def check_config(
    where: str, spec: Spec, path: str, configmaps: dict[str, dict[str, str]], report: Report
) -> FerryConfig | None:
    """The config `-c path` reads in the driver pod: a key of a ConfigMap mounted there, loaded
    by ferry with every ${env:NAME} it names set in the driver's environment, its state
    directory writable and every file a cluster's client opens mounted on driver and executors."""
    name = mounted(path, spec, "driver", ("configMap",))
    text = configmaps.get(name or "", {}).get(PurePosixPath(path).name)
    if text is None:
        report.problems.append(f"{where}: -c {path} is no key of a ConfigMap the driver mounts")
        return None
    env = env_names(spec, "driver")
    for missing in sorted(set(re.findall(r"\$\{env:([^}]+)\}", text)) - env):
        report.problems.append(f"{where}: ferry.yaml reads ${{env:{missing}}}; the driver lacks it")
    with tempfile.TemporaryDirectory() as tmp, mock.patch.dict(os.environ, dict.fromkeys(env, "x")):
        (Path(tmp) / "ferry.yaml").write_text(text)
        try:
            config = load_config(Path(tmp) / "ferry.yaml")
        except Exception as exc:  # ferry's ConfigError: an unknown key, a bad value, ...
            report.problems.append(f"{where}: ConfigMap {name}, {path}: {exc}")
            return None
    report.problems += [f"{where}: {path}: ferry ignores a key: {note}" for note in config.notes]
    state = str(config.state_dir)
    if not mounted(state, spec, "driver", ("emptyDir", "persistentVolumeClaim")):
        report.problems.append(f"{where}: ferry.state.dir {state}: no writable volume there")
    for alias, cluster in config.clusters.items():
        settings = {**cluster.consumer_config(), **cluster.producer_config()}
        files = {k: v for k, v in settings.items() if k.endswith(".location")}
        for key, file in files.items():
            for role in ("driver", "executor"):  # the executors' copy loops open them too
                if not mounted(file, spec, role, ("secret",)):
                    report.problems.append(f"{where}: {alias}.{key} {file}: no Secret on {role}")
    return config


def check_app(
    where: str,
    spec: Spec,
    image: tuple[str, set[str]],
    configmaps: dict[str, dict[str, str]],
    report: Report,
) -> dict[str, int]:
    """A SparkApplication's spec (`image`: the Containerfile's text and the ferry runners it
    writes); returns the ports ferry serves in its driver pod, by option."""
    text, runners = image
    argv = spec.get("arguments", [])
    if not all(isinstance(a, str) for a in argv):  # the resource's arguments are strings
        report.problems.append(f"{where}: arguments must all be strings: {argv}")
    if spec.get("mainApplicationFile", "").removeprefix("local://") not in runners:
        report.problems.append(f"{where}: {spec.get('mainApplicationFile')} runs no ferry")
    python = spec.get("sparkConf", {}).get("spark.pyspark.python")
    if not python or python not in text:  # unset: ferry would pack and ship its environment
        report.problems.append(f"{where}: spark.pyspark.python {python} is not the image's")
    try:
        command, params = parse_ferry([str(a) for a in argv])
    except Exception as exc:  # the parser's own error: no such command, option or value
        report.problems.append(f"{where}: ferry {shlex.join(map(str, argv))}: {exc}")
        return {}
    report.commands.add(command)
    config = check_config(where, spec, str(params["config"]), configmaps, report)

    served = {k: v for k, v in params.items() if k.endswith("_port") and isinstance(v, int)}
    # ferry run serves its API on --api-host and its metrics on --metrics-host (both loopback
    # unless told otherwise).
    api_open = "api_port" in served and params.get("api_host") not in LOOPBACK
    metrics_open = "metrics_port" in served and params.get("metrics_host") not in LOOPBACK
    open_ports = {served["api_port"]} if api_open else set()
    open_ports |= {served["metrics_port"]} if metrics_open else set()
    loopback = set(served.values()) - open_ports
    has_token = "FERRY_API_TOKEN" in env_names(spec, "driver") or (config and config.api.token_file)
    if api_open and not has_token:
        report.problems.append(f"{where}: ferry run refuses a non-loopback --api-host: no token")
    for role in ("driver", "executor"):
        for container in pod_spec(spec, role).get("containers", []):
            is_ferry = role == "driver" and container["name"] == SPARK_CONTAINERS["driver"]
            command_line = " ".join(strings([container.get("command"), container.get("args")]))
            for declared in container.get("ports", []):
                port = declared["containerPort"]
                # ferry's own container opens the open ports; another one may forward a
                # loopback one to the pod's address.
                forwards = port in loopback and f"127.0.0.1:{port}" in command_line
                if not (port in open_ports if is_ferry else forwards):
                    report.problems.append(
                        f"{where}: {role} container {container['name']} declares port {port}, "
                        f"which ferry does not serve there (ferry's ports: {served})"
                    )
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                http = container.get(probe, {}).get("httpGet")
                if http and port_number(container, http["port"]) not in open_ports:
                    report.problems.append(f"{where}: {probe} on a port ferry does not open")
    for string in strings(spec):
        for port in re.findall(r"(?:127\.0\.0\.1|localhost):(\d+)", string):
            if int(port) not in served.values():
                report.problems.append(f"{where}: {string!r}: ferry serves nothing on {port}")
    return served


def check_service(where: str, spec: Spec, apps: dict[str, Any], report: Report) -> None:
    """A Service reaches the driver pod of a SparkApplication, on ports ferry serves there."""
    selector = spec.get("selector", {}).items()
    drivers = {name: pod_labels(name, s, "driver").items() for name, (s, _) in apps.items()}
    name = next((name for name, labels in drivers.items() if selector <= labels), None)
    if name is None:
        report.problems.append(f"{where}: selects no SparkApplication's driver pod")
        return
    app_spec, served = apps[name]
    if selector <= pod_labels(name, app_spec, "executor").items():
        report.problems.append(f"{where}: selects the executors of {name} too")
    driver = pod_spec(app_spec, "driver").get("containers", [])
    for port in spec.get("ports", []):
        number = next((n for c in driver if (n := port_number(c, port["targetPort"]))), None)
        if number not in served.values():
            report.problems.append(
                f"{where}: targetPort {port['targetPort']} is no port ferry serves in the driver "
                f"of {name} (ferry's ports: {served})"
            )


def check(directory: Path) -> Report:
    """Everything in `directory` (its Containerfile and *.yaml) that does not fit ferry."""
    report = Report()
    text = (directory / "Containerfile").read_text()
    runs, files = containerfile(text)
    for argv in (a for run in runs for a in shell_ferry_argvs(run)):
        try:
            report.commands.add(parse_ferry(argv)[0])
        except Exception as exc:  # the parser's own error: no such command, option or value
            report.problems.append(f"Containerfile: ferry {shlex.join(argv)}: {exc}")
    image = text, {path for path, body in files.items() if "from ferry.cli import main" in body}

    docs = [
        (f"{path.name}: {doc['kind']} {doc['metadata']['name']}", doc)
        for path in sorted(directory.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]
    configmaps = {d["metadata"]["name"]: d["data"] for _, d in docs if d["kind"] == "ConfigMap"}
    apps = {}
    for where, doc in docs:
        if doc["kind"] == "SparkApplication":
            served = check_app(where, doc["spec"], image, configmaps, report)
            apps[doc["metadata"]["name"]] = doc["spec"], served
        elif doc["kind"] == "ScheduledSparkApplication":
            check_app(where, doc["spec"]["template"], image, configmaps, report)
    for where, doc in docs:
        if doc["kind"] == "Service":
            check_service(where, doc["spec"], apps, report)
    return report


def test_the_manifests_fit_ferry() -> None:
    report = check(DEPLOY)
    assert report.problems == []
    # Were the commands found at all?
    assert report.commands == {"ferry run", "ferry audit", "ferry local provision"}


RUN = "ferry-run.sparkapplication.yaml"
AUDIT = "ferry-audit.scheduledsparkapplication.yaml"


@pytest.mark.parametrize(
    ("file", "old", "new", "said"),
    [
        (RUN, "- --api-port", "- --api-prot", "No such option: --api-prot"),
        (AUDIT, "[audit,", "[audits,", "`ferry audits` is no ferry command"),
        ("Containerfile", "ferry local provision", "ferry local provison", "provison"),
        (RUN, "sync.group.offsets.enabled", "sync.group.offset.enabled", "offset.enabled"),
        (RUN, '- "9465"\n    - --metrics-host', '- "9466"\n    - --metrics-host', "port 9465"),
        (RUN, "- 0.0.0.0  # all of the pod's addresses, for", "- 127.0.0.1  #", "port 9465"),
        (RUN, "ferry.state.dir: /var/lib", "ferry.state.dir: /srv", "/srv/ferry"),
        (
            RUN,
            "kafka-b, readOnly: true}\n        volumes:",
            "b, readOnly: true}\n        volumes:",
            "on executor",
        ),
        ("ferry-api.yaml", "spark-role: driver", "spark-role: executor", "selects no"),
        ("ferry-api.yaml", "targetPort: api", "targetPort: 8081", "targetPort 8081"),
    ],
)
def test_a_spoilt_manifest_is_caught(
    tmp_path: Path, file: str, old: str, new: str, said: str
) -> None:
    shutil.copytree(DEPLOY, tmp_path, dirs_exist_ok=True)
    text = (tmp_path / file).read_text()
    assert text.count(old) == 1, f"{old!r} is not once in {file}"
    (tmp_path / file).write_text(text.replace(old, new))
    found = check(tmp_path).problems
    assert any(said in problem for problem in found), found
