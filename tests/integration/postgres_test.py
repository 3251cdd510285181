#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of isowatch-pg against a real PostgreSQL 15 and isowatchd.

Each case starts a throwaway cluster (initdb in a temporary directory, wal_level=logical, a free
port on loopback), an isowatchd on free ports with its store in the same directory, runs
isowatch-pg, waits until the daemon has checked the whole stream, and stops everything:
  rr       repeatable read, key-value, contention (few keys, many sessions): SI holds, no violation
  rr-list  the same with lists (appends)
  ser      serializable, with the adya plug-in at SER on windows beside the online SI check: no
           violation
  rc       read committed checked as SI: lost updates (NOCONFLICT) and reads outside the
           transaction's snapshot (EXT; INT when the read repeats an earlier one) are found,
           each with a readable counterexample, and nothing else
  restart  repeatable read; PostgreSQL restarted (immediate shutdown) mid-run, then isowatchd
           killed with SIGKILL and started again on its store, then the collector killed with
           SIGKILL and started again: every committed transaction (counted by an independent
           test_decoding slot) is in the daemon once, nothing refused, no violation
  canary   the canary on its own table, stopped by SIGTERM and started again: its stream stays
           open and resumes, no violation
  tls      to an isowatchd that asks for TLS, a client certificate and a token (certificates made
           with `openssl`): refused without the token, every transaction in the daemon with it

Usage: postgres_test.py PATH/TO/isowatchd PATH/TO/isowatch-pg [CASE...]
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
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_util  # noqa: E402
from daemon_util import TestFailure, check, free_port, log, run_cases  # noqa: E402

ALL_CASES = ["rr", "rr-list", "ser", "rc", "restart", "canary", "tls"]


def pg_bin():
    for d in ["/usr/lib/postgresql/15/bin"] + sorted(glob.glob("/usr/lib/postgresql/*/bin")):
        if os.path.exists(os.path.join(d, "postgres")):
            return d
    raise TestFailure("no PostgreSQL server binaries under /usr/lib/postgresql "
                      "(deploy/setup-debian.sh installs postgresql-15)")


class Cluster:
    """A throwaway PostgreSQL cluster, run as the `postgres` user when we are root."""

    def __init__(self, root):
        self.bin = pg_bin()
        self.dir = os.path.join(root, "pg")
        self.data = os.path.join(self.dir, "data")
        self.log_path = os.path.join(self.dir, "server.log")
        self.port = free_port()
        self.proc = None
        os.makedirs(self.dir)
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            os.chmod(root, 0o755)
        self.run(["initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "--no-sync",
                  "-E", "UTF8", "--locale=C"])
        self.dsn = f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def command(self, args):
        cmd = [os.path.join(self.bin, args[0])] + args[1:]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--"] + cmd
        return cmd

    def run(self, args):
        r = subprocess.run(self.command(args), capture_output=True, text=True)
        check(r.returncode == 0, f"{args[0]} failed: {r.stdout}{r.stderr}")
        return r.stdout

    def start(self):
        logf = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            self.command(["postgres", "-D", self.data, "-p", str(self.port),
                          "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.dir}",
                          "-c", "wal_level=logical", "-c", "max_wal_senders=10",
                          "-c", "max_replication_slots=10", "-c", "max_connections=60",
                          "-c", "fsync=off", "-c", "full_page_writes=off",
                          # Deadlocks are part of a contended workload: find them quickly.
                          "-c", "deadlock_timeout=20ms"]),
            stdout=logf, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            r = subprocess.run(["psql", self.dsn, "-Atc", "SELECT 1"], capture_output=True,
                               text=True)
            if r.returncode == 0:
                return
            check(self.proc.poll() is None, f"postgres exited: see {self.log_path}")
            time.sleep(0.1)
        raise TestFailure("postgres did not accept connections within 60 s")

    def restart_immediate(self):
        """An immediate shutdown (no checkpoint: recovery replays the WAL), then a start."""
        self.run(["pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop"])
        self.proc.wait(timeout=30)
        self.start()

    def sql(self, query):
        r = subprocess.run(["psql", self.dsn, "-v", "ON_ERROR_STOP=1", "-Atc", query],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"psql: {query}: {r.stderr}")
        return r.stdout.strip()

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        # The server itself, not runuser in front of it: pg_ctl signals the postmaster.
        subprocess.run(self.command(["pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop"]),
                       capture_output=True)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Daemon(daemon_util.Daemon):
    """isowatchd at SI, started at once, keeping versions 64 MiB of WAL below the final point:
    room for transactions that long (docs/collectors/postgres.md, "Configuring isowatchd")."""

    def __init__(self, path, root, sets):
        super().__init__(path, root, ["engine.level=si", "engine.retention=67108864"] + sets)
        self.start()


