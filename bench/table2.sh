#!/usr/bin/env bash
# Seed 001 Table II on the lab, ferry and its peer in ONE run: the same grid
# (32–512 KB at 30 Hz, ideal / 1 % / 20 % loss both ways / 20 s outage, 1000
# messages per cell) for
#   1. ferry with its defaults (UDP path chosen by itself),
#   2. ferry's outage row with a history sized to the outage (udp_history_mb),
#   3. Cyclone DDS with its default configuration (PyPI cyclonedds),
# back to back on the same emulated link, then the table and plot
# (bench/results/wireless.{md,png}, cyclone_table2.{md,json},
# wireless-outage-history200.{md,json}).
#
# Usage (root, ~45 min): bash bench/table2.sh [--quick]
#   --quick: 60 messages, 64 and 512 KB, ideal + 20 % loss (a few minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "table2: the lab needs root" >&2
  exit 1
fi
python3 -c 'import cyclonedds, matplotlib' 2>/dev/null ||
  pip install --break-system-packages -q 'cyclonedds==11.0.1' matplotlib
cargo build --release -q -p ferry-lab

R=bench/results
W=./target/release/ferry-wireless
if [ "${1:-}" = "--quick" ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
  "$W" run --quick --out "$out/wireless"
  python3 bench/cyclone_table2.py run --quick --out "$out/cyclone"
  exit 0
fi

hist=$(mktemp)
trap 'rm -f "$hist"' EXIT
printf 'udp_history_mb = 200\n' > "$hist"
echo "== $(date -u +%FT%TZ) ferry (defaults), load $(cut -d' ' -f1-3 /proc/loadavg)"
"$W" run --out "$R/wireless"
echo "== $(date -u +%FT%TZ) ferry outage row, udp_history_mb = 200"
FERRY_CONFIG="$hist" "$W" run --conditions outage --out "$R/wireless-outage-history200"
echo "== $(date -u +%FT%TZ) Cyclone DDS (default configuration)"
python3 bench/cyclone_table2.py run --count 1000 --out "$R/cyclone_table2"
echo "== $(date -u +%FT%TZ) done, load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 bench/plot_wireless.py
