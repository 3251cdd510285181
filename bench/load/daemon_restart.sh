#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What a restart of isowatchd costs, with and without checkpoints. Generates once a key-value
# simulator history of TXNS transactions (cached, as daemon_budget.sh does), starts a release
# isowatchd with a temporary store, --memory-budget BUDGET and store.checkpoint_interval
# INTERVAL, streams the file to it (σ = 100 ms), waits until every verdict is final, then kills
# the daemon with SIGKILL (no checkpoint at shutdown), measures the store on disk, starts it
# again on the same store and times how long it takes to be ready (recovery: the checkpoint, if
# any, and the log after it). Prints the checkpoints' counts, sizes and pauses, the log's length
# and the store's size at the kill, the restart time, and checks that the restarted daemon
# serves the same number of violations.
#
# Usage: bash bench/load/daemon_restart.sh [TXNS] [INTERVAL] [BUDGET]
#   TXNS      transactions in the history, committed and aborted (default 1000000)
#   INTERVAL  store.checkpoint_interval, e.g. 10s; 0s: no checkpoints (default 10s)
#   BUDGET    engine.memory_budget (default 256MiB)
# Environment: ISOWATCH_BIN (default build/release/bin), ISOWATCH_BENCH_CACHE, KEYS (default
# 100000), BATCH (default 1000), DAEMON_ARGS (more isowatchd flags).
set -euo pipefail

txns=${1:-1000000}
interval=${2:-10s}
budget=${3:-256MiB}
keys=${KEYS:-100000}
batch=${BATCH:-1000}
dir=$(mktemp -d /tmp/isowatch-restart-XXXXXX)
# shellcheck source-path=SCRIPTDIR source=daemon_lib.sh
source "$(dirname "$0")/daemon_lib.sh"
iw_init

iw_cached_history "$txns" "$keys"
echo "history: $hist ($(du -h "$hist" | cut -f1)); $keys keys"

args=(--memory-budget "$budget" --set "store.checkpoint_interval=$interval")
# shellcheck disable=SC2086
iw_start_daemon "${args[@]}" ${DAEMON_ARGS:-}
echo "isowatchd pid $daemon_pid: ${args[*]} ${DAEMON_ARGS:-}"
start=$(date +%s.%N)
"$bin/isowatch" replay "$hist" --to "127.0.0.1:$grpc_port" --batch "$batch" --sigma-ms 100 --quiet
iw_wait_final 3600
done_at=$(date +%s.%N)
iw_http /metrics > "$dir/metrics.before"
iw_http /api/v1/status > "$dir/status.before"
kill -9 "$daemon_pid"
wait "$daemon_pid" 2> /dev/null || true
daemon_pid=""
store_kib=$(du -sk "$dir/data/store" | cut -f1)
data_kib=$(du -sk "$dir/data" | cut -f1)

restart=$(date +%s.%N)
# shellcheck disable=SC2086
iw_start_daemon "${args[@]}" ${DAEMON_ARGS:-}
iw_wait_status 3600 'True' "the restarted daemon did not answer"
python3 - "http://127.0.0.1:$http_port/readyz" <<'PY'
import sys, time, urllib.error, urllib.request
while True:
    try:
        with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
            if r.status == 200:
                break
    except (urllib.error.HTTPError, OSError):
        pass
    time.sleep(0.05)
PY
ready=$(date +%s.%N)
iw_http /api/v1/status > "$dir/status.after"
iw_stop_daemon

python3 - "$dir" "$start" "$done_at" "$restart" "$ready" "$store_kib" "$data_kib" <<'PY'
import json, re, sys
d = sys.argv[1]
start, done, restart, ready = map(float, sys.argv[2:6])
store_kib, data_kib = int(sys.argv[6]), int(sys.argv[7])
m = open(f"{d}/metrics.before").read()

def value(name):
    found = re.findall(rf"^{name} (\S+)$", m, re.M)
    return float(found[0]) if found else 0.0

before = json.load(open(f"{d}/status.before"))
after = json.load(open(f"{d}/status.after"))
n = sum(s["ingested_transactions"] for s in before["streams"])
count = value("isowatch_checkpoint_seconds_count")
print(f"stream: {n:,} transactions final in {done - start:.1f} s ({n / (done - start):,.0f}/s, reading the file included)")
print(f"checkpoints: {value('isowatch_checkpoints_total'):.0f} saved, {value('isowatch_checkpoint_failures_total'):.0f} failed; "
      f"mean pause {1000 * value('isowatch_checkpoint_seconds_sum') / count if count else 0:.1f} ms; "
      f"last one {value('isowatch_checkpoint_bytes') / 2**20:.1f} MiB")
print(f"at the kill: {value('isowatch_store_log_batches'):,.0f} batches in the log; store {store_kib / 1024:,.1f} MiB, "
      f"data directory {data_kib / 1024:,.1f} MiB")
print(f"restart: ready {ready - restart:.2f} s after the start")
vb, va = before["counts"]["violations"], after["counts"]["violations"]
print(f"violations before the kill {vb}, after the restart {va}")
if vb != va:
    sys.exit("the restarted daemon serves other violations")
PY
