# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of plug-in checkers on isowatchd's windows: anomaly patterns and their near
misses, each on keys and sessions of its own, sent to a real daemon with `isowatch replay`; the
checker runs on the sealed windows, and /api/v1/violations holds each pattern's finding, at the
levels it breaks, with its read fault or cycle kind, and nothing for the near misses.
  plume (docs/checkers/plume.md, "Windows"): the TAP histories at rc, ra and tcc.
  polygraph (docs/checkers/polygraph.md): write skew, lost update and long fork at si and ser.

Usage: window_checkers_test.py PATH/TO/isowatch PATH/TO/isowatchd CASE
  plume_one_window  every TAP pattern in one window
  plume_windows     windows of 6 transactions with a lead-in of 3: the patterns straddle windows
  polygraph         every polygraph pattern in one window
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

# The notes' cycles in the same text, with the cycle kind the polygraph names at each level it
# breaks (None: any kind; an empty dict: a valid near miss).
CYCLES = [
    ("skew", "r(1,0,1,1) r(2,0,1,1) w(1,1,1,1) r(1,0,2,2) r(2,0,2,2) w(2,1,2,2)",
     {"ser": "write skew"}),
    ("skew_near", "r(1,0,1,1) r(2,0,1,1) w(1,1,1,1) r(1,1,2,2) r(2,0,2,2) w(2,1,2,2)", {}),
    ("lost", "r(1,0,1,1) w(1,1,1,1) r(1,0,2,2) w(1,2,2,2)",
     {"si": "lost update", "ser": "lost update"}),
    ("lost_near", "r(1,0,1,1) w(1,1,1,1) r(1,1,2,2) w(1,2,2,2)", {}),
    ("fork", "w(1,1,1,1) w(2,1,2,2) r(1,1,3,3) r(2,0,3,3) r(1,0,4,4) r(2,1,4,4)",
     {"si": "long fork", "ser": None}),
    ("fork_near", "w(1,1,1,1) w(2,1,2,2) r(1,1,3,3) r(2,0,3,3) r(1,1,4,4) r(2,1,4,4)", {}),
]


def write_history(path, patterns):
    """One native history of every pattern, keys and sessions renamed apart, transactions in the
    order they first appear with start and commit timestamps in that order (aborted ones too).
    Returns {pattern: (reader id, first key)} of the violating patterns."""
    lines = [json.dumps({"header": {"version": 1,
                                    "initial": {"default_value": {"int": "0"}}}})]
    clock = 0
    readers = {}
    for n, (name, text, _) in enumerate(patterns):
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


def by_pattern(found):
    """The findings grouped by the pattern of their first transaction."""
    groups = {}
    for v in found:
        groups.setdefault(str(v["txns"][0]).split(".")[0], []).append(v)
    return groups


def check_plume(found, readers):
    groups = by_pattern(found)
    for name, _, levels in PATTERNS:
        got = groups.get(name, [])
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


def check_polygraph(found):
    groups = by_pattern(found)
    for name, _, kinds in CYCLES:
        got = groups.get(name, [])
        for v in got:
            check(all(str(t).startswith(f"{name}.") for t in v["txns"]),
                  f"{name}: a finding names another pattern's transactions: {v}")
        levels = {lv for v in got for lv in (v.get("levels") or [v["level"]])}
        check(levels == set(kinds), f"{name} breaks {sorted(levels)}, want {sorted(kinds)}: {got}")
        for level, kind in kinds.items():
            at = [v for v in got if level in (v.get("levels") or [v["level"]])]
            if kind is not None:
                check(any(v.get("cycle_kind") == kind for v in at),
                      f"{name} at {level}: want a {kind}, found "
                      f"{[(v['anomaly'], v.get('cycle_kind')) for v in at]}")
            check(all(v.get("cycle_kind") for v in at),
                  f"{name} at {level}: a finding without its cycle kind: {at}")


CASES = {
    # case: (checker, its levels, patterns, window size, overlap)
    "plume_one_window": ("plume", "rc,ra,tcc", PATTERNS, "1000", "100"),
    "plume_windows": ("plume", "rc,ra,tcc", PATTERNS, "6", "3"),
    "polygraph": ("polygraph", "si,ser", CYCLES, "1000", "100"),
}


def main(argv):
    cli, daemond, case = argv[1:4]
    checker, levels, patterns, size, overlap = CASES[case]
    tmp = tempfile.mkdtemp(prefix=f"isowatch-{checker}-")
    try:
        history = os.path.join(tmp, "patterns.jsonl")
        readers = write_history(history, patterns)
        d = Daemon(daemond, tmp, case, ["--set", f"windows.checkers={checker}",
                                        "--set", f"checkers.{checker}.levels={levels}",
                                        "--set", f"windows.size={size}",
                                        "--set", f"windows.overlap={overlap}"])
        try:
            status, out, _ = run([cli, "replay", history, "--to", f"127.0.0.1:{d.grpc}",
                                  "--stream", "patterns", "--quiet"])
            check(status == 0, f"replay failed: {out}")
            daemon_compare.wait_checked(d.http, "patterns", 120)
            daemon_compare.wait_windows(d.http, 120)
            found_path = os.path.join(tmp, "found.json")
            daemon_compare.violations(d.http, found_path, checker=checker)
            with open(found_path) as f:
                found = json.load(f)
            d.stop()
        finally:
            d.kill()
        if checker == "plume":
            check_plume(found, readers)
        else:
            check_polygraph(found)
        print(f"{checker} on {case}: {len(found)} findings, every pattern found, no near miss "
              f"flagged")
        return 0
    except Failure as e:
        print(f"FAIL: {e}")
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
