#!/usr/bin/env bash
# CI under load: `make test` three times back to back, then every other suite of .ci/run once,
# with CPU-bound processes running beside them the whole time (two by default: on a 2-core
# machine the tests get about half of it). The burners are started here and ended by their
# process ids when the script ends, however it ends. Prints pass/fail and time per run; exits
# 1 if any run failed. Over an hour on 2 cores.
#
#   CI_STRESS_RUNS     the make targets, in order (default: test test test test-processes
#                      test-cluster secure-test test-topologies test-api test-monitor-audit
#                      test-dr test-scale test-faults); e.g. "unit"
#                      for a quick check of this script
#   CI_STRESS_BURNERS  how many CPU burners (default 2)
#   CI_REPORTS         where each run's JUnit XML report goes (default artifacts/ci-stress),
#                      as <dir>/<n>-<target>/<target>.xml
set -uo pipefail
cd "$(dirname "$0")/.."
read -r -a runs <<<"${CI_STRESS_RUNS:-test test test test-processes test-cluster secure-test test-topologies test-api test-monitor-audit test-dr test-scale test-faults}"
burners=${CI_STRESS_BURNERS:-2}
reports="${CI_REPORTS:-$PWD/artifacts/ci-stress}"
rm -rf "$reports"
mkdir -p "$reports"

pids=()
stop_burners() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    pids=()
}
trap stop_burners EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for _ in $(seq "$burners"); do
    python3 -c 'while True: pass' &
    pids+=("$!")
done
echo "=== ${#pids[@]} CPU burners beside the runs: pids ${pids[*]}"

results=()
failed=0
n=0
for target in "${runs[@]}"; do
    n=$((n + 1))
    dir="$reports/$n-$target"
    mkdir -p "$dir"
    echo "=== run $n: make $target ($(date -u +%H:%M:%S) UTC)"
    began=$SECONDS
    if make "$target" CI_REPORTS="$dir"; then status=pass; else status=FAIL; failed=1; fi
    results+=("$(printf '%3d  %-20s %-5s %6d s' "$n" "$target" "$status" $((SECONDS - began)))")
done
stop_burners

echo
echo "=== ci-stress: ${#runs[@]} runs beside $burners CPU burners (reports in $reports)"
printf '%s\n' "${results[@]}"
python=.venv/bin/python
[ -x "$python" ] || python=python3
for dir in "$reports"/*/; do
    if compgen -G "$dir*.xml" >/dev/null; then
        echo
        echo "--- $(basename "$dir")"
        "$python" scripts/ci_summary.py "$dir" --slowest 5
    fi
done
exit "$failed"
