#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end throughput of isowatchd over gRPC on loopback, with the replay client on the same
# machine (issue 4's benchmark). Generates a simulator history, starts a release isowatchd with a
# temporary store, replays the history with simulated disorder, waits until every transaction is
# final, and prints: transactions/s, CPU seconds of client and daemon, the daemon's peak RSS and
# the batch ack latency (receipt to durable) from its metrics.
#
# Usage: bash bench/load/daemon_e2e.sh [TXNS_COMMITTED] [BATCH] [SIGMA_MS]
# Needs the release build (cmake --preset release && cmake --build --preset release).
set -euo pipefail

txns=${1:-300000}
batch=${2:-1000}
sigma=${3:-100}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${ISOWATCH_BIN:-$root/build/release/bin}
dir=$(mktemp -d /tmp/isowatch-e2e-XXXXXX)
daemon_pid=""
cleanup() {
  if [ -n "$daemon_pid" ]; then kill -9 "$daemon_pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT

hist=$dir/history.json
"$bin/isowatch" gen --out "$hist" --txns "$txns" --committed --keys 10000 --seed 42 > /dev/null
delivered=$(python3 -c "import json,sys; print(sum(1 for _ in json.load(open('$hist'))))")
echo "history: $txns committed, $delivered transactions in all, $(du -h "$hist" | cut -f1)"

"$bin/isowatchd" --data-dir "$dir/data" --grpc-port 0 --http-port 0 --ports-file "$dir/ports" \
  --set log.level=warn 2> "$dir/daemon.log" &
daemon_pid=$!
for _ in $(seq 1 100); do [ -f "$dir/ports" ] && break; sleep 0.1; done
grpc=$(python3 -c "import json; print(json.load(open('$dir/ports'))['grpc'])")
http=$(python3 -c "import json; print(json.load(open('$dir/ports'))['http'])")

cpu_of() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }
start=$(date +%s.%N)
/usr/bin/time -f "%U %S" -o "$dir/client.time" \
  "$bin/isowatch" replay "$hist" --to "127.0.0.1:$grpc" --batch "$batch" --sigma-ms "$sigma" \
  --quiet
sent=$(date +%s.%N)
# Until every transaction is final (the stream is closed with nothing pending).
for _ in $(seq 1 600); do
  if curl -sf "http://127.0.0.1:$http/api/v1/status" | python3 -c "
import json, sys
s = json.load(sys.stdin)['streams']
sys.exit(0 if s and all(x['closed'] and x['pending_transactions'] == 0 for x in s) else 1)"; then
    break
  fi
  sleep 0.1
done
done_at=$(date +%s.%N)
daemon_cpu=$(cpu_of "$daemon_pid")
daemon_rss=$(awk '/VmHWM/ {print $2 / 1024}' "/proc/$daemon_pid/status")
curl -sf "http://127.0.0.1:$http/metrics" > "$dir/metrics"
curl -sf "http://127.0.0.1:$http/api/v1/status" > "$dir/status"
kill -TERM "$daemon_pid"
wait "$daemon_pid" || true
daemon_pid=""

python3 - "$dir" "$start" "$sent" "$done_at" "$delivered" "$daemon_cpu" "$daemon_rss" <<'PY'
import json, re, sys
d, start, sent, done, n, dcpu, drss = sys.argv[1], *map(float, sys.argv[2:5]), int(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7])
cu, cs = map(float, open(f"{d}/client.time").read().split()[-2:])
metrics = open(f"{d}/metrics").read()
buckets = []
for m in re.finditer(r'^isowatch_ingest_batch_latency_seconds_bucket\{le="([^"]+)"\} (\S+)$', metrics, re.M):
    le = float("inf") if m.group(1) == "+Inf" else float(m.group(1))
    buckets.append((le, float(m.group(2))))
total = buckets[-1][1] if buckets else 0
def quantile(q):
    for le, c in buckets:
        if total and c >= q * total:
            return le
    return float("nan")
s = sum(float(x) for x in re.findall(r'^isowatch_ingest_batch_latency_seconds_sum (\S+)$', metrics, re.M))
status = json.load(open(f"{d}/status"))
print(f"sent in {sent - start:.2f} s: {n / (sent - start):,.0f} transactions/s sent and acknowledged")
print(f"all final after {done - start:.2f} s: {n / (done - start):,.0f} transactions/s end to end")
print(f"CPU: client {cu + cs:.2f} s (user {cu:.2f}, sys {cs:.2f}); daemon {dcpu:.2f} s")
mem = status['memory']
print(f"daemon peak RSS {drss:,.0f} MiB; engine state {mem['engine_bytes'] / 2**20:,.0f} MiB, "
      f"live history {mem.get('history_bytes', 0) / 2**20:,.0f} MiB")
if total:
    print(f"batch ack latency: mean {1000 * s / total:.1f} ms, p50 <= {1000 * quantile(0.5):g} ms, p99 <= {1000 * quantile(0.99):g} ms ({total:.0f} batches)")
print(f"violations {status['counts']['violations']}, refused {status['counts']['refused_transactions']}")
PY
