# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of isowatchd's bounded findings (docs/operations.md, "Bounded findings"), one
case per run:

  pathological  one batch of overlapping writers of the same keys (a NOCONFLICT violation per
                pair): every violation counted, exactly, in /api/v1/status and /metrics; at most
                findings.max_per_key per key stored in full, the rest in summaries; the log and
                the store small; and the same totals after a kill -9 and a restart, without a
                checkpoint since (the log replayed) and with one
  limits        small findings.max_store_bytes and max_log_bytes: both limits reached, said in
                the log, /metrics and /api/v1/status; the daemon goes on checking and counting
                another stream exactly
  normal        a simulator history with planted faults, default findings options: every
                violation stored in full, as the offline check finds them

Usage: findings_test.py PATH/TO/isowatch PATH/TO/isowatchd PATH/TO/pathological_writers.py CASE
Each daemon runs on loopback, on free ports, with its store in a temporary directory.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_compare  # noqa: E402  (the helpers of daemon_test.sh)
from daemon_limits_test import Daemon, Failure, check, run  # noqa: E402


def writers(generator, path, txns, keys=1, first_key=0, first_txn=1):
    """Writes a pathological history; returns the number of violations it holds."""
    status, out, _ = run([sys.executable, generator, path, "--txns", str(txns), "--keys",
                          str(keys), "--first-key", str(first_key), "--first-txn",
                          str(first_txn)])
    check(status == 0, f"pathological_writers.py failed: {out}")
    return int(out.strip())


def replay(cli, d, path, stream):
    """Sends `path` to `d` as one batch on `stream`."""
    status, out, _ = run([cli, "replay", path, "--to", f"127.0.0.1:{d.grpc}", "--stream", stream,
                          "--batch", "10000", "--quiet"], timeout=600)
    check(status == 0, f"replay of {stream} failed: {out}")


def status_of(d):
    code, body = daemon_compare.get(d.http, "/api/v1/status")
    return json.loads(body) if code == 200 else None


def wait_counted(d, violations, timeout=600):
    """Waits until the daemon counted `violations` and every stream is final; returns the status."""
    def done():
        s = status_of(d)
        if s is None or s["counts"]["violations"] < violations:
            return None
        if not all(x["closed"] and x["pending_transactions"] == 0 for x in s["streams"]):
            return None
        return s
    s = daemon_compare.poll(done, timeout, f"{violations} violations counted, the streams final")
    check(s["counts"]["violations"] == violations,
          f"counted {s['counts']['violations']} violations, the history has {violations}")
    return s


def metric(d, name):
    code, body = daemon_compare.get(d.http, "/metrics")
    check(code == 200, f"/metrics answered {code}")
    return daemon_compare.sample_total(body, name)


def listed(d, path, key):
    """Every item of a paged listing (/api/v1/violations or /api/v1/summaries)."""
    items, token = [], ""
    for _ in range(10000):
        target = f"{path}?limit=1000" + (f"&page_token={token}" if token else "")
        code, body = daemon_compare.get(d.http, target)
        check(code == 200, f"{target} answered {code}: {body}")
        page = json.loads(body)
        items += page[key]
        token = page["next_page_token"]
        if not token:
            return items
    raise Failure(f"{path} did not end")


def check_totals(d, violations, what):
    """The status, the metrics, the violations and the summaries agree, and count `violations`."""
    s = wait_counted(d, violations)
    c = s["counts"]
    check("violations_stored" in c and "findings" in s,
          f"{what}: the status says nothing of stored and summarised violations: {c}")
    check(c["violations_stored"] + c["violations_summarised"] == violations,
          f"{what}: {c['violations_stored']} stored + {c['violations_summarised']} summarised, "
          f"want {violations} in all")
    total = metric(d, "isowatch_violations_total")
    check(total == violations, f"{what}: isowatch_violations_total is {total}, want {violations}")
    summarised = metric(d, "isowatch_violations_summarised_total")
    check(summarised == c["violations_summarised"],
          f"{what}: isowatch_violations_summarised_total is {summarised}, the status says "
          f"{c['violations_summarised']}")
    stored = listed(d, "/api/v1/violations", "violations")
    check(len(stored) == c["violations_stored"],
          f"{what}: /api/v1/violations lists {len(stored)}, the status says "
          f"{c['violations_stored']} stored")
    summaries = listed(d, "/api/v1/summaries", "summaries")
    in_summaries = sum(x["summarised"] for x in summaries)
    check(in_summaries == c["violations_summarised"],
          f"{what}: the summaries count {in_summaries}, the status says "
          f"{c['violations_summarised']} summarised")
    check(s["findings"]["summaries"] == len(summaries),
          f"{what}: findings.summaries is {s['findings']['summaries']}, {len(summaries)} listed")
    return s, stored, summaries


