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
  storage    key-value, through a storage sink's directory (canal-json files, `metadata`)
  kafka      key-value, through librdkafka's mock cluster, three partitions
  list       lists (appends), through the mock cluster
  restart    the mock cluster fed slowly; the collector killed with SIGKILL mid-stream and started
             again on its state directory (and its Kafka consumer group)
  daemon     the mock cluster fed slowly; isowatchd killed with SIGKILL mid-stream and started
             again on its store and ports while the collector runs: the collector reconnects,
             sends again what was not acknowledged and ends by itself; its progress lines carry
             rows, rates, unknown outcomes, lags and refusals
  both       isowatchd killed, then the collector killed while it reconnects; both started again
  rebalance  two collectors (two state directories, two isowatchd) in one consumer group, and a
             third consumer (kafka_group_member) that joins the group, reads every partition,
             commits their ends (past what the first collector had acknowledged: isowatchd is
             stopped meanwhile) and leaves; then the first collector killed with SIGKILL and
             started again: it resumes where its state file says, not where the group's offsets
             were moved, and both streams hold every transaction once

Usage: tidb_test.py ISOWATCH ISOWATCHD ISOWATCH_TIDB TICDC_PRODUCER KAFKA_GROUP_MEMBER [CASE...]
With ISOWATCH_KEEP_TMP=1 the temporary directory is kept on failure.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon_compare import comparable  # noqa: E402
from daemon_util import Daemon, check, log, run_cases, spawn, wait_for  # noqa: E402

ALL_CASES = ["storage", "kafka", "list", "restart", "daemon", "both", "rebalance", "broker"]

SUMMARY = re.compile(r"(?P<records>\d+) client records in [\d.]+ s; sent (?P<sent>\d+) in \d+ "
                     r"batches, (?P<refused>\d+) refused; joined (?P<joined>\d+), client only "
                     r"(?P<client_only>\d+), CDC only (?P<cdc_only>\d+); unknown resolved "
                     r"committed (?P<unknown_committed>\d+), aborted (?P<unknown_aborted>\d+); "
                     r"missing in CDC (?P<missing>\d+), write mismatches (?P<mismatches>\d+)"
                     r".*reconnects to isowatchd (?P<reconnects>\d+);"
                     r".*acknowledgements failed (?P<ack_failures>\d+)")
PROGRESS = re.compile(r"isowatch-tidb: rows (?P<rows>\d+) \([\d.]+/s\), joined (?P<joined>\d+) "
                      r"\([\d.]+/s\), sent (?P<sent>\d+) \([\d.]+/s\), durable batches \d+; "
                      r"unknown outcomes committed \d+, aborted \d+, pending \d+; waiting \d+ "
                      r"client records / \d+ CDC transactions; release point \d+, watermark \d+; "
                      r"lag (?P<lag>-|p50 [\d.]+ s, p99 [\d.]+ s, max [\d.]+ s); refused by "
                      r"isowatchd (?P<refused>\d+), CDC messages refused \d+, late rows \d+, "
                      r"input errors \d+, acknowledgements failed \d+$", re.M)
# The daemon's options: SI, and versions kept far enough below the final point (2^40 TSO units,
# over an hour) for the gaps of any history here (docs/collectors/tidb.md, "Deployment").
DAEMON_SETS = ["engine.level=si", "engine.retention=1099511627776"]


class Tools:
    def __init__(self, argv):
        self.cli, self.daemon, self.collector, self.producer, self.member = (
            os.path.abspath(a) for a in argv)


def start_daemon(tools, root):
    return Daemon(tools.daemon, root, DAEMON_SETS).start()


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
    args = [tools.producer, "--history", history, "--client-log",
            os.path.join(root, "client.jsonl")] + extra
    return spawn(args, os.path.join(root, "producer.log"))


def wait_file(path, proc, timeout=60):
    def there():
        check(proc.poll() is None, f"the producer exited with {proc.returncode}")
        return os.path.exists(path)

    wait_for(there, timeout, path, interval=0.05)
    return open(path).read().strip()


def collector_args(tools, root, daemon, source, data, state="state"):
    return [tools.collector, "--client-log", os.path.join(root, "client.jsonl"), "--to",
            daemon.target, "--state-dir", os.path.join(root, state), "--stream", "tidb",
            "--data", data, "--table", "isowatch_list" if data == "list" else "isowatch_kv",
            "--stall-timeout-s", "40"] + source


