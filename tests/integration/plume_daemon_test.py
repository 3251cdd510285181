# SPDX-License-Identifier: Apache-2.0
"""End-to-end test of the plume checker on isowatchd's windows (docs/checkers/plume.md,
"Windows"): TAP histories, each on keys and sessions of its own, sent to a real daemon with
`isowatch replay`; plume runs on the sealed windows at rc, ra and tcc, and /api/v1/violations
holds each pattern's finding, at the levels it breaks, with its read fault where it has one, and
nothing for the near misses.

Usage: plume_daemon_test.py PATH/TO/isowatch PATH/TO/isowatchd CASE
  one_window  every pattern in one window
  windows     windows of 6 transactions with a lead-in of 3: the patterns straddle windows
The daemon runs on loopback, on free ports, with its store in a temporary directory.
"""

import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_compare  # noqa: E402  (the helpers of daemon_test.sh)
from daemon_limits_test import Daemon, Failure, check, run  # noqa: E402

# Plume's text lines w/r(key, value, session, txn), txn -1 an aborted write, with the TAP each
# breaks (None: a valid near miss) and the levels it breaks.
PATTERNS = [
    ("b", "w(1,1,1,-1) r(1,1,2,2)", ["rc", "ra", "tcc"]),
    ("b_near", "w(1,1,1,-1) r(1,0,2,2)", None),
    ("d", "w(1,1,1,1) w(1,2,2,2) r(1,1,2,2)", ["rc", "ra", "tcc"]),
    ("h", "w(1,1,1,1) w(1,2,1,2) w(2,1,1,2) r(2,1,2,3) r(1,1,2,3)", ["rc", "ra", "tcc"]),
    ("h_near", "w(1,1,1,1) w(1,2,1,2) w(2,1,1,2) r(2,1,2,3) r(1,2,2,3)", None),
    ("k", "w(1,1,1,1) w(1,2,1,2) w(2,2,1,2) r(1,1,2,3) r(2,2,2,3)", ["ra", "tcc"]),
    ("m", "w(1,1,1,1) w(1,2,1,2) w(2,2,1,2) r(2,2,2,4) r(1,1,2,3)", ["tcc"]),
]
READ_FAULTS = {"b": "aborted read", "d": "not own write"}


def write_history(path):
    """One native history of every pattern, keys and sessions renamed apart, transactions in the
    order they first appear with start and commit timestamps in that order (aborted ones too).
    Returns {pattern: (reader id, first key)} of the violating patterns."""
    lines = [json.dumps({"header": {"version": 1,
                                    "initial": {"default_value": {"int": "0"}}}})]
    clock = 0
    readers = {}
    for n, (name, text, _) in enumerate(PATTERNS):
        txns = {}
        for op in text.split():
            kind, args = op[0], [int(x) for x in op[2:-1].split(",")]
            key, value, session, txn = args
            tid = f"{name}.abort{session}" if txn == -1 else f"{name}.T{txn}"
            if tid not in txns:
                txns[tid] = {"id_str": tid, "session_str": f"{name}.s{session}", "ops": []}
                if txn == -1:
                    txns[tid]["status"] = "ABORTED"
            txns[tid]["ops"].append({"kind": "WRITE" if kind == "w" else "READ",
                                     "key": {"int": 100 * n + key}, "value": {"int": value}})
            if kind == "r":
                readers[name] = tid
        for t in txns.values():
            t["start"] = {"physical": clock + 1}
            t["commit"] = {"physical": clock + 2}
            clock += 2
            lines.append(json.dumps({"txn": t}))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return readers


def main(argv):
    cli, daemond, case = argv[1:4]
    size, overlap = {"one_window": ("1000", "100"), "windows": ("6", "3")}[case]
    tmp = tempfile.mkdtemp(prefix="isowatch-plume-")
    try:
        history = os.path.join(tmp, "taps.jsonl")
        readers = write_history(history)
        d = Daemon(daemond, tmp, case, ["--set", "windows.checkers=plume",
                                        "--set", "checkers.plume.levels=rc,ra,tcc",
                                        "--set", f"windows.size={size}",
                                        "--set", f"windows.overlap={overlap}"])
        try:
            status, out, _ = run([cli, "replay", history, "--to", f"127.0.0.1:{d.grpc}",
                                  "--stream", "taps", "--quiet"])
            check(status == 0, f"replay failed: {out}")
            daemon_compare.wait_checked(d.http, "taps", 120)
            daemon_compare.wait_windows(d.http, 120)
            found_path = os.path.join(tmp, "plume.json")
            daemon_compare.violations(d.http, found_path, checker="plume")
            with open(found_path) as f:
                found = json.load(f)
            d.stop()
        finally:
            d.kill()
        by_pattern = {}
        for v in found:
            reader = str(v["txns"][0])
            name = reader.split(".")[0]
            by_pattern.setdefault(name, []).append(v)
        for name, _, levels in PATTERNS:
            got = by_pattern.get(name, [])
            if levels is None:
                check(got == [], f"near miss {name} flagged: {got}")
                continue
            taps = [v for v in got if v["anomaly"] == f"TAP-{name}"]
            check(len(taps) == 1, f"pattern {name}: want one TAP-{name}, found "
                                  f"{[v['anomaly'] for v in got]}")
            v = taps[0]
            check(str(v["txns"][0]) == readers[name],
                  f"TAP-{name} names {v['txns'][0]}, not the reader {readers[name]}")
            want_levels = v.get("levels") or [v["level"]]
            check(sorted(want_levels) == sorted(levels),
                  f"TAP-{name} breaks {want_levels}, want {levels}")
            check(v.get("read_fault") == READ_FAULTS.get(name),
                  f"TAP-{name} read fault {v.get('read_fault')}, want {READ_FAULTS.get(name)}")
            check(v["explanation"].startswith(f"TAP-{name}"), f"explanation: {v['explanation']}")
        print(f"plume on {case}: {len(found)} findings, every pattern found, no near miss flagged")
        return 0
    except Failure as e:
        print(f"FAIL: {e}")
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
