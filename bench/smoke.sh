#!/usr/bin/env bash
# Quick modes of ferry's experiments, as CI runs them (root needed for the
# lab; without root they are skipped with a message), the Zenoh comparison
# (bench/Cargo.toml) included, so none of them can rot unseen. Full runs are
# made by hand: see bench/results/*.md and bench/README.md for the commands.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "bench smoke: SKIPPED (the lab needs root)"
  exit 0
fi
cargo build --release -q -p ferry-lab -p ferry-cli --features ferry-lab/zenoh
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "== ferry-sec-micro --quick (issue 22: Ed25519 per beacon; signed vs plain discovery converging and at rest)"
# (It exits non-zero when a signed or plain domain does not converge.)
./target/release/ferry-sec-micro --quick
echo "== ferry-wireless with FERRY_SECURITY=enforce (protected UDP on the Wi-Fi link: 20 % loss, and a 6 s outage past the 3 s discovery lease)"
./target/release/ferry security create-keystore "$out/ks" > /dev/null
./target/release/ferry security create-identity "$out/ks" / > /dev/null
printf 'version: 1\nidentities:\n  /: { allow: { publish: ["/**"], subscribe: ["/**"] } }\n' > "$out/policy.yaml"
./target/release/ferry security create-permissions "$out/ks" "$out/policy.yaml" > /dev/null
FERRY_SECURITY=enforce FERRY_KEYSTORE="$out/ks" FERRY_ENCLAVE=/ ./target/release/ferry-wireless run \
  --sizes 64 --conditions loss20,outage --count 300 --outage 3:9 | tee "$out/sec.txt"
if [ "$(grep -cE '^\| (loss20|outage) \| 64 KB \| 300/300 ' "$out/sec.txt")" != 2 ]; then
  echo "bench smoke: protected UDP lost samples (loss or outage)" >&2
  exit 1
fi
echo "== ferry-lab check --quick"
./target/release/ferry-lab check --quick | tee "$out/lab.md"
grep -q "wifi: 300 Mbit/s" "$out/lab.md"
echo "== ferry-wireless run --quick (seed 001 Table II, 2 sizes x ideal/20 % loss)"
./target/release/ferry-wireless run --quick --out "$out/wireless" | tee "$out/w.txt"
# Reliable delivery is complete in every quick cell.
if grep -E '^\| (ideal|loss20) ' "$out/w.txt" | grep -vq '60/60'; then
  echo "bench smoke: a quick Table II cell lost samples" >&2
  exit 1
fi
echo "== ferry-wireless run --link lte (256 KB at 30 Hz: 126 % of a 50 Mbit/s link, no link hint)"
./target/release/ferry-wireless run --link lte --sizes 256 --conditions ideal --count 60 | tee "$out/lte.txt"
if grep -E '^\| ideal ' "$out/lte.txt" | grep -vq '60/60'; then
  echo "bench smoke: the overloaded LTE cell lost samples" >&2
  exit 1
fi
echo "== ferry-wireless run, best effort, 10 % loss (recovery shards)"
FERRY_WIRELESS_QOS=best-effort ./target/release/ferry-wireless run --sizes 64 --conditions loss10 --count 60 | tee "$out/be.txt"
# 90 % of large best-effort samples arrive at 10 % loss (the first ones
# before the loss estimate settles may not).
if ! awk -F'|' '/^\| loss10 / { split($4, r, "/"); if (r[1] + 0 < 50) bad = 1; n++ } END { exit (bad || n != 1) }' "$out/be.txt"; then
  echo "bench smoke: best effort lost too many samples at 10 % loss" >&2
  exit 1
fi
echo "== grid --quick (issue 20: ferry beside Zenoh over TCP and Cyclone DDS on an untuned emulated link and an overloaded kernel link)"
python3 bench/grid.py run --quick | tee "$out/grid.txt"
# (grid.py itself fails when ferry loses or reorders a sample.) Both peers
# measured both cells, so the comparison cannot rot unseen.
if [ "$(grep -cE '^\| (base|k-load120) \|' "$out/grid.txt")" != 2 ] || grep -q 'no result' "$out/grid.txt"; then
  echo "bench smoke: the grid beside Zenoh and Cyclone is incomplete" >&2
  exit 1