def summary(path, code):
    text = open(path).read()
    check(code == 0, f"isowatch-tidb exited with {code}: {text[-1500:]}")
    m = SUMMARY.search(text)
    check(m is not None, f"no summary line in {path}")
    return {k: int(v) for k, v in m.groupdict().items()}


def run_collector(args, root, name="collector"):
    path = os.path.join(root, f"{name}.log")
    with open(path, "a") as out:
        code = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, timeout=240).returncode
    return summary(path, code)


def wait_collector(proc, root, name):
    return summary(os.path.join(root, f"{name}.log"), proc.wait(timeout=240))


def verify(daemon, offline, statuses):
    stream = "tidb"
    s = daemon.wait_checked(stream)
    total = sum(statuses.values())
    check(s["committed_transactions"] == statuses["COMMITTED"],
          f"{s['committed_transactions']} committed transactions in isowatchd, "
          f"want {statuses['COMMITTED']}")
    online = daemon.violations(stream)
    want = Counter(comparable(v) for v in offline)
    got = Counter(comparable(v) for v in online)
    missing, extra = want - got, got - want
    check(not missing and not extra,
          f"stream {stream}: violations differ: missing {list(missing.items())[:5]}, extra "
          f"{list(extra.items())[:5]} (offline {len(offline)}, online {len(online)})")
    refused = daemon.metric("isowatch_refused_transactions_total", {})
    check(refused == 0, f"isowatchd refused {refused} transactions")
    kinds = Counter(v["anomaly"] for v in offline)
    log(f"   {stream}: {total} transactions; {len(online)} violations equal offline "
        f"({dict(sorted(kinds.items()))})")


def check_summary(r, statuses):
    total = sum(statuses.values())
    check(r["records"] == total and r["sent"] == total,
          f"{r['records']} records, {r['sent']} sent, want {total}")
    check(r["refused"] == 0 and r["missing"] == 0 and r["mismatches"] == 0,
          f"refused {r['refused']}, missing {r['missing']}, write mismatches {r['mismatches']}")
    check(r["unknown_committed"] + r["unknown_aborted"] > 0, "no unknown outcome was planted")
    check(r["cdc_only"] == 0, f"{r['cdc_only']} transactions from the CDC alone")


def check_resumed(r):
    check(r["refused"] == 0 and r["mismatches"] == 0 and r["missing"] == 0,
          f"after the restart: {r}")


def case_storage(tools, root):
    history, offline, statuses = generate(tools, root, "kv", 3, 600)
    sink = os.path.join(root, "sink")
    producer = start_producer(tools, root, history, ["--storage-dir", sink, "--seed", "2"])
    check(producer.wait(timeout=120) == 0, "the producer failed")
    daemon = start_daemon(tools, root)
    r = run_collector(collector_args(tools, root, daemon,
                                     ["--storage-dir", sink, "--storage-format", "canal-json"],
                                     "kv"), root)
    check_summary(r, statuses)
    verify(daemon, offline, statuses)
    daemon.stop()


class KafkaCase:
    """A history in the mock cluster (three partitions) and isowatchd. When `slow`, the producer
    sends a chunk of ten transactions every `interval_ms`, with TSOs of the time it sends them."""

    def __init__(self, tools, root, data, seed, txns, slow=False, interval_ms=200, producer=()):
        self.tools, self.root, self.data = tools, root, data
        self.history, self.offline, self.statuses = generate(tools, root, data, seed, txns)
        brokers_file = os.path.join(root, "brokers")
        table = "isowatch_list" if data == "list" else "isowatch_kv"
        extra = ["--chunk", "10", "--interval-ms", str(interval_ms), "--wall-clock"] if slow else []
        self.producer = start_producer(tools, root, self.history,
                                       ["--brokers-file", brokers_file, "--partitions", "3",
                                        "--data", data, "--table", table, "--seed", str(seed)]
                                       + extra + list(producer))
        self.brokers = wait_file(brokers_file, self.producer)
        self.daemon = start_daemon(tools, root)
        # The collector is not a member of its consumer group (it assigns itself every
        # partition): no session timeout holds anything after a kill.
        self.source = ["--kafka", self.brokers, "--topic", "ticdc", "--group", "isowatch-test"]

    def args(self, state="state", extra=(), daemon=None):
        return collector_args(self.tools, self.root, daemon or self.daemon, self.source, self.data,
                              state=state) + list(extra)

    def start(self, name, state="state", extra=(), daemon=None):
        return spawn(self.args(state, extra, daemon), os.path.join(self.root, f"{name}.log"))

    def wait_committed(self, n, proc, stream="tidb"):
        def enough():
            check(proc.poll() is None, "the collector ended before it was interrupted")
            s = self.daemon.stream(stream)
            return s is not None and s["committed_transactions"] >= n

        wait_for(enough, 120, f"{n} committed transactions in stream {stream}", interval=0.02)

    def stop(self):
        self.producer.send_signal(signal.SIGTERM)
        check(self.producer.wait(timeout=30) == 0, "the producer failed")
        self.daemon.stop()


