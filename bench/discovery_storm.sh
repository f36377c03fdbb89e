#!/usr/bin/env bash
# Discovery traffic with N ferry processes on one host: does it stay linear?
# Runs N `ferry topic pub` processes (one node, one publisher, one admin
# service each) in a private network namespace, counts every discovery
# datagram they send with an nftables counter, and prints packets/s.
# Usage: bench/discovery_storm.sh [--quick] [FERRY_BINARY]   (needs root)
set -euo pipefail
quick=0
if [ "${1:-}" = "--quick" ]; then quick=1; shift; fi
ferry=${1:-target/release/ferry}
[ -x "$ferry" ] || { echo "build first: cargo build --release ($ferry missing)" >&2; exit 1; }
ns=ferrystorm$$
warm=3; window=10; sizes="5 10 20"
if [ $quick = 1 ]; then warm=2; window=3; sizes="5 20"; fi
# kill -9 leaves the publishers' shared-memory files: `ferry shm gc` removes
# those of dead processes.
cleanup() {
  ip netns pids $ns 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  ip netns del $ns 2>/dev/null || true
  "$ferry" shm gc >/dev/null 2>&1 || true
}
trap cleanup EXIT
ip netns add $ns
ip -n $ns link set lo up
ip netns exec $ns nft -f - <<'NFT'
table inet storm {
  counter disco { }
  chain out { type filter hook output priority 0; udp dport 7400-7415 counter name disco; }
}
NFT
echo "| processes | discovery datagrams/s | per process/s | bytes/s |"
echo "|---:|---:|---:|---:|"
for n in $sizes; do
  pids=()
  for i in $(seq 1 $n); do
    FERRY_DOMAIN_ID=0 FERRY_DISCOVERY=localhost ip netns exec $ns "$ferry" topic pub /storm/t$i std_msgs/msg/String "data: $i" -r 1 >/dev/null 2>&1 &
    pids+=($!)
  done
  sleep $warm
  ip netns exec $ns nft reset counter inet storm disco >/dev/null
  sleep $window
  read -r pk by < <(ip netns exec $ns nft list counter inet storm disco | awk '/packets/ {print $2, $4}')
  echo "| $n | $(awk "BEGIN{printf \"%.1f\", $pk/$window}") | $(awk "BEGIN{printf \"%.2f\", $pk/$window/$n}") | $(awk "BEGIN{printf \"%.0f\", $by/$window}") |"
  kill -9 "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  sleep 0.5
done
