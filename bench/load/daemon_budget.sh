#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Memory of isowatchd under a memory budget over a long stream (the bounded-memory benchmark). Generates
# once a key-value simulator history of TXNS transactions in the native format (cached), starts a
# release isowatchd with a temporary store and --memory-budget BUDGET, streams the file to it with
# `isowatch replay` (delivery disorder σ = SIGMA_MS), and samples once a second the daemon's RSS
# (/proc/PID/status VmRSS) and its metrics: transactions ingested, the engine's own memory, the
# live history, the spill on disk, the transaction ids remembered, RocksDB's memory (store and
# spill). Prints a table over time, then the throughput, the largest RSS and the RSS at 25, 50,
# 75 and 100 % of the stream: a flat memory profile is one where the last ones do not grow.
#
# Usage: bash bench/load/daemon_budget.sh [TXNS] [BUDGET] [SIGMA_MS]
#   TXNS      transactions in the history, committed and aborted (default 10000000)
#   BUDGET    engine.memory_budget (default 256MiB)
#   SIGMA_MS  standard deviation of the delivery delay in ms (default 100)
# Environment: ISOWATCH_BIN (default build/release/bin), ISOWATCH_BENCH_CACHE (where generated
# histories are kept, default /tmp/isowatch-bench-cache), KEYS (default 100000), VALUES (int, or
# bytes for byte-string values: `isowatch gen --values`; default int), DIST (key distribution:
# uniform, zipfian or hotspot, `isowatch gen --dist`; default zipfian), BATCH (transactions per
# batch, default 1000), DAEMON_ARGS (more isowatchd flags, e.g. "--set ingest.remembered_ids=0").
set -euo pipefail

txns=${1:-10000000}
budget=${2:-256MiB}
sigma=${3:-100}
keys=${KEYS:-100000}
batch=${BATCH:-1000}
dir=$(mktemp -d /tmp/isowatch-budget-XXXXXX)
# shellcheck source-path=SCRIPTDIR source=daemon_lib.sh
source "$(dirname "$0")/daemon_lib.sh"
iw_init

iw_cached_history "$txns" "$keys"
counts=$(python3 -c "import json; t = json.load(open('$hist.truth.json')); print(t['committed'], t['aborted'])")
read -r committed aborted <<< "$counts"
echo "history: $hist, $(du -h "$hist" | cut -f1): $committed committed, $aborted aborted; $keys keys"

# shellcheck disable=SC2086
iw_start_daemon --memory-budget "$budget" ${DAEMON_ARGS:-}
echo "isowatchd pid $daemon_pid, --memory-budget $budget ${DAEMON_ARGS:-}; replay with σ = $sigma ms, batches of $batch"

# The sampler: one row a second until $dir/stop appears (or the daemon is gone).
python3 - "$dir" "$daemon_pid" "$http_port" <<'PY' &
import os, re, sys, time, urllib.request
d, pid, port = sys.argv[1], sys.argv[2], sys.argv[3]
url = f"http://127.0.0.1:{port}/metrics"

def total(text, name):
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))

def rss_kib():
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"^VmRSS:\s+(\d+)", f.read(), re.M).group(1))

start = time.monotonic()
mib = 2 ** 20
print(f"{'s':>6} {'ingested':>11} {'RSS MiB':>8} {'engine':>7} {'history':>8} {'spill':>7} "
      f"{'ids':>9} {'rocksdb':>8}", flush=True)
with open(f"{d}/samples.tsv", "w") as out:
    while not os.path.exists(f"{d}/stop"):
        try:
            rss = rss_kib() / 1024
            with urllib.request.urlopen(url, timeout=5) as r:
                m = r.read().decode()
        except (OSError, AttributeError):
            break
        t = time.monotonic() - start
        row = (t, total(m, "isowatch_ingested_transactions_total"), rss,
               total(m, "isowatch_engine_memory_bytes") / mib,
               total(m, "isowatch_engine_history_bytes") / mib,
               total(m, "isowatch_engine_spill_bytes") / mib,
               total(m, "isowatch_ingest_remembered_ids"),
               total(m, "isowatch_rocksdb_memory_bytes") / mib)
        out.write("\t".join(f"{x:.3f}" for x in row) + "\n")
        out.flush()
        print(f"{row[0]:6.1f} {row[1]:11,.0f} {row[2]:8,.0f} {row[3]:7,.1f} {row[4]:8,.0f} "
              f"{row[5]:7,.0f} {row[6]:9,.0f} {row[7]:8,.0f}", flush=True)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - start - t)))
PY
sampler_pid=$!

start=$(date +%s.%N)
"$bin/isowatch" replay "$hist" --to "127.0.0.1:$grpc_port" --batch "$batch" --sigma-ms "$sigma" \
  --quiet
sent=$(date +%s.%N)
iw_wait_final 3600
done_at=$(date +%s.%N)
sleep 1.2  # one more sample, with the final counts
touch "$dir/stop"
wait "$sampler_pid" || true
daemon_cpu=$(iw_cpu_of "$daemon_pid")
peak_rss=$(awk '/VmHWM/ {print $2 / 1024}' "/proc/$daemon_pid/status")
iw_http /api/v1/status > "$dir/status"
iw_http /metrics > "$dir/metrics"
iw_stop_daemon

