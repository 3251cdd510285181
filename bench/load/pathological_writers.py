#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes a pathological TimeKiller JSON history: writers of the same keys with overlapping
intervals, so that snapshot isolation's NOCONFLICT (two concurrent transactions wrote the same
key) fires for every pair of overlapping writers of a key.

Transaction i (from 1) is alone in its session, starts at time max(0, i - 1 - OVERLAP) and
commits at time i (both moved by FIRST_TXN - 1), and writes every one of KEYS keys once; OVERLAP (default: every earlier
transaction) is how many earlier transactions each one overlaps. The history has
KEYS * sum(min(i - 1, OVERLAP)) NOCONFLICT violations and nothing else: with the defaults,
2,500 transactions on one key, 3,123,750 of them.

Usage: pathological_writers.py OUT [--txns N] [--keys K] [--overlap W] [--first-key F]
                               [--first-txn T]
Prints the number of violations the history holds.
"""
import argparse
import json


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--txns", type=int, default=2500)
    p.add_argument("--keys", type=int, default=1)
    p.add_argument("--overlap", type=int, default=None, help="earlier transactions each overlaps")
    p.add_argument("--first-key", type=int, default=0, help="number of the first key written")
    p.add_argument("--first-txn", type=int, default=1,
                   help="id (and session, and time) of the first transaction, so that two "
                        "histories sent to one daemon share no ids")
    a = p.parse_args()
    overlap = a.txns if a.overlap is None else a.overlap
    base = a.first_txn - 1  # times move with the ids
    expected = 0
    with open(a.out, "w") as f:
        f.write("[\n")
        for i in range(1, a.txns + 1):
            ops = [{"t": "w", "k": a.first_key + k, "v": i} for k in range(a.keys)]
            txn = {
                "tid": a.first_txn + i - 1,
                "sid": a.first_txn + i - 1,
                "sts": {"p": base + max(0, i - 1 - overlap), "l": 0},
                "cts": {"p": base + i, "l": 0},
                "ops": ops,
            }
            f.write(json.dumps(txn, separators=(",", ":")))
            f.write(",\n" if i < a.txns else "\n")
            expected += a.keys * min(i - 1, overlap)
        f.write("]\n")
    print(expected)


if __name__ == "__main__":
    main()