fi
echo "== grid --set zenoh --quick (issue 24: ferry's UDP path beside its Zenoh path and plain Zenoh on a lossy Wi-Fi-like link)"
python3 bench/grid.py run --set zenoh --quick --seconds 4 | tee "$out/grid-zenoh.txt"
# (grid.py fails when a ferry run loses or reorders a sample.) Every peer
# measured the cell, and the pinned run went over Zenoh.
if ! grep -qE '^\| wifi-loss1 \|.*\| [a-z]+ / zenoh / [a-z]+ \|' "$out/grid-zenoh.txt" || grep -q 'no result' "$out/grid-zenoh.txt"; then
  echo "bench smoke: the UDP / Zenoh path comparison is incomplete" >&2
  exit 1
fi
echo "== ferry-wireless rates --quick (0.2 / 1 / 10 Hz: idleness is not an outage)"
./target/release/ferry-wireless rates --quick | tee "$out/rates.txt"
# Every sample arrives at every rate (received = sent in each row).
if ! awk -F'|' '/^\| [0-9.]+ Hz/ { split($3, r, "/"); if (r[1] + 0 != r[2] + 0 || $4 ~ /NaN/) bad = 1; n++ }
    END { exit (bad || n != 3) }' "$out/rates.txt"; then
  echo "bench smoke: a low-rate cell lost samples" >&2
  exit 1
fi
echo "== ferry-prio run --quick (seed 002 Fig. 4a: priority under 70 % load)"
./target/release/ferry-prio run --quick --out "$out/priority" | tee "$out/p.txt"
# Every quick cell measured its pings (no cell without samples or all timeouts).
if grep -E '^\| a \|' "$out/p.txt" | grep -q ' 0\.00 / 0\.00 '; then
  echo "bench smoke: a priority cell measured nothing" >&2
  exit 1
fi
echo "== ingest example (issue 19/25: one runtime's cost of learning another, c in docs/design/host-discovery.md)"
cargo run --release -q -p ferry-conn --example ingest -- 200 3
echo "== ferry-fwd run --quick (seed 004 Tables II-III, issue 25: the forwarded path beside per-subscriber UDP, 2+2 subscribers on another host)"
# (It exits non-zero when a reliable sample is lost, repeated or reordered,
# a pair took another path, or the forwarded topic put more than 1.3x its
# payload on the link.) Here: both sizes, all 30 trials at every subscriber.
./target/release/ferry-fwd run --quick --out "$out/fwd" | tee "$out/fwd.txt"
if [ "$(grep -cE '^\| (1|100) KB \| Sub[1-4] \| (fwd|udp) \| 30 \| 0 \|' "$out/fwd.md")" != 8 ]; then
  echo "bench smoke: the forwarder's quick run is incomplete" >&2
  exit 1
fi
echo "== ferry-fwd run --quick --auto (the same, Pub1 not pinned: forwarded by automatic selection)"
./target/release/ferry-fwd run --quick --auto --out "$out/fwd-auto" | tee "$out/fwd-auto.txt"
if [ "$(grep -cE '^\| (1|100) KB \| Sub[1-4] \| (fwd|udp) \| 30 \| 0 \|' "$out/fwd-auto.md")" != 8 ]; then
  echo "bench smoke: the forwarder's automatic quick run is incomplete" >&2
  exit 1
fi
echo "== ferry-shm-rtt run --quick (shared memory vs TCP vs futex floor)"
./target/release/ferry-shm-rtt run --quick | tee "$out/s.txt"
# Every quick cell measured round trips (NaN: the echo never answered).
if grep -E '^\| [0-9]' "$out/s.txt" | grep -q 'NaN'; then
  echo "bench smoke: a shared-memory round-trip cell measured nothing" >&2
  exit 1
fi
echo "== ferry-srv-rtt run --quick (service calls per path: intra, shm, udp, tcp)"
./target/release/ferry-srv-rtt run --quick | tee "$out/srv.txt"
# Every quick cell answered (NaN: a call failed or took another path).
if [ "$(grep -cE '^\| [0-9]+ (B|KiB) \| (intra|shm|udp|tcp) \|' "$out/srv.txt")" != 8 ] \
  || grep -E '^\| [0-9]' "$out/srv.txt" | grep -q 'NaN'; then
  echo "bench smoke: a service round-trip cell measured nothing" >&2
  exit 1
