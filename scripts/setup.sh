#!/usr/bin/env bash
# Installs what ferry's build and tests need on a fresh Debian machine.
# Idempotent: skips what is already there. Needs root for apt (CI runs as root).
set -euo pipefail

need_apt=()
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
command -v nft >/dev/null 2>&1 || need_apt+=(nftables)
command -v ping >/dev/null 2>&1 || need_apt+=(iputils-ping)
command -v iperf3 >/dev/null 2>&1 || need_apt+=(iperf3)
command -v ethtool >/dev/null 2>&1 || need_apt+=(ethtool)
command -v ddsperf >/dev/null 2>&1 || need_apt+=(cyclonedds-tools)
command -v mosquitto >/dev/null 2>&1 || need_apt+=(mosquitto)
command -v mosquitto_sub >/dev/null 2>&1 || need_apt+=(mosquitto-clients)
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
  curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
  # shellcheck disable=SC1091
  . "$HOME/.cargo/env"
fi
echo "setup: ok ($(cargo --version))"
