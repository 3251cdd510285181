# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests: what isowatchd accepts is what was sent, and how it was sent raises no false
alarm. One case per run:

  same_stream      two replays of different histories under one stream name at once: the later
                   claim fences the first, the second's batch 1 is refused as other content;
                   both exit non-zero saying why, and nothing of the second is checked
  other_stream     a history replayed again on a second stream: every transaction is refused
                   before its ack (ID_ON_OTHER_STREAM), the replay prints the refusals and exits
                   non-zero, nothing is refused after an ack and no violation appears
  interrupted      Ctrl-C during a replay leaves the stream open: the replay says it stopped
                   early and exits non-zero, and the reads whose writers were never sent are not
                   reported as violations
  closed_then_new  a stream refused whole and closed, then a fault-free history on a new stream:
                   no violation (the finality point once jumped to the end when every stream was
                   closed, and the new stream's reads were judged before their writers came)

Usage: daemon_integrity_test.py PATH/TO/isowatch PATH/TO/isowatchd CASE
Each daemon runs on loopback, on free ports, with its store in a temporary directory.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_compare  # noqa: E402
from daemon_limits_test import Daemon, Failure, check, metric, run  # noqa: E402


def gen(cli, tmp, name, seed, txns=2000):
    """A fault-free history: every violation the daemon reports is a false alarm."""
    path = os.path.join(tmp, f"{name}.json")
    status, out, _ = run([cli, "gen", "--out", path, "--txns", str(txns), "--committed",
                          "--keys", "20", "--sessions", "8", "--seed", str(seed)])
    check(status == 0, f"isowatch gen failed: {out}")
    return path


def replay_args(cli, d, history, stream, *extra):
    return [cli, "replay", history, "--to", f"127.0.0.1:{d.grpc}", "--stream", stream,
            "--batch", "50", "--sigma-ms", "200", "--connect-timeout-ms", "10000"] + list(extra)


def start_replay(cli, d, history, stream, rate, batches):
    """A replay in the background, paced at `rate`, once `batches` of its batches are acked."""
    p = subprocess.Popen(replay_args(cli, d, history, stream, "--rate", str(rate)),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    daemon_compare.poll(
        lambda: (daemon_compare.stream_status(d.http, stream) or {}).get(
            "acked_sequence", 0) >= batches, 60, f"{batches} batches of stream {stream}")
    return p


def output_of(p):
    return p.communicate(timeout=120)[0].decode("utf-8", "replace")


def online_violations(d, tmp):
    """Every violation the daemon reports (daemon_compare.violations writes them to a file)."""
    path = os.path.join(tmp, "online.json")
    daemon_compare.violations(d.http, path)
    with open(path) as f:
        return json.load(f)


def status_of(d):
    status, body = daemon_compare.get(d.http, "/api/v1/status")
    check(status == 200, f"/api/v1/status answered {status}")
    return json.loads(body)


def check_nothing_refused_after_ack(d):
    """Nothing was refused after its ack: no second history mixed into the first."""
    late = metric(d.http, 'isowatch_refused_transactions_total{reason="history_conflict"}')
    check(late == 0, f"{late} transactions refused after their ack")


def check_no_false_violations(d, tmp, when=""):
    """The histories of these cases are fault-free: any violation is a false alarm."""
    found = online_violations(d, tmp)
    check(not found, f"{len(found)} false violations{when}, the first: {found[:1]}")


def case_same_stream(cli, daemond, tmp):
    a = gen(cli, tmp, "a", 1)
    b = gen(cli, tmp, "b", 2)
    d = Daemon(daemond, tmp, "same")
    try:
        # Let the first one get a few batches in, then start the second on the same name.
        first = start_replay(cli, d, a, "replay", rate=100, batches=3)
        status, second_out, _ = run(replay_args(cli, d, b, "replay"))
        first_out = output_of(first)
        check(first.returncode != 0, f"the fenced replay exited 0: {first_out}")
        check("claimed by another writer" in first_out,
              f"the fenced replay does not say why it stopped: {first_out}")
        check(status != 0, f"the second replay exited 0: {second_out}")
        check("durable with other content" in second_out,
              f"the second replay does not say why it was refused: {second_out}")
        check(metric(d.http, "isowatch_ingest_fenced_batches_total") >= 1,
              "isowatch_ingest_fenced_batches_total did not count the fenced batch")
        check(metric(d.http, "isowatch_ingest_conflicting_batches_total") >= 1,
              "isowatch_ingest_conflicting_batches_total did not count the refused batch")
        check(metric(d.http, "isowatch_ingest_stream_claims_total") == 2,
              "two replays, two claims")
        s = daemon_compare.stream_status(d.http, "replay")
        check(not s["closed"], f"the stream was closed by one of the replays: {s}")
        check_nothing_refused_after_ack(d)
        log = d.log_text()
        check("refused: the stream's writer is epoch" in log, "the daemon did not log the fence")
    finally:
        d.stop()


def case_other_stream(cli, daemond, tmp):
    h = gen(cli, tmp, "h", 3, txns=800)
    d = Daemon(daemond, tmp, "other")
    try:
        status, out, _ = run(replay_args(cli, d, h, "first"))
        check(status == 0, f"the first replay failed: {out}")
        status, out, _ = run(replay_args(cli, d, h, "second"))
        check(status != 0, f"a replay with every transaction refused exited 0: {out}")
        check("ID_ON_OTHER_STREAM" in out.upper() and 'stream "first"' in out,
              f"the replay does not print the refusals: {out[-3000:]}")
        check("refused" in out and "not checked" in out, f"no summary of the refusals: {out}")
        daemon_compare.wait_checked(d.http, "first", 120)
        daemon_compare.wait_checked(d.http, "second", 120)
        refused = metric(d.http, 'isowatch_refused_transactions_total{reason="id_on_other_stream"}')
        check(refused > 0, "id_on_other_stream refusals not counted")
        check_nothing_refused_after_ack(d)
        check_no_false_violations(d, tmp)
        # The same history under its own ids is welcome on a third stream: nothing is refused
        # (its keys are the first history's, so it is not checked here for violations).
        status, out, _ = run(replay_args(cli, d, h, "third", "--id-prefix", "again-"))
        check(status == 0, f"a replay with prefixed ids failed: {out}")
    finally:
        d.stop()


def case_interrupted(cli, daemond, tmp):
    h = gen(cli, tmp, "h", 4, txns=6000)
    d = Daemon(daemond, tmp, "interrupted")
    try:
        p = start_replay(cli, d, h, "ctrl-c", rate=500, batches=20)
        p.send_signal(signal.SIGINT)
        out = output_of(p)
        check(p.returncode != 0, f"an interrupted replay exited 0: {out}")
        check("interrupted after" in out and "left open" in out,
              f"the replay does not say it stopped early: {out}")
        s = daemon_compare.stream_status(d.http, "ctrl-c")
        check(s is not None and not s["closed"], f"the interrupted stream was closed: {s}")
        check(s["acked_sequence"] < 6000 // 50, f"the whole history was sent: {s}")
        # Give the engine time to finalise what it can (watermarks; the timeout does not apply to
        # a stream that sends them), then look: a fault-free history has no violation.
        time.sleep(3)
        check_no_false_violations(d, tmp, " after the interruption")
    finally:
        d.stop()


def case_closed_then_new(cli, daemond, tmp):
    small = gen(cli, tmp, "small", 5, txns=300)
    h = gen(cli, tmp, "h", 6, txns=3000)
    d = Daemon(daemond, tmp, "closed", ["--set", "ingest.max_batch_transactions=60"])
    try:
        status, out, _ = run([cli, "replay", small, "--to", f"127.0.0.1:{d.grpc}", "--stream",
                              "too-big", "--batch", "100"])
        check(status != 0, f"a replay refused whole exited 0: {out}")
        check("BATCH_TOO_LARGE" in out.upper(), f"the refusals are not printed: {out[-2000:]}")
        daemon_compare.wait_checked(d.http, "too-big", 60)
        status, out, _ = run(replay_args(cli, d, h, "later"))
        check(status == 0, f"the later replay failed: {out}")
        daemon_compare.wait_checked(d.http, "later", 120)
        check_no_false_violations(d, tmp, " on the later stream")
        checked = status_of(d)["counts"]["ingested_transactions"]
        check(checked > 2000, f"only {checked} transactions ingested")
    finally:
        d.stop()


CASES = {
    "same_stream": case_same_stream,
    "other_stream": case_other_stream,
    "interrupted": case_interrupted,
    "closed_then_new": case_closed_then_new,
}


def main(argv):
    if len(argv) != 4 or argv[3] not in CASES:
        print(__doc__)
        return 2
    cli, daemond, case = argv[1], argv[2], argv[3]
    tmp = tempfile.mkdtemp(prefix=f"isowatch-integrity-{case}-")
    try:
        CASES[case](cli, daemond, tmp)
    except Failure as e:
        print(f"FAIL {case}: {e}")
        print(f"(kept {tmp})")
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"PASS {case}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
