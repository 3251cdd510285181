#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Chronos benchmark of record: a 1M-transaction key-value history (8 operations per
# transaction, half reads, 10K keys, zipfian), checked with `isowatch check --level si`, parsing
# included. Prints wall time and peak RSS (GNU time) and the read/check split (--json timing).
# DATA=list reads and appends lists instead of registers (the list-append history of the same
# shape). MAX_APPENDS (lists only) retires a key after that many appends, as Jepsen's
# list-append workload does (max-writes-per-key); 0, the default, never retires one.
# Usage: bench/load/chronos_check_1m.sh [BUILD_DIR] [TXNS] [DATA: kv or list] [MAX_APPENDS]
set -euo pipefail
build=${1:-build/release}
txns=${2:-1000000}
data=${3:-kv}
max_appends=${4:-0}
bin="$build/bin/isowatch"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" gen --out "$dir/h.json" --txns "$txns" --ops-per-txn 8 --read-ratio 0.5 --keys 10000 \
  --dist zipfian --sessions 24 --seed 1 --committed --data "$data" --max-appends-per-key "$max_appends" >/dev/null
echo "history: $(du -h "$dir/h.json" | cut -f1), $txns transactions, $data, max appends per key $max_appends"
for run in 1 2 3; do
  /usr/bin/time -f "run $run: wall %e s, peak RSS %M KiB" "$bin" check "$dir/h.json" --level si --json \
    >"$dir/report.json"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); t=r['timing']; print(f\"  valid={r['valid']} transactions={r['transactions']} read {t['read_seconds']:.3f} s, check {t['check_seconds']:.3f} s\")" "$dir/report.json"
done