SUMMARY = re.compile(
    r"(?P<attempted>\d+) transactions in [\d.]+ s: (?P<committed>\d+) committed, "
    r"(?P<conflict>\d+) aborted by conflicts, (?P<other>\d+) aborted otherwise, "
    r"(?P<unknown>\d+) unknown; sent (?P<sent>\d+) in \d+ batches, (?P<refused>\d+) refused")


def collector_args(path, cluster, daemon, root, stream, isolation, extra):
    return [path, "workload", "--dsn", cluster.dsn, "--to", daemon.target,
            "--isolation", isolation, "--stream", stream,
            "--state-dir", os.path.join(root, "collector-state"), "--slot", "isowatch_test",
            "--publication", "isowatch_test"] + extra


def run_collector(args, root, timeout=300):
    log("$ " + " ".join(args))
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    with open(os.path.join(root, "collector.log"), "a") as f:
        f.write(r.stdout + r.stderr)
    log(r.stdout.strip())
    check(r.returncode == 0, f"isowatch-pg exited with {r.returncode}: {r.stderr[-2000:]}")
    m = SUMMARY.search(r.stdout)
    check(m is not None, f"no summary in the collector's output: {r.stdout}")
    return {k: int(v) for k, v in m.groupdict().items()}


def contended_workload(path, cluster, daemon, root, stream, isolation, data="kv", txns=1000,
                       keys=10):
    s = run_collector(collector_args(path, cluster, daemon, root, stream, isolation,
                                     ["--txns", str(txns), "--sessions", "8", "--keys", str(keys),
                                      "--ops-per-txn", "4", "--read-ratio", "0.5", "--dist",
                                      "uniform", "--data", data, "--retries", "2"]), root)
    check(s["committed"] >= txns // 4, f"only {s['committed']} of {txns} transactions committed")
    check(s["refused"] == 0, f"isowatchd refused {s['refused']} transactions")
    st = daemon.wait_checked(stream)
    check(st["committed_transactions"] == s["committed"],
          f"the daemon has {st['committed_transactions']} committed transactions, the collector "
          f"committed {s['committed']}")
    check(st["ingested_transactions"] == s["committed"] + s["conflict"] + s["other"] + s["unknown"],
          f"the daemon has {st['ingested_transactions']} transactions, the collector recorded "
          f"{s}")
    # Every read was judged: none needed state the engine had already collected.
    misses = daemon.status()["counts"]["horizon_misses"]
    check(misses == 0, f"{misses} reads left unjudged (horizon misses)")
    return s, st


def case_rr(tools, root, data="kv"):
    isowatchd, pgc = tools
    cluster = Cluster(root)
    cluster.start()
    daemon = Daemon(isowatchd, root, [])
    try:
        s, _ = contended_workload(pgc, cluster, daemon, root, "pg-rr", "repeatable-read", data)
        check(s["conflict"] > 0, "no serialization failure: the workload had no contention")
        v = daemon.violations()
        check(v == [], f"{len(v)} violations at repeatable read, want none: {v[:3]}")
        daemon.stop()
    finally:
        daemon.proc.kill()
        cluster.stop()


def case_rr_list(tools, root):
    case_rr(tools, root, data="list")


def case_tls(tools, root):
    """The collector to an isowatchd that asks for TLS, a client certificate and a token
    (docs/security.md); without the token it is refused and says so."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from tls_test import Pki  # the certificates, made with `openssl`
    isowatchd, pgc = tools
    pki = Pki(root)
    cluster = Cluster(root)
    cluster.start()
    daemon = Daemon(isowatchd, root, [f"grpc.tls.cert_file={pki.path('server.pem')}",
                                      f"grpc.tls.key_file={pki.path('server.key')}",
                                      f"grpc.tls.client_ca_file={pki.path('ca.pem')}",
                                      f"grpc.auth.token_file={pki.token}"])
    tls = ["--tls-ca", pki.path("ca.pem"), "--tls-cert", pki.path("client.pem"),
           "--tls-key", pki.path("client.key")]
    try:
        args = collector_args(pgc, cluster, daemon, root, "pg-tls", "repeatable-read",
                              tls + ["--txns", "300"])
        r = subprocess.run(args, capture_output=True, text=True, timeout=300)
        check(r.returncode != 0, f"isowatch-pg without the token got through: {r.stdout}")
        check("needs a bearer token" in r.stdout + r.stderr,
              f"isowatch-pg without the token does not say why: {r.stdout} {r.stderr}")
        s = run_collector(args + ["--token-file", pki.token], root)
        check(s["refused"] == 0, f"isowatchd refused {s['refused']} transactions")
        st = daemon.wait_checked("pg-tls")
        check(st["ingested_transactions"] == s["committed"] + s["conflict"] + s["other"] +
              s["unknown"], f"the daemon has {st['ingested_transactions']} transactions, the "
              f"collector recorded {s}")
        daemon.stop()
    finally:
        daemon.proc.kill()
        cluster.stop()


def case_ser(tools, root):
    isowatchd, pgc = tools
    cluster = Cluster(root)
    cluster.start()
    daemon = Daemon(isowatchd, root, ["windows.checkers=adya", "checkers.adya.levels=ser",
                                      "windows.size=300", "windows.overlap=50"])
    try:
        s, _ = contended_workload(pgc, cluster, daemon, root, "pg-ser", "serializable")
        check(s["conflict"] > 0, "no serialization failure: the workload had no contention")
        deadline = time.monotonic() + 120
        while daemon.metric("isowatch_windows_sealed_total", {}) > \
                daemon.metric("isowatch_window_checks_total", {"checker": "adya"}):
            check(time.monotonic() < deadline, "windows sealed but not checked within 120 s")
            time.sleep(0.1)
        checked = daemon.metric("isowatch_window_checks_total",
                                {"checker": "adya", "outcome": "checked"})
        check(checked >= 1, f"adya checked {checked} windows, want at least one")
        v = daemon.violations()
        check(v == [], f"{len(v)} violations at serializable, want none: {v[:3]}")
        daemon.stop()
    finally:
        daemon.proc.kill()
        cluster.stop()


def case_rc(tools, root):
    isowatchd, pgc = tools
    cluster = Cluster(root)
    cluster.start()
    daemon = Daemon(isowatchd, root, [])
    try:
        contended_workload(pgc, cluster, daemon, root, "pg-rc", "read-committed", keys=5)
        v = daemon.violations()
        kinds = {x["anomaly"] for x in v}
        log(f"read committed checked as SI: {len(v)} violations, kinds {sorted(kinds)}")
        check("NOCONFLICT" in kinds, "no lost update (NOCONFLICT) found at read committed")
        check("EXT" in kinds, "no read outside the snapshot (EXT) found at read committed")
        for anomaly in ("NOCONFLICT", "EXT"):
            example = next(x for x in v if x["anomaly"] == anomaly)
            log(f"{anomaly}: {json.dumps(example)}")
        for x in v:
            check(x["txns"] and x["explanation"], f"a violation without a counterexample: {x}")
            check(x["key"] is not None or x["anomaly"] == "SESSION", f"no key: {x}")
            if x["anomaly"] == "EXT":
                check(x["expected"] and x["observed"], f"EXT without values: {x}")
        # A read that repeats an earlier one of its transaction and returns what a later commit
        # wrote is INT (the transaction disagrees with itself); SESSION never happens in
        # PostgreSQL, whose next transaction always sees the session's last commit.
        check(kinds <= {"NOCONFLICT", "EXT", "INT"},
              f"unexpected kinds at read committed: {sorted(kinds)}")
        daemon.stop()
    finally:
        daemon.proc.kill()
        cluster.stop()


def case_restart(tools, root):
    isowatchd, pgc = tools
    cluster = Cluster(root)
    cluster.start()
    # An independent count of the committed workload transactions: every one emits a
    # transactional logical message, which a test_decoding slot of our own sees once.
    cluster.sql("SELECT pg_create_logical_replication_slot('audit', 'test_decoding')")
    daemon = Daemon(isowatchd, root, [])
    collector = None
    try:
        args = collector_args(pgc, cluster, daemon, root, "pg-restart", "repeatable-read",
                              ["--sessions", "4", "--keys", "50", "--ops-per-txn", "4",
                               "--dist", "uniform", "--rate", "400", "--retries", "2"])
        log("$ " + " ".join(args + ["--txns", "1000000"]))
        collector = subprocess.Popen(args + ["--txns", "1000000", "--progress-ms", "1000"],
                                     stdout=open(os.path.join(root, "collector-1.log"), "w"),
                                     stderr=subprocess.STDOUT)
        daemon.wait_committed("pg-restart", 400)
        log("restarting PostgreSQL (immediate shutdown)")
        cluster.restart_immediate()
        before = daemon.stream("pg-restart")["committed_transactions"]
        daemon.wait_committed("pg-restart", before + 300)
        log("killing isowatchd with SIGKILL and starting it again")
        daemon.kill_and_restart()
        before = daemon.stream("pg-restart")["committed_transactions"]
        daemon.wait_committed("pg-restart", before + 300)
        log("killing the collector with SIGKILL")
        collector.kill()
        collector.wait()
        s = run_collector(args + ["--txns", "800"], root)
        st = daemon.wait_checked("pg-restart")
        audit = int(cluster.sql(
            "SELECT count(*) FROM pg_logical_slot_peek_changes('audit', NULL, NULL) "
            "WHERE data LIKE 'message: transactional: 1 prefix: isowatch,%'"))
        log(f"PostgreSQL committed {audit} workload transactions; the daemon has "
            f"{st['committed_transactions']} committed, {st['ingested_transactions']} in all")
        check(audit > 800, f"only {audit} committed transactions in all")
        check(st["committed_transactions"] == audit,
              f"the daemon has {st['committed_transactions']} committed transactions, "
              f"PostgreSQL committed {audit}")
        counts = daemon.status()["counts"]
        check(counts["refused_transactions"] == 0,
              f"isowatchd refused {counts['refused_transactions']} transactions")
        check(s["refused"] == 0, "the second run had refusals")
        v = daemon.violations()
        check(v == [], f"{len(v)} violations after the restarts, want none: {v[:3]}")
        daemon.stop()
    finally:
        if collector is not None and collector.poll() is None:
            collector.kill()
        daemon.proc.kill()
        cluster.stop()


def case_canary(tools, root):
    isowatchd, pgc = tools
    cluster = Cluster(root)
    cluster.start()
    daemon = Daemon(isowatchd, root, [])
    canary = None
    try:
        args = [pgc, "canary", "--dsn", cluster.dsn, "--to", daemon.target, "--rate", "50",
                "--state-dir", os.path.join(root, "canary-state")]
        committed = 0
        for run in (1, 2):
            # It runs until SIGTERM, then leaves its stream open for the next start.
            log("$ " + " ".join(args))
            canary = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True)
            daemon.wait_committed("canary", committed + 100)
            canary.send_signal(signal.SIGTERM)
            out, _ = canary.communicate(timeout=60)
            log(out.strip().splitlines()[-1])
            check(canary.returncode == 0, f"the canary exited with {canary.returncode}: {out}")
            check(f"run {run} ({'new' if run == 1 else 'resumed'})" in out,
                  f"run {run} of the canary did not say so: {out}")
            s = daemon.stream("canary")
            check(not s["closed"], "SIGTERM closed the canary's stream")
            committed = s["committed_transactions"]
        check(int(cluster.sql("SELECT count(*) FROM isowatch_canary_kv")) > 0,
              "the canary wrote no rows to its own table")
        check(cluster.sql("SELECT count(*) FROM pg_tables WHERE tablename = 'isowatch_kv'") == "0",
              "the canary touched the workload's table")
        v = daemon.violations()
        check(v == [], f"{len(v)} violations from the canary, want none: {v[:3]}")
        daemon.stop()
    finally:
        if canary is not None and canary.poll() is None:
            canary.kill()
        daemon.proc.kill()
        cluster.stop()


CASES = {"rr": case_rr, "rr-list": case_rr_list, "ser": case_ser, "rc": case_rc,
         "restart": case_restart, "canary": case_canary, "tls": case_tls}


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    tools = (os.path.abspath(argv[1]), os.path.abspath(argv[2]))
    cases = {name: (lambda root, case=case: case(tools, root)) for name, case in CASES.items()}
    return run_cases(cases, argv[3:] or ALL_CASES, "isowatch-pg", "PostgreSQL")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