fi
echo "== ferry-mqtt-rtt run --quick (seed 000: bare MQTT clients vs bridge-free vs bridged, Mosquitto)"
./target/release/ferry-mqtt-rtt run --quick | tee "$out/m.txt"
# Every quick cell got all its answers (30 per configuration).
if grep -E '^\| [0-9]' "$out/m.txt" | grep -vqE '\| 30(/30)+ \|$'; then
  echo "bench smoke: an MQTT round-trip cell lost answers" >&2
  exit 1
fi
echo "== pyrtt run --quick (Python publish -> callback; Cyclone DDS / Zenoh Python too when installed)"
cargo build --release -q -p ferry --example py_peer
python3 bench/python/pyrtt.py run --quick --out "$out/python" 2>&1 | tee "$out/py.txt"
# Every quick ferry cell measured its round trips without losses.
if [ "$(grep -cE '^\| [0-9]+ \| ferry \|' "$out/python.md")" != 2 ] \
  || grep -E '^\| [0-9]+ \| ferry \|' "$out/python.md" | grep -vq '| 200 | 0 |$'; then
  echo "bench smoke: a Python round-trip cell lost replies" >&2
  exit 1
fi
echo "== python codec --quick (message codecs: pure Python vs Rust through PyO3; the same bytes first)"
python3 bench/python/codec.py run --quick --out "$out/codec" | tee "$out/codec.txt"
# Four messages timed (the run exits non-zero when the two paths' bytes differ).
if [ "$(grep -cE '^\| [A-Z0-9].* \| [0-9]+ \| [0-9.]+ \|' "$out/codec.md")" != 4 ]; then
  echo "bench smoke: the Python codec timing is incomplete" >&2
  exit 1
fi
echo "== ferry-bench --quick (ferry in-process and TCP beside Zenoh over TCP; its own workspace, Zenoh's release build ~5 min cold)"
(cd bench && cargo build --release -q && ./target/release/ferry-bench --quick --out "$out/zenoh") | tee "$out/z.txt"
# It pins ferry's path to TCP itself and fails if it gets another one; here:
# every TCP cell of both measured, and no keep_all run stalled.
if [ "$(grep -cE '^\| [0-9]+ (B|KiB|MiB) \| [0-9.]+ / [0-9.]+ \| [0-9.]+ / [0-9.]+ \| [0-9.]+ / [0-9.]+ \|' "$out/zenoh.md")" != 4 ] \
  || ! grep -q '^Notes: 0 ferry keep_all throughput run(s) stalled' "$out/zenoh.md"; then
  echo "bench smoke: the ferry/Zenoh comparison is incomplete" >&2
  exit 1
fi
echo "== ferry-bench --security --quick (what TLS costs: ferry TCP and Zenoh TCP, plain and TLS with mutual certificates)"
./bench/target/release/ferry-bench --security --quick --out "$out/zenoh-tls" | tee "$out/zt.txt"
# It checks that ferry's protected side is TLS and the plain side is not;
# here: five sizes, all four systems in both tables, nothing of ferry's lost,
# stalled or timed out (the peer's trouble is reported in its own line).
if [ "$(grep -cE '^\| [0-9]+ (B|KiB|MiB)( \| [0-9.]+ / [0-9.]+){2} \| [0-9.]+( \| [0-9.]+ / [0-9.]+){2} \|' "$out/zenoh-tls.md")" != 5 ] \
  || [ "$(grep -cE '^\| [0-9]+ (B|KiB|MiB)( \| [0-9.]+){7} \|$' "$out/zenoh-tls.md")" != 5 ] \
  || ! grep -q '^Notes (ferry): 0 cell(s) lost samples, stalled or timed out\.' "$out/zenoh-tls.md"; then
  echo "bench smoke: the TLS comparison with Zenoh is incomplete" >&2
  exit 1
fi
echo "== cyclone_security.sh --quick (Cyclone DDS, DDS Security off vs on; built once from the source vendored in cyclors, ~30 s cold)"
# Exits non-zero when a cell produced no figure or security was not on.
bash bench/cyclone_security.sh --quick --out "$out/cyclone-sec" | tee "$out/cs.txt"
echo "== discovery storm --quick"
bash bench/discovery_storm.sh --quick target/release/ferry
echo "== ferry-disco run --quick (discovery at rest: 40 participants on a host, a 4-host fleet)"
./target/release/ferry-disco run --quick --out "$out/disco" | tee "$out/d.txt"
# Both graphs complete, and the host at rest sends heartbeats only (25 B
# each: well under 100 B per datagram on average).
if grep -q 'never' "$out/disco.md" \
  || ! python3 -c 'import json,sys; h=json.load(open(sys.argv[1]))["host"]; sys.exit(0 if h["bytes_per_s"] < 100 * h["datagrams_per_s"] else 1)' "$out/disco.json"; then
  echo "bench smoke: discovery did not complete or is not at rest" >&2
  exit 1
