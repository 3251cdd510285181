#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end throughput of isowatchd over gRPC on loopback, with the replay client on the same
# machine. Generates a simulator history, starts a release isowatchd with a
# temporary store, replays the history with simulated disorder, waits until every transaction is
# final, and prints: transactions/s (end to end from the client's start, the client's reading of
# the file included, and sustained, from the first batch sent), CPU seconds of client and daemon,
# the daemon's peak RSS and the batch ack latency (receipt to durable) from its metrics.
#
# Usage: bash bench/load/daemon_e2e.sh [TXNS_COMMITTED] [BATCH] [SIGMA_MS]
# ISOWATCHD_ARGS adds flags to isowatchd, e.g. "--set windows.checkers=adya,chronos" to run the
# plug-in checkers on sealed windows; it then also waits for every window to be checked and
# prints the windows' figures.
# TLS=on runs the gRPC ingest over TLS with a bearer token (docs/security.md), with certificates
# made for the run by `openssl`; TLS=mtls with client certificates instead of the token;
# TLS=both runs the same history without TLS and then with it (TLS=on), one after the other on
# the same machine, and prints the two rates side by side. Default: TLS=off.
# Needs the release build (cmake --preset release && cmake --build --preset release).
set -euo pipefail

txns=${1:-300000}
batch=${2:-1000}
sigma=${3:-100}
dir=$(mktemp -d /tmp/isowatch-e2e-XXXXXX)
# shellcheck source-path=SCRIPTDIR source=daemon_lib.sh
source "$(dirname "$0")/daemon_lib.sh"
iw_init

hist=$dir/history.json
"$bin/isowatch" gen --out "$hist" --txns "$txns" --committed --keys 10000 --seed 42 > /dev/null
delivered=$(python3 -c "import json,sys; print(sum(1 for _ in json.load(open('$hist'))))")
echo "history: $txns committed, $delivered transactions in all, $(du -h "$hist" | cut -f1)"

tls=${TLS:-off}
case "$tls" in
  off | on | mtls | both) ;;
  *)
    echo "TLS=$tls: expected off, on, mtls or both" >&2
    exit 2
    ;;
esac

# A CA, a server certificate for 127.0.0.1, a client certificate and a token, in $dir/pki.
make_pki() {
  local p=$dir/pki
  mkdir -p "$p"
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
  openssl req -x509 "${ec[@]}" -keyout "$p/ca.key" -out "$p/ca.pem" -days 1 \
    -subj "/CN=isowatch bench CA" 2> /dev/null
  for leaf in server client; do
    openssl req "${ec[@]}" -keyout "$p/$leaf.key" -out "$p/$leaf.csr" -subj "/CN=$leaf" 2> /dev/null
  done
  printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > "$p/server.ext"
  printf 'extendedKeyUsage=clientAuth\n' > "$p/client.ext"
  for leaf in server client; do
    openssl x509 -req -in "$p/$leaf.csr" -CA "$p/ca.pem" -CAkey "$p/ca.key" -CAcreateserial \
      -out "$p/$leaf.pem" -days 1 -extfile "$p/$leaf.ext" 2> /dev/null
  done
  head -c 32 /dev/urandom | base64 | tr -d '/+=' > "$p/token"
}

