#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end tests of isowatchd with the isowatch command:
#  - simulator histories with faults (kv and list, SI and SER, with and without watermarks),
#    replayed with disorder into a daemon on free ports, give over /api/v1/violations the
#    violations of `isowatch check` on the same file, each once; /metrics counts them and the
#    transactions, and promtool accepts it;
#  - crash: kill -9 of the daemon in the middle of a paced replay, then a restart on the same
#    ports and store: the replay reconnects and finishes, the violations are the same, each once,
#    and SIGTERM then ends the daemon with status 0;
#  - budget: the crash case with a one-byte memory budget and every collected version spilled to
#    <data_dir>/spill, so that checks reload from the spill before and after the restart;
#  - checkpoint, budget_checkpoint: the crash and budget cases with a checkpoint every 100 ms, so
#    that the restarted daemon starts from a checkpoint (and its spill snapshot) and replays only
#    the log after it;
#  - windows_checkpoint: the checkpoint case with windows cut for the chronos plug-in: the
#    restarted daemon goes on from the checkpoint's window cutter, every window is done, each
#    violation is served once, and the online engine's equal the offline check.
# Each case runs in a process of its own (this script with the case's name), so that one failing
# case does not hide the others' results.
# Usage: daemon_test.sh PATH/TO/isowatch PATH/TO/isowatchd [CASE...]
#   CASE: kv, list, nowm, ser, crash, budget, checkpoint, budget_checkpoint, windows_checkpoint
#   (default: all).
# With ISOWATCH_KEEP_TMP=1 the temporary directory (histories, reports, logs) is kept on failure.
set -euo pipefail

