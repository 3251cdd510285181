#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of isowatchd's metrics, alert rules and log, against the real programs.

Each case runs isowatchd (and, for `alert`, a real Prometheus server) on free loopback ports in a
temporary directory, feeds it with `isowatch replay`, and stops everything:
  rules    deploy/prometheus/isowatch-rules.yml passes `promtool check rules` and its unit tests
           (isowatch-rules.test.yml), and every metric name either file uses is one a running
           isowatchd exports: a renamed metric fails here
  alert    Prometheus (Debian's package) scrapes a fresh isowatchd every second and evaluates the
           rules: before any violation the violation counters exist at 0 and nothing fires; the
           first violations make IsowatchIsolationViolation fire
  restart  counters, status totals and the store agree, and the counters keep their totals: a
           kill -9 in the middle of a paced replay and a restart (the replay reconnects), then a
           stop with SIGTERM and a restart, then a kill -9 and a restart
  jsonlog  with log.format=json every line of the daemon's log (to a file, and to standard error)
           is a JSON object, violations, refusals and whole-batch refusals included

Usage: metrics_test.py PATH/TO/isowatchd PATH/TO/isowatch RULES_DIR [CASE...]
With ISOWATCH_KEEP_TMP=1 the temporary directory is kept on failure.
"""

import json
import os
import re
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_util  # noqa: E402
from daemon_util import (TestFailure, check, free_port, http_get, log,  # noqa: E402
                         run_cases, spawn, wait_for)

ALL_CASES = ["rules", "alert", "restart", "jsonlog"]
PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"


def parse_metrics(text):
    """{series: value} of the samples of a /metrics text, and the metric family names."""
    samples, families = {}, set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            name, kind = line.split()[2:4]
            families.add(name)
            if kind == "histogram":
                families.update({name + "_bucket", name + "_sum", name + "_count"})
            continue
        if not line or line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        samples[series] = float(value)
    return samples, families


def total(samples, name):
    return sum(v for s, v in samples.items() if s == name or s.startswith(name + "{"))


class Daemon(daemon_util.Daemon):
    """isowatchd in ROOT/NAME whose verdicts are final at the watermarks and the end of the
    stream, never by timeout."""

    def __init__(self, path, root, name, sets=()):
        super().__init__(path, root, ["engine.finality_timeout=600s"] + list(sets), name)


def gen(cli, root, name, *args):
    path = os.path.join(root, f"{name}.json")
    subprocess.run([cli, "gen", "--out", path, *args], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return path


def replay(cli, daemon, history, stream, *args, may_fail=False, background=False):
    out = open(os.path.join(daemon.dir, f"replay-{stream}.log"), "a")
    cmd = [cli, "replay", history, "--to", f"127.0.0.1:{daemon.grpc}", "--stream", stream, *args]
    if background:
        return spawn(cmd, out.name)
    code = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=300).returncode
    check(may_fail or code == 0, f"isowatch replay {stream} exited {code}")


def faulty_history(cli, root, txns=1500, seed=7):
    return gen(cli, root, f"faulty-{txns}-{seed}", "--committed", "--txns", str(txns),
               "--sessions", "8", "--keys", "25", "--seed", str(seed),
               "--fault", "stale-snapshot:0.02", "--fault", "lost-update:0.02")


# --- rules ----------------------------------------------------------------------------------------

METRIC_NAME = re.compile(r"\b((?:isowatch|process)_[a-z0-9_]+)")


def case_rules(tools, root):
    daemond, cli, rules_dir = tools
    rules = os.path.join(rules_dir, "isowatch-rules.yml")
    tests = os.path.join(rules_dir, "isowatch-rules.test.yml")
    for args in (["check", "rules", rules], ["test", "rules", tests]):
        r = subprocess.run([PROMTOOL, *args], capture_output=True, text=True, cwd=rules_dir)
        log(r.stdout.strip())
        check(r.returncode == 0, f"promtool {' '.join(args)} failed:\n{r.stdout}{r.stderr}")
    # With plug-in checkers and a stream, so that every metric the daemon can export is there.
    d = Daemon(daemond, root, "d", sets=["windows.checkers=chronos"]).start()
    small = gen(cli, root, "small", "--committed", "--txns", "50", "--seed", "1")
    replay(cli, d, small, "small")
    d.wait_checked("small")
    _, families = parse_metrics(d.metrics())
    d.stop()
    used = set()
    for path in (rules, tests):
        used |= set(METRIC_NAME.findall(open(path).read()))
    check(len(used) >= 15, f"only {len(used)} metric names found in the rules and their tests")
    missing = sorted(used - families)
    check(not missing, f"metrics the rules or their tests use that isowatchd does not export: "
                       f"{missing}")
    log(f"{len(used)} metric names used by the rules and their tests, all exported")


# --- alert ----------------------------------------------------------------------------------------

class Prometheus:
    def __init__(self, root, target_port, rules):
        self.dir = os.path.join(root, "prometheus")
        os.makedirs(os.path.join(self.dir, "data"))
        self.port = free_port()
        self.log_path = os.path.join(self.dir, "prometheus.log")
        config = os.path.join(self.dir, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n"
                    "  scrape_interval: 1s\n"
                    "  scrape_timeout: 1s\n"
                    "  evaluation_interval: 1s\n"
                    f"rule_files:\n  - {rules}\n"
                    "scrape_configs:\n"
                    "  - job_name: isowatch\n"
                    "    static_configs:\n"
                    f"      - targets: ['127.0.0.1:{target_port}']\n")
        self.proc = spawn(
            [PROMETHEUS, f"--config.file={config}",
             f"--storage.tsdb.path={os.path.join(self.dir, 'data')}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h"],
            self.log_path, stdin=subprocess.DEVNULL)

        def ready():
            check(self.proc.poll() is None, f"prometheus exited: see {self.log_path}")
            return http_get(self.port, "/-/ready")[0] == 200

        wait_for(ready, 60, "Prometheus to be ready")

    def api(self, target):
        code, body = http_get(self.port, target)
        check(code == 200, f"Prometheus {target} answered {code}: {body}")
        answer = json.loads(body)
        check(answer.get("status") == "success", f"Prometheus {target}: {body}")
        return answer["data"]

    def query(self, expr):
        return self.api("/api/v1/query?" + urllib.parse.urlencode({"query": expr}))["result"]

    def alerts(self, name):
        return [a for a in self.api("/api/v1/alerts")["alerts"]
                if a["labels"].get("alertname") == name]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def case_alert(tools, root):
    daemond, cli, rules_dir = tools
    history = faulty_history(cli, root)
    d = Daemon(daemond, root, "d").start()
    prom = Prometheus(root, d.http, os.path.join(rules_dir, "isowatch-rules.yml"))
    try:
        # A few scrapes of the fresh daemon: the violation counters are there, at 0.
        def scraped_at_zero():
            up = prom.query('up{job="isowatch"}')
            series = prom.query('count_over_time(isowatch_violations_total{checker="online"}[1m])')
            return (up and up[0]["value"][1] == "1" and len(series) == 4 and
                    all(int(s["value"][1]) >= 3 for s in series))

        wait_for(scraped_at_zero, 60, "3 scrapes of the 4 online violation counters")
        check(prom.query("sum(isowatch_violations_total)")[0]["value"][1] == "0",
              "violations before any transaction")
        check(not prom.alerts("IsowatchIsolationViolation"), "the alert fired before a violation")
        started = time.monotonic()
        replay(cli, d, history, "faulty", "--batch", "100")
        d.wait_checked("faulty")
        stored = len(d.violations())
        check(stored > 0, "the faulty history gave no violation")

        def firing():
            return [a for a in prom.alerts("IsowatchIsolationViolation")
                    if a["state"] == "firing"]

        alerts = wait_for(firing, 60, "IsowatchIsolationViolation to fire")
        kinds = sorted((a["labels"]["level"], a["labels"]["anomaly"]) for a in alerts)
        log(f"IsowatchIsolationViolation firing {time.monotonic() - started:.1f} s after the "
            f"replay started, for {kinds} ({stored} violations stored)")
        for a in alerts:
            check(a["labels"].get("severity") == "critical", f"alert labels: {a['labels']}")
        counted = prom.query("sum by (level, anomaly) (isowatch_violations_total) > 0")
        want = sorted((s["metric"]["level"], s["metric"]["anomaly"]) for s in counted)
        wait_for(lambda: sorted((a["labels"]["level"], a["labels"]["anomaly"])
                                for a in firing()) == want,
                 30, f"an alert for each kind found: {want}")
    finally:
        prom.stop()
        d.stop()


# --- restart --------------------------------------------------------------------------------------

# The counters a restart keeps (docs/operations.md, "Metrics"), with the violations.
KEPT = ["isowatch_violations_total", "isowatch_refused_transactions_total",
        "isowatch_refused_batches_total", "isowatch_duplicate_batches_total",
        "isowatch_watermark_regressions_total", "isowatch_flip_flops_total",
        "isowatch_reported_flip_flops_total",
        "isowatch_late_arrivals_total", "isowatch_horizon_misses_total",
        "isowatch_session_unjudged_total", "isowatch_ingested_transactions_total"]


def agree(d, what):
    """The metrics, the status and the store say the same; returns the kept series."""
    # The engine thread refreshes both at its ticks: read until two reads agree.
    def consistent():
        samples, _ = parse_metrics(d.metrics())
        status = d.status()["counts"]
        stored = len(d.violations())
        ok = (total(samples, "isowatch_violations_total") == status["violations"] == stored and
              total(samples, "isowatch_refused_transactions_total") ==
              status["refused_transactions"] and
              total(samples, "isowatch_ingested_transactions_total") ==
              status["ingested_transactions"] and
              total(samples, "isowatch_flip_flops_total") == status["flip_flops"] and
              total(samples, "isowatch_duplicate_batches_total") == status["duplicate_batches"])
        if ok:
            return samples, status
        agree.last = (samples, status, stored)
        return None

    samples, status = wait_for(consistent, 30,
                               f"{what}: metrics, status and store to agree "
                               f"(last: {getattr(agree, 'last', None)})")
    kept = {s: v for s, v in samples.items() if any(s == n or s.startswith(n + "{") for n in KEPT)}
    log(f"{what}: {status['violations']} violations, {status['refused_transactions']} refused, "
        f"{status['flip_flops']} flip-flops, {status['duplicate_batches']} duplicate batches: "
        f"metrics, status and store agree")
    return kept


def case_restart(tools, root):
    daemond, cli, _ = tools
    kv = gen(cli, root, "kv", "--committed", "--txns", "4000", "--sessions", "12", "--keys", "40",
             "--seed", "13", "--fault", "lost-update:0.01", "--fault", "stale-snapshot:0.01",
             "--fault", "session-order:0.01")
    big = gen(cli, root, "big", "--committed", "--txns", "300", "--keys", "10", "--seed", "2")
    d = Daemon(daemond, root, "d", sets=["ingest.max_batch_transactions=60"])
    d.start(free_port(), free_port())
    grpc, http = d.grpc, d.http
    # Violations: a paced replay, killed -9 in the middle.
    paced = replay(cli, d, kv, "kv", "--batch", "50", "--sigma-ms", "50", "--seed", "5",
                   "--rate", "800", background=True)
    wait_for(lambda: (d.stream("kv") or {}).get("acked_sequence", 0) >= 5, 120,
             "5 batches of the paced replay acknowledged")
    # Refusals: three batches of 100 over the limit of 60, refused whole (300 transactions). (The
    # stream ends, empty, while the paced one is open: alone it would let the final point jump.)
    replay(cli, d, big, "big", "--batch", "100", may_fail=True)
    wait_for(lambda: (d.stream("kv") or {}).get("acked_sequence", 0) >= 15, 120,
             "15 batches of the paced replay acknowledged")
    samples, _ = parse_metrics(d.metrics())
    before_crash = total(samples, "isowatch_violations_total")
    refused_before = total(samples, "isowatch_refused_transactions_total")
    check(refused_before == 300, f"{refused_before} transactions refused, want 300")
    d.kill()
    check(paced.poll() is None, "the replay ended before the daemon was killed")
    time.sleep(1)
    d.start(grpc, http)
    samples, _ = parse_metrics(d.metrics())
    check(total(samples, "isowatch_violations_total") >= before_crash,
          f"violations went down from {before_crash} over the kill -9: {samples}")
    check(total(samples, "isowatch_refused_transactions_total") == 300,
          "the refusals were not kept over the kill -9")
    code = paced.wait(timeout=300)
    check(code == 0, f"the paced replay exited {code} after the restart")
    d.wait_checked("kv")
    kept = agree(d, "after the replay")
    check(kept['isowatch_refused_transactions_total{reason="batch_too_large"}'] == 300,
          f"batch_too_large: {kept}")
    check(kept["isowatch_refused_batches_total"] == 3, f"refused batches: {kept}")
    check(total(kept, "isowatch_violations_total") > 0, "no violation")
    check(total(kept, "isowatch_ingested_transactions_total") == 4000, "ingested")

    d.stop()
    d.start(grpc, http)
    after_stop = agree(d, "after a stop with SIGTERM and a restart")
    check(after_stop == kept, f"a restart changed the counters:\n{kept}\n{after_stop}")

    d.kill()
    d.start(grpc, http)
    after_kill = agree(d, "after a kill -9 and a restart")
    check(after_kill == kept, f"a kill -9 changed the counters:\n{kept}\n{after_kill}")
    d.stop()


# --- jsonlog --------------------------------------------------------------------------------------

def json_lines(path):
    """Every line of the file as a JSON object; fails on the first that is not one."""
    records = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                record = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise TestFailure(f"{path}:{number} is not JSON ({e}): {raw[:300]!r}")
            check(isinstance(record, dict) and
                  {"time", "level", "thread", "message"} <= set(record),
                  f"{path}:{number}: not a log record: {raw[:300]!r}")
            records.append(record)
    return records


def case_jsonlog(tools, root):
    daemond, cli, _ = tools
    faulty = faulty_history(cli, root)
    lists = gen(cli, root, "lists", "--data", "list", "--committed", "--txns", "200",
                "--keys", "25", "--seed", "5")
    for where in ("file", "stderr"):
        log_file = os.path.join(root, f"{where}.jsonl")
        sets = ["log.format=json", "ingest.max_batch_transactions=50"]
        if where == "file":
            sets.append(f"log.file={log_file}")
        d = Daemon(daemond, root, where, sets=sets).start()
        replay(cli, d, faulty, "faulty", "--batch", "40")
        # The faulty history's keys are registers: appends to them are refused one by one.
        replay(cli, d, lists, "lists", "--batch", "40", may_fail=True)
        replay(cli, d, lists, "whole", "--batch", "100", may_fail=True)
        d.wait_checked("faulty")
        d.stop()
        records = json_lines(log_file if where == "file" else d.log_path)
        messages = [r["message"] for r in records]
        violations = [m for m in messages if m.startswith("violation ")]
        check(violations, f"{where}: no violation logged")
        # A violation's line carries the violation's JSON, which parses on its own.
        json.loads(violations[0][violations[0].index("{"):])
        check(any("transactions refused (" in m and "key_kind_conflict" in m for m in messages),
              f"{where}: no refusal logged")
        check(any("refused whole" in m and "batch_too_large" in m for m in messages),
              f"{where}: no whole-batch refusal logged")
        check(all(r["level"] == "warning" for r in records
                  if "refused" in r["message"] or r["message"].startswith("violation ")),
              f"{where}: refusals and violations are warnings")
        log(f"{where}: {len(records)} lines, all JSON ({len(violations)} violations)")


CASES = {"rules": case_rules, "alert": case_alert, "restart": case_restart,
         "jsonlog": case_jsonlog}


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    tools = (os.path.abspath(argv[1]), os.path.abspath(argv[2]), os.path.abspath(argv[3]))
    cases = {name: (lambda root, case=case: case(tools, root)) for name, case in CASES.items()}
    return run_cases(cases, argv[4:] or ALL_CASES, "isowatch-metrics", "metrics")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
