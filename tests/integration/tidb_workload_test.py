#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of isowatch-tidb's SQL workload against a real MariaDB server.

MariaDB speaks TiDB's protocol but has no timestamp oracle, so the workload runs with its test
double (`--testing-fake-tso`: TSOs from a local counter of the wall clock). Each case starts a
throwaway server (mariadb-install-db in a temporary directory, mariadbd on a free loopback port)
and checks what the workload recorded against the database itself:
  kv       registers, pessimistic mode, 8 sessions on 6 keys: lock waits and deadlocks happen
  list     lists (appends), optimistic mode named
  list-rc  lists at read committed, pessimistic
  live     the workload inside the collector (`isowatch-tidb workload --to ...`), its records
           joined with a changefeed that a small fake TiCDC in this script writes as a storage
           sink from the client log: every record reaches isowatchd once, joined
  bare     `workload --bare`: no timestamp queries, nothing recorded, no daemon allowed
  canary   the canary at 60 transactions per second, stopped by SIGTERM after 4 s
  restart  lists, the server killed with SIGKILL twice mid-run and started again: sessions
           reconnect, unknown outcomes are all-or-nothing in the table
For the record-only cases: the final table is what the committed writes and appends imply (the
last committed write of each key by commit timestamp, every committed append exactly once), no
aborted transaction's value is in the table or was read by anyone, every list read is a prefix of
the final list, and `isowatch check` (timestamps dropped: they are the double's, not MariaDB's)
finds the history valid at read committed with the adya checker (lists) and plume (registers).

Usage: tidb_workload_test.py ISOWATCH ISOWATCHD ISOWATCH_TIDB [CASE...]
Exits 77 (skipped) when mariadbd is not installed (deploy/setup-debian.sh installs it).
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
import threading
import time
import traceback
from collections import Counter, defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from postgres_test import Daemon, TestFailure, check, free_port, log  # noqa: E402

ALL_CASES = ["kv", "list", "list-rc", "live", "restart", "canary", "bare"]
SKIP = 77

SUMMARY = re.compile(r"(?P<attempted>\d+) transactions in [\d.]+ s: (?P<committed>\d+) committed, "
                     r"(?P<conflict>\d+) aborted by conflicts, (?P<other>\d+) aborted otherwise, "
                     r"(?P<unknown>\d+) unknown; (?P<unrecorded>\d+) unrecorded")


def which(name):
    for d in ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"]:
        p = os.path.join(d, name)
        if os.path.exists(p):
            return p
    return shutil.which(name)


