# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of isowatchd's HTTP server under abuse (docs/operations.md, "HTTP under
load"), one case per run:

  idle          300, then 1,000 connections that connect and send nothing: every scrape of
                /healthz and /metrics still answers
  slow_headers  300 connections that send a request header one byte at a time: scrapes still
                answer, and the server closes each slow connection at its header deadline
  flood         the load test: 1,000 idle connections (re-opened as the server drops them) and a
                flood of refused ingest batches from three clients for 30 s, while /healthz and
                /metrics are scraped ten times a second; prints the scrape success rate

Usage: http_abuse_test.py PATH/TO/isowatch PATH/TO/isowatchd CASE
Each daemon runs on loopback, on free ports, with its store in a temporary directory.
"""

import http.client
import os
import resource
import selectors
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon_limits_test import Daemon, Failure, check, run, run_cases  # noqa: E402


def raise_open_file_limit(need):
    """Raises this process's soft limit of open files to its hard limit (the daemon, started
    afterwards, inherits it); fails when even the hard limit is below `need`."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    check(soft == resource.RLIM_INFINITY or soft >= need,
          f"the open-file limit is {soft}; this test needs {need}")


def scrape(port, target, timeout=10.0):
    """GET on a new connection, given as long as Prometheus gives a scrape by default (10 s); the
    status, or the error as a string."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", target)
        response = conn.getresponse()
        response.read()
        return response.status
    except (OSError, http.client.HTTPException) as e:
        return f"{type(e).__name__}: {e}"
    finally:
        conn.close()


def metric_text(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        check(response.status == 200, f"/metrics answered {response.status}")
        return response.read().decode()
    finally:
        conn.close()


def sample(text, name):
    """The value of series `name` (`x_total` or `x_total{reason="y"}`); for a name without labels,
    the sum over its label values."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        series = line.split()[0]
        if series == name or ("{" not in name and series.startswith(name + "{")):
            total += float(line.split()[-1])
    return total


def dropped(port, reason):
    return sample(metric_text(port), f'isowatch_http_connections_dropped_total{{reason="{reason}"}}')


class Scraper:
    """Scrapes `targets` every `period` seconds on a thread of its own, until stopped; counts the
    answers 200 and keeps the failures."""

    def __init__(self, port, targets, period=0.1):
        self.port, self.targets, self.period = port, targets, period
        self.ok = {t: 0 for t in targets}
        self.failures = {t: [] for t in targets}
        self.latencies = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            for target in self.targets:
                start = time.monotonic()
                status = scrape(self.port, target)
                self.latencies.append(time.monotonic() - start)
                if status == 200:
                    self.ok[target] += 1
                else:
                    self.failures[target].append(status)
            self._stop.wait(self.period)

    def stop(self):
        self._stop.set()
        self._thread.join()

    def report(self):
        parts = []
        for t in self.targets:
            n = self.ok[t] + len(self.failures[t])
            parts.append(f"{t} {self.ok[t]}/{n} ({100.0 * self.ok[t] / max(n, 1):.1f}%)")
        ms = sorted(1000 * t for t in self.latencies) or [0]
        return (", ".join(parts) + f"; latency p50 {ms[len(ms) // 2]:.0f} ms, "
                f"p99 {ms[min(len(ms) - 1, len(ms) * 99 // 100)]:.0f} ms, max {ms[-1]:.0f} ms")

    def check_all_ok(self, what):
        for t in self.targets:
            n = self.ok[t] + len(self.failures[t])
            check(n > 0, f"{what}: no scrape of {t} finished")
            check(not self.failures[t],
                  f"{what}: {len(self.failures[t])} of {n} scrapes of {t} failed, e.g. "
                  f"{self.failures[t][:3]} ({self.report()})")


