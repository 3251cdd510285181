# SPDX-License-Identifier: Apache-2.0
"""What the integration tests in Python share: failures and logging, free ports, HTTP requests,
waiting for a condition, an isowatchd on loopback (`Daemon`), and the main of a script of cases
(`run_cases`). Imported by postgres_test.py, metrics_test.py, tidb_test.py and the load scripts
in bench/load/; daemon_compare.py (the helpers of daemon_test.sh) takes its HTTP request from
here.
"""

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

# Every process a case started with spawn() or Daemon.start(), killed by run_cases at the end of
# the case if it still runs.
PROCESSES = []


class TestFailure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise TestFailure(message)


def log(message):
    print(message, flush=True)


def free_port():
    """A loopback port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(port, target, timeout=10):
    """(status, body) of GET http://127.0.0.1:PORT/TARGET; (None, None) if nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{target}", timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError):
        return None, None


def wait_for(condition, timeout, what, interval=0.1):
    """The first true value of condition(), tried every `interval` seconds; fails after
    `timeout` seconds, naming `what` (a string, or a function that returns one)."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TestFailure(f"timed out after {timeout} s waiting for "
                              f"{what() if callable(what) else what}")
        time.sleep(interval)


def spawn(args, log_path, **kwargs):
    """Starts `args` with its output (standard output and error) appended to `log_path`, to be
    killed at the end of the case if it still runs."""
    proc = subprocess.Popen(args, stdout=open(log_path, "a"), stderr=subprocess.STDOUT, **kwargs)
    PROCESSES.append(proc)
    return proc


class Daemon:
    """isowatchd on loopback, its store and log in ROOT/NAME: start() runs it on free ports (or
    the given ones) and waits until it is ready; `sets` are its --set NAME=VALUE options."""

    def __init__(self, path, root, sets=(), name="isowatchd"):
        self.path, self.sets = path, list(sets)
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir, exist_ok=True)
        self.log_path = os.path.join(self.dir, "isowatchd.log")
        self.proc = None
        self.grpc = self.http = 0
        self.target = None

    def start(self, grpc=0, http=0):
        ports = os.path.join(self.dir, "ports.json")
        if os.path.exists(ports):
            os.unlink(ports)
        args = [self.path, "--data-dir", os.path.join(self.dir, "data"), "--grpc-port", str(grpc),
                "--http-port", str(http), "--ports-file", ports]
        for s in self.sets:
            args += ["--set", s]
        self.proc = spawn(args, self.log_path)

        def written():
            check(self.proc.poll() is None, f"isowatchd exited: see {self.log_path}")
            return os.path.exists(ports) and os.path.getsize(ports) > 0

        wait_for(written, 60, "the ports file", interval=0.05)
        p = json.load(open(ports))
        self.grpc, self.http = p["grpc"], p["http"]
        self.target = f"127.0.0.1:{self.grpc}"
        wait_for(lambda: http_get(self.http, "/readyz")[0] == 200, 120, "/readyz")
        return self

    def kill(self):
        """kill -9."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def kill_and_restart(self):
        """kill -9, then a start on the same ports and store: collectors reconnect to it."""
        self.kill()
        self.start(self.grpc, self.http)

    def stop(self):
        """SIGTERM; fails unless it exits with status 0 within a minute."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise TestFailure("isowatchd did not stop within 60 s of SIGTERM")
        check(code == 0, f"isowatchd exited with status {code} after SIGTERM")

    def metrics(self):
        code, body = http_get(self.http, "/metrics")
        check(code == 200, f"/metrics answered {code}")
        return body

    def metric(self, name, labels):
        """The sum of the samples of metric `name` whose labels include `labels`."""
        total = 0.0
        for line in self.metrics().splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                if all(f'{k}="{v}"' in line for k, v in labels.items()):
                    total += float(line.rsplit(" ", 1)[1])
        return total

    def status(self):
        code, body = http_get(self.http, "/api/v1/status")
        check(code == 200, f"/api/v1/status answered {code}")
        return json.loads(body)

    def stream(self, name):
        """The stream's entry in /api/v1/status, or None."""
        for s in self.status().get("streams", []):
            if s["name"] == name:
                return s
        return None

    def wait_checked(self, name, timeout=300):
        """Waits until the stream is closed with nothing pending; returns its status entry."""
        def checked():
            s = self.stream(name)
            return s if s is not None and s["closed"] and s["pending_transactions"] == 0 else None

        return wait_for(checked, timeout,
                        lambda: f"stream {name} closed and checked: {self.stream(name)}")

    def wait_committed(self, name, n, timeout=120):
        def committed():
            s = self.stream(name)
            return s is not None and s["committed_transactions"] >= n

        wait_for(committed, timeout, f"{n} committed transactions in stream {name}")

    def violations(self, stream=None):
        """Every stored violation (of one stream, if given), page by page."""
        out, token = [], None
        while True:
            query = {"limit": "500"}
            if stream:
                query["stream"] = stream
            if token:
                query["page_token"] = token
            code, body = http_get(self.http, "/api/v1/violations?" + urllib.parse.urlencode(query))
            check(code == 200, f"/api/v1/violations answered {code}: {body}")
            page = json.loads(body)
            out += page["violations"]
            token = page.get("next_page_token")
            if not token:
                return out


def show_logs(root):
    """The last lines of every log under `root` (not RocksDB's, under data/)."""
    for path in sorted(glob.glob(os.path.join(root, "**", "*.log"), recursive=True)):
        if f"{os.sep}data{os.sep}" in path:
            continue
        log(f"--- last lines of {path}")
        with open(path, errors="replace") as f:
            log("".join(line[:400] for line in f.readlines()[-15:]))


def kill_leftovers():
    """Kills (SIGKILL) every process spawn() and Daemon.start() started that still runs."""
    for proc in PROCESSES:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    PROCESSES.clear()


def run_cases(cases, names, prefix, what):
    """The main of a script of cases: runs cases[name](root) for each of `names`, each in a
    temporary directory of its own (removed after, also on failure unless ISOWATCH_KEEP_TMP=1),
    kills what a case left running, and shows the logs of a failed case. Returns 0 when every
    case passed, 1 otherwise, 2 for an unknown case."""
    unknown = [n for n in names if n not in cases]
    if unknown:
        log(f"unknown cases: {' '.join(unknown)} (known: {' '.join(cases)})")
        return 2
    failed = []
    for name in names:
        root = tempfile.mkdtemp(prefix=f"{prefix}-{name}-")
        log(f"== {name} ({root})")
        started = time.monotonic()
        error = None
        try:
            cases[name](root)
        except Exception as e:  # a failing case must not hide the others' results
            error = e
            if not isinstance(e, TestFailure):
                traceback.print_exc()
        finally:
            kill_leftovers()
        if error is None:
            log(f"== {name}: passed in {time.monotonic() - started:.1f} s")
        else:
            log(f"== {name}: FAILED: {error}")
            show_logs(root)
            failed.append(name)
        if error is None or os.environ.get("ISOWATCH_KEEP_TMP") != "1":
            shutil.rmtree(root, ignore_errors=True)
    if failed:
        log(f"failed cases: {' '.join(failed)}")
        return 1
    log(f"all {what} tests passed")
    return 0