def kill(proc):
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def case_kafka(tools, root, data="kv", seed=5):
    k = KafkaCase(tools, root, data, seed, 600)
    check_summary(run_collector(k.args(), root), k.statuses)
    verify(k.daemon, k.offline, k.statuses)
    k.stop()


def case_list(tools, root):
    case_kafka(tools, root, "list", 7)


def case_restart(tools, root):
    k = KafkaCase(tools, root, "kv", 9, 300, slow=True)
    first = k.start("first", extra=["--batch", "20"])
    k.wait_committed(60, first)
    kill(first)
    s = k.daemon.stream("tidb")
    check(not s["closed"], "the stream was closed before the collector was killed")
    log(f"   killed the collector with {s['committed_transactions']} committed transactions in "
        f"isowatchd")
    check_resumed(run_collector(k.args(extra=["--batch", "20"]), root))
    verify(k.daemon, k.offline, k.statuses)
    k.stop()


def case_daemon(tools, root):
    k = KafkaCase(tools, root, "kv", 11, 300, slow=True)
    collector = k.start("collector", extra=["--batch", "20", "--progress-ms", "300"])
    k.wait_committed(60, collector)
    before = k.daemon.stream("tidb")["committed_transactions"]
    k.daemon.kill_and_restart()
    after = k.daemon.stream("tidb")["committed_transactions"]
    log(f"   killed isowatchd with {before} committed transactions in it, {after} after its "
        f"restart")
    check(collector.poll() is None, "the collector ended while isowatchd was down")
    r = wait_collector(collector, root, "collector")
    check_summary(r, k.statuses)
    check(r["reconnects"] >= 1, f"the collector did not reconnect to isowatchd: {r}")
    verify(k.daemon, k.offline, k.statuses)
    progress = [m.groupdict() for m in PROGRESS.finditer(open(os.path.join(root,
                                                                          "collector.log")).read())]
    check(progress, "no progress line in the collector's output")
    check(any(int(p["rows"]) > 0 and int(p["joined"]) > 0 and p["lag"] != "-" for p in progress),
          f"no progress line with rows, joined transactions and lags: {progress[-3:]}")
    check(all(p["refused"] == "0" for p in progress), f"refusals in the progress: {progress}")
    k.stop()


def case_broker(tools, root):
    """The Kafka broker down for 3 s mid-stream (connections dropped, none accepted) and back up
    with its log: the collector waits it out and loses nothing."""
    k = KafkaCase(tools, root, "kv", 17, 300, slow=True,
                  producer=["--broker-down-after", "8", "--broker-down-ms", "3000"])
    collector = k.start("collector", extra=["--batch", "20"])
    r = wait_collector(collector, root, "collector")
    check("broker down after chunk 8" in open(os.path.join(root, "producer.log")).read(),
          "the producer did not take the broker down")
    check_summary(r, k.statuses)
    verify(k.daemon, k.offline, k.statuses)
    k.stop()


