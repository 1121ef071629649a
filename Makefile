# Every target sets itself up first: a fresh clone needs only `make demo` or `make test`.
PYTHON ?= python3.11
# Extra pytest options for every test target (e.g. PYTEST_ARGS='-x'); CI_REPORTS=<dir> makes each
# suite also write a JUnit XML report, <dir>/<target>.xml (read by scripts/ci_summary.py).
PYTEST_ARGS ?=
CI_REPORTS ?=
PYTEST_CI = $(if $(CI_REPORTS),--junitxml=$(CI_REPORTS)/$@.xml) $(PYTEST_ARGS)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export SPARK_LOCAL_IP := 127.0.0.1
export PYSPARK_PYTHON := $(abspath $(BIN)/python)
export PYSPARK_DRIVER_PYTHON := $(abspath $(BIN)/python)

.PHONY: setup test unit integration secure-test lint demo bench chaos clean test-api test-cluster test-topologies test-schemas test-yarn

# The virtualenv alone (make unit, make lint, make docs need nothing else); setup adds what the
# clusters and Spark need: Java, and the jars the package's lock pins, downloaded once into
# ~/.cache/ferry and checked (no Maven: scripts/jars/lock.py is the only user of it).
setup: $(STAMP)
	@command -v java >/dev/null || { echo "need Java 17 (apt-get install openjdk-17-jre-headless)"; exit 1; }
	@$(BIN)/ferry local provision

$(STAMP): pyproject.toml setup.py src/ferry/engine/copy/native/fastcopy.c
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $(STAMP)

# Two pytest workers: the integration tests in order on one (one set of clusters and one Spark,
# see tests/conftest.py), the unit tests on the other.
test: setup lint
	$(BIN)/pytest -n 2 $(PYTEST_CI)

unit: $(STAMP)
	$(BIN)/pytest $(PYTEST_CI) -m 'not integration and not system'

integration: setup
	$(BIN)/pytest $(PYTEST_CI) -m 'integration and not system and not api and not secure and not topologies and not cluster and not monitor_audit and not processes and not dr and not scale and not faults and not schemas and not package and not yarn'

# ferry run's control API end to end: a `ferry run --api-port 0` subprocess (its own Spark)
# changed over HTTP and the CLI, then restarted, and the same changes in bounded micro-batches;
# then the web console in a headless Chromium (Debian's, installed when missing) pausing and
# resuming a flow; not part of `make test` (which runs the API's changes
# in leases, in process). The console's screenshots go to artifacts/console/.
test-api: setup
	@sh scripts/install_chromium.sh
	$(BIN)/pytest $(PYTEST_CI) -m api tests/integration/test_control_api.py tests/integration/test_control_batches.py \
	  tests/integration/test_console_browser.py

# Schema registries (Apicurio Registry from Maven Central, one beside each of the session's
# clusters A and B): Avro, Protobuf and JSON Schema records copied with their schemas
# registered on B and their ids translated, decoded on B through B's registry; a few minutes.
test-schemas: setup
	$(BIN)/ferry local provision --schema-registry
	$(BIN)/pytest $(PYTEST_CI) -m schemas tests/integration/test_schema_registries.py

# YARN and HDFS on this machine (`ferry local yarn up`: Hadoop's own minicluster, a
# ResourceManager, two NodeManagers, a NameNode and a DataNode in one JVM): the cluster and its
# Hadoop config directory, then a Spark query with its checkpoint and sink on that HDFS failed
# over with `ferry failover --spark-checkpoint hdfs://...` and back.
test-yarn: setup
	$(BIN)/ferry local provision --yarn
	$(BIN)/pytest $(PYTEST_CI) -m yarn tests/integration/test_yarn_hdfs.py

# A local Spark standalone cluster (two one-core workers that cannot see this virtualenv): a
# flow on it from the shipped environment, then executors and workers SIGKILLed while ferry
# run copies steady traffic, in both modes, and the driver killed and restarted.
test-cluster: setup
	$(BIN)/pytest $(PYTEST_CI) -m cluster tests/integration/test_spark_cluster.py 	  tests/integration/test_executor_loss.py

# ferry against secure local clusters (SASL_SSL with SCRAM, mutual TLS; ACLs), as the `ferry`
# principal with only the ACLs the README lists: their own two cluster pairs, a few minutes.
secure-test: setup
	$(BIN)/pytest $(PYTEST_CI) -m secure tests/integration