python3 - "$dir" "$start" "$sent" "$done_at" "$((committed + aborted))" "$committed" \
  "$daemon_cpu" "$peak_rss" <<'PY'
import json, sys
d = sys.argv[1]
start, sent, done = map(float, sys.argv[2:5])
n, committed = int(sys.argv[5]), int(sys.argv[6])
cpu, peak = float(sys.argv[7]), float(sys.argv[8])
rows = [list(map(float, line.split("\t"))) for line in open(f"{d}/samples.tsv")]
status = json.load(open(f"{d}/status"))
if not rows:
    sys.exit("no samples")
# The client reads the whole file before it sends: the rate counts from the first sample with
# transactions ingested (the last sample without any is at most a second before the first one).
first = next((i for i, r in enumerate(rows) if r[1] > 0), 0)
t0 = rows[max(first - 1, 0)][0]
streaming = (done - start) - t0
print()
print(f"replay (reading the file included) {sent - start:.1f} s; all final {done - start:.1f} s after "
      f"the start, {streaming:.1f} s after the last sample with nothing ingested: "
      f"{n / streaming:,.0f} transactions/s ({committed / streaming:,.0f} committed/s) at least; "
      f"daemon CPU {cpu:.1f} s")
print(f"RSS: largest sample {max(r[2] for r in rows):,.0f} MiB, peak (VmHWM) {peak:,.0f} MiB; "
      f"largest engine {max(r[3] for r in rows):,.1f} MiB, history {max(r[4] for r in rows):,.0f} MiB, "
      f"spill {max(r[5] for r in rows):,.0f} MiB")
print("at % of the stream:   RSS MiB   engine   history   spill   ids remembered   rocksdb")
marks = []
for q in (25, 50, 75, 100):
    row = next((r for r in rows if r[1] >= q / 100 * n), rows[-1])
    marks.append(row)
    print(f"  {q:3d} % ({row[0]:6.1f} s)  {row[2]:8,.0f} {row[3]:8,.1f} {row[4]:9,.0f} {row[5]:7,.0f} {row[6]:16,.0f} {row[7]:9,.0f}")
half, end = marks[1], marks[3]
if half[2] > 0:
    print(f"RSS from 50 % to 100 %: {end[2] - half[2]:+,.0f} MiB ({100 * (end[2] - half[2]) / half[2]:+.0f} %); "
          f"engine {end[3] - half[3]:+,.1f} MiB, history {end[4] - half[4]:+,.0f} MiB")
mem = status["memory"]
print(f"at the end: engine {mem['engine_bytes'] / 2**20:,.1f} MiB of a {mem['budget_bytes'] / 2**20:,.0f} MiB budget, "
      f"history {mem['history_bytes'] / 2**20:,.0f} MiB, spill {mem['spill_bytes'] / 2**20:,.0f} MiB; "
      f"violations {status['counts']['violations']}, refused {status['counts']['refused_transactions']}, "
      f"horizon misses {status['counts']['horizon_misses']}")
# Pauses of the engine thread: writes to the spill and collections of byte strings and keys.
import re
metrics = open(f"{d}/metrics").read()
for name, what in (("isowatch_engine_spill_pause_seconds", "spill writes"),
                   ("isowatch_history_byte_collection_seconds", "byte-string collections"),
                   ("isowatch_history_key_collection_seconds", "key collections")):
    count = re.search(rf"^{name}_count (\S+)$", metrics, re.M)
    if count is None or float(count.group(1)) == 0:
        continue
    total = float(re.search(rf"^{name}_sum (\S+)$", metrics, re.M).group(1))
    n = float(count.group(1))
    buckets = [(float(le), float(c)) for le, c in
               re.findall(rf'^{name}_bucket{{le="([^"+]+)"}} (\S+)$', metrics, re.M)]
    longest = next((le for le, c in buckets if c >= n), float("inf"))
    print(f"{what}: {n:,.0f}, {total:.3f} s in all, {1000 * total / n:.1f} ms mean, "
          f"each at most {longest:g} s")
forgotten = re.search(r"^isowatch_history_byte_strings_forgotten_total (\S+)$", metrics, re.M)
if forgotten:
    print(f"byte strings forgotten: {float(forgotten.group(1)):,.0f}")
keys = {name: re.search(rf"^{name} (\S+)$", metrics, re.M) for name in
        ("isowatch_history_keys", "isowatch_history_keys_forgotten_total",
         "isowatch_engine_new_key_lookups_total", "isowatch_engine_restored_keys_total")}
if keys["isowatch_history_keys"]:
    print("keys: " + ", ".join(f"{name.removeprefix('isowatch_')} {float(m.group(1)):,.0f}"
                              for name, m in keys.items() if m))
for db, m in mem.get("rocksdb", {}).items():
    print(f"RocksDB {db}: memtables {m['memtables'] / 2**20:,.1f} MiB, table readers "
          f"{m['table_readers'] / 2**20:,.1f} MiB, block cache {m['block_cache'] / 2**20:,.1f} MiB")
PY
