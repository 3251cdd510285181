#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of isowatch-tidb with a TiCDC-shaped producer and a real isowatchd.

Each case generates a history with planted faults (`isowatch gen`), checks it offline
(`isowatch check --json`: the planted faults and what they cause), has ticdc_producer encode it as
TiCDC and its client would show it (a client log with some outcomes unknown; the rows of each
transaction shuffled over partitions, duplicates, watermarks to every partition), starts isowatchd
on free loopback ports in a temporary directory, runs isowatch-tidb, and requires that the daemon
reports exactly the offline violations, that every transaction is in it once and that nothing was
refused:
  storage  key-value, through a storage sink's directory (canal-json files, `metadata`)
  kafka    key-value, through librdkafka's mock cluster, three partitions
  list     lists (appends), through the mock cluster
  restart  the mock cluster fed slowly; the collector killed with SIGKILL mid-stream and started
           again on its state directory (and its Kafka consumer group): nothing lost, nothing twice

Usage: tidb_test.py ISOWATCH ISOWATCHD ISOWATCH_TIDB TICDC_PRODUCER [CASE...]
With ISOWATCH_KEEP_TMP=1 the temporary directory is kept on failure.
"""

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon_compare import comparable  # noqa: E402
from postgres_test import Daemon, TestFailure, check, log  # noqa: E402

ALL_CASES = ["storage", "kafka", "list", "restart"]

SUMMARY = re.compile(r"(?P<records>\d+) client records in [\d.]+ s; sent (?P<sent>\d+) in \d+ "
                     r"batches, (?P<refused>\d+) refused; joined (?P<joined>\d+), client only "
                     r"(?P<client_only>\d+), CDC only (?P<cdc_only>\d+); unknown resolved "
                     r"committed (?P<unknown_committed>\d+), aborted (?P<unknown_aborted>\d+); "
                     r"missing in CDC (?P<missing>\d+), write mismatches (?P<mismatches>\d+)")


class Tools:
    def __init__(self, argv):
        self.cli, self.daemon, self.collector, self.producer = (os.path.abspath(a) for a in argv)


def generate(tools, root, data, seed, txns):
    """A history with planted faults, and the offline verdict on it."""
    history = os.path.join(root, "history.json")
    args = [tools.cli, "gen", "--format", "native-json", "--out", history, "--committed",
            "--txns", str(txns), "--sessions", "8", "--keys", "30", "--seed", str(seed),
            "--fault", "lost-update:0.01", "--fault", "stale-snapshot:0.01",
            "--fault", "session-order:0.01"]
    if data == "list":
        args += ["--data", "list", "--max-appends-per-key", "20",
                 "--fault", "fractured-visibility:0.01"]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    offline = os.path.join(root, "offline.json")
    with open(offline, "w") as out:
        code = subprocess.run([tools.cli, "check", history, "--json"], stdout=out).returncode
    check(code == 1, f"isowatch check: exit {code}, want 1 (violations)")
    report = json.load(open(offline))
    check(report["violations"], "the offline check found nothing: the history tests nothing")
    statuses = Counter()
    for line in open(history):
        txn = json.loads(line).get("txn")
        if txn is not None:
            statuses[txn.get("status", "COMMITTED")] += 1
    return history, report["violations"], statuses


def start_producer(tools, root, history, extra):
    out = open(os.path.join(root, "producer.log"), "w")
    args = [tools.producer, "--history", history, "--client-log",
            os.path.join(root, "client.jsonl")] + extra
    return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)


def wait_file(path, proc, timeout=60):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        check(proc.poll() is None, f"the producer exited with {proc.returncode}")
        check(time.monotonic() < deadline, f"no {path} within {timeout} s")
        time.sleep(0.05)
    return open(path).read().strip()


def collector_args(tools, root, daemon, source, data, stream="tidb"):
    return [tools.collector, "--client-log", os.path.join(root, "client.jsonl"), "--to",
            daemon.target, "--state-dir", os.path.join(root, "state"), "--stream", stream,
            "--data", data, "--table", "isowatch_list" if data == "list" else "isowatch_kv",
            "--stall-timeout-s", "40"] + source


def run_collector(args, root, name="collector"):
    path = os.path.join(root, f"{name}.log")
    with open(path, "w") as out:
        code = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, timeout=240).returncode
    text = open(path).read()
    check(code == 0, f"isowatch-tidb exited with {code}: {text[-1500:]}")
    m = SUMMARY.search(text)
    check(m is not None, f"no summary line in {path}")
    return {k: int(v) for k, v in m.groupdict().items()}


def verify(daemon, offline, statuses, stream="tidb"):
    s = daemon.wait_checked(stream)
    total = sum(statuses.values())
    check(s["committed_transactions"] == statuses["COMMITTED"],
          f"{s['committed_transactions']} committed transactions in isowatchd, "
          f"want {statuses['COMMITTED']}")
    online = daemon.violations()
    want = Counter(comparable(v) for v in offline)
    got = Counter(comparable(v) for v in online)
    missing, extra = want - got, got - want
    check(not missing and not extra,
          f"violations differ: missing {list(missing.items())[:5]}, extra "
          f"{list(extra.items())[:5]} (offline {len(offline)}, online {len(online)})")
    refused = daemon.metric("isowatch_refused_transactions_total", {})
    check(refused == 0, f"isowatchd refused {refused} transactions")
    kinds = Counter(v["anomaly"] for v in offline)
    log(f"   {total} transactions; {len(online)} violations equal offline "
        f"({dict(sorted(kinds.items()))})")


def check_summary(r, statuses):
    total = sum(statuses.values())
    check(r["records"] == total and r["sent"] == total,
          f"{r['records']} records, {r['sent']} sent, want {total}")
    check(r["refused"] == 0 and r["missing"] == 0 and r["mismatches"] == 0,
          f"refused {r['refused']}, missing {r['missing']}, write mismatches {r['mismatches']}")
    check(r["unknown_committed"] + r["unknown_aborted"] > 0, "no unknown outcome was planted")
    check(r["cdc_only"] == 0, f"{r['cdc_only']} transactions from the CDC alone")


def case_storage(tools, root):
    history, offline, statuses = generate(tools, root, "kv", 3, 600)
    sink = os.path.join(root, "sink")
    producer = start_producer(tools, root, history, ["--storage-dir", sink, "--seed", "2"])
    check(producer.wait(timeout=120) == 0, "the producer failed")
    daemon = Daemon(tools.daemon, root, [])
    try:
        r = run_collector(collector_args(tools, root, daemon,
                                         ["--storage-dir", sink, "--storage-format",
                                          "canal-json"], "kv"), root)
        check_summary(r, statuses)
        verify(daemon, offline, statuses)
    finally:
        daemon.stop()


def kafka_case(tools, root, data, seed, extra_producer, restart, txns=600):
    history, offline, statuses = generate(tools, root, data, seed, txns)
    brokers_file = os.path.join(root, "brokers")
    table = "isowatch_list" if data == "list" else "isowatch_kv"
    producer = start_producer(tools, root, history,
                              ["--brokers-file", brokers_file, "--partitions", "3", "--data",
                               data, "--table", table, "--seed", str(seed)] + extra_producer)
    daemon = None
    try:
        brokers = wait_file(brokers_file, producer)
        daemon = Daemon(tools.daemon, root, [])
        # A killed member holds its partitions for the session timeout (45 s by default).
        source = ["--kafka", brokers, "--topic", "ticdc", "--group", "isowatch-test",
                  "--kafka-config", "session.timeout.ms=6000"]
        args = collector_args(tools, root, daemon, source, data)
        if restart:
            first = subprocess.Popen(args + ["--batch", "20"],
                                     stdout=open(os.path.join(root, "first.log"), "w"),
                                     stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 120
            while True:
                s = daemon.stream("tidb")
                if s is not None and s["committed_transactions"] >= 60:
                    break
                check(first.poll() is None, "the collector ended before it was killed")
                check(time.monotonic() < deadline, "the collector sent too little within 120 s")
                time.sleep(0.02)
            first.send_signal(signal.SIGKILL)
            first.wait()
            s = daemon.stream("tidb")
            check(not s["closed"], "the stream was closed before the collector was killed")
            log(f"   killed the collector with {s['committed_transactions']} committed "
                f"transactions in isowatchd")
            args += ["--batch", "20"]
        r = run_collector(args, root)
        if not restart:
            check_summary(r, statuses)
        else:
            check(r["refused"] == 0 and r["mismatches"] == 0 and r["missing"] == 0,
                  f"after the restart: {r}")
        verify(daemon, offline, statuses)
    finally:
        producer.send_signal(signal.SIGTERM)
        producer.wait(timeout=30)
        if daemon is not None:
            daemon.stop()


def case_kafka(tools, root):
    kafka_case(tools, root, "kv", 5, [], False)


def case_list(tools, root):
    kafka_case(tools, root, "list", 7, [], False)


def case_restart(tools, root):
    kafka_case(tools, root, "kv", 9, ["--chunk", "10", "--interval-ms", "200"], True, txns=300)


CASES = {"storage": case_storage, "kafka": case_kafka, "list": case_list,
         "restart": case_restart}


def main(argv):
    if len(argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    tools = Tools(argv[1:5])
    cases = argv[5:] or ALL_CASES
    failed = []
    for name in cases:
        root = tempfile.mkdtemp(prefix=f"isowatch-tidb-{name}-")
        log(f"== {name} ({root})")
        started = time.monotonic()
        try:
            CASES[name](tools, root)
            log(f"== {name}: passed in {time.monotonic() - started:.1f} s")
            shutil.rmtree(root, ignore_errors=True)
        except Exception as e:  # a failing case must not hide the others' results
            log(f"== {name}: FAILED: {e}")
            if not isinstance(e, TestFailure):
                traceback.print_exc()
            for path in glob.glob(os.path.join(root, "**", "*.log"), recursive=True):
                log(f"--- last lines of {path}")
                with open(path, errors="replace") as f:
                    log("".join(f.readlines()[-15:]))
            failed.append(name)
            if os.environ.get("ISOWATCH_KEEP_TMP") != "1":
                shutil.rmtree(root, ignore_errors=True)
    if failed:
        log(f"failed cases: {' '.join(failed)}")
        return 1
    log("all TiDB collector tests passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
