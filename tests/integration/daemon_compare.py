# SPDX-License-Identifier: Apache-2.0
"""Helpers of daemon_test.sh: free ports, waiting for isowatchd, its HTTP API and metrics, and the
comparison of its violations with `isowatch check --json`.

Usage:
  daemon_compare.py free-ports N
  daemon_compare.py wait-ports FILE PID TIMEOUT          prints "GRPC HTTP"
  daemon_compare.py wait-ready HTTP_PORT TIMEOUT
  daemon_compare.py wait-checked HTTP_PORT STREAM TIMEOUT
  daemon_compare.py wait-acked HTTP_PORT STREAM MIN_SEQ TIMEOUT
  daemon_compare.py violations HTTP_PORT OUT.json [STREAM [CHECKER]]
  daemon_compare.py wait-windows HTTP_PORT TIMEOUT
  daemon_compare.py compare OFFLINE.json ONLINE.json
  daemon_compare.py metrics HTTP_PORT OUT.txt VIOLATIONS INGESTED
  daemon_compare.py ingested HTTP_PORT STREAM TRANSACTIONS

Each command exits 0 on success and 1, with a message on standard error, on failure.
"""

import json
import os
import socket
import sys
import time
import urllib.parse
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon_util import http_get as get  # noqa: E402  (GET http://127.0.0.1:PORT/TARGET)


def fail(message):
    print(f"daemon_compare: {message}", file=sys.stderr)
    sys.exit(1)


def poll(condition, timeout, what):
    deadline = time.monotonic() + float(timeout)
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def free_ports(n):
    """N distinct ports that were free a moment ago (bound to port 0 together, then released)."""
    sockets = []
    for _ in range(int(n)):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        sockets.append(s)
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    print(" ".join(str(p) for p in ports))


def wait_ports(path, pid, timeout):
    def ready():
        try:
            os.kill(int(pid), 0)
        except OSError:
            fail(f"isowatchd (pid {pid}) exited before writing {path}")
        try:
            with open(path) as f:
                ports = json.load(f)
            return f"{int(ports['grpc'])} {int(ports['http'])}"
        except (OSError, ValueError, KeyError):
            return None

    print(poll(ready, timeout, f"the ports file {path}"))


def wait_ready(port, timeout):
    poll(lambda: get(port, "/readyz")[0] == 200, timeout, f"/readyz on port {port}")


def stream_status(port, stream):
    status, body = get(port, "/api/v1/status")
    if status != 200:
        return None
    for s in json.loads(body).get("streams", []):
        if s.get("name") == stream:
            return s
    return None


def wait_checked(port, stream, timeout):
    def checked():
        s = stream_status(port, stream)
        return s is not None and s["closed"] and s["pending_transactions"] == 0

    poll(checked, timeout, f"stream {stream} closed with nothing pending")


def wait_acked(port, stream, min_seq, timeout):
    def acked():
        s = stream_status(port, stream)
        return s is not None and s.get("acked_sequence", 0) >= int(min_seq)

    poll(acked, timeout, f"stream {stream} acknowledged up to batch {min_seq}")


def wait_windows(port, timeout):
    """Waits until at least one window was sealed and every sealed window is done."""

    def done():
        status, body = get(port, "/api/v1/status")
        if status != 200:
            return False
        w = json.loads(body).get("windows", {})
        return w.get("enabled") and w["sealed"] > 0 and w["done"] == w["sealed"]

    poll(done, timeout, "every sealed window done")


def violations(port, out, stream=None, checker=None):
    """Every page of /api/v1/violations (of one stream and one checker, if given: an empty stream
    is every stream); fails if an id comes twice or a token does not end."""
    result = []
    ids = set()
    token = ""
    for _ in range(100000):
        query = {"limit": "37"}
        if token:
            query["page_token"] = token
        if stream:
            query["stream"] = stream
        if checker:
            query["checker"] = checker
        status, body = get(port, "/api/v1/violations?" + urllib.parse.urlencode(query))
        if status != 200:
            fail(f"/api/v1/violations answered {status}: {body}")
        page = json.loads(body)
        for v in page["violations"]:
            if v["id"] in ids:
                fail(f"violation {v['id']} served twice: {json.dumps(v)}")
            ids.add(v["id"])
            result.append(v)
        token = page["next_page_token"]
        if not token:
            break
    else:
        fail("/api/v1/violations: the pages do not end")
    with open(out, "w") as f:
        json.dump(result, f)
    print(len(result))


