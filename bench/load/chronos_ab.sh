#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A/B of two isowatch binaries on the list-append benchmark of record (chronos_check_1m.sh with
# DATA=list and MAX_APPENDS=32): the two are run in turn, ROUNDS times each, so that both see the
# same phases of a shared machine; with PAUSE > 0, each run follows a pause of that many seconds.
# Prints, per binary, its runs sorted by wall time as read / check / wall / CPU (user + system)
# seconds, and its peak RSS. HISTORY=FILE checks that file instead of generating one.
# Usage: bench/load/chronos_ab.sh BIN_A BIN_B [ROUNDS] [PAUSE]
set -euo pipefail
a=$1
b=$2
rounds=${3:-8}
pause=${4:-0}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
history=${HISTORY:-}
if [[ -z "$history" ]]; then
  history="$dir/h.json"
  "$a" gen --out "$history" --txns 1000000 --ops-per-txn 8 --read-ratio 0.5 --keys 10000 \
    --dist zipfian --sessions 24 --seed 1 --committed --data list --max-appends-per-key 32 >/dev/null
fi
for ((i = 0; i < rounds; i++)); do
  for side in A B; do
    bin=$a
    [[ $side == B ]] && bin=$b
    ((pause > 0)) && sleep "$pause"
    /usr/bin/time -o "$dir/time" -f "%e %U %S %M" "$bin" check "$history" --level si --json \
      >"$dir/report.json"
    python3 - "$side" "$dir/report.json" "$dir/time" >>"$dir/runs" <<'EOF'
import json, sys
side, report, timing = sys.argv[1:]
r = json.load(open(report))
wall, user, system, rss = open(timing).read().split()
t = r["timing"]
print(side, wall, f"{t['read_seconds']:.3f}/{t['check_seconds']:.3f}/{float(wall):.2f}/"
      f"{float(user) + float(system):.2f}", int(rss) // 1024)
EOF
  done
done
for side in A B; do
  bin=$a
  [[ $side == B ]] && bin=$b
  echo "$side ($bin): read/check/wall/cpu s, sorted by wall"
  grep "^$side " "$dir/runs" | sort -k2,2n | awk '{printf "  %s", $3} END {print ""}'
  grep "^$side " "$dir/runs" | awk '{if ($4 > m) m = $4} END {print "  peak RSS " m " MiB"}'
done
