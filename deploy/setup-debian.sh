#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs every Debian 12 package isowatch needs to build, test and run.
# Idempotent and non-interactive; run as root (or through sudo).
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config git ccache clang clang-format clang-tidy
  libclang-rt-14-dev
  # libraries
  libabsl-dev libprotobuf-dev protobuf-compiler libsimdjson-dev libcli11-dev
  libfmt-dev libspdlog-dev rapidjson-dev
  libgrpc++-dev protobuf-compiler-grpc librocksdb-dev libyaml-cpp-dev libboost-dev
  prometheus-cpp-dev libxxhash-dev libpq-dev libssl-dev librdkafka-dev
  # MySQL protocol client of the TiDB collector's workload (collectors/tidb/mysql_conn.h)
  libmariadb-dev
  # SAT solvers of the polygraph checker (docs/checkers/polygraph.md)
  libcadical-dev libcryptominisat5-dev
  # real peers in tests
  prometheus postgresql-15 mariadb-server
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev python3 time openssl
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-debian: all ${#packages[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
echo "setup-debian: installing ${missing[*]}"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