def violation_lines(d):
    return [line for line in d.log_text().splitlines() if " violation " in line]


def case_pathological(cli, daemond, generator, tmp):
    history = os.path.join(tmp, "writers.json")
    # 300 writers of two keys, all overlapping: 89,700 NOCONFLICT violations.
    violations = writers(generator, history, 300, keys=2)
    # No checkpoint: a restart replays the whole log, and counts again what was summarised.
    args = ["--set", "log.level=warn", "--set", "findings.summary_interval=1s",
            "--set", "store.checkpoint_interval=0s"]
    d = Daemon(daemond, tmp, "p", args)
    try:
        replay(cli, d, history, "writers")
        s, stored, summaries = check_totals(d, violations, "after the batch")
        per_key = {}
        for v in stored:
            per_key[v["key"]] = per_key.get(v["key"], 0) + 1
        check(sorted(per_key) == [0, 1] and all(n <= 100 for n in per_key.values()),
              f"stored in full per key: {per_key}, want at most findings.max_per_key (100) each")
        check(s["findings"]["state"] == "summarising", f"findings: {s['findings']}")
        keys = sorted(x["key"] for x in summaries if x["scope"] == "key")
        check(keys == ["0", "1"], f"the keys' summaries: {keys}")
        check(all(x["kept"] <= 100 if x["scope"] == "key" else x["kept"] <= 20
                  for x in summaries), f"summaries keep too many: {summaries[:3]}")
        check(s["findings"]["store_bytes"] < (1 << 20),
              f"the violations take {s['findings']['store_bytes']} bytes in the store")
        # The log: a line per violation stored in full, and summary lines every second.
        daemon_compare.poll(lambda: "summarised in the last" in d.log_text(), 30,
                            "a summary line in the log")
        lines = violation_lines(d)
        check(len(lines) == len(stored) == s["findings"]["logged"],
              f"{len(lines)} violation lines, {len(stored)} stored in full, "
              f"{s['findings']['logged']} logged")
        size = os.path.getsize(d.log_path)
        check(size < 256 << 10, f"the log has {size} bytes")
    finally:
        d.kill()

    d = Daemon(daemond, tmp, "p", args)
    try:
        check_totals(d, violations, "after a kill -9, the log replayed")
        replay(cli, d, history, "writers")  # sent again: recognised, nothing counted twice
        check_totals(d, violations, "after the batch was sent again")
    finally:
        d.kill()
    d = Daemon(daemond, tmp, "p", args[:-2] + ["--set", "store.checkpoint_interval=200ms"])
    try:
        check_totals(d, violations, "after a second kill -9, the log replayed")
        daemon_compare.poll(lambda: metric(d, "isowatch_checkpoints_total") >= 1, 60,
                            "a checkpoint")
    finally:
        d.kill()
    d = Daemon(daemond, tmp, "p", args[:-2])
    try:
        check_totals(d, violations, "after a kill -9 after a checkpoint")
    finally:
        d.stop()


