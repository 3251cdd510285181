#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end tests of the isowatch command: gen -> check in both formats, exit statuses, the JSON
# report against the simulator's ground truth, positioned errors, and the demo.
# Usage: cli_test.sh PATH/TO/isowatch
set -uo pipefail
bin="$1"
src=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
passed=0
failed=0

expect_status() {  # expect_status WANT DESCRIPTION -- command...
  local want=$1 what=$2
  shift 3
  "$@" >"$dir/out" 2>"$dir/err"
  local got=$?
  if [ "$got" -eq "$want" ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: $what: exit $got, want $want"
    head -20 "$dir/out" "$dir/err"
  fi
}

expect_grep() {  # expect_grep PATTERN FILE DESCRIPTION
  if grep -q -- "$1" "$2"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: $3: '$1' not in $2"
    head -20 "$2"
  fi
}

# A fault-free SI history is SI-valid, in both formats.
expect_status 0 "gen valid" -- "$bin" gen --out "$dir/ok.json" --txns 2000 --sessions 8 --keys 50 --seed 7
expect_status 0 "check valid timekiller" -- "$bin" check "$dir/ok.json" --level si
expect_grep "result: VALID" "$dir/out" "valid report"
expect_status 0 "gen native" -- "$bin" gen --out "$dir/ok.bin" --format native --txns 2000 --sessions 8 --keys 50 --seed 7
expect_status 0 "check valid native" -- "$bin" check "$dir/ok.bin" --format native --level si
expect_status 0 "gen native-json" -- "$bin" gen --out "$dir/ok.jsonl" --format native-json --txns 500 --seed 9 --data list
expect_status 0 "check valid native json lines, list" -- "$bin" check "$dir/ok.jsonl" --level si

# A fault-free SER history is SER-valid.
expect_status 0 "gen ser" -- "$bin" gen --out "$dir/ser.json" --txns 2000 --level ser --seed 8
expect_status 0 "check ser" -- "$bin" check "$dir/ser.json" --level ser

# Lost updates: exit 1, and the JSON report counts exactly the ground truth's NOCONFLICTs.
expect_status 0 "gen lost updates" -- "$bin" gen --out "$dir/lu.json" --txns 3000 --sessions 16 --keys 30 --fault lost-update:0.05 --seed 11
expect_status 1 "check lost updates" -- "$bin" check "$dir/lu.json" --level si --json
cp "$dir/out" "$dir/lu.report.json"
if python3 - "$dir/lu.report.json" "$dir/lu.json.truth.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
truth = json.load(open(sys.argv[2]))
assert report["valid"] is False, report["valid"]
assert report["level"] == "si"
want = sum(1 for e in truth["expected"] if e["anomaly"] == "NOCONFLICT")
got = report["counts"].get("NOCONFLICT", 0)
assert want > 0 and got == want, (got, want)
assert len(report["violations"]) == len(truth["expected"]), (len(report["violations"]), len(truth["expected"]))
v = report["violations"][0]
for field in ("anomaly", "txns", "key", "expected", "observed", "explanation"):
    assert field in v, field
PY
then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: JSON report vs ground truth"; fi

# Online with a spill: a one-byte memory budget, and everything collected spilled, report the
# same violations as the offline check (same anomalies, transactions and keys).
for spill in "--memory-budget 1" "--spill-collected"; do
  # shellcheck disable=SC2086
  expect_status 1 "check --online $spill" -- "$bin" check "$dir/lu.json" --level si --json --online --sigma-ms 50 $spill
  cp "$dir/out" "$dir/lu.online.json"
  expect_grep "spill: [1-9][0-9]* versions written" "$dir/err" "spill used ($spill)"
  if python3 - "$dir/lu.report.json" "$dir/lu.online.json" <<'PY'
import json, sys
offline = json.load(open(sys.argv[1]))
online = json.load(open(sys.argv[2]))
key = lambda v: (v["anomaly"], json.dumps(v["txns"]), json.dumps(v["key"]))
assert sorted(map(key, offline["violations"])) == sorted(map(key, online["violations"]))
assert online["online"]["horizon_misses"] == 0, online["online"]
PY
  then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: online with a spill ($spill) vs offline"; fi
done

# Plug-in checkers: adya and chronos on a golden lost update, both in one JSON report.
histories="$(cd "$(dirname "$0")/../histories" && pwd)"
expect_status 0 "checkers" -- "$bin" checkers
expect_grep "adya.max_search_steps=integer" "$dir/out" "checkers lists adya's option"
expect_status 1 "check --checker adya,chronos" -- "$bin" check "$histories/adya/c_lost_update.jsonl" --checker adya,chronos --json
cp "$dir/out" "$dir/plugins.json"
if python3 - "$dir/plugins.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
assert report["valid"] is False and report["result"] == "invalid", report["result"]
assert report["checker"] == "adya,chronos", report["checker"]
assert report["level"] is None, report["level"]
names = [c["name"] for c in report["checkers"]]
assert names == ["adya", "chronos"], names
adya, chronos = report["checkers"]
assert adya["levels"] == ["rc", "rr", "si", "ser"] and chronos["levels"] == ["si", "ser"]
assert all(c["complete"] and c["result"] == "invalid" for c in report["checkers"])
assert report["counts"]["G-single"] == 1 and report["counts"]["NOCONFLICT"] == 1, report["counts"]
assert {v["checker"] for v in report["violations"]} == {"adya", "chronos"}
assert sum(c["violations"] for c in report["checkers"]) == len(report["violations"])
assert "sccs" in adya["stats"] and "external_reads" in chronos["stats"]
PY
then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: check --checker JSON report"; fi
expect_status 0 "check --checker adya --level rc" -- "$bin" check "$histories/adya/c_lost_update.jsonl" --checker adya --level rc
expect_grep "adya (rc): VALID" "$dir/out" "adya at rc only"
expect_status 2 "chronos cannot judge rc" -- "$bin" check "$histories/adya/c_lost_update.jsonl" --checker chronos --level rc
expect_grep "cannot judge" "$dir/err" "level error names the checker"
expect_status 0 "rc picks adya" -- "$bin" check "$histories/adya/c_lost_update.jsonl" --level rc
expect_grep "picked: adya, since chronos does not judge rc" "$dir/out" "the pick is said"
# Which checker judges what, by level and shape; and a read that misses its own append, named
# alike by the checker picked for rc on a black-box list history and by plume.
"$bin" checkers > "$dir/checkers_out"
expect_grep "Which checker judges which level" "$dir/checkers_out" "checkers prints the matrix"
expect_grep "^  si  *chronos, adya, polygraph  *polygraph, adya  *chronos, adya, polygraph  *adya, polygraph$" "$dir/checkers_out" "si row of the matrix"
expect_grep "^  ra  *plume  *plume  *plume  *plume$" "$dir/checkers_out" "ra row of the matrix"
cat > "$dir/own.edn" <<'EDN'
{:type :invoke, :f :txn, :value [[:append :x 1]], :process 0, :index 0}
{:type :ok, :f :txn, :value [[:append :x 1]], :process 0, :index 1}
{:type :invoke, :f :txn, :value [[:append :x 2] [:r :x nil]], :process 1, :index 2}
{:type :ok, :f :txn, :value [[:append :x 2] [:r :x [1]]], :process 1, :index 3}
EDN
expect_status 1 "rc on a black-box list history" -- "$bin" check "$dir/own.edn" --level rc
expect_grep "picked: adya at rc" "$dir/out" "rc without timestamps picks adya"
expect_grep "INT \[not own write\]" "$dir/out" "adya names the read fault"
expect_grep "misses its own append of 2 at operation 1" "$dir/out" "adya names the missed append"
expect_status 1 "plume on the same history" -- "$bin" check "$dir/own.edn" --checker plume --level rc --json
expect_grep '"anomaly":"TAP-d","read_fault":"not own write"' "$dir/out" "plume names the same read fault"
# plume on a black-box text history: a non-monotonic read (TAP-h) breaks rc, ra and tcc; a
# causality conflict (TAP-m) only tcc, and ra and tcc pick plume by themselves.
printf 'w(1,1,1,1)\nw(1,2,1,2)\nw(2,1,1,2)\nr(2,1,2,3)\nr(1,1,2,3)\n' > "$dir/tap_h.txt"
printf 'w(1,1,1,1)\nw(1,2,1,2)\nw(2,2,1,2)\nr(2,2,2,4)\nr(1,1,2,3)\n' > "$dir/tap_m.txt"
expect_status 1 "plume finds TAP-h at rc" -- "$bin" check "$dir/tap_h.txt" --checker plume --level rc
expect_grep "TAP-h (non-monotonic read): T3 read key 2 = 1 from T2" "$dir/out" "plume names the pattern"
expect_status 0 "TAP-m is read atomic" -- "$bin" check "$dir/tap_m.txt" --level ra
expect_grep "picked: plume at ra" "$dir/out" "ra picks plume"
expect_status 1 "TAP-m breaks tcc" -- "$bin" check "$dir/tap_m.txt" --level tcc
expect_grep "TAP-m (causality conflict)" "$dir/out" "plume at tcc"
# polygraph on a black-box text history: a write skew is snapshot-isolated but not serializable.
printf 'r(1,0,1,1)\nr(2,0,1,1)\nw(1,1,1,1)\nr(1,0,2,2)\nr(2,0,2,2)\nw(2,1,2,2)\n' > "$dir/write_skew.txt"
expect_status 1 "polygraph rejects a write skew at ser" -- "$bin" check "$dir/write_skew.txt" --checker polygraph --level ser
expect_grep "write skew" "$dir/out" "polygraph names the write skew"
expect_grep "G2-item <write skew>" "$dir/out" "the text report shows the cycle kind"
expect_status 1 "polygraph rejects a write skew at ser, as JSON" -- "$bin" check "$dir/write_skew.txt" --checker polygraph --level ser --json
expect_grep '"anomaly":"G2-item","cycle_kind":"write skew"' "$dir/out" "the JSON report has the cycle kind"
expect_status 0 "polygraph accepts a write skew at si" -- "$bin" check "$dir/write_skew.txt" --checker polygraph --level si
expect_grep "polygraph (si): VALID" "$dir/out" "polygraph at si"
expect_status 2 "unknown checker" -- "$bin" check "$histories/adya/c_lost_update.jsonl" --checker elle
expect_status 2 "unknown option" -- "$bin" check "$histories/adya/c_lost_update.jsonl" --checker adya --checker-option adya.depth=3
expect_grep "adya.depth" "$dir/err" "unknown option named"
# Windows of 300 transactions with a lead-in of 50 find what the whole history shows (the key
# named by a G-SIa pair may differ: windows intern keys afresh).
expect_status 1 "check --checker whole" -- "$bin" check "$dir/lu.json" --checker chronos,adya --level si --json
cp "$dir/out" "$dir/whole.json"
expect_status 1 "check --checker --window" -- "$bin" check "$dir/lu.json" --checker chronos,adya --level si --window 300 --window-overlap 50 --json
cp "$dir/out" "$dir/windows.json"
if python3 - "$dir/whole.json" "$dir/windows.json" <<'PY'
import json, sys
whole = json.load(open(sys.argv[1]))
windows = json.load(open(sys.argv[2]))
assert windows["window"] == {"transactions": 300, "overlap": 50}, windows.get("window")
assert all(c["windows"] >= 2 for c in windows["checkers"]), windows["checkers"]
key = lambda v: (v["checker"], v["anomaly"], tuple(map(str, v["txns"])))
a = sorted(map(key, whole["violations"]))
b = sorted(map(key, windows["violations"]))
assert a == b, (len(a), len(b))
PY
then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: windows vs whole history"; fi
# Out of time with no violation found: UNKNOWN, exit 3, never VALID.
expect_status 0 "gen large valid" -- "$bin" gen --out "$dir/big.json" --txns 30000 --keys 500 --seed 5
expect_status 3 "check --time-limit-ms 1" -- "$bin" check "$dir/big.json" --checker adya,chronos --time-limit-ms 1
expect_grep "result: UNKNOWN" "$dir/out" "out of time is UNKNOWN"

# Bad input: exit 2 with the file and position in the message.
printf '[\n {"tid": 1, "sid": 0, "sts": {"p": 1, "l": 0}' > "$dir/truncated.json"
expect_status 2 "truncated file" -- "$bin" check "$dir/truncated.json" --format timekiller
expect_grep "truncated.json:" "$dir/err" "error names the file"
expect_status 2 "missing file" -- "$bin" check "$dir/nope.json"
expect_status 2 "bad level" -- "$bin" check "$dir/ok.json" --level xyz
expect_status 2 "bad initial value" -- "$bin" check "$dir/ok.json" --initial-value abc
expect_status 2 "unknown fault" -- "$bin" gen --out "$dir/x.json" --fault nonsense

# Formats: listed, detected by content, converted; black-box histories go to adya.
expect_status 0 "formats" -- "$bin" formats
for name in native timekiller edn elle-json text cobra dbcop dbcop-json viper; do
  expect_grep "^$name " "$dir/out" "formats lists $name"
done
expect_status 0 "gen lost update" -- "$bin" gen --out "$dir/lu_ser.json" --txns 600 --sessions 6 --keys 20 --seed 3 --level ser --fault lost-update:0.05
expect_status 0 "convert to edn" -- "$bin" convert "$dir/lu_ser.json" "$dir/lu.edn" --to edn
expect_grep "(timekiller): [0-9]* transactions written" "$dir/out" "convert says what it wrote"
# The EDN file keeps the database timestamps (:ts), so chronos judges it, as the original.
expect_status 1 "check edn" -- "$bin" check "$dir/lu.edn" --level ser
expect_grep "^format: edn (rw-register)" "$dir/out" "edn detected"
expect_status 1 "check edn with adya" -- "$bin" check "$dir/lu.edn" --level ser --checker adya
expect_grep "G-single" "$dir/out" "lost update found by adya"
# elle-cli's JSON says what EDN says, the timestamps (ts) included.
expect_status 0 "convert to elle-json" -- "$bin" convert "$dir/lu.edn" "$dir/lu_elle.json" --to elle-json
expect_status 1 "check elle-json" -- "$bin" check "$dir/lu_elle.json" --level ser
expect_grep "^format: elle-json (rw-register)" "$dir/out" "elle-json detected"
expect_grep "EXT" "$dir/out" "chronos finds the lost update in elle-cli JSON"
# Text has no timestamps: they are dropped only on purpose; then the polygraph is picked (it
# decides black-box registers), and finds the lost updates without them.
expect_status 2 "convert to text keeps timestamps or refuses" -- "$bin" convert "$dir/lu.edn" "$dir/lu.txt" --to text
expect_grep "drop-timestamps" "$dir/err" "refusal says how to drop timestamps"
expect_status 0 "convert to text" -- "$bin" convert "$dir/lu.edn" "$dir/lu.txt" --to text --drop-timestamps
expect_status 1 "check text" -- "$bin" check "$dir/lu.txt" --level ser
expect_grep "^picked: polygraph at ser" "$dir/out" "polygraph picked"
expect_grep "G-single" "$dir/out" "lost update found without timestamps"
expect_status 1 "check text json" -- "$bin" check "$dir/lu.txt" --level ser --json
expect_grep '"format":"text"' "$dir/out" "text detected"
expect_grep '"picked":"polygraph at ser' "$dir/out" "json says what was picked"
expect_status 3 "chronos on a black-box history is skipped" -- "$bin" check "$dir/lu.txt" --checker chronos
expect_grep "skipped: it orders transactions by commit timestamp" "$dir/out" "skip says why"
expect_status 2 "online needs commit timestamps" -- "$bin" check "$dir/lu.txt" --online
expect_grep "has no commit timestamps" "$dir/err" "online refusal says why"
expect_status 2 "convert what the target cannot say" -- "$bin" convert "$dir/lu.txt" "$dir/lu_tk.json" --to timekiller
printf 'hello\n' > "$dir/odd.dat"
expect_status 2 "no format fits" -- "$bin" check "$dir/odd.dat"
expect_grep "edn: " "$dir/err" "detection names the formats it tried"
mkdir -p "$dir/cobra"
expect_status 0 "convert to cobra" -- "$bin" convert "$dir/lu.txt" "$dir/cobra" --to cobra
expect_status 1 "check cobra directory" -- "$bin" check "$dir/cobra" --level ser
expect_grep "^format: cobra" "$dir/out" "cobra directory detected"
# ViperBench range reads are read and kept; the polygraph, picked for black-box registers, judges
# them; adya does not weigh them, so its result is UNKNOWN.
expect_status 0 "check viper directory" -- "$bin" check "$src/tests/histories/formats/viper/ranges"
expect_grep "^format: viper" "$dir/out" "viper directory detected"
expect_grep "^picked: polygraph at si" "$dir/out" "polygraph picked for range reads"
expect_status 3 "adya on a viper directory" -- "$bin" check "$src/tests/histories/formats/viper/ranges" --checker adya
expect_grep "range reads are not judged" "$dir/out" "unjudged range reads are named"
expect_status 0 "convert to viper" -- "$bin" convert "$dir/lu.edn" "$dir/viper" --to viper --drop-timestamps
expect_status 1 "check generated viper" -- "$bin" check "$dir/viper" --level ser
expect_grep "G-single" "$dir/out" "lost update found in a viper directory"

# The demo finds every injected fault and nothing else.
expect_status 0 "demo" -- "$bin" demo --txns 4000
expect_grep "no false alarm" "$dir/out" "demo matches ground truth"
# On two keys, past the daemon's default bound of findings per key: the demo lists them all.
expect_status 0 "demo on two keys" -- "$bin" demo --txns 4000 --keys 2
expect_grep "no false alarm" "$dir/out" "demo on two keys matches ground truth"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
