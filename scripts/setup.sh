#!/usr/bin/env bash
# Installs every Debian package ATP needs to build and test. Idempotent: packages already
# present are not fetched again, so `make test` on a set-up machine touches no network.
set -euo pipefail

packages=(
  cmake ninja-build g++ make pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libtomlplusplus-dev libspdlog-dev libfmt-dev
  python3 iproute2 iptables iperf3 openssl libssl-dev ethtool
  clang-14 libclang-rt-14-dev libgloo-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  python3-dev pybind11-dev python3-numpy python3-pytest python3-torch python3-sklearn libtorch-dev
  python3-pip python3-setuptools python3-wheel
)
# scripts/sim-plots.py draws with matplotlib: `scripts/setup.sh --plots` adds it.
if [ "${1:-}" = "--plots" ]; then
  packages+=(python3-matplotlib)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: these Debian packages are missing: ${missing[*]}" >&2
  echo "setup: run as root (or: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