# Deployments of three and four clusters (a chain A->B->C, aggregates C and D fed by A and B,
# active/active A<->B): failover across them and exactly one copy of each record, by origin;
# and the audit of a chain, hop by hop and end to end.
# The extra clusters start once per test file; several minutes, so not part of `make test`.
test-topologies: setup
	$(BIN)/pytest $(PYTEST_CI) -m topologies tests/integration/test_chain_failover.py \
	  tests/integration/test_aggregate_failover.py tests/integration/test_active_active.py \
	  tests/integration/test_audit_chain.py tests/integration/test_graph_while_running.py

# ferry monitor's continuous audit end to end: a `ferry monitor` process (its own Spark) with
# audit.interval.seconds set, damage done to a copy, the gauges and the webhook alert checked.
.PHONY: test-monitor-audit
test-monitor-audit: setup
	$(BIN)/pytest $(PYTEST_CI) -m monitor_audit tests/integration/test_monitor_audit.py

# ferry as a process of its own (its own Spark JVM each): SIGKILLed and SIGTERMed mid-copy
# and restarted, a target that does not answer, the driver's head start while Spark starts
# from nothing, the JVM class archive written then mapped, a run's whole output and event log
# free of secrets, and `ferry demo` (short traffic). Not part of `make test`; CI runs it.
.PHONY: test-processes
test-processes: setup
	$(BIN)/pytest $(PYTEST_CI) -m processes tests/integration

# CI under load: `make test` three times back to back, then every other suite of .ci/run once,
# beside two CPU-bound processes (CI_STRESS_RUNS, CI_STRESS_BURNERS change that: see the
# script). Pass/fail and time per run, then each run's tests. Over an hour on 2 cores.
.PHONY: ci-stress
ci-stress: setup
	@bash scripts/ci_stress.sh

lint: $(STAMP)
	$(BIN)/ruff check src tests scripts bench
	$(BIN)/ruff format --check src tests scripts bench
	$(BIN)/mypy
	$(BIN)/lint-imports

demo: setup
	$(BIN)/ferry demo

# The documentation site (docs/, mkdocs.yml) into build/site: the configuration reference and
# the command reference written from the code first (the command reference fails the target
# when the page it found was out of date: commit the new one), then every link and anchor
# checked (--strict). No brokers.
.PHONY: docs
docs: $(STAMP)
	$(BIN)/python docs/tools/config_reference.py
	$(BIN)/python docs/tools/command_reference.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# ferry against MirrorMaker 2 and the brokers' own limit (Kafka's perf tools) on two local
# clusters: 2,000,000 x 1 KiB records, 8 partitions, 5 throughput runs, then 60 s at 5,000
# records/s for latency, then a steady-rate sweep (1,000, 5,000, 20,000, 50,000 records/s,
# 30 s settling, then 10 s warm-up + 30 s timed each: latency percentiles and CPU shares)
# (BENCH_RECORDS, BENCH_REPEAT, BENCH_PARTITIONS, BENCH_VALUE_BYTES, BENCH_LATENCY_RATE,
# BENCH_LATENCY_SECONDS, BENCH_LATENCY_REPEAT, BENCH_SWEEP_RATES, BENCH_SWEEP_SECONDS,
# BENCH_SWEEP_WARMUP, BENCH_SWEEP_SETTLE, BENCH_SWEEP=0 change that; or pass flags:
# .venv/bin/python -m bench.compare --help). MM2 and the perf tools come from Maven Central
# with the brokers (`make setup`). Writes bench/results/latest.{json,md} and sweep.png.
# Then start-up: process start to the first copied record, ferry (with and without its head
# start) against MM2, 5 rounds (bench/results/startup.{json,md}). Then many partitions
# (partitions.*), across a WAN (wan.*) and exactly-once latency at a read_committed consumer
# of the target, ferry at two commit intervals and MM2 with its exactly-once engaged
# (exactly-once-consumer.*). Then recovery time: `ferry switchover --writers-stopped` with A
# alive, then `ferry failover --flow A->B` with A's node killed, at 10 groups x 8 partitions
# and 1,000 groups over 10,000 partitions (rto.*). Not part of `make test`.
bench: setup
	$(BIN)/python -m bench.compare
	$(BIN)/python -m bench.startup
	$(BIN)/python -m bench.partitions
	$(BIN)/python -m bench.wan
	$(BIN)/python -m bench.exactly_once_consumer --runs ferry-eos,ferry-eos:100,mm2-eos,ferry-alos,mm2-alos
	$(BIN)/python -m bench.rto

