#!/usr/bin/env bash
# Installs what ferry's build and tests need on a fresh Debian machine.
# Idempotent: skips what is already there. Needs root for apt (CI runs as root).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
command -v nft >/dev/null 2>&1 || need_apt+=(nftables)
command -v ping >/dev/null 2>&1 || need_apt+=(iputils-ping)
command -v iperf3 >/dev/null 2>&1 || need_apt+=(iperf3)
command -v ethtool >/dev/null 2>&1 || need_apt+=(ethtool)
command -v ddsperf >/dev/null 2>&1 || need_apt+=(cyclonedds-tools)
command -v mosquitto >/dev/null 2>&1 || need_apt+=(mosquitto)
command -v mosquitto_sub >/dev/null 2>&1 || need_apt+=(mosquitto-clients)
# The bare C MQTT client of the RTT study (bench: ferry-mqtt-rtt) links libmosquitto.
[ -f /usr/include/mosquitto.h ] || need_apt+=(libmosquitto-dev)
command -v cc >/dev/null 2>&1 || need_apt+=(gcc)
# Cyclone DDS with DDS Security, built from source by bench/cyclone_security.sh
# (Debian's has no security plugins): CMake, OpenSSL headers, openssl CLI.
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
[ -f /usr/include/openssl/ssl.h ] || need_apt+=(libssl-dev)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
command -v taskset >/dev/null 2>&1 || need_apt+=(util-linux)
# The DDS path (crates/ferry-dds) builds against Cyclone DDS's C library.
[ -f /usr/include/dds/ddsi/ddsi_serdata.h ] || need_apt+=(cyclonedds-dev)
# Python bindings: an interpreter with pip (the wheel is built below).
command -v "${PYTHON:-python3}" >/dev/null 2>&1 || need_apt+=(python3)
"${PYTHON:-python3}" -m pip --version >/dev/null 2>&1 || need_apt+=(python3-pip)
# The ROS 2 peers of the DDS tests live in a virtualenv of their own.
"${PYTHON:-python3}" -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing ${need_apt[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "setup: please install ${need_apt[*]} (needs root); namespace tests will be skipped" >&2
  fi
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: installing Rust with rustup"
  curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c rustfmt -c clippy
  # shellcheck disable=SC1091
  . "$HOME/.cargo/env"
fi
# CI's guard rails (.ci/run) need rustfmt and clippy.
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  command -v rustup >/dev/null 2>&1 && rustup component add rustfmt clippy
fi
# Python bindings (crates/ferry-py): numpy + pytest for the tests, maturin
# builds the abi3 wheel (CPython >= 3.10) into target/wheels, pip installs it.
PY=${PYTHON:-python3}
if command -v "$PY" >/dev/null 2>&1; then
  pip_install() { "$PY" -m pip install -q "$@" 2>/dev/null || "$PY" -m pip install -q --break-system-packages "$@"; }
  "$PY" -c 'import numpy, pytest' 2>/dev/null || pip_install numpy pytest
  # (a maturin too old for `--auditwheel`, used below, is upgraded)
  "$PY" -m maturin build --help 2>/dev/null | grep -- '--auditwheel' >/dev/null || pip_install -U 'maturin>=1.9,<2'
  # The peers of the wireless grid (bench/grid.py, run by bench/smoke.sh):
  # Cyclone DDS and Zenoh as prebuilt wheels from PyPI.
  "$PY" -c 'import cyclonedds' 2>/dev/null || pip_install 'cyclonedds==11.0.1'
  "$PY" -c 'import zenoh' 2>/dev/null || pip_install 'eclipse-zenoh==1.10.2'
  # rmw_zenoh's GID (XXH3-128 of a liveliness token) for the peer that speaks as rmw_zenoh.
  "$PY" -c 'import xxhash' 2>/dev/null || pip_install 'xxhash==3.5.0'
  # The DDS path's tests talk to real ROS 2 nodes: ROS 2 Jazzy's rclpy with
  # its default RMW (rmw_fastrtps_cpp, Fast DDS 2.14) from PyPI, in its own
  # virtualenv (FERRY_ROS2_PYTHON points the tests elsewhere).
  ROS2_VENV=${FERRY_ROS2_VENV:-/opt/ferry-ros2}
  if ! "$ROS2_VENV/bin/python" -c 'import rclpy, std_msgs, std_srvs' >/dev/null 2>&1; then
    echo "setup: installing ROS 2 Jazzy's rclpy (rmw_fastrtps_cpp) into $ROS2_VENV"
    "$PY" -m venv "$ROS2_VENV"
    "$ROS2_VENV/bin/pip" install -q 'ros-jazzy-rclpy[fastrtps]==7.1.6' 'ros-jazzy-std-msgs==5.3.6' 'ros-jazzy-std-srvs==5.3.6'
  fi
  rm -f target/wheels/ferry-*.whl
  echo "setup: building the Python wheel (maturin, release)"
  "$PY" -m maturin build --release -q -m crates/ferry-py/Cargo.toml --features ros2 --auditwheel skip -i "$PY" 2>&1 | grep -v '^📦\|^🔗\|^🐍\|^📡\|^⚠' || true
  whl=$(ls target/wheels/ferry-*.whl 2>/dev/null | head -n1)
  [ -n "$whl" ] || { echo "setup: the Python wheel did not build" >&2; exit 1; }
  pip_install --force-reinstall --no-deps "$whl"
  "$PY" -c 'import ferry; print("setup: python ferry ok (" + ferry.__file__ + ")")'
else
  echo "setup: no $PY; the Python bindings are not installed" >&2
fi
echo "setup: ok ($(cargo --version))"