fi
echo "== ferry-disco run --quick --host-leader (the same, with host discovery through each host's leader)"
./target/release/ferry-disco run --quick --host-leader --out "$out/disco-hl" | tee "$out/dhl.txt"
if grep -q 'never' "$out/disco-hl.md"; then
  echo "bench smoke: host discovery did not complete" >&2
  exit 1
fi
echo "== dds.py --quick (ferry's DDS path beside Cyclone DDS's own ddsperf, latency and throughput, one host and two)"
cargo build --release -q -p ferry-dds --example dds_pingpong --example dds_flood
cargo build --release -q -p ferry --features ros2 --example ros2_ping --example ros2_flood
# Exits non-zero when a cell has no figure for any system.
python3 bench/dds.py run --quick --out "$out/dds" | tee "$out/dds.txt"
if [ "$(grep -cE '^\| (one host|two hosts) \| [0-9]+ (B|KiB|MiB) \| [0-9.]+ / [0-9.]+ \| [0-9.]+ / [0-9.]+ \| [0-9.]+ / [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$' "$out/dds.md")" != 4 ]; then
  echo "bench smoke: the DDS comparison with Cyclone is incomplete" >&2
  exit 1
fi
if [ "$(grep -cE '^\| (one host|two hosts) \| [0-9]+ (B|KiB|MiB)( \| [0-9]+){4}( \| [0-9.]+){4} \|$' "$out/dds_throughput.md")" != 4 ]; then
  echo "bench smoke: the DDS throughput comparison with Cyclone is incomplete" >&2
  exit 1
fi
echo "== table2_dds.py --quick (seed 001 Table II's quick cells: ferry's UDP path, ferry's DDS path and Cyclone, default and ferry tune's profile)"
# Exits non-zero when a row received nothing; ferry's own path loses nothing.
python3 bench/table2_dds.py --quick --out "$out/t2dds" | tee "$out/t2dds.txt"
if [ "$(grep -cE '^\| (ideal|loss20) \| [0-9]+ KB \| ferry UDP \| 60/60 ' "$out/t2dds.md")" != 2 ] \
  || [ "$(grep -cE '^\| (ideal|loss20) \| [0-9]+ KB \| (ferry DDS|Cyclone)( \+ tune)? \| [0-9]+/60 ' "$out/t2dds.md")" != 8 ]; then
  echo "bench smoke: the Table II cells with the DDS path are incomplete" >&2
  exit 1
fi
echo "== zenoh_fleet.py --quick (issue 24's fleet: robots -> Zenoh router -> cloud, steady and across a router restart)"
cargo build --release -q -p ferry --features zenoh --example zenoh_fleet
# Exits non-zero when telemetry was lost or duplicated (steady) or lost
# across the router restart, or a service call of the steady run failed.
python3 bench/zenoh_fleet.py --quick | tee "$out/zfleet.txt"
if [ "$(grep -cE '^\| (steady|router restart) \| 4 \| [0-9]+ / [0-9]+ \(100.00 %\) \| 0 \|' "$out/zfleet.txt")" != 2 ]; then
  echo "bench smoke: the Zenoh fleet lost or duplicated telemetry" >&2
  exit 1
fi
echo "== zenoh_path --quick (issue 24: ferry's Zenoh path beside plain Zenoh 1.10.2, with and without rmw_zenoh's attachment, peer and router)"
cargo build --release -q -p ferry --features zenoh --example zenoh_path
# Exits non-zero when a ping went unanswered or a blast came up short.
./target/release/examples/zenoh_path run --quick --out "$out/zpath" | tee "$out/zpath.txt"
if [ "$(grep -cE '^\| (peer|router) \| [0-9]+ (B|KiB|MiB) \| [0-9]+ / [0-9]+ \| [0-9]+ / [0-9]+ \| [0-9]+ / [0-9]+ \| [0-9.]+ / [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ / [0-9.]+ \| 0 / 0 \|$' "$out/zpath.txt")" != 6 ]; then
  echo "bench smoke: the Zenoh path comparison is incomplete" >&2
  exit 1
fi
echo "bench smoke: ok"