class MariaDB:
    """A throwaway MariaDB server on loopback, its files in `root`/mariadb."""

    def __init__(self, root, durable=False):
        self.dir = os.path.join(root, "mariadb")
        # Durable: a commit is on disk before it is acknowledged, so that one survives kill -9.
        self.flush = "1" if durable else "0"
        self.data = os.path.join(self.dir, "data")
        self.socket = os.path.join(self.dir, "mysqld.sock")
        self.log_path = os.path.join(self.dir, "server.log")
        self.port = free_port()
        # A temporary directory of its own: servers bootstrapping side by side in the shared /tmp
        # clash on the names of their temporary tables.
        self.tmp = os.path.join(self.dir, "tmp")
        os.makedirs(self.tmp)
        user = ["--user=root"] if os.geteuid() == 0 else []
        r = subprocess.run([which("mariadb-install-db"), "--no-defaults", f"--datadir={self.data}",
                            f"--tmpdir={self.tmp}", "--auth-root-authentication-method=normal",
                            "--skip-test-db"] + user,
                           capture_output=True, text=True)
        check(r.returncode == 0, f"mariadb-install-db failed: {r.stdout}{r.stderr}")
        self.user = user
        self.start()

    def start(self):
        user = self.user
        self.proc = subprocess.Popen(
            [which("mariadbd"), "--no-defaults", f"--datadir={self.data}", f"--tmpdir={self.tmp}",
             f"--socket={self.socket}", f"--port={self.port}", "--bind-address=127.0.0.1",
             "--skip-grant-tables", f"--log-error={self.log_path}",
             f"--pid-file={os.path.join(self.dir, 'mariadbd.pid')}",
             "--innodb-buffer-pool-size=64M", f"--innodb-flush-log-at-trx-commit={self.flush}",
             "--max-connections=100"] + user,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            check(self.proc.poll() is None, f"mariadbd exited: see {self.log_path}")
            r = subprocess.run(self.client(["-e", "SELECT 1"]), capture_output=True, text=True)
            if r.returncode == 0:
                break
            check(time.monotonic() < deadline, "mariadbd did not accept connections in 60 s")
            time.sleep(0.2)

    def client(self, args):
        return [which("mariadb") or which("mysql"), "--no-defaults", f"--socket={self.socket}",
                "-uroot", "--batch", "--skip-column-names"] + args

    def sql(self, query):
        r = subprocess.run(self.client(["-e", query]), capture_output=True, text=True)
        check(r.returncode == 0, f"mariadb: {query}: {r.stderr}")
        return [line.split("\t") for line in r.stdout.splitlines()]

    def status(self, name):
        rows = self.sql(f"SHOW GLOBAL STATUS LIKE '{name}'")
        return int(rows[0][1]) if rows else 0

    def kill_and_restart(self):
        """kill -9, and the server started again on its files and port."""
        self.proc.kill()
        self.proc.wait()
        self.start()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def server_args(db):
    return ["--host", "127.0.0.1", "--port", str(db.port), "--user", "root",
            "--testing-fake-tso"]


def run_workload(tools, db, root, data, extra, name="workload"):
    out = os.path.join(root, f"{name}.jsonl")
    args = [tools.collector, "--data", data, "workload"] + server_args(db) + \
        ["--client-log-out", out] + extra
    log("$ " + " ".join(args))
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    with open(os.path.join(root, f"{name}.log"), "w") as f:
        f.write(r.stdout + r.stderr)
    log(r.stdout.strip())
    check(r.returncode == 0, f"isowatch-tidb exited with {r.returncode}: {r.stderr[-2000:]}")
    m = SUMMARY.search(r.stdout)
    check(m is not None, f"no summary in the output: {r.stdout}")
    return out, {k: int(v) for k, v in m.groupdict().items()}


def read_log(path):
    header, txns = None, []
    for line in open(path):
        rec = json.loads(line)
        if "header" in rec:
            header = rec["header"]
        else:
            txns.append(rec["txn"])
    return header, txns


def ts(t, field):
    return int(t[field]["physical"]) if field in t else None


def value(op):
    return int(op["value"]["int"]) if "value" in op else None


def elements(op):
    return [int(e["int"]) for e in op.get("list", {}).get("elements", [])]


def check_history(db, txns, table, data, summary, durable_reads_only=False):
    """The recorded history against the final table. With `durable_reads_only` (a server that
    crashed), only the reads of transactions whose commit was acknowledged with writes are held to
    the final table: InnoDB shows a commit before its log is on disk, so a transaction that made
    no durable commit may have read one the crash undid; an acknowledged writer's log flush
    covers every commit it read."""
    statuses = Counter(t["status"] for t in txns)
    check(statuses["COMMITTED"] == summary["committed"] and
          statuses["ABORTED"] == summary["conflict"] + summary["other"] - summary["unrecorded"] and
          statuses.get("UNKNOWN", 0) == summary["unknown"],
          f"the log's outcomes {dict(statuses)} differ from the summary {summary}")
    ids = [t["id_str"] for t in txns]
    check(len(ids) == len(set(ids)), "an id appears twice in the log")
    committed = [t for t in txns if t["status"] == "COMMITTED"]
    aborted = [t for t in txns if t["status"] == "ABORTED"]
    for t in committed:
        check("start" in t, f"{t['id_str']} has no start ts")
        if t.get("resolved"):
            continue  # an unknown outcome the table showed committed: no commit ts was learnt
        writes = [op for op in t.get("ops", []) if op["kind"] in ("WRITE", "APPEND")]
        check(not writes or "commit" in t, f"committed writer {t['id_str']} has no commit ts")
        if "commit" in t:
            check(ts(t, "commit") > ts(t, "start"), f"{t['id_str']} commits before it starts")
    table_rows = {int(k): (v, tid) for k, v, tid in db.sql(f"SELECT k, v, t FROM test.{table}")}
    aborted_values = {value(op) for t in aborted for op in t.get("ops", [])
                      if op["kind"] in ("WRITE", "APPEND")}
    committed_values = {value(op) for t in committed for op in t.get("ops", [])
                        if op["kind"] in ("WRITE", "APPEND")}
    check(not aborted_values & committed_values, "a value was written twice")
    if data == "kv":
        # The last committed write of each key, by commit ts: the double draws a commit ts while
        # the transaction holds its row locks, so writers of one key commit in that order.
        last = {}
        for t in sorted((t for t in committed if "commit" in t), key=lambda t: ts(t, "commit")):
            for op in t.get("ops", []):
                if op["kind"] == "WRITE":
                    last[int(op["key"]["int"])] = (value(op), t["id_str"])
        got = {k: (int(v), tid) for k, (v, tid) in table_rows.items()}
        check(got == last, f"the table is not what the committed writes imply: table {got}, "
              f"writes {last}")
        for t in txns:
            for op in t.get("ops", []):
                if op["kind"] == "READ" and value(op) is not None:
                    check(value(op) not in aborted_values or t["status"] != "COMMITTED",
                          f"{t['id_str']} read {value(op)}, written by an aborted transaction")
                    check(value(op) in committed_values or value(op) in aborted_values,
                          f"{t['id_str']} read {value(op)}, which nobody wrote")
        return len(last)
    appended = defaultdict(list)
    for t in committed:
        for op in t.get("ops", []):
            if op["kind"] == "APPEND":
                appended[int(op["key"]["int"])].append(value(op))
    final = {k: [int(e) for e in v.split(",")] if v else [] for k, (v, _) in table_rows.items()}
    for k, lst in final.items():
        check(len(lst) == len(set(lst)), f"key {k}: an element twice in {lst}")
        check(sorted(lst) == sorted(appended[k]),
              f"key {k}: the list is not the committed appends: missing "
              f"{set(appended[k]) - set(lst)}, extra {set(lst) - set(appended[k])}")
        check(not set(lst) & aborted_values, f"key {k}: an aborted append is in the list")
    check(set(appended) <= set(final), "a committed append's key is not in the table")
    reads = 0
    for t in txns:
        if durable_reads_only and (t["status"] != "COMMITTED" or t.get("resolved") or not any(
                op["kind"] == "APPEND" for op in t.get("ops", []))):
            continue
        own = defaultdict(list)
        for op in t.get("ops", []):
            k = int(op["key"]["int"])
            if op["kind"] == "APPEND":
                own[k].append(value(op))
            elif op["kind"] == "LIST_READ":
                seen = elements(op)
                # The reader's own appends at the end are its own; the rest is a committed list.
                mine = own[k]
                while seen and mine and seen[-1] == mine[-1]:
                    seen, mine = seen[:-1], mine[:-1]
                whole = final.get(k, [])
                check(seen == whole[:len(seen)],
                      f"{t['id_str']} read key {k} as {elements(op)}, not a prefix of {whole}")
                reads += 1
    check(reads > 0, "no list was read")
    return len(final)


def offline_check(tools, root, path, data):
    """isowatch check on the recorded history without its (test double's) timestamps."""
    bare = os.path.join(root, "bare.jsonl")
    r = subprocess.run([tools.cli, "convert", path, bare, "--to", "native-json",
                        "--drop-timestamps"], capture_output=True, text=True)
    check(r.returncode == 0, f"isowatch convert: {r.stdout}{r.stderr}")
    checker = "adya" if data == "list" else "plume"
    args = [tools.cli, "check", bare, "--checker", checker, "--level", "rc"]
    r = subprocess.run(args, capture_output=True, text=True)
    log("$ " + " ".join(args) + "\n" + r.stdout.strip())
    check(r.returncode == 0, f"isowatch check: exit {r.returncode}: {r.stdout}{r.stderr}")


def record_only_case(tools, root, data, mode, isolation):
    db = MariaDB(root)
    try:
        waits0, deadlocks0 = db.status("Innodb_row_lock_waits"), db.status("Innodb_deadlocks")
        path, s = run_workload(tools, db, root, data,
                               ["--mode", mode, "--isolation", isolation, "--txns", "600",
                                "--sessions", "8", "--keys", "6", "--ops-per-txn", "4",
                                "--dist", "uniform", "--retries", "2", "--lock-wait-timeout-s",
                                "1"])
        waits = db.status("Innodb_row_lock_waits") - waits0
        deadlocks = db.status("Innodb_deadlocks") - deadlocks0
        log(f"   {s}; row lock waits {waits}, deadlocks {deadlocks}")
        check(s["committed"] >= 300, f"only {s['committed']} of 600 transactions committed")
        check(s["conflict"] > 0, "no conflict aborted a transaction: there was no contention")
        check(waits > 0, "no row lock wait happened")
        check(deadlocks > 0, "no deadlock happened")
        check(s["unknown"] == 0, f"{s['unknown']} unknown outcomes on a healthy server")
        header, txns = read_log(path)
        check(header is not None and header["metadata"]["data_model"] == data,
              f"bad header {header}")
        table = "isowatch_list" if data == "list" else "isowatch_kv"
        keys = check_history(db, txns, table, data, s)
        log(f"   {len(txns)} records agree with the final table ({keys} keys)")
        offline_check(tools, root, path, data)
    finally:
        db.stop()


def case_kv(tools, root):
    record_only_case(tools, root, "kv", "pessimistic", "repeatable-read")


def case_list(tools, root):
    record_only_case(tools, root, "list", "optimistic", "repeatable-read")


def case_list_rc(tools, root):
    record_only_case(tools, root, "list", "pessimistic", "read-committed")


def resolve_unknown(db, txns, table):
    """Decides each unknown outcome by the final table, as the changefeed would: a transaction's
    appends are all in it (committed) or none is (aborted). Returns (committed, aborted)."""
    present = set()
    for _, v, _ in db.sql(f"SELECT k, v, t FROM test.{table}"):
        present.update(int(e) for e in v.split(",") if e)
    decided = Counter()
    for t in txns:
        if t["status"] != "UNKNOWN":
            continue
        appends = [value(op) for op in t.get("ops", []) if op["kind"] == "APPEND"]
        there = [a in present for a in appends]
        check(all(there) or not any(there),
              f"{t['id_str']}: only some of its appends {appends} are in the table")
        t["status"] = "COMMITTED" if appends and all(there) else "ABORTED"
        t["resolved"] = True
        decided[t["status"]] += 1
    return decided["COMMITTED"], decided["ABORTED"]


def case_restart(tools, root):
    """The server killed with SIGKILL twice while the workload runs, and started again on its
    files: the sessions reconnect, a transaction whose connection broke before COMMIT is aborted
    and one whose COMMIT got no answer is unknown; the unknown ones turn out all-or-nothing in
    the table, and with them decided the recorded history agrees with it as in the other cases."""
    db = MariaDB(root, durable=True)
    try:
        out = os.path.join(root, "workload.jsonl")
        args = [tools.collector, "--data", "list", "workload"] + server_args(db) + \
            ["--client-log-out", out, "--mode", "optimistic", "--txns", "6000", "--sessions", "8",
             "--keys", "20", "--ops-per-txn", "4", "--dist", "uniform", "--retries", "1"]
        log("$ " + " ".join(args))
        with open(os.path.join(root, "workload.log"), "w") as wlog:
            proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=wlog, text=True)
            kills = 0
            for _ in range(2):
                time.sleep(1.5)
                if proc.poll() is not None:
                    break
                db.kill_and_restart()
                kills += 1
            stdout, _ = proc.communicate(timeout=300)
        log(stdout.strip())
        check(proc.returncode == 0, f"isowatch-tidb exited with {proc.returncode}")
        check(kills == 2, f"the workload ended before the server was killed twice ({kills})")
        m = SUMMARY.search(stdout)
        check(m is not None, f"no summary in the output: {stdout}")
        s = {k: int(v) for k, v in m.groupdict().items()}
        check(s["other"] > 0, "no transaction was aborted by a lost connection")
        # Durable commits take long enough that some session is in COMMIT at a kill (4 to 11
        # in each of the runs this test was written with).
        check(s["unknown"] > 0, "no COMMIT was left without an answer")
        header, txns = read_log(out)
        statuses = Counter(t["status"] for t in txns)
        check(statuses.get("UNKNOWN", 0) == s["unknown"],
              f"the log has {statuses.get('UNKNOWN', 0)} unknown outcomes, the summary {s}")
        committed, aborted = resolve_unknown(db, txns, "isowatch_list")
        log(f"   {s}; unknown outcomes decided by the table: {committed} committed, {aborted} "
            f"aborted")
        resolved = dict(s, committed=s["committed"] + committed,
                        other=s["other"] + aborted, unknown=0)
        keys = check_history(db, txns, "isowatch_list", "list", resolved, durable_reads_only=True)
        log(f"   {len(txns)} records agree with the final table ({keys} keys)")
    finally:
        db.stop()


