#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The PostgreSQL collector's cost and lag against a local PostgreSQL 15.

Starts a throwaway cluster and isowatchd (as tests/integration/postgres_test.py does), then runs
the same workload twice per round, each on a fresh table:
  bare       isowatch-pg workload --bare: the transactions as the application would run them,
             nothing recorded, no logical decoding, no daemon;
  collected  the full collector: snapshot and xid recorded, a logical message per transaction,
             logical decoding, the join and the stream to isowatchd;
and prints transactions per second of each, the overhead of collection, the lag from commit to
durable in isowatchd (p50, p99, max), the CPU time isowatchd used, and the daemon's time from
arrival to final verdict. On a small machine the daemon, the collector and the WAL sender
compete with PostgreSQL for the same cores: part of the overhead is theirs, not the recording's.

Usage: postgres_collect.py PATH/TO/isowatchd PATH/TO/isowatch-pg [--txns N] [--sessions S]
       [--keys K] [--isolation I] [--rounds R]
"""

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "tests", "integration"))
from postgres_test import Cluster, Daemon  # noqa: E402

RATE = re.compile(r"(\d+) transactions in ([\d.]+) s")
LAG = re.compile(r"p50 ([\d.]+) s, p99 ([\d.]+) s, max ([\d.]+) s")


def cpu_seconds(pid):
    """User + system CPU time of process `pid` so far."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu():
    """User + system CPU time of the finished child processes so far."""
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(args)} failed: {r.stdout}{r.stderr}")
    m = RATE.search(r.stdout)
    return int(m.group(1)) / float(m.group(2)), r.stdout


def main():
    p = argparse.ArgumentParser()
    p.add_argument("isowatchd")
    p.add_argument("isowatch_pg")
    p.add_argument("--txns", type=int, default=20000)
    p.add_argument("--sessions", type=int, default=8)
    p.add_argument("--keys", type=int, default=10000)
    p.add_argument("--isolation", default="repeatable-read")
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    root = tempfile.mkdtemp(prefix="isowatch-pg-bench-")
    cluster = Cluster(root)
    cluster.start()
    daemon = Daemon(os.path.abspath(a.isowatchd), root, [])
    common = ["--dsn", cluster.dsn, "--isolation", a.isolation, "--txns", str(a.txns),
              "--sessions", str(a.sessions), "--keys", str(a.keys), "--ops-per-txn", "4",
              "--read-ratio", "0.5", "--dist", "uniform"]
    try:
        bare, collected = [], []
        for i in range(a.rounds):
            tps, _ = run([a.isowatch_pg, "workload", "--bare", "--table-prefix", f"bare{i}_"] +
                         common)
            bare.append(tps)
            daemon_cpu = cpu_seconds(daemon.proc.pid)
            collector_cpu = children_cpu()
            tps, out = run([a.isowatch_pg, "workload", "--to", daemon.target, "--stream",
                            f"bench-{i}", "--state-dir", os.path.join(root, f"state-{i}"),
                            "--slot", f"bench_{i}", "--publication", f"bench_{i}",
                            "--table-prefix", f"bench{i}_", "--drop-slot"] + common)
            collected.append(tps)
            daemon_cpu = cpu_seconds(daemon.proc.pid) - daemon_cpu
            collector_cpu = children_cpu() - collector_cpu
            lag = LAG.search(out)
            print(f"round {i}: bare {bare[-1]:.0f} txn/s, collected {tps:.0f} txn/s, commit to "
                  f"durable in isowatchd p50 {lag.group(1)} s p99 {lag.group(2)} s max "
                  f"{lag.group(3)} s; CPU: isowatchd {daemon_cpu:.1f} s, isowatch-pg {collector_cpu:.1f} s",
                  flush=True)
            daemon.wait_checked(f"bench-{i}")
        b, c = max(bare), max(collected)
        print(f"best of {a.rounds}: bare {b:.0f} txn/s, collected {c:.0f} txn/s, "
              f"overhead {100 * (b - c) / b:.1f}%")
        count = daemon.metric("isowatch_check_latency_seconds_count", {})
        total = daemon.metric("isowatch_check_latency_seconds_sum", {})
        if count:
            print(f"isowatchd, arrival to final verdict: mean {total / count * 1000:.1f} ms over "
                  f"{count:.0f} transactions")
        daemon.stop()
    finally:
        daemon.proc.kill()
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