def comparable(v):
    """What must agree between the online and the offline report: the anomaly, the transactions
    and the key; for EXT only the reader, since the kind and the writer named depend on what had
    arrived when the verdict became final."""
    txns = v["txns"]
    if v["anomaly"] == "EXT":
        txns = txns[:1]
    return (v["anomaly"], json.dumps(txns), json.dumps(v.get("key")))


def compare(offline_path, online_path):
    with open(offline_path) as f:
        offline = json.load(f)["violations"]
    with open(online_path) as f:
        online = json.load(f)
    want = Counter(comparable(v) for v in offline)
    got = Counter(comparable(v) for v in online)
    if want != got:
        missing = want - got
        extra = got - want
        for item, n in list(missing.items())[:10]:
            print(f"  missing online: {item} x{n}", file=sys.stderr)
        for item, n in list(extra.items())[:10]:
            print(f"  extra online:   {item} x{n}", file=sys.stderr)
        fail(f"{sum(missing.values())} offline violations missing online, "
             f"{sum(extra.values())} online violations not offline "
             f"(offline {len(offline)}, online {len(online)})")
    if not offline:
        fail("the offline check found no violation: the history tests nothing")
    kinds = Counter(v["anomaly"] for v in offline)
    print(f"{len(online)} violations equal offline ({dict(sorted(kinds.items()))})")


def sample_total(text, name):
    """The sum of every sample of metric NAME, whatever its labels."""
    total = 0.0
    found = False
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        if series == name or series.startswith(name + "{"):
            total += float(value)
            found = True
    return total if found else None


def metrics(port, out, want_violations, want_ingested):
    want = {"isowatch_violations_total": float(want_violations),
            "isowatch_ingested_transactions_total": float(want_ingested)}
    last = {}

    def right():
        status, body = get(port, "/metrics")
        if status != 200:
            return False
        last["body"] = body
        return all(sample_total(body, name) == value for name, value in want.items())

    deadline = time.monotonic() + 30
    while not right():
        if time.monotonic() > deadline:
            body = last.get("body", "")
            got = {name: sample_total(body, name) for name in want}
            fail(f"/metrics: want {want}, got {got}")
        time.sleep(0.1)
    with open(out, "w") as f:
        f.write(last["body"])


def ingested(port, stream, want):
    """The stream's transactions, each counted once by /api/v1/status and by /metrics."""
    s = stream_status(port, stream)
    if s is None:
        fail(f"no stream {stream} in /api/v1/status")
    if s["ingested_transactions"] != int(want):
        fail(f"stream {stream}: /api/v1/status counts {s['ingested_transactions']} "
             f"transactions, want {want}")
    status, body = get(port, "/metrics")
    if status != 200:
        fail(f"/metrics answered {status}")
    got = sample_total(body, f'isowatch_ingested_transactions_total{{stream="{stream}"}}')
    if got != float(want):
        fail(f"stream {stream}: /metrics counts {got} transactions, want {want}")


def main(argv):
    if len(argv) < 2:
        fail(__doc__)
    command, args = argv[1], argv[2:]
    commands = {
        "free-ports": (free_ports, 1),
        "wait-ports": (wait_ports, 3),
        "wait-ready": (wait_ready, 2),
        "wait-checked": (wait_checked, 3),
        "wait-acked": (wait_acked, 4),
        "violations": (violations, None),
        "wait-windows": (wait_windows, 2),
        "compare": (compare, 2),
        "metrics": (metrics, 4),
        "ingested": (ingested, 3),
    }
    if command not in commands:
        fail(f"unknown command {command}\n{__doc__}")
    function, arity = commands[command]
    if arity is not None and len(args) != arity:
        fail(f"{command} takes {arity} arguments\n{__doc__}")
    function(*args)


if __name__ == "__main__":
    main(sys.argv)