def case_bare(tools, root):
    """`workload --bare`, as the application would run without a collector (for measuring the
    collector's cost): it runs and commits, writes no client log, and refuses a daemon."""
    db = MariaDB(root)
    try:
        args = [tools.collector, "--data", "kv", "workload"] + server_args(db)[:-1] + \
            ["--bare", "--txns", "300", "--sessions", "4", "--keys", "50", "--dist", "uniform"]
        log("$ " + " ".join(args))
        r = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=root)
        log(r.stdout.strip())
        check(r.returncode == 0, f"isowatch-tidb --bare exited with {r.returncode}: {r.stderr}")
        check("bare, nothing recorded" in r.stdout, f"not a bare run: {r.stdout}")
        m = SUMMARY.search(r.stdout)
        check(m is not None, f"no summary in the output: {r.stdout}")
        s = {k: int(v) for k, v in m.groupdict().items()}
        check(s["committed"] >= 250, f"only {s['committed']} of 300 transactions committed")
        rows = db.sql("SELECT COUNT(*) FROM test.isowatch_kv")
        check(int(rows[0][0]) > 0, "the bare workload wrote nothing to its table")
        check(glob.glob(os.path.join(root, "*.jsonl")) == [], "a bare run wrote a client log")
        r = subprocess.run(args + ["--to", "127.0.0.1:1"], capture_output=True, text=True,
                           timeout=60)
        check(r.returncode == 2 and "--bare runs the workload alone" in r.stderr,
              f"--bare with a daemon: exit {r.returncode}: {r.stderr}")
    finally:
        db.stop()


