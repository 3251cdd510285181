#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What one pathological batch costs isowatchd's store and log: writers of the same keys with
# overlapping intervals (pathological_writers.py), TXNS transactions on KEYS keys, each pair of
# overlapping writers of a key one NOCONFLICT violation under snapshot isolation (3,123,750 with
# the defaults). Starts a release isowatchd with a temporary store (log.level=warn, the daemon's
# default for violations), sends the history as one batch (`isowatch replay --batch`), waits
# until the daemon has counted every violation and the stream is final, drains it (SIGTERM) and
# prints: the violations counted, stored in full and summarised, the log's bytes and lines, and
# the store's size on disk.
#
# Usage: bash bench/load/daemon_findings.sh [TXNS] [KEYS]
#   TXNS  writers (default 2500)
#   KEYS  keys each one writes (default 1)
# Environment: ISOWATCH_BIN (default build/release/bin), DAEMON_ARGS (more isowatchd flags),
# IW_KEEP=1 keeps the temporary directory.
set -euo pipefail

txns=${1:-2500}
keys=${2:-1}
dir=$(mktemp -d /tmp/isowatch-findings-XXXXXX)
# shellcheck source-path=SCRIPTDIR source=daemon_lib.sh
source "$(dirname "$0")/daemon_lib.sh"
iw_init

hist=$dir/writers.json
expected=$(python3 "$(dirname "$0")/pathological_writers.py" "$hist" --txns "$txns" --keys "$keys")
echo "history: $txns writers of $keys key(s), all overlapping: $expected NOCONFLICT violations"

# shellcheck disable=SC2086
iw_start_daemon ${DAEMON_ARGS:-}
start=$(date +%s.%N)
"$bin/isowatch" replay "$hist" --to "127.0.0.1:$grpc_port" --batch "$txns" --quiet
iw_wait_status 3600 "s['counts']['violations'] >= $expected" \
  "the daemon did not count every violation in time"
iw_wait_final 3600
done_at=$(date +%s.%N)
iw_http /api/v1/status > "$dir/status.json"
iw_http /metrics > "$dir/metrics.txt"
iw_stop_daemon
store_kib=$(du -sk "$dir/data" | cut -f1)

python3 - "$dir" "$start" "$done_at" "$store_kib" "$expected" <<'PY'
import json, os, re, sys
d, start, done, store_kib, expected = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
s = json.load(open(f"{d}/status.json"))
c = s["counts"]
m = open(f"{d}/metrics.txt").read()
counted = sum(float(v) for v in re.findall(r'^isowatch_violations_total\{[^}]*\} (\S+)$', m, re.M))
stored = c.get("violations_stored", c["violations"])
summarised = c.get("violations_summarised", 0)
log = f"{d}/daemon.log"
with open(log, "rb") as f:
    lines = sum(1 for _ in f)
print(f"violations: expected {expected}, status {c['violations']}, isowatch_violations_total {counted:.0f}")
print(f"stored in full {stored}, summarised {summarised}")
print(f"log: {os.path.getsize(log)} bytes, {lines} lines")
print(f"store on disk (data_dir, after the drain): {store_kib} KiB")
print(f"from the replay's start to every verdict final: {done - start:.1f} s")
if int(c["violations"]) != expected or int(counted) != expected:
    sys.exit("the daemon's totals differ from the history's violations")
PY