class Herd:
    """`n` connections to 127.0.0.1:port that hold their place: `idle` ones send nothing, `slow`
    ones send a request header one byte at a time (one byte per connection every `pace` seconds)
    and never finish it. With `reopen`, a connection the server closes is opened again, so that
    the server always sees `n`."""

    HEADER = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 100000

    def __init__(self, port, n, mode="idle", pace=1.0, reopen=False):
        self.port, self.mode, self.pace, self.reopen = port, mode, pace, reopen
        self.socks = {}  # socket -> [opened at, bytes sent]
        # epoll: select() cannot watch descriptors above 1023.
        self.selector = selectors.DefaultSelector()
        self.closed_after = []  # seconds from opening to the server's close, per closed socket
        self.opened = 0
        self._stop = threading.Event()
        for _ in range(n):
            self._open()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _open(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(True)
        s.connect(("127.0.0.1", self.port))
        s.setblocking(False)
        self.socks[s] = [time.monotonic(), 0]
        self.selector.register(s, selectors.EVENT_READ)
        self.opened += 1

    def _closed_by_server(self, s):
        try:
            return s.recv(4096) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

    def _run(self):
        next_byte = time.monotonic()
        while not self._stop.is_set():
            for key, _ in self.selector.select(0.05):
                s = key.fileobj
                if self._closed_by_server(s):
                    self.selector.unregister(s)
                    opened, _ = self.socks.pop(s)
                    self.closed_after.append(time.monotonic() - opened)
                    s.close()
                    if self.reopen and not self._stop.is_set():
                        try:
                            self._open()
                        except OSError:
                            pass
            if self.mode == "slow" and time.monotonic() >= next_byte:
                next_byte += self.pace
                for s, state in list(self.socks.items()):
                    try:
                        s.send(self.HEADER[state[1]:state[1] + 1])
                        state[1] += 1
                    except OSError:
                        pass

    def open_count(self):
        return len(self.socks)

    def close(self):
        self._stop.set()
        self._thread.join()
        for s in self.socks:
            s.close()
        self.socks.clear()
        self.selector.close()


def case_idle(cli, daemond, tmp):
    raise_open_file_limit(1200)
    d = Daemon(daemond, tmp, "idle")
    try:
        for n in (300, 1000):
            herd = Herd(d.http, n)
            try:
                scraper = Scraper(d.http, ["/healthz", "/metrics"])
                time.sleep(5)
                scraper.stop()
                print(f"idle: {n} idle connections: {scraper.report()}")
                scraper.check_all_ok(f"with {n} idle connections")
            finally:
                herd.close()
    finally:
        d.stop()


def case_slow_headers(cli, daemond, tmp):
    raise_open_file_limit(600)
    d = Daemon(daemond, tmp, "slow")
    try:
        herd = Herd(d.http, 300, mode="slow", pace=0.5)
        try:
            scraper = Scraper(d.http, ["/healthz", "/metrics"])
            # The default header deadline is 10 s: every slow connection is closed by then.
            deadline = time.monotonic() + 20
            while herd.open_count() > 0 and time.monotonic() < deadline:
                time.sleep(0.1)
            scraper.stop()
            print(f"slow_headers: 300 slow connections: {scraper.report()}; "
                  f"{len(herd.closed_after)} closed by the server, the last after "
                  f"{max(herd.closed_after, default=0):.1f} s")
            scraper.check_all_ok("with 300 slow connections")
            check(herd.open_count() == 0,
                  f"{herd.open_count()} of 300 slow connections still open after 20 s")
        finally:
            herd.close()
        # Over the limit of 256, the slow connections idle the longest made room for the newer
        # ones and for the scrapes; the others were closed at their header deadline.
        early = sum(1 for t in herd.closed_after if t < 9)
        late = sum(1 for t in herd.closed_after if t >= 9)
        evicted = dropped(d.http, "evicted")
        timed_out = dropped(d.http, "header_timeout")
        print(f"slow_headers: {early} closed early, {evicted:.0f} evicted; {late} closed after 9 s, "
              f"{timed_out:.0f} header timeouts")
        check(early >= 300 - 256, f"only {early} slow connections were evicted")
        check(early == evicted, f"{early} slow connections closed early, {evicted} evicted")
        check(late == timed_out, f"{late} slow connections closed late, {timed_out} header "
              f"timeouts counted")
        check(max(herd.closed_after) < 12,
              f"a slow connection was closed after {max(herd.closed_after):.1f} s, past its header "
              f"deadline of 10 s")
    finally:
        d.stop()


def case_flood(cli, daemond, tmp):
    raise_open_file_limit(1200)
    history = os.path.join(tmp, "flood.json")
    status, out, _ = run([cli, "gen", "--out", history, "--txns", "20000", "--keys", "100",
                          "--seed", "1"])
    check(status == 0, f"isowatch gen failed: {out}")
    # Every batch of 20 transactions is over the limit of 10: refused whole, with a reason.
    d = Daemon(daemond, tmp, "flood", ["--set", "ingest.max_batch_transactions=10",
                                       "--set", "ingest.max_streams=100000"])
    stop = threading.Event()
    refused_runs = [0]

    def refused_batches(i):
        # A stream of its own for each run: batches sent again on a stream are duplicates.
        run_number = 0
        while not stop.is_set():
            subprocess.run([cli, "replay", history, "--to", f"127.0.0.1:{d.grpc}",
                            "--stream", f"flood{i}-{run_number}", "--batch", "20", "--quiet"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
            run_number += 1
            refused_runs[0] += 1

    try:
        herd = Herd(d.http, 1000, reopen=True)
        senders = [threading.Thread(target=refused_batches, args=(i,), daemon=True)
                   for i in range(3)]
        for t in senders:
            t.start()
        try:
            scraper = Scraper(d.http, ["/healthz", "/metrics"])
            time.sleep(30)
            scraper.stop()
        finally:
            stop.set()
            for t in senders:
                t.join()
            held = herd.open_count()
            herd.close()
        text = metric_text(d.http)
        refused = sample(text, "isowatch_refused_batches_total")
        print(f"flood: 1000 idle connections ({herd.opened} opened in all, {held} held at the "
              f"end), {refused_runs[0]} replays, {refused:.0f} batches refused; "
              f"scrapes: {scraper.report()}")
        check(refused > 0, "the flood of refused batches refused nothing")
        scraper.check_all_ok("under the flood")
    finally:
        d.stop()


CASES = {
    "idle": case_idle,
    "slow_headers": case_slow_headers,
    "flood": case_flood,
}


if __name__ == "__main__":
    sys.exit(run_cases(CASES, sys.argv, __doc__))