def case_canary(tools, root):
    """The canary at 60 transactions per second until SIGTERM: it stops cleanly after its
    current transactions, at about the rate asked, and what it recorded agrees with the table."""
    db = MariaDB(root)
    try:
        out = os.path.join(root, "canary.jsonl")
        args = [tools.collector, "--data", "list", "canary"] + server_args(db) + \
            ["--client-log-out", out, "--rate", "60", "--sessions", "2", "--keys", "8"]
        log("$ " + " ".join(args))
        with open(os.path.join(root, "canary.log"), "w") as clog:
            proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=clog, text=True)
            time.sleep(4)
            check(proc.poll() is None, f"the canary ended by itself with {proc.returncode}")
            proc.send_signal(signal.SIGTERM)
            stdout, _ = proc.communicate(timeout=60)
        log(stdout.strip())
        check(proc.returncode == 0, f"the canary exited with {proc.returncode} after SIGTERM")
        m = SUMMARY.search(stdout)
        check(m is not None, f"no summary in the output: {stdout}")
        s = {k: int(v) for k, v in m.groupdict().items()}
        # Four seconds at 60/s (and its start-up): far fewer would mean the rate is not kept,
        # far more that it is not limited.
        check(60 <= s["attempted"] <= 400, f"{s['attempted']} transactions in about 4 s at 60/s")
        header, txns = read_log(out)
        check(len(txns) == s["attempted"] - s["unrecorded"],
              f"{len(txns)} records for {s['attempted']} transactions")
        keys = check_history(db, txns, "isowatch_canary_list", "list", s)
        log(f"   {len(txns)} records agree with the final table ({keys} keys)")
    finally:
        db.stop()


