# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of isowatchd's limits and answers to misuse, one case per run:

  replay_dead   `isowatch replay` to an address where nothing listens fails within seconds,
                says so and exits non-zero
  exit_codes    isowatchd exits with status 2 for bad flags and option values, 0 for --help
                (docs/operations.md, "Running")
  max_streams   with ingest.max_streams=2, a third stream is refused with a reason the replay
                prints, counted in /metrics, and still after a restart; the first two still work
  recovery      while a restarted daemon replays a large log, /healthz answers 200 and /readyz
                503 "recovering the store"; recovery logs its progress
  permissions   with umask 000, the store, its files and the log file are owner-only (0700, 0600)

Usage: daemon_limits_test.py PATH/TO/isowatch PATH/TO/isowatchd CASE
Each daemon runs on loopback, on free ports, with its store in a temporary directory.
"""

import os
import json
import shutil
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_compare  # noqa: E402  (the helpers of daemon_test.sh)
from daemon_util import TestFailure as Failure  # noqa: E402
from daemon_util import check, free_port  # noqa: E402


def run(args, timeout=120):
    """Runs a command; returns (status, stdout + stderr, seconds)."""
    start = time.monotonic()
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), time.monotonic() - start


def make_history(cli, tmp):
    path = os.path.join(tmp, "h.json")
    status, out, _ = run([cli, "gen", "--out", path, "--txns", "200", "--keys", "10", "--seed",
                          "1"])
    check(status == 0, f"isowatch gen failed: {out}")
    return path


def case_replay_dead(cli, daemond, tmp):
    history = make_history(cli, tmp)
    port = free_port()
    status, out, seconds = run([cli, "replay", history, "--to", f"127.0.0.1:{port}",
                                "--connect-timeout-ms", "2000"])
    check(status != 0, f"replay to a dead address exited 0: {out}")
    check("cannot connect to" in out, f"replay does not say it cannot connect: {out}")
    check(seconds < 20, f"replay to a dead address took {seconds:.1f} s")


def case_exit_codes(cli, daemond, tmp):
    cases = [
        (["--no-such-flag"], 2),
        (["--grpc-port", "not-a-number"], 2),
        (["--set", "no.such.option=1"], 2),
        (["--set", "ingest.max_streams=0"], 2),
        (["--help"], 0),
        (["--version"], 0),
    ]
    for args, want in cases:
        status, out, _ = run([daemond, "--data-dir", os.path.join(tmp, "data")] + args)
        check(status == want, f"isowatchd {' '.join(args)}: exit status {status}, want {want}: "
              f"{out.strip()}")


class Daemon:
    """isowatchd on loopback, on free ports (or the given HTTP port), its store in `data`."""

    def __init__(self, daemond, tmp, name, args=(), http_port=0, umask=None, wait=True):
        self.data = os.path.join(tmp, f"{name}.data")
        self.ports_file = os.path.join(tmp, f"{name}.ports")
        self.log_path = os.path.join(tmp, f"{name}.daemon.log")
        if os.path.exists(self.ports_file):
            os.remove(self.ports_file)
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [daemond, "--data-dir", self.data, "--grpc-port", "0", "--http-port", str(http_port),
             "--ports-file", self.ports_file] + list(args),
            stdout=self.log, stderr=subprocess.STDOUT,
            preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)
        self.grpc = self.http = None
        if wait:
            self.wait_ports()

    def wait_ports(self, timeout=120):
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.ports_file):
            check(self.proc.poll() is None,
                  f"isowatchd exited with {self.proc.returncode}: {self.log_text()[-2000:]}")
            check(time.monotonic() < deadline, "isowatchd did not write its ports file")
            time.sleep(0.05)
        with open(self.ports_file) as f:
            ports = json.load(f)
        self.grpc, self.http = ports["grpc"], ports["http"]

    def log_text(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self):
        self.proc.terminate()
        status = self.proc.wait(timeout=120)
        self.log.close()
        check(status == 0, f"isowatchd exited with {status} after SIGTERM")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def case_permissions(cli, daemond, tmp):
    history = make_history(cli, tmp)
    log_file = os.path.join(tmp, "isowatchd.log")
    d = Daemon(daemond, tmp, "perm", ["--set", f"log.file={log_file}",
                                      "--set", "store.checkpoint_interval=100ms"], umask=0)
    try:
        status, out, _ = run([cli, "replay", history, "--to", f"127.0.0.1:{d.grpc}"])
        check(status == 0, f"replay failed: {out}")
        time.sleep(0.5)  # a checkpoint or two
    finally:
        d.stop()
    paths = [d.data, log_file, d.ports_file]
    for root, dirs, files in os.walk(d.data):
        paths += [os.path.join(root, n) for n in dirs + files]
    check(len(paths) > 10, f"only {len(paths)} files: {paths}")
    wrong = []
    for path in paths:
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        want = 0o700 if os.path.isdir(path) else 0o600
        if mode != want:
            wrong.append(f"{path}: {mode:o}, want {want:o}")
    check(not wrong, "files not owner-only after a run with umask 000:\n" + "\n".join(wrong))


def metric(port, name):
    status, body = daemon_compare.get(port, "/metrics")
    check(status == 200, f"/metrics answered {status}")
    return daemon_compare.sample_total(body, name)


def case_max_streams(cli, daemond, tmp):
    history = make_history(cli, tmp)
    args = ["--set", "ingest.max_streams=2"]

    def replay(d, stream):
        # Ids are unique across a daemon's streams: each stream sends the history under its own.
        return run([cli, "replay", history, "--to", f"127.0.0.1:{d.grpc}", "--stream", stream,
                    "--id-prefix", f"{stream}-"])

    d = Daemon(daemond, tmp, "streams", args)
    try:
        for stream in ("s1", "s2"):
            status, out, _ = replay(d, stream)
            check(status == 0, f"replay of {stream} failed: {out}")
        status, out, _ = replay(d, "s3")
        check(status != 0, f"a third stream was taken with ingest.max_streams=2: {out}")
        check("ingest.max_streams" in out, f"replay does not say why it was refused: {out}")
        daemon_compare.poll(lambda: metric(d.http, "isowatch_ingest_streams_refused_total") >= 1,
                            30, "isowatch_ingest_streams_refused_total to count the refusal")
    finally:
        d.stop()
    # After a restart the streams in the store still count; those streams keep working.
    d = Daemon(daemond, tmp, "streams", args)
    try:
        status, out, _ = replay(d, "s3")
        check(status != 0, f"a third stream was taken after a restart: {out}")
        check("ingest.max_streams" in out, f"replay does not say why it was refused: {out}")
        status, out, _ = replay(d, "s1")
        check(status == 0, f"a stream the daemon has was refused after a restart: {out}")
        status, body = daemon_compare.get(d.http, "/api/v1/status")
        names = sorted(s["name"] for s in json.loads(body)["streams"])
        check(names == ["s1", "s2"], f"streams after the restart: {names}")
    finally:
        d.stop()


def case_recovery(cli, daemond, tmp):
    history = os.path.join(tmp, "big.json")
    status, out, _ = run([cli, "gen", "--out", history, "--txns", "30000", "--keys", "10000",
                          "--seed", "3"])
    check(status == 0, f"isowatch gen failed: {out}")
    # No checkpoints: the restart replays the whole log, which takes a moment.
    args = ["--set", "store.checkpoint_interval=0s"]
    d = Daemon(daemond, tmp, "rec", args)
    try:
        status, out, _ = run([cli, "replay", history, "--to", f"127.0.0.1:{d.grpc}",
                              "--batch", "200", "--quiet"])
        check(status == 0, f"replay failed: {out}")
    finally:
        d.stop()
    http = free_port()
    d = Daemon(daemond, tmp, "rec", args, http_port=http, wait=False)
    try:
        seen = []  # (healthz, readyz, readyz body) while the ports file is not there
        while not os.path.exists(d.ports_file):
            check(d.proc.poll() is None, f"isowatchd exited: {d.log_text()[-2000:]}")
            health, _ = daemon_compare.get(http, "/healthz", timeout=5)
            ready, body = daemon_compare.get(http, "/readyz", timeout=5)
            if health is not None:
                seen.append((health, ready, body))
            time.sleep(0.01)
        d.wait_ports()
        recovering = [x for x in seen if x[1] == 503]
        check(recovering, f"no answer from /readyz during recovery; answers: {seen[:5]}")
        check(all(h == 200 for h, _, _ in recovering),
              f"/healthz during recovery: {recovering[:5]}")
        check(all(b.strip() == "not ready: recovering the store" for _, _, b in recovering),
              f"/readyz during recovery: {recovering[:5]}")
        status, _ = daemon_compare.get(http, "/api/v1/status")
        check(status == 200, f"/api/v1/status after recovery: {status}")
        daemon_compare.poll(lambda: daemon_compare.get(http, "/readyz")[0] == 200, 30,
                            "/readyz to answer 200 after recovery")
        log = d.log_text()
        check("recovering: replaying log positions" in log, f"recovery logs no progress: {log}")
        print(f"recovery: {len(recovering)} answers of /readyz 503 during recovery")
    finally:
        d.stop()


CASES = {
    "replay_dead": case_replay_dead,
    "exit_codes": case_exit_codes,
    "permissions": case_permissions,
    "max_streams": case_max_streams,
    "recovery": case_recovery,
}


def run_cases(cases, argv, usage):
    """The main of a test script of cases: `script PATH/TO/isowatch PATH/TO/isowatchd CASE` runs
    cases[CASE](cli, daemond, tmp) in a temporary directory; 0 passed, 1 failed, 2 usage."""
    if len(argv) != 4 or argv[3] not in cases:
        print(usage, file=sys.stderr)
        return 2
    cli, daemond, name = argv[1:]
    tmp = tempfile.mkdtemp(prefix=f"isowatch-{name}-")
    try:
        cases[name](cli, daemond, tmp)
    except Failure as e:
        print(f"{name}: FAILED: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{name}: passed")
    return 0


if __name__ == "__main__":
    sys.exit(run_cases(CASES, sys.argv, __doc__))