# `ferry audit` at scale: 5,000,000 records of 32 B over 8 partitions copied with `ferry run
# --once`, the first 1,000 copies of one partition deleted, then one audit timed with the peak
# memory of its driver (Python + JVM) sampled (bench/results/audit.{json,md}; --records etc.:
# .venv/bin/python -m bench.audit --help). Half an hour or more on 2 shared cores.
.PHONY: bench-audit
bench-audit: setup
	$(BIN)/python -m bench.audit

# Lag-aware placement: a skewed backlog (one partition with 10x the records of each other one,
# steady traffic elsewhere) against the same records spread evenly (a perfect split), from the
# first record copied to the backlog copied (bench/results/placement.{json,md}).
.PHONY: bench-placement
bench-placement: setup
	$(BIN)/python -m bench.placement

# Across a WAN (part of `make bench`): ferry and MM2 reaching the source through a delay-and-
# bandwidth proxy (bench/wan/), 60 ms / 200 Mbit/s and 100 ms / 1 Gbit/s: backlog rate, time to
# the first record, latency at 2,000 records/s, bytes over the link per record
# (bench/results/wan.{json,md,png}). The quick one: one link, a small backlog, short windows,
# results under $TMPDIR/ferry-bench-wan-quick.
.PHONY: bench-wan-quick
bench-wan-quick: setup
	$(BIN)/python -m bench.wan --quick

# `make bench`'s comparison, small (100,000 records, one run, 20 s of latency, 10 s per sweep
# rate), in a few minutes; the results go to $TMPDIR/ferry-bench-quick, not bench/results.
.PHONY: bench-quick
bench-quick: setup
	BENCH_RECORDS=100000 BENCH_REPEAT=1 BENCH_LATENCY_SECONDS=20 BENCH_LATENCY_WARMUP=5 \
	  BENCH_LATENCY_BROKER_WARMUP=10 \
	  BENCH_SWEEP_SECONDS=10 BENCH_SWEEP_WARMUP=5 \
	  $(BIN)/python -m bench.compare --out $${TMPDIR:-/tmp}/ferry-bench-quick

# Fault test: steady traffic, ferry SIGKILLed 5x and SIGTERMed 2x, each broker
# SIGKILLed once, in exactly-once then at-least-once mode; writes bench/results/chaos.{json,md}.
# Its short version (tests/integration/test_chaos_short.py) first. Not part of `make test`.
chaos: setup
	$(BIN)/pytest -m system tests/integration/test_chaos_short.py
	$(BIN)/python -m tests.chaos.run

clean:
	rm -rf $(VENV) .ferry-local .ferry-demo .pytest_cache .mypy_cache .ruff_cache

# Disaster recovery end to end on the session's clusters: every group of a flow failed over
# with the source lost, a Spark Structured Streaming query's checkpoint moved to the other
# cluster and back, the recovery point (ferry_rpo_seconds) while ferry is stopped.
.PHONY: test-dr
test-dr: setup
	$(BIN)/pytest $(PYTEST_CI) -m dr tests/integration

# Thousands of topics and partitions on real brokers (10,000 partitions copied by one run).
.PHONY: test-scale
test-scale: setup
	$(BIN)/pytest $(PYTEST_CI) -m scale tests/integration

# The fault suite: two 3-node clusters (RF 3, min.insync.replicas 2) behind link proxies, an
# exactly-once and an at-least-once ferry run copying across them while partition leaders,
# coordinators and controllers are killed, clusters restarted node by node, the target held
# below min.insync.replicas, links cut and black-holed, ferry itself frozen and replaced, and
# source records deleted before they were copied, a source topic re-created, and 1,000 topics
# copied by --once. One checker judges every run (lost, duplicated, out of order, aborted
# reads); the figures go to artifacts/faults/results.jsonl.
.PHONY: test-faults
test-faults: setup
	rm -f artifacts/faults/results.jsonl
	$(BIN)/pytest $(PYTEST_CI) -m faults tests/faults

# ferry as a user installs it: the wheel built, installed in a fresh virtualenv, run from
# outside the repository with an empty cache and no Maven (clusters and Spark of its own).
.PHONY: test-package
test-package: $(STAMP)
	$(BIN)/pytest $(PYTEST_CI) -m package tests/package
