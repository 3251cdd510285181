#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The TiDB collector's throughput through librdkafka's mock cluster.

Generates a fault-free simulator history (`isowatch gen`), has ticdc_producer put it into a mock
Kafka cluster as TiCDC would (canal-json with the TiDB extension, rows shuffled over the
partitions, duplicates, watermarks to every partition) and write its client log, starts isowatchd
(as tests/integration/tidb_test.py does), then times isowatch-tidb from start to the daemon's last
ack: reading the client log, consuming and decoding the topic, grouping, joining and streaming.
Prints transactions joined and sent per second, over the rounds. The producer fills the topic
before the clock starts, so the rate is the collector's (and the daemon's ingest), not TiCDC's.
The daemon, the collector and the mock cluster share the machine's cores.

Usage: tidb_collect.py BIN_DIR [--txns N] [--partitions P] [--rounds R]
BIN_DIR holds isowatch, isowatchd, isowatch-tidb and ticdc_producer (a build with tests, such as
build/relassert/bin: the producer is a test tool).
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
from postgres_test import Daemon  # noqa: E402

SUMMARY = re.compile(r"(?P<records>\d+) client records in (?P<seconds>[\d.]+) s; sent "
                     r"(?P<sent>\d+) in (?P<batches>\d+) batches, (?P<refused>\d+) refused")


def one_round(bin_dir, root, args, seed):
    history = os.path.join(root, "history.json")
    subprocess.run([os.path.join(bin_dir, "isowatch"), "gen", "--format", "native-json", "--out",
                    history, "--committed", "--txns", str(args.txns), "--sessions", "16",
                    "--keys", "10000", "--dist", "uniform", "--seed", str(seed)],
                   check=True, stdout=subprocess.DEVNULL)
    brokers_file = os.path.join(root, "brokers")
    producer = subprocess.Popen(
        [os.path.join(bin_dir, "ticdc_producer"), "--history", history, "--client-log",
         os.path.join(root, "client.jsonl"), "--brokers-file", brokers_file, "--partitions",
         str(args.partitions), "--chunk", "500", "--seed", str(seed)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    daemon = None
    try:
        # The producer says it is done (every chunk in the cluster) on its second line.
        lines = [producer.stdout.readline(), producer.stdout.readline()]
        if "mock cluster" not in lines[1]:
            raise SystemExit(f"producer: {lines}")
        brokers = open(brokers_file).read().strip()
        daemon = Daemon(os.path.join(bin_dir, "isowatchd"), root, [])
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
        return int(m["sent"]), float(m["seconds"]), wall
    finally:
        producer.send_signal(signal.SIGTERM)
        producer.wait(timeout=30)
        if daemon is not None:
            daemon.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bin_dir")
    p.add_argument("--txns", type=int, default=20000, help="committed transactions")
    p.add_argument("--partitions", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    bin_dir = os.path.abspath(args.bin_dir)
    rates = []
    for r in range(args.rounds):
        root = tempfile.mkdtemp(prefix="isowatch-tidb-bench-")
        try:
            sent, seconds, wall = one_round(bin_dir, root, args, r + 1)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        rates.append(sent / seconds)
        print(f"round {r + 1}: {sent} transactions joined and sent in {seconds:.2f} s "
              f"({sent / seconds:.0f}/s; {wall:.2f} s with process start)", flush=True)
    rates.sort()
    print(f"median {rates[len(rates) // 2]:.0f} transactions/s over {len(rates)} rounds "
          f"({args.partitions} partitions)")


if __name__ == "__main__":
    main()