class FakeTicdc(threading.Thread):
    """A storage sink written from the client log, as TiCDC would write the rows of the
    transactions that log says committed: one canal-json line per row with the commit ts and the
    writer's id in t. The checkpoint is the client's floor (every session's last start ts: the
    transactions still to come commit above it) and, once the log has not grown for 8 s (the
    workload is over), the clock."""

    def __init__(self, root, log_path, sessions, table, data):
        super().__init__(daemon=True)
        self.root, self.log_path, self.sessions = root, log_path, sessions
        self.table, self.list = table, data == "list"
        self.stop = threading.Event()
        self.error = None
        self.files = 0
        schema_dir = os.path.join(root, "test", table, "meta")
        os.makedirs(schema_dir)
        self.write(os.path.join(schema_dir, "schema_1_0000000000.json"), json.dumps(
            {"Table": table, "Schema": "test", "Version": 1, "TableVersion": 1, "Query": "",
             "TableColumns": [{"ColumnName": "k", "ColumnType": "BIGINT", "ColumnIsPk": "true"},
                              {"ColumnName": "v", "ColumnType": "TEXT"},
                              {"ColumnName": "t", "ColumnType": "VARCHAR"}],
             "TableColumnsTotal": "3"}))
        os.makedirs(os.path.join(root, "test", table, "1"))

    @staticmethod
    def write(path, text):
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.rename(path + ".tmp", path)

    def rows(self, t):
        written = {}
        for op in t.get("ops", []):
            if op["kind"] in ("WRITE", "APPEND"):
                k = int(op["key"]["int"])
                v = str(value(op))
                written[k] = written[k] + "," + v if self.list and k in written else v
        commit = ts(t, "commit")
        return [json.dumps({"id": 0, "database": "test", "table": self.table, "pkNames": ["k"],
                            "isDdl": False, "type": "UPDATE", "es": 0, "ts": 0, "sql": "",
                            "sqlType": {"k": -5, "v": 12, "t": 12},
                            "mysqlType": {"k": "bigint", "v": "text", "t": "varchar"},
                            "old": None, "data": [{"k": str(k), "v": v, "t": t["id_str"]}],
                            "_tidb": {"commitTs": commit}}) for k, v in sorted(written.items())]

    def run(self):
        try:
            self.loop()
        except Exception as e:  # reported by the test
            self.error = e

    def loop(self):
        offset, last_growth, floors, checkpoint = 0, time.monotonic(), {}, 0
        while not self.stop.is_set():
            lines = []
            if os.path.exists(self.log_path):
                with open(self.log_path) as f:
                    f.seek(offset)
                    chunk = f.read()
                complete = chunk[:chunk.rfind("\n") + 1]
                offset += len(complete.encode())
                lines = [line for line in complete.splitlines() if line]
            if lines:
                last_growth = time.monotonic()
            out = []
            for line in lines:
                rec = json.loads(line)
                t = rec.get("txn")
                if t is None:
                    continue
                floors[t["session_str"]] = ts(t, "start")
                if t["status"] == "COMMITTED" and "commit" in t:
                    if ts(t, "commit") < checkpoint:
                        raise TestFailure(f"{t['id_str']} committed at {ts(t, 'commit')}, below "
                                          f"the checkpoint {checkpoint} already written")
                    out += self.rows(t)
            if out:
                self.files += 1
                self.write(os.path.join(self.root, "test", self.table, "1",
                                        f"CDC{self.files:020}.json"), "\n".join(out) + "\n")
            if time.monotonic() - last_growth > 8:
                new = int(time.time() * 1000) << 18
            elif len(floors) == self.sessions:
                new = min(floors.values()) + 1
            else:
                new = 0
            if new > checkpoint:
                checkpoint = new
                self.write(os.path.join(self.root, "metadata"),
                           json.dumps({"checkpoint-ts": checkpoint}))
            time.sleep(0.05)


