#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The TiDB collector's throughput and lag through librdkafka's mock cluster.

Generates a fault-free simulator history (`isowatch gen`), has ticdc_producer put it into a mock
Kafka cluster as TiCDC would (canal-json with the TiDB extension, rows shuffled over the
partitions, duplicates, watermarks to every partition) and write its client log, starts isowatchd
(as tests/integration/tidb_test.py does), and runs isowatch-tidb:

- throughput rounds: the producer fills the topic before the clock starts, then the collector is
  timed from its start to the daemon's last ack (reading the client log, consuming and decoding
  the topic, grouping, joining and streaming). The rate is the collector's (and the daemon's
  ingest), not TiCDC's.
- with --paced-tps N, one more run in which the producer sends a chunk of 100 transactions with
  writes (those that have rows in the changefeed) every 100/N seconds, with TSOs of the time it
  sends them (`--wall-clock`), while the collector runs: the lag from a row's commit to its being durable in isowatchd (p50, p99, max,
  as the collector's summary prints it) is the row-to-verdict lag through Kafka at that rate. It
  includes the wait for the watermark that follows each chunk, as TiCDC's resolved ts would be.
  The first chunk comes 5 s after the collector starts, so the lag is the steady state's.

The daemon, the collector and the mock cluster share the machine's cores.

Usage: tidb_collect.py BIN_DIR [--producer PATH] [--txns N] [--partitions P] [--rounds R]
                       [--paced-tps N]
BIN_DIR holds isowatch, isowatchd and isowatch-tidb (build/release/bin); ticdc_producer, a test
tool that the release preset does not build, is taken from --producer (default
BIN_DIR/ticdc_producer; build/dev/bin/ticdc_producer will do: it only fills the topic, or paces it).
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "tests", "integration"))
from daemon_util import Daemon  # noqa: E402
from tidb_test import DAEMON_SETS  # noqa: E402

SUMMARY = re.compile(r"(?P<records>\d+) client records in (?P<seconds>[\d.]+) s; sent "
                     r"(?P<sent>\d+) in (?P<batches>\d+) batches, (?P<refused>\d+) refused.*"
                     r"commit to durable in isowatchd: p50 (?P<p50>[\d.]+) s, p99 (?P<p99>[\d.]+) "
                     r"s, max (?P<max>[\d.]+) s")
CHUNK = 100


def one_round(bin_dir, producer_path, root, args, seed, paced_tps=0):
    history = os.path.join(root, "history.json")
    subprocess.run([os.path.join(bin_dir, "isowatch"), "gen", "--format", "native-json", "--out",
                    history, "--committed", "--txns", str(args.txns), "--sessions", "16",
                    "--keys", "10000", "--dist", "uniform", "--seed", str(seed)],
                   check=True, stdout=subprocess.DEVNULL)
    brokers_file = os.path.join(root, "brokers")
    daemon = Daemon(os.path.join(bin_dir, "isowatchd"), root, DAEMON_SETS).start()
    pacing = []
    if paced_tps:
        # The first chunk comes 5 s after the cluster is announced: the lag is the steady
        # state's, not the collector's start-up.
        pacing = ["--interval-ms", str(int(1000 * CHUNK / paced_tps)), "--wall-clock",
                  "--start-delay-ms", "5000"]
    producer = subprocess.Popen(
        [producer_path, "--history", history, "--client-log", os.path.join(root, "client.jsonl"),
         "--brokers-file", brokers_file, "--partitions", str(args.partitions), "--chunk",
         str(CHUNK), "--seed", str(seed)] + pacing,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = [producer.stdout.readline()]
        if not paced_tps:
            # The producer says it is done (every chunk in the cluster) on its second line.
            lines.append(producer.stdout.readline())
            if "chunks in the mock cluster" not in lines[1]:
                raise SystemExit(f"producer: {lines}")
        while not os.path.exists(brokers_file):
            if producer.poll() is not None:
                raise SystemExit(f"producer: {lines}")
            time.sleep(0.01)
        brokers = open(brokers_file).read().strip()
        started = time.monotonic()
        out = subprocess.run(
            [os.path.join(bin_dir, "isowatch-tidb"), "--client-log",
             os.path.join(root, "client.jsonl"), "--to", daemon.target, "--kafka", brokers,
             "--topic", "ticdc", "--state-dir", os.path.join(root, "state"), "--batch", "1000"],
            capture_output=True, text=True)
        wall = time.monotonic() - started
        m = SUMMARY.search(out.stdout)
        if out.returncode != 0 or m is None or int(m["refused"]) != 0:
            raise SystemExit(f"isowatch-tidb failed ({out.returncode}): {out.stdout}{out.stderr}")
        return {k: float(v) for k, v in m.groupdict().items()}, wall
    finally:
        producer.send_signal(signal.SIGTERM)
        producer.wait(timeout=30)
        daemon.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bin_dir")
    p.add_argument("--producer", help="ticdc_producer (default: BIN_DIR/ticdc_producer)")
    # librdkafka's mock cluster keeps about 5 MiB per partition (the producer fails beyond).
    p.add_argument("--txns", type=int, default=10000, help="committed transactions")
    p.add_argument("--partitions", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--paced-tps", type=int, default=0,
                   help="also one run with the topic fed at this rate (transactions with writes "
                   "per second), for the lag")
    args = p.parse_args()
    bin_dir = os.path.abspath(args.bin_dir)
    producer = os.path.abspath(args.producer or os.path.join(bin_dir, "ticdc_producer"))
    rates = []
    for r in range(args.rounds):
        root = tempfile.mkdtemp(prefix="isowatch-tidb-bench-")
        try:
            s, wall = one_round(bin_dir, producer, root, args, r + 1)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        rates.append(s["sent"] / s["seconds"])
        print(f"round {r + 1}: {s['sent']:.0f} transactions joined and sent in "
              f"{s['seconds']:.2f} s ({rates[-1]:.0f}/s; {wall:.2f} s with process start)",
              flush=True)
    if rates:
        rates.sort()
        print(f"median {rates[len(rates) // 2]:.0f} transactions/s over {len(rates)} rounds "
              f"({args.partitions} partitions)")
    if args.paced_tps:
        root = tempfile.mkdtemp(prefix="isowatch-tidb-bench-")
        try:
            s, _ = one_round(bin_dir, producer, root, args, args.rounds + 1, args.paced_tps)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(f"paced at {args.paced_tps} transactions/s: {s['sent']:.0f} sent in "
              f"{s['seconds']:.1f} s; commit to durable in isowatchd p50 {s['p50']:.3f} s, "
              f"p99 {s['p99']:.3f} s, max {s['max']:.3f} s")


if __name__ == "__main__":
    main()