cli=$1
daemond=$2
shift 2
all_cases=(kv list nowm ser crash budget checkpoint budget_checkpoint windows_checkpoint)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [ $# -ne 1 ]; then
  cases=("$@")
  [ ${#cases[@]} -gt 0 ] || cases=("${all_cases[@]}")
  failed=()
  for c in "${cases[@]}"; do
    echo "== $c"
    if bash "$here/daemon_test.sh" "$cli" "$daemond" "$c"; then
      echo "== $c: passed"
    else
      echo "== $c: FAILED"
      failed+=("$c")
    fi
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "failed cases: ${failed[*]}"
    exit 1
  fi
  echo "all daemon tests passed"
  exit 0
fi

case_name=$1
dir=$(mktemp -d)
pids=()

helper() { python3 "$here/daemon_compare.py" "$@"; }

cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do
    kill -9 "$pid" 2>/dev/null || true
  done
  if [ "$status" -ne 0 ]; then
    echo "FAILED (status $status); the last lines of the logs:"
    for log in "$dir"/*.log; do
      [ -e "$log" ] || continue
      echo "--- $log"
      tail -n 15 "$log" | cut -c1-400
    done
  fi
  if [ "$status" -ne 0 ] && [ "${ISOWATCH_KEEP_TMP:-0}" = 1 ]; then
    echo "kept $dir"
  else
    rm -rf "$dir"
  fi
}
trap cleanup EXIT

step() { echo "== $*"; }

# start_daemon NAME GRPC_PORT HTTP_PORT [ARGS...]: starts isowatchd with its store in
# $dir/NAME.data, waits for its ports file; sets daemon_pid, grpc_port and http_port.
# The finality timeout is long, so that the verdicts are final only at the watermarks and the end
# of the stream, never by timeout, whatever the speed of the machine: finality by timeout depends
# on how fast the daemon applies the batches, and the offline check has no such notion. (A
# replayed stream has no watermark in its first batches, and the daemon finalises such a stream by
# timeout until its first watermark comes: see StreamWithoutWatermarkYetIsNotFinalisedByTimeout
# in tests/unit/monitor/daemon_test.cc.)
start_daemon() {
  local name=$1 grpc=$2 http=$3
  shift 3
  rm -f "$dir/$name.ports"
  "$daemond" --data-dir "$dir/$name.data" --grpc-port "$grpc" --http-port "$http" \
    --ports-file "$dir/$name.ports" --set engine.finality_timeout=600s "$@" \
    >>"$dir/$name.daemon.log" 2>&1 &
  daemon_pid=$!
  pids+=("$daemon_pid")
  local ports
  ports=$(helper wait-ports "$dir/$name.ports" "$daemon_pid" 120)
  read -r grpc_port http_port <<<"$ports"
  helper wait-ready "$http_port" 60
}

# stop_daemon PID: SIGTERM, then the exit status must be 0.
stop_daemon() {
  local pid=$1 status=0
  kill -TERM "$pid"
  wait "$pid" || status=$?
  if [ "$status" -ne 0 ]; then
    echo "isowatchd (pid $pid) exited with status $status after SIGTERM, want 0"
    return 1
  fi
}

# offline NAME [CHECK ARGS...]: the offline report of $dir/NAME.json in $dir/NAME.offline.json.
offline() {
  local name=$1 status=0
  shift
  "$cli" check "$dir/$name.json" --json "$@" >"$dir/$name.offline.json" 2>"$dir/$name.check.log" ||
    status=$?
  # 1: violations found (the histories have faults).
  if [ "$status" -ne 1 ]; then
    echo "isowatch check $name: exit $status, want 1"
    return 1
  fi
}

# transactions NAME: the number of transactions of the offline report.
transactions() {
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["transactions"])' \
    "$dir/$1.offline.json"
}

# end_to_end NAME "GEN ARGS" "REPLAY ARGS" ["DAEMON ARGS"] ["CHECK ARGS"]
end_to_end() {
  local name=$1 gen_args=$2 replay_args=$3 daemon_args=${4:-} check_args=${5:-}
  step "end to end: $name"
  # shellcheck disable=SC2086
  "$cli" gen --out "$dir/$name.json" $gen_args >"$dir/$name.gen.log" 2>&1
  # shellcheck disable=SC2086
  offline "$name" $check_args
  # shellcheck disable=SC2086
  start_daemon "$name" 0 0 $daemon_args
  local pid=$daemon_pid
  # shellcheck disable=SC2086
  "$cli" replay "$dir/$name.json" --to "127.0.0.1:$grpc_port" --stream "$name-stream" \
    $replay_args >"$dir/$name.replay.log" 2>&1
  helper wait-checked "$http_port" "$name-stream" 300
  helper violations "$http_port" "$dir/$name.online.json" >/dev/null
  helper compare "$dir/$name.offline.json" "$dir/$name.online.json"
  # The stream filter gives the same set.
  helper violations "$http_port" "$dir/$name.filtered.json" "$name-stream" >/dev/null
  helper compare "$dir/$name.offline.json" "$dir/$name.filtered.json" >/dev/null
  local violations total
  violations=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' \
    "$dir/$name.online.json")
  total=$(transactions "$name")
  helper metrics "$http_port" "$dir/$name.metrics.txt" "$violations" "$total"
  promtool check metrics <"$dir/$name.metrics.txt"
  stop_daemon "$pid"
}

case_kv() {
  end_to_end kv \
    "--committed --txns 2500 --sessions 12 --keys 40 --seed 3 --fault lost-update:0.01 --fault stale-snapshot:0.01 --fault session-order:0.01" \
    "--sigma-ms 50 --batch 100 --seed 1"
}

case_list() {
  end_to_end list \
    "--data list --committed --txns 1500 --sessions 10 --keys 30 --seed 5 --fault lost-update:0.02 --fault fractured-visibility:0.01 --fault aborted-read:0.01" \
    "--sigma-ms 100 --mean-ms 20 --batch 40 --seed 2"
}

case_nowm() {
  end_to_end nowm \
    "--committed --txns 1500 --sessions 8 --keys 25 --seed 7 --fault stale-snapshot:0.02 --fault intermediate-read:0.01 --fault non-repeatable-read:0.01" \
    "--sigma-ms 30 --batch 64 --seed 3 --no-watermarks"
}

case_ser() {
  end_to_end ser \
    "--level ser --committed --txns 1500 --sessions 8 --keys 30 --seed 11 --fault lost-update:0.02 --fault session-order:0.01" \
    "--sigma-ms 50 --batch 80 --seed 4" \
    "--set engine.level=ser" "--level ser"
}

# crash_run NAME [DAEMON ARGS...]
crash_run() {
  local name=$1
  shift
  step "$name: kill -9 in the middle of a paced replay, restart on the same ports and store"
  "$cli" gen --out "$dir/$name.json" --committed --txns 4000 --sessions 12 --keys 40 --seed 13 \
    --fault lost-update:0.01 --fault stale-snapshot:0.01 --fault session-order:0.01 \
    >"$dir/$name.gen.log" 2>&1
  offline "$name"
  local total fixed_grpc fixed_http
  total=$(transactions "$name")
  read -r fixed_grpc fixed_http <<<"$(helper free-ports 2)"
  start_daemon "$name" "$fixed_grpc" "$fixed_http" "$@"
  local first_pid=$daemon_pid
  # 50 transactions per batch at 800 transactions/s: 80 batches over about 5 s.
  "$cli" replay "$dir/$name.json" --to "127.0.0.1:$fixed_grpc" --stream "$name-stream" \
    --sigma-ms 50 --batch 50 --seed 5 --rate 800 >"$dir/$name.replay.log" 2>&1 &
  local replay_pid=$!
  pids+=("$replay_pid")
  # Some batches durable, most still to come.
  helper wait-acked "$fixed_http" "$name-stream" 15 120
  kill -9 "$first_pid"
  wait "$first_pid" || true
  if ! kill -0 "$replay_pid" 2>/dev/null; then
    echo "the replay ended before the daemon was killed: the crash was not mid-stream"
    return 1
  fi
  # The daemon stays down for a moment, so that the client has to retry.
  sleep 1
  start_daemon "$name" "$fixed_grpc" "$fixed_http" "$@"
  local second_pid=$daemon_pid
  if [ "$grpc_port" != "$fixed_grpc" ] || [ "$http_port" != "$fixed_http" ]; then
    echo "restarted on $grpc_port/$http_port, want $fixed_grpc/$fixed_http"
    return 1
  fi
  local replay_status=0
  wait "$replay_pid" || replay_status=$?
  cat "$dir/$name.replay.log"
  if [ "$replay_status" -ne 0 ]; then
    echo "the replay failed after the restart (exit $replay_status)"
    return 1
  fi
  if ! grep -Eq '[1-9][0-9]* reconnects' "$dir/$name.replay.log"; then
    echo "the replay did not reconnect"
    return 1
  fi
  helper wait-checked "$fixed_http" "$name-stream" 300
  if [[ " $* " == *windows.checkers* ]]; then
    # Every window done once (the helper fails on an id served twice); the online engine's own
    # findings are compared with the offline check.
    helper wait-windows "$fixed_http" 300
    helper violations "$fixed_http" "$dir/$name.all.json" >/dev/null
    helper violations "$fixed_http" "$dir/$name.online.json" "" online >/dev/null
  else
    helper violations "$fixed_http" "$dir/$name.online.json" >/dev/null
  fi
  helper compare "$dir/$name.offline.json" "$dir/$name.online.json"
  # Every transaction applied once: the restarted daemon counts those of its log and the new ones.
  helper ingested "$fixed_http" "$name-stream" "$total"
  if [[ " $* " == *checkpoint_interval* ]] &&
    ! grep -q "restored the checkpoint" "$dir/$name.daemon.log"; then
    echo "the restarted daemon did not start from a checkpoint"
    return 1
  fi
  if [[ " $* " == *--memory-budget* ]]; then
    # The spill was used by the restarted daemon (the counters start at its start).
    python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
      "http://127.0.0.1:$fixed_http/metrics" >"$dir/$name.metrics.txt"
    if ! grep -Eq '^isowatch_engine_spilled_versions_total [1-9]' "$dir/$name.metrics.txt"; then
      echo "no version was spilled"
      return 1
    fi
    if grep -Eq '^isowatch_horizon_misses_total [1-9]' "$dir/$name.metrics.txt"; then
      echo "horizon misses with everything spilled"
      return 1
    fi
  fi
  stop_daemon "$second_pid"
}

case_crash() { crash_run crash; }

case_budget() {
  crash_run budget --memory-budget 1 --set engine.spill_collected=true
}

case_checkpoint() { crash_run checkpoint --set store.checkpoint_interval=100ms; }

# Windows cut for a plug-in checker, with a checkpoint every 100 ms: the restart goes on from the
# checkpoint's window cutter and checks the windows it saved.
case_windows_checkpoint() {
  crash_run windows_checkpoint --set store.checkpoint_interval=100ms \
    --set windows.checkers=chronos --set windows.size=300 --set windows.overlap=30
}

case_budget_checkpoint() {
  crash_run budget_checkpoint --memory-budget 1 --set engine.spill_collected=true \
    --set store.checkpoint_interval=100ms
}

case "$case_name" in
  kv | list | nowm | ser | crash | budget | checkpoint | budget_checkpoint | windows_checkpoint)
    "case_$case_name"
    ;;
  *)
    echo "unknown case $case_name (${all_cases[*]})"
    exit 2
    ;;
esac