# One measurement: $1 is off, on or mtls. Prints its figures and sets `rate` (end to end).
measure() {
  local mode=$1 daemon_tls=() client_tls=()
  local p=$dir/pki
  if [ "$mode" != off ]; then
    [ -f "$p/token" ] || make_pki
    daemon_tls=(--set "grpc.tls.cert_file=$p/server.pem" --set "grpc.tls.key_file=$p/server.key")
    client_tls=(--tls-ca "$p/ca.pem")
    if [ "$mode" = mtls ]; then
      daemon_tls+=(--set "grpc.tls.client_ca_file=$p/ca.pem")
      client_tls+=(--tls-cert "$p/client.pem" --tls-key "$p/client.key")
    else
      daemon_tls+=(--set "grpc.auth.token_file=$p/token")
      client_tls+=(--token-file "$p/token")
    fi
  fi
  rm -rf "$dir/data"
  echo "--- gRPC ingest: TLS $mode"
  # shellcheck disable=SC2086  # ISOWATCHD_ARGS is a list of flags
  iw_start_daemon ${ISOWATCHD_ARGS:-} "${daemon_tls[@]}"

  start=$(date +%s.%N)
  /usr/bin/time -f "%U %S" -o "$dir/client.time" \
    "$bin/isowatch" replay "$hist" --to "127.0.0.1:$grpc_port" --batch "$batch" \
    --sigma-ms "$sigma" "${client_tls[@]}" > "$dir/replay.out"
  sent=$(date +%s.%N)
  # The client reads the whole file before it sends; it says how long the sending took.
  sending=$(sed -n 's/.* in \([0-9.]*\) s (.*/\1/p' "$dir/replay.out")
  iw_wait_final 600  # until every transaction is final (the stream closed, nothing pending)
  done_at=$(date +%s.%N)
  iw_wait_windows 1800
  windows_at=$(date +%s.%N)
  daemon_cpu=$(iw_cpu_of "$daemon_pid")
  daemon_rss=$(awk '/VmHWM/ {print $2 / 1024}' "/proc/$daemon_pid/status")
  iw_http /metrics > "$dir/metrics"
  iw_http /api/v1/status > "$dir/status"
  iw_stop_daemon

  python3 - "$dir" "$start" "$sent" "$done_at" "$delivered" "$daemon_cpu" "$daemon_rss" "$windows_at" "$sending" <<'PY' | tee "$dir/report.$mode"
import json, re, sys
d, start, sent, done, n, dcpu, drss = sys.argv[1], *map(float, sys.argv[2:5]), int(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7])
windows_at, sending = float(sys.argv[8]), float(sys.argv[9])
cu, cs = map(float, open(f"{d}/client.time").read().split()[-2:])
metrics = open(f"{d}/metrics").read()
buckets = []
for m in re.finditer(r'^isowatch_ingest_batch_latency_seconds_bucket\{le="([^"]+)"\} (\S+)$', metrics, re.M):
    le = float("inf") if m.group(1) == "+Inf" else float(m.group(1))
    buckets.append((le, float(m.group(2))))
total = buckets[-1][1] if buckets else 0
def quantile(q):
    for le, c in buckets:
        if total and c >= q * total:
            return le
    return float("nan")
s = sum(float(x) for x in re.findall(r'^isowatch_ingest_batch_latency_seconds_sum (\S+)$', metrics, re.M))
status = json.load(open(f"{d}/status"))
print(f"sent in {sent - start:.2f} s: {n / (sent - start):,.0f} transactions/s sent and acknowledged")
print(f"all final after {done - start:.2f} s: {n / (done - start):,.0f} transactions/s end to end")
first = sent - sending  # the first batch left the client
print(f"sustained, from the first batch sent to all final ({done - first:.2f} s): "
      f"{n / (done - first):,.0f} transactions/s")
print(f"CPU: client {cu + cs:.2f} s (user {cu:.2f}, sys {cs:.2f}); daemon {dcpu:.2f} s")
mem = status['memory']
print(f"daemon peak RSS {drss:,.0f} MiB; engine state {mem['engine_bytes'] / 2**20:,.0f} MiB, "
      f"live history {mem.get('history_bytes', 0) / 2**20:,.0f} MiB")
if total:
    print(f"batch ack latency: mean {1000 * s / total:.1f} ms, p50 <= {1000 * quantile(0.5):g} ms, p99 <= {1000 * quantile(0.99):g} ms ({total:.0f} batches)")
print(f"violations {status['counts']['violations']}, refused {status['counts']['refused_transactions']}")
w = status["windows"]
if w["enabled"]:
    print(f"windows: {w['sealed']} sealed, {w['done']} done, {w['dropped']} dropped, "
          f"{w['late_transactions']} late transactions; all checked {windows_at - start:.2f} s after the start")
    for c in w["checkers"]:
        per = c["seconds"] / c["checked"] if c["checked"] else float("nan")
        print(f"  {c['name']}: {c['checked']} windows checked, {c['unknown']} unknown, "
              f"{c['violations']} violations, {c['seconds']:.2f} s in all ({1000 * per:.1f} ms per window)")
PY
}

if [ "$tls" = both ]; then
  measure off
  measure on
  python3 - "$dir/report.off" "$dir/report.on" <<'PY'
import re, sys
def rates(path):
    text = open(path).read()
    def grab(pattern):
        m = re.search(pattern, text)
        return float(m.group(1).replace(",", "")) if m else float("nan")
    return (grab(r"([\d,]+) transactions/s sent and acknowledged"),
            grab(r"([\d,]+) transactions/s end to end"),
            grab(r"\): ([\d,]+) transactions/s\n"))
off, on = rates(sys.argv[1]), rates(sys.argv[2])
print("--- A/B, transactions/s: TLS off / TLS on (TLS + token) / change")
for name, a, b in zip(("sent and acknowledged", "end to end", "sustained"), off, on):
    print(f"{name}: {a:,.0f} / {b:,.0f} / {100 * (b - a) / a:+.1f}%")
PY
else
  measure "$tls"
fi