def case_both(tools, root):
    k = KafkaCase(tools, root, "kv", 13, 300, slow=True)
    first = k.start("first", extra=["--batch", "20"])
    k.wait_committed(60, first)
    k.daemon.kill()
    time.sleep(0.5)  # the collector finds isowatchd gone and reconnects, with batches unacked
    kill(first)
    k.daemon.start(k.daemon.grpc, k.daemon.http)
    s = k.daemon.stream("tidb")
    log(f"   killed isowatchd, then the collector; {s['committed_transactions']} committed "
        f"transactions in isowatchd after its restart")
    check_resumed(run_collector(k.args(extra=["--batch", "20"]), root))
    verify(k.daemon, k.offline, k.statuses)
    k.stop()


def resume_offsets(state_dir):
    """The Kafka offsets a collector's state file says it resumes from, by partition (None when
    it says none)."""
    path = os.path.join(state_dir, "state")
    if not os.path.exists(path):
        return None
    for line in open(path):
        if line.startswith("input kafka "):
            return [int(o) for o in line.split()[3].split(",")]
    return None


def case_rebalance(tools, root):
    # Chunks every 0.5 s (about 20 s in all): the producer is still going when the third
    # consumer commits, even when the collectors start slowly.
    k = KafkaCase(tools, root, "kv", 15, 400, slow=True, interval_ms=500)
    # The second collector streams the same history to an isowatchd of its own (one daemon
    # takes each transaction id once, whatever its stream).
    other_daemon = Daemon(tools.daemon, root, DAEMON_SETS, name="isowatchd-b").start()
    batch = ["--batch", "20"]
    first = k.start("first", extra=batch)
    other = k.start("other", state="state-b", extra=batch, daemon=other_daemon)
    k.wait_committed(60, first)
    # Until the first collector has acknowledged a watermark: its state file says where it
    # resumes in Kafka.
    state = os.path.join(root, "state")
    wait_for(lambda: any(o > 0 for o in resume_offsets(state) or []), 60,
             "Kafka offsets past the start in the collector's state file")
    # isowatchd stops acknowledging: the collectors' acknowledged offsets stay where they are
    # while the producer goes on.
    k.daemon.proc.send_signal(signal.SIGSTOP)
    try:
        time.sleep(1.5)
        acknowledged = resume_offsets(state)
        member = subprocess.run([tools.member, "--brokers", k.brokers, "--topic", "ticdc",
                                 "--group", "isowatch-test", "--linger-ms", "1000"],
                                capture_output=True, text=True, timeout=120)
        check(member.returncode == 0, f"kafka_group_member failed: {member.stdout}"
              f"{member.stderr[-2000:]}")
        joined = json.loads(member.stdout.strip().splitlines()[-1])
        log(f"   a third consumer joined the group, was assigned partitions "
            f"{joined['assigned']}, committed {joined['committed']} and left; the collector's "
            f"state file resumes at {acknowledged}")
        check(sorted(joined["assigned"]) == [0, 1, 2],
              f"the third consumer was assigned {joined['assigned']}, want every partition "
              f"(the collectors are not members of the group)")
        check(any(joined["committed"][str(p)] > o for p, o in enumerate(acknowledged)),
              "the group's offsets did not move past the collector's: the case tests nothing")
        kill(first)
    finally:
        k.daemon.proc.send_signal(signal.SIGCONT)
    log("   killed the first collector; started it again")
    again = run_collector(k.args(extra=batch), root, "first")
    check_resumed(again)
    r = wait_collector(other, root, "other")
    check_summary(r, k.statuses)
    # The group refuses the offsets of consumers outside it once it has had members (librdkafka's
    # mock cluster refuses them for good; a broker takes them again once the group is empty).
    check(again["ack_failures"] > 0 and r["ack_failures"] > 0,
          f"no Kafka commit was refused: {again}, {r}")
    verify(k.daemon, k.offline, k.statuses)
    verify(other_daemon, k.offline, k.statuses)
    other_daemon.stop()
    k.stop()


CASES = {"storage": case_storage, "kafka": case_kafka, "list": case_list,
         "restart": case_restart, "daemon": case_daemon, "both": case_both,
         "rebalance": case_rebalance, "broker": case_broker}


def main(argv):
    if len(argv) < 6:
        print(__doc__, file=sys.stderr)
        return 2
    tools = Tools(argv[1:6])
    cases = {name: (lambda root, case=case: case(tools, root)) for name, case in CASES.items()}
    return run_cases(cases, argv[6:] or ALL_CASES, "isowatch-tidb", "TiDB collector")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