def case_live(tools, root):
    db = MariaDB(root)
    daemon = Daemon(tools.daemon, root, [])
    sink = os.path.join(root, "sink")
    os.makedirs(sink)
    client_log = os.path.join(root, "client.jsonl")
    fake = FakeTicdc(sink, client_log, 4, "isowatch_list", "list")
    fake.start()
    try:
        args = [tools.collector, "--data", "list", "--to", daemon.target, "--storage-dir", sink,
                "--storage-format", "canal-json", "--stream", "tidb-live", "--state-dir",
                os.path.join(root, "state"), "--stall-timeout-s", "60", "workload"] + \
            server_args(db) + ["--client-log-out", client_log, "--txns", "400", "--sessions",
                               "4", "--keys", "20", "--dist", "uniform", "--retries", "1",
                               "--lock-wait-timeout-s", "1", "--mode", "optimistic"]
        log("$ " + " ".join(args))
        r = subprocess.run(args, capture_output=True, text=True, timeout=300)
        with open(os.path.join(root, "collector.log"), "w") as f:
            f.write(r.stdout + r.stderr)
        log(r.stdout.strip())
        check(fake.error is None, f"the fake TiCDC failed: {fake.error}")
        check(r.returncode == 0, f"isowatch-tidb exited with {r.returncode}: {r.stderr[-2000:]}")
        m = SUMMARY.search(r.stdout)
        check(m is not None, f"no workload summary: {r.stdout}")
        s = {k: int(v) for k, v in m.groupdict().items()}
        j = re.search(r"(\d+) client records in [\d.]+ s; sent (\d+) in \d+ batches, (\d+) refused; "
                      r"joined (\d+), client only (\d+), CDC only (\d+)", r.stdout)
        check(j is not None, f"no collector summary: {r.stdout}")
        records, sent, refused, joined, client_only, cdc_only = map(int, j.groups())
        _, txns = read_log(client_log)
        writers = [t for t in txns if t["status"] == "COMMITTED" and
                   any(op["kind"] == "APPEND" for op in t.get("ops", []))]
        check(records == len(txns) == sent, f"{records} records, {sent} sent, {len(txns)} logged")
        check(refused == 0 and cdc_only == 0, f"refused {refused}, CDC only {cdc_only}")
        check(joined == len(writers), f"joined {joined}, want every committed writer "
              f"({len(writers)})")
        st = daemon.wait_checked("tidb-live")
        check(st["committed_transactions"] == s["committed"],
              f"the daemon has {st['committed_transactions']} committed, the workload "
              f"{s['committed']}")
        check(st["ingested_transactions"] == len(txns),
              f"the daemon has {st['ingested_transactions']} transactions, the log {len(txns)}")
        refused = daemon.metric("isowatch_refused_transactions_total", {})
        check(refused == 0, f"isowatchd refused {refused} transactions")
        v = daemon.violations()
        log(f"   {len(txns)} records, {joined} joined; isowatchd (SI on the double's "
            f"timestamps, not MariaDB's): {Counter(x['anomaly'] for x in v)}")
        daemon.stop()
    finally:
        fake.stop.set()
        daemon.proc.kill()
        db.stop()


CASES = {"kv": case_kv, "list": case_list, "list-rc": case_list_rc, "live": case_live,
         "restart": case_restart, "canary": case_canary, "bare": case_bare}


class Tools:
    def __init__(self, argv):
        self.cli, self.daemon, self.collector = (os.path.abspath(a) for a in argv)


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    if which("mariadbd") is None or which("mariadb-install-db") is None:
        log("mariadbd is not installed (deploy/setup-debian.sh installs mariadb-server): skipped")
        return SKIP
    tools = Tools(argv[1:4])
    cases = argv[4:] or ALL_CASES
    failed = []
    for name in cases:
        root = tempfile.mkdtemp(prefix=f"isowatch-tidbw-{name}-")
        os.chmod(root, 0o755)
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
    log("all TiDB workload tests passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