def case_limits(cli, daemond, generator, tmp):
    first = os.path.join(tmp, "first.json")
    second = os.path.join(tmp, "second.json")
    violations = writers(generator, first, 120)  # 7,140 on key 0
    more = writers(generator, second, 40, first_key=1, first_txn=1001)  # 780 on key 1
    d = Daemon(daemond, tmp, "l", ["--set", "log.level=warn",
                                   "--set", "findings.max_per_key=0",
                                   "--set", "findings.max_per_txn=0",
                                   "--set", "findings.max_store_bytes=64KiB",
                                   "--set", "findings.log_per_minute=100000",
                                   "--set", "findings.max_log_bytes=16KiB"])
    try:
        replay(cli, d, first, "first")
        s, stored, summaries = check_totals(d, violations, "past the limits")
        f = s["findings"]
        check(f["state"] == "store_limit_reached", f"findings: {f}")
        check(f["log_state"] == "budget_spent", f"findings: {f}")
        check(0 < len(stored) < violations, f"{len(stored)} stored in full")
        check(f["store_bytes"] < (64 << 10) + 4096,
              f"the violations take {f['store_bytes']} bytes, the limit is 64 KiB")
        check(f["log_bytes"] <= 16 << 10, f"{f['log_bytes']} bytes of violations logged")
        check(f["logged"] + f["unlogged"] == len(stored), f"findings: {f}")
        check(metric(d, "isowatch_violations_unlogged_total") == f["unlogged"],
              "isowatch_violations_unlogged_total differs from findings.unlogged")
        code, body = daemon_compare.get(d.http, "/metrics")
        for limit in ("store", "log"):
            check(f'isowatch_findings_limit_reached{{limit="{limit}"}} 1' in body,
                  f"the {limit} limit is not reported in /metrics")
        kinds = [x for x in summaries if x["scope"] == "kind"]
        check(len(kinds) == 1 and kinds[0]["kept"] == 0, f"kind summaries: {kinds}")
        # The daemon goes on checking: another stream's violations are counted exactly.
        replay(cli, d, second, "second")
        check_totals(d, violations + more, "another stream past the limits")
    finally:
        d.stop()
    log = d.log_text()
    for said in ("the store's limit for violations (findings.max_store_bytes) is reached",
                 "the log's budget for violations (findings.max_log_bytes = 16KiB) is spent"):
        check(log.count(said) == 1, f"the log says {log.count(said)} times: {said}")
    check(len(violation_lines(d)) < 200, f"{len(violation_lines(d))} violation lines")


def case_normal(cli, daemond, generator, tmp):
    history = os.path.join(tmp, "normal.json")
    status, out, _ = run([cli, "gen", "--out", history, "--committed", "--txns", "4000",
                          "--sessions", "12", "--keys", "40", "--seed", "13", "--fault",
                          "lost-update:0.01", "--fault", "stale-snapshot:0.01", "--fault",
                          "session-order:0.01"])
    check(status == 0, f"isowatch gen failed: {out}")
    offline = os.path.join(tmp, "offline.json")
    with open(offline, "w") as f:
        status = subprocess.run([cli, "check", history, "--json"], stdout=f,
                                stderr=subprocess.DEVNULL, timeout=600).returncode
    check(status == 1, f"isowatch check exited {status}, want 1 (violations)")
    with open(offline) as f:
        expected = len(json.load(f)["violations"])
    d = Daemon(daemond, tmp, "n", ["--set", "log.level=warn"])
    try:
        status, out, _ = run([cli, "replay", history, "--to", f"127.0.0.1:{d.grpc}", "--stream",
                              "normal", "--sigma-ms", "50", "--batch", "100", "--seed", "1",
                              "--quiet"], timeout=600)
        check(status == 0, f"replay failed: {out}")
        s, stored, _ = check_totals(d, expected, "a normal history")
        check(s["counts"]["violations_summarised"] == 0 and s["findings"]["state"] == "complete",
              f"violations of a normal history summarised: {s['counts']}, {s['findings']}")
        online = os.path.join(tmp, "online.json")
        with open(online, "w") as f:
            json.dump(stored, f)
        status, out, _ = run([sys.executable, daemon_compare.__file__, "compare", offline, online])
        check(status == 0, f"the daemon's violations differ from the offline check's: {out}")
        check(len(violation_lines(d)) == expected,
              f"{len(violation_lines(d))} violation lines for {expected} violations")
    finally:
        d.stop()


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    cli, daemond, generator, case = sys.argv[1:]
    cases = {"pathological": case_pathological, "limits": case_limits, "normal": case_normal}
    if case not in cases:
        sys.exit(f"unknown case {case}; one of {', '.join(cases)}")
    tmp = tempfile.mkdtemp(prefix=f"isowatch-findings-{case}-")
    try:
        cases[case](cli, daemond, generator, tmp)
    except Failure as e:
        print(f"FAIL {case}: {e}", file=sys.stderr)
        print(f"(kept {tmp})", file=sys.stderr)
        sys.exit(1)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"ok {case}")


if __name__ == "__main__":
    main()
