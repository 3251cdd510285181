# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034  # sets variables for the scripts that source it
# Helpers for the benchmarks that run isowatchd (daemon_e2e.sh, daemon_budget.sh); sourced, not
# run. HTTP is read with python3's urllib: curl is not installed everywhere.
#
# The caller sets `dir` (a temporary directory, removed on exit) and calls iw_init; then
# iw_start_daemon, iw_http, iw_wait_final, iw_stop_daemon. Needs bash, python3 and a release build
# (cmake --preset release && cmake --build --preset release), or ISOWATCH_BIN pointing at one.

iw_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=${ISOWATCH_BIN:-$iw_root/build/release/bin}
daemon_pid=""
grpc_port=""
http_port=""

iw_cleanup() {
  if [ -n "$daemon_pid" ]; then kill -9 "$daemon_pid" 2> /dev/null || true; fi
  if [ -n "${IW_KEEP:-}" ] && [ -n "${dir:-}" ]; then
    echo "kept $dir (IW_KEEP)" >&2
  elif [ -n "${dir:-}" ]; then
    rm -rf "$dir"
  fi
}

# Checks the binaries and removes `dir` (and kills the daemon) on exit; IW_KEEP=1 keeps `dir`
# (the daemon's log, its store and spill with their RocksDB LOG files).
iw_init() {
  for b in isowatch isowatchd; do
    if [ ! -x "$bin/$b" ]; then
      echo "no $bin/$b: build the release preset or set ISOWATCH_BIN" >&2
      exit 2
    fi
  done
  trap iw_cleanup EXIT
}

# Starts isowatchd on free ports with its store in $dir/data and its log in $dir/daemon.log;
# extra arguments go to isowatchd. Sets daemon_pid, grpc_port and http_port.
iw_start_daemon() {
  rm -f "$dir/ports"
  "$bin/isowatchd" --data-dir "$dir/data" --grpc-port 0 --http-port 0 --ports-file "$dir/ports" \
    --set log.level=warn "$@" 2> "$dir/daemon.log" &
  daemon_pid=$!
  for _ in $(seq 1 600); do
    [ -f "$dir/ports" ] && break
    if ! kill -0 "$daemon_pid" 2> /dev/null; then
      echo "isowatchd did not start:" >&2
      cat "$dir/daemon.log" >&2
      daemon_pid=""
      exit 1
    fi
    sleep 0.1
  done
  grpc_port=$(python3 -c "import json; print(json.load(open('$dir/ports'))['grpc'])")
  http_port=$(python3 -c "import json; print(json.load(open('$dir/ports'))['http'])")
}

# Prints the body of GET http://127.0.0.1:$http_port$1; fails on an error.
iw_http() {
  python3 - "http://127.0.0.1:$http_port$1" <<'PY'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
    sys.stdout.write(r.read().decode())
PY
}

# Polls /api/v1/status every 100 ms until the Python expression $2 holds of it (`s`, the parsed
# status) or $1 seconds pass; then fails with message $3.
iw_wait_status() {
  python3 - "http://127.0.0.1:$http_port/api/v1/status" "$1" "$2" "$3" <<'PY'
import json, sys, time, urllib.request
url, limit, condition, message = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
deadline = time.monotonic() + limit
while time.monotonic() < deadline:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            s = json.load(r)
        if eval(condition, {"s": s}):
            sys.exit(0)
    except OSError:
        pass
    time.sleep(0.1)
sys.exit(message)
PY
}

# Waits until every stream is closed with nothing pending (at most $1 seconds, default 600).
iw_wait_final() {
  iw_wait_status "${1:-600}" \
    's["streams"] and all(x["closed"] and x["pending_transactions"] == 0 for x in s["streams"])' \
    "the streams did not become final in time"
}

# Waits until the windows sealed so far are all checked or dropped (nothing queued or running);
# at most $1 seconds (default 600). Returns at once when no plug-in runs on windows.
iw_wait_windows() {
  iw_wait_status "${1:-600}" \
    'not s["windows"]["enabled"] or (s["windows"]["queued"] == 0 and s["windows"]["running"] == 0 and s["windows"]["done"] >= s["windows"]["sealed"])' \
    "the windows were not checked in time"
}

# CPU seconds (user + system) of process $1 so far.
iw_cpu_of() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }

# Drains the daemon (SIGTERM) and waits for it to exit.
iw_stop_daemon() {
  kill -TERM "$daemon_pid"
  wait "$daemon_pid" || true
  daemon_pid=""
}

# Sets `hist` to a key-value simulator history of $1 transactions over $2 keys (seed 42) in the
# native format, generated once into ${ISOWATCH_BENCH_CACHE:-/tmp/isowatch-bench-cache} (under a
# temporary name, then renamed), with its ground truth beside it ($hist.truth.json). VALUES (int or
# bytes) and DIST (the key distribution: uniform, zipfian or hotspot; default zipfian) go to
# `isowatch gen`; the name carries them when they are not the defaults.
iw_cached_history() {
  local cache=${ISOWATCH_BENCH_CACHE:-/tmp/isowatch-bench-cache}
  local values=${VALUES:-int}
  local dist=${DIST:-zipfian}
  mkdir -p "$cache"
  hist=$cache/kv-$1-keys$2-seed42
  [ "$values" = int ] || hist=$hist-$values
  [ "$dist" = zipfian ] || hist=$hist-$dist
  hist=$hist.native
  if [ ! -f "$hist" ]; then
    echo "generating $hist ..."
    "$bin/isowatch" gen --out "$hist.tmp" --truth "$hist.truth.json" --format native --data kv \
      --txns "$1" --keys "$2" --dist "$dist" --seed 42 --values "$values" > /dev/null
    mv "$hist.tmp" "$hist"
  fi
}
