#!/usr/bin/env bash
# What turning on OMG DDS Security costs Cyclone DDS on this machine (issue 22).
#
# Debian's cyclonedds and the PyPI wheel ship no security plugins, so this
# builds Cyclone DDS from the copy vendored in the crates.io crate `cyclors`
# (with the builtin auth/access-control/crypto plugins and ddsperf), makes a
# throw-away PKI plus SROS2-default governance and permissions with the
# openssl CLI, and runs ddsperf over loopback with security OFF and ON:
#   latency    ddsperf ping size S  <->  ddsperf pong   (per-second p50/p99)
#   throughput ddsperf pub size S   <->  ddsperf sub    (reliable, keep-all)
# OFF and ON alternate within each round because the machine is shared.
# Latency pairs are pinned (taskset): unpinned, this VM flips between ~4 us
# (both on one vCPU) and ~30-50 us (waking the other, idle vCPU) within a
# run, which buries the crypto cost.  "same" = both on the last CPU, "cross"
# = ping on CPU 0, pong on the last.  Throughput pairs run unpinned.
#
# Usage: bash bench/cyclone_security.sh [--quick] [--out PATH]
#   full : 3 rounds, 10 s a cell; latency 64 B..4 MiB same- and cross-CPU,
#          throughput 1 KiB..1 MiB (~16 min + build)
#   quick: 1 round, 5 s a cell; 1 KiB and 64 KiB, latency same-CPU only (~1.5 min)
# Writes PATH.md and PATH.json (default bench/results/cyclone-security); exits
# non-zero if any cell produced no figure.  KEEP_TMP=1 keeps the logs/PKI.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CMDLINE="bash bench/cyclone_security.sh${*:+ $*}"

QUICK=0
OUT=bench/results/cyclone-security
while [ $# -gt 0 ]; do
  case $1 in
    --quick) QUICK=1 ;;
    --out) OUT=${2:?--out needs a path}; shift ;;
    *) echo "usage: $0 [--quick] [--out PATH]" >&2; exit 2 ;;
  esac
  shift
done
if [ $QUICK = 1 ]; then
  ROUNDS=1 SECS=5 LAT_SIZES="1024 65536" THR_SIZES="1024 65536" PLACES="same"
else
  ROUNDS=3 SECS=10 LAT_SIZES="64 1024 65536 1048576 4194304" THR_SIZES="1024 65536 1048576" PLACES="same cross"
fi
LAST=$(( $(nproc) - 1 ))
[ $LAST -gt 0 ] || PLACES=same
# One DDS domain per mode and one for the check, drawn at random so that a
# concurrent run of this script (which would cross-talk) is unlikely to share them.
DOM_OFF=$(( 20 + RANDOM % 200 )); DOM_ON=$((DOM_OFF + 1)) DOM_CHECK=$((DOM_OFF + 2))
CACHE=$ROOT/bench/target/cyclonedds-sec
PREFIX=$CACHE/install
DDSPERF=$PREFIX/bin/ddsperf
START=$(date -u +%FT%TZ) LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
RMEM=$(cat /proc/sys/net/core/rmem_max 2>/dev/null || echo '?')

# Everything created at run time lives in $TMP; $BG is the background peer.
TMP=$(mktemp -d /tmp/cyclone-sec.XXXXXX)
BG=""
cleanup() {
  if [ -n "$BG" ]; then kill "$BG" 2>/dev/null || true; wait "$BG" 2>/dev/null || true; fi
  if [ -n "${KEEP_TMP:-}" ]; then echo "kept $TMP" >&2; else rm -rf "$TMP"; fi
}
trap cleanup EXIT

# ---- 1. build Cyclone DDS with security (cached) ----------------------------
have_build() {
  [ -x "$DDSPERF" ] || return 1
  for p in auth ac crypto; do [ -e "$PREFIX/lib/libdds_security_$p.so" ] || return 1; done
}
find_src() {  # newest vendored copy in the cargo registry
  local c=("${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cyclors-*/cyclonedds)
  [ -d "${c[0]}" ] && printf '%s\n' "${c[@]}" | sort -V | tail -1
}
if have_build; then
  BUILD_NOTE="reused the cached build in bench/target/cyclonedds-sec (its cold build took $(cat "$CACHE/build-seconds" 2>/dev/null || echo '?') s on $(cat "$CACHE/build-date" 2>/dev/null || echo '?'))"
else
  SRC=$(find_src) || {
    echo "== cyclors is not in the cargo registry: cargo fetch in a throw-away project"
    cargo init -q --vcs none --name cyclors_fetch "$TMP/fetch"
    echo 'cyclors = "0.3"' >> "$TMP/fetch/Cargo.toml"
    (cd "$TMP/fetch" && cargo fetch -q)
    SRC=$(find_src)
  }
  echo "== building Cyclone DDS from $SRC (nice, -j2)"
  rm -rf "$CACHE" && mkdir -p "$CACHE"
  cp -r "$SRC" "$CACHE/src"   # the build regenerates files in the source tree
  echo "$SRC" > "$CACHE/source-path"
  t0=$(date +%s)
  # Security + OpenSSL + ddsperf (needs idlc); tests, examples, LTO, iceoryx,
  # TCP/TLS transport and the type/topic-discovery extras are left out.
  { nice cmake -S "$CACHE/src" -B "$CACHE/build" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_INSTALL_PREFIX="$PREFIX" -DCMAKE_INSTALL_LIBDIR=lib \
      -DENABLE_SECURITY=ON -DENABLE_SSL=ON -DBUILD_DDSPERF=ON -DBUILD_IDLC=ON \
      -DBUILD_TESTING=OFF -DBUILD_EXAMPLES=OFF -DBUILD_IDLC_XTESTS=OFF \
      -DENABLE_LTO=OFF -DENABLE_ICEORYX=OFF -DENABLE_TCP_TLS=OFF \
      -DENABLE_TOPIC_DISCOVERY=OFF -DENABLE_TYPE_DISCOVERY=OFF \
      && nice cmake --build "$CACHE/build" --target install -j2; } > "$CACHE/build.log" 2>&1 \
    || { tail -40 "$CACHE/build.log"; echo "build failed, log: $CACHE/build.log" >&2; exit 1; }
  echo $(( $(date +%s) - t0 )) > "$CACHE/build-seconds"; date -u +%F > "$CACHE/build-date"
  have_build || { echo "build finished without ddsperf or the security plugins" >&2; exit 1; }
  BUILD_NOTE="cold build, $(cat "$CACHE/build-seconds") s wall (nice, -j2, $(nproc) cores)"
fi
echo "== $BUILD_NOTE"
VERSION=$(sed -n 's:.*<version>\(.*\)</version>.*:\1:p' "$CACHE/src/package.xml" | head -1)
CRATE=$(basename "$(dirname "$(cat "$CACHE/source-path")")")
export LD_LIBRARY_PATH=$PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
ldd "$DDSPERF" | grep "$PREFIX/lib/libddsc" > /dev/null \
  || { echo "ddsperf does not pick up the libddsc built here" >&2; exit 1; }

# ---- 2. PKI, governance and permissions (openssl CLI) -----------------------
# One EC prime256v1 CA is both identity CA and permissions CA; alice and bob
# are the two participants of every pair.
PKI=$TMP/pki
mkdir -p "$PKI" "$TMP/log"
GOV_DISC=ENCRYPT GOV_LIVE=ENCRYPT GOV_RTPS=SIGN GOV_META=ENCRYPT GOV_DATA=ENCRYPT
(
  cd "$PKI"
  key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1"; }
  key ca.key
  openssl req -x509 -new -key ca.key -sha256 -days 7 -subj "/C=NL/O=ferry bench/CN=ferry bench CA" -out ca.pem
  for who in alice bob; do
    key $who.key
    openssl req -new -key $who.key -subj "/C=NL/O=ferry bench/CN=$who" -out $who.csr
    openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -set_serial "0x$(openssl rand -hex 8)" -days 7 -sha256 -out $who.pem
  done
  domains="<domains><id_range><min>$DOM_ON</min><max>$DOM_CHECK</max></id_range></domains>"
  cat > governance.xml <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<dds xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation="http://www.omg.org/spec/DDS-SECURITY/20170901/omg_shared_ca_governance.xsd">
  <domain_access_rules><domain_rule>
    $domains
    <allow_unauthenticated_participants>false</allow_unauthenticated_participants>
    <enable_join_access_control>true</enable_join_access_control>
    <discovery_protection_kind>$GOV_DISC</discovery_protection_kind>
    <liveliness_protection_kind>$GOV_LIVE</liveliness_protection_kind>
    <rtps_protection_kind>$GOV_RTPS</rtps_protection_kind>
    <topic_access_rules><topic_rule><topic_expression>*</topic_expression>
      <enable_discovery_protection>true</enable_discovery_protection><enable_liveliness_protection>true</enable_liveliness_protection>
      <enable_read_access_control>true</enable_read_access_control><enable_write_access_control>true</enable_write_access_control>
      <metadata_protection_kind>$GOV_META</metadata_protection_kind><data_protection_kind>$GOV_DATA</data_protection_kind>
    </topic_rule></topic_access_rules>
  </domain_rule></domain_access_rules>
</dds>
EOF
  { echo '<?xml version="1.0" encoding="UTF-8"?>'
    echo '<dds xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation="http://www.omg.org/spec/DDS-SECURITY/20170901/omg_shared_ca_permissions.xsd"><permissions>'
    for who in alice bob; do cat <<EOF
  <grant name="$who"><subject_name>CN=$who,O=ferry bench,C=NL</subject_name>
    <validity><not_before>2020-01-01T00:00:00</not_before><not_after>2120-01-01T00:00:00</not_after></validity>
    <allow_rule>$domains
      <publish><topics><topic>*</topic></topics><partitions><partition>*</partition></partitions></publish>
      <subscribe><topics><topic>*</topic></topics><partitions><partition>*</partition></partitions></subscribe>
    </allow_rule><default>DENY</default></grant>
EOF
    done
    echo '</permissions></dds>'; } > permissions.xml
  for doc in governance permissions; do
    openssl smime -sign -text -in $doc.xml -out $doc.p7s -signer ca.pem -inkey ca.key
  done
) > "$TMP/openssl.log" 2>&1 || { cat "$TMP/openssl.log" >&2; exit 1; }

# CYCLONEDDS_URI documents: loopback only (multicast forced on for lo), a
# socket receive buffer of up to 4 MiB in both modes (with Cyclone's default
# 1 MiB a 4 MiB sample loses fragments and waits ~100 ms for repair, which
# swamps the crypto cost); the ON ones add a <Security> section for identity $2.
cfg() {
  { echo '<CycloneDDS><Domain id="any"><General><Interfaces><NetworkInterface name="lo" multicast="true"/></Interfaces></General>'
    echo '<Internal><SocketReceiveBufferSize min="default" max="4MiB"/></Internal>'
    [ -z "${2:-}" ] || cat <<EOF
<Security>
  <Authentication><Library path="dds_security_auth" initFunction="init_authentication" finalizeFunction="finalize_authentication"/>
    <IdentityCA>file:$PKI/ca.pem</IdentityCA><IdentityCertificate>file:$PKI/$2.pem</IdentityCertificate><PrivateKey>file:$PKI/$2.key</PrivateKey></Authentication>
  <AccessControl><Library path="dds_security_ac" initFunction="init_access_control" finalizeFunction="finalize_access_control"/>
    <PermissionsCA>file:$PKI/ca.pem</PermissionsCA><Governance>file:$PKI/governance.p7s</Governance><Permissions>file:$PKI/permissions.p7s</Permissions></AccessControl>
  <Cryptographic><Library path="dds_security_crypto" initFunction="init_crypto" finalizeFunction="finalize_crypto"/></Cryptographic>
</Security>
EOF
    echo '</Domain></CycloneDDS>'; } > "$1"
}
cfg "$TMP/off.xml"; cfg "$TMP/on-alice.xml" alice; cfg "$TMP/on-bob.xml" bob

# ---- 3. one pair of ddsperf processes -----------------------------------------
# pair LOG DOMAIN PEER_CFG DRIVER_CFG WAIT PEER_ARGS -- DRIVER_ARGS
# ($PIN_PEER / $PIN_DRV: optional "taskset -c N" prefixes)
# Starts the peer (pong/sub) in the background, runs the driver (ping/pub)
# for $SECS after it matched (-Qinitwait; ddsperf's documented -W does not
# exist in this version), then stops the peer with SIGINT (ddsperf
# flushes its figures on SIGINT).  Returns the driver's exit status.
pair() {
  local log=$1 dom=$2 pcfg=$3 dcfg=$4 wait=$5; shift 5
  local peer=() rc=0
  while [ "$1" != -- ]; do peer+=("$1"); shift; done; shift
  CYCLONEDDS_URI=file://$pcfg timeout -s INT -k 5 $((SECS + wait + 30)) \
    ${PIN_PEER:-} "$DDSPERF" -i "$dom" "${peer[@]}" > "$log.peer" 2>&1 &
  BG=$!
  CYCLONEDDS_URI=file://$dcfg timeout -k 5 $((SECS + wait + 20)) \
    ${PIN_DRV:-} "$DDSPERF" -i "$dom" -Qminmatch:1 -Qinitwait:"$wait" -D "$SECS" "$@" > "$log.drv" 2>&1 || rc=$?
  # with security on, the peer must have mapped all three plugin libraries
  local child; child=$(pgrep -P "$BG" || true)
  if [ "$pcfg" != "$TMP/off.xml" ] && [ -n "$child" ]; then
    grep -o 'libdds_security_[a-z]*' "/proc/$child/maps" | sort -u | tr '\n' ' ' > "$log.maps" || true
  fi
  kill -INT "$BG" 2>/dev/null || true; wait "$BG" || true
  BG=""; sleep 1
  return $rc
}
cell() {  # cell MODE lat-same|lat-cross|thr SIZE ROUND
  local dom=$DOM_OFF a=$TMP/off.xml b=$TMP/off.xml log=$TMP/log/$2-$3-$1-r$4
  [ "$1" = on ] && dom=$DOM_ON a=$TMP/on-alice.xml b=$TMP/on-bob.xml
  case $2 in
    lat-same)  PIN_PEER="taskset -c $LAST" PIN_DRV="taskset -c $LAST" ;;
    lat-cross) PIN_PEER="taskset -c $LAST" PIN_DRV="taskset -c 0" ;;
    *)         PIN_PEER="" PIN_DRV="" ;;
  esac
  if [ "$2" = thr ]; then pair "$log" $dom "$b" "$a" 20 sub -- pub size "$3" || echo "   ddsperf pub exited $?"
  else pair "$log" $dom "$b" "$a" 20 pong -- ping size "$3" || echo "   ddsperf ping exited $?"; fi
}

# ---- 4. is security really on? -------------------------------------------------
# (a) secure alice pings secure bob: must match; (b) an insecure ping against
# the same secure pong must NOT match (allow_unauthenticated_participants is
# false); (c) every ON peer maps libdds_security_{auth,ac,crypto} (pair()).
echo "== security check in domain $DOM_CHECK"
CELL_SECS=$SECS SECS=2
CHECK_SECURE=fail CHECK_PLAIN=fail
pair "$TMP/log/check-secure" $DOM_CHECK "$TMP/on-bob.xml" "$TMP/on-alice.xml" 20 pong -- ping size 64 \
  && grep -q ' 50% ' "$TMP/log/check-secure.drv" && CHECK_SECURE=ok
pair "$TMP/log/check-plain" $DOM_CHECK "$TMP/on-bob.xml" "$TMP/off.xml" 8 pong -- ping size 64 \
  || { grep -q 'too few matching participants' "$TMP/log/check-plain.drv" \
         && ! grep -q ' 50% ' "$TMP/log/check-plain.drv" && CHECK_PLAIN=ok; }
CHECK_MAPS=$(cat "$TMP/log/check-secure.maps" 2>/dev/null || true)
echo "   secure<->secure matched: $CHECK_SECURE; plain->secure refused: $CHECK_PLAIN; plugins mapped: ${CHECK_MAPS:-none}"
[ $CHECK_SECURE = ok ] && [ $CHECK_PLAIN = ok ] && [ "$(wc -w <<< "$CHECK_MAPS")" = 3 ] \
  || { tail -n 5 "$TMP"/log/check-*; echo "security check failed" >&2; exit 1; }
SECS=$CELL_SECS

# ---- 5. the grid: OFF first in odd rounds, ON first in even ones --------------
for r in $(seq 1 $ROUNDS); do
  order="off on"; [ $((r % 2)) = 0 ] && order="on off"
  for pl in $PLACES; do for s in $LAT_SIZES; do for m in $order; do
    echo "== $(date -u +%T) round $r latency ($pl CPU) $s B security $m"; cell $m lat-$pl "$s" "$r"; done; done; done
  for s in $THR_SIZES; do for m in $order; do
    echo "== $(date -u +%T) round $r throughput $s B security $m"; cell $m thr "$s" "$r"; done; done
done

# ---- 6. parse ddsperf's output, write the table --------------------------------
mkdir -p "$(dirname "$OUT")"
export TMP OUT CMDLINE VERSION CRATE BUILD_NOTE START LOAD_START ROUNDS SECS LAT_SIZES THR_SIZES PLACES LAST \
  RMEM DOM_OFF DOM_ON GOV_DISC GOV_LIVE GOV_RTPS GOV_META GOV_DATA CHECK_MAPS
python3 - <<'PY'
import glob, json, os, re, statistics as st, time
E = os.environ
LOG, rounds, places = E["TMP"] + "/log/", int(E["ROUNDS"]), E["PLACES"].split()
LAT = re.compile(r" size (\d+) mean [\d.]+us min [\d.]+us 50% ([\d.]+)us 90% [\d.]+us 99% ([\d.]+)us max [\d.]+us cnt (\d+)")
THR = re.compile(r" size (\d+) total \d+ lost (\d+) delta \d+ lost \d+ rate ([\d.]+) kS/s ([\d.]+) Mb/s")
def read(path, rx):
    try: return [m.groups() for m in map(rx.search, open(path, errors="replace")) if m]
    except FileNotFoundError: return []
def lat(kind, mode, size, r):   # median over ddsperf's 1-s windows, first 2 (warm-up) dropped
    w = read(f"{LOG}{kind}-{size}-{mode}-r{r}.drv", LAT); w = w[min(2, max(len(w) - 1, 0)):]
    return w and {"p50_us": st.median(float(x[1]) for x in w), "p99_us": st.median(float(x[2]) for x in w),
                  "windows": len(w), "roundtrips": sum(int(x[3]) for x in w)} or None
def thr(kind, mode, size, r):   # sub's 1-s windows, first 2 and last (partial) dropped
    w = read(f"{LOG}{kind}-{size}-{mode}-r{r}.peer", THR); w = w[2:-1] if len(w) > 3 else w[1:]
    return w and {"MBps": st.median(float(x[3]) / 8 for x in w), "kSps": st.median(float(x[2]) for x in w),
                  "windows": len(w), "lost": int(w[-1][1])} or None
def crowded(kind, mode, size, r):   # a third ddsperf in the domain would skew the cell
    seen = set()
    for ext in ("drv", "peer"):
        try: seen |= {l.split()[2] for l in open(f"{LOG}{kind}-{size}-{mode}-r{r}.{ext}", errors="replace") if l.rstrip().endswith(": new")}
        except FileNotFoundError: pass
    return len(seen) > 2
def med(cells, key):
    v = [c[key] for c in cells if c]
    return st.median(v) if v else None
kinds = [(f"lat-{p}", E["LAT_SIZES"], lat, ("p50_us", "p99_us")) for p in places] + [("thr", E["THR_SIZES"], thr, ("MBps", "kSps"))]
res, missing = {}, []
for kind, sizes, fn, keys in kinds:
    for s in map(int, sizes.split()):
        for mode in ("off", "on"):
            cells = [None if crowded(kind, mode, s, r) else fn(kind, mode, s, r) for r in range(1, rounds + 1)]
            missing += [f"{kind} {s} B {mode} round {r}" + (" (other ddsperf in the domain)" if crowded(kind, mode, s, r) else "")
                        for r, c in enumerate(cells, 1) if c is None]
            res.setdefault(kind, {}).setdefault(str(s), {})[mode] = {**{k: med(cells, k) for k in keys}, "rounds": cells}
def get(kind, s, mode): return res.get(kind, {}).get(str(s), {}).get(mode)
def fmt_size(s): return f"{s >> 20} MiB" if s >= 1 << 20 else f"{s >> 10} KiB" if s >= 1024 else f"{s} B"
def f(x): return "—" if x is None else f"{x:.1f}"
def latc(c): return "not run" if c is None else f"{f(c['p50_us'])} / {f(c['p99_us'])}"
def thrc(c): return "not run" if c is None else f(c["MBps"])
def rat(a, b, k): return f"{a[k] / b[k]:.2f}" if a and b and a[k] and b[k] else "—"
sizes = sorted({int(s) for k in res.values() for s in k})
main = ["| size | off p50 / p99 (µs) | on p50 / p99 (µs) | on/off p50 | off MB/s | on MB/s | on/off |", "|---|---|---|---|---|---|---|"]
for s in sizes:
    lo, ln, to, tn = get("lat-same", s, "off"), get("lat-same", s, "on"), get("thr", s, "off"), get("thr", s, "on")
    main.append(f"| {fmt_size(s)} | {latc(lo)} | {latc(ln)} | {rat(ln, lo, 'p50_us')} | {thrc(to)} | {thrc(tn)} | {rat(tn, to, 'MBps')} |")
cross = ["| size | off p50 / p99 (µs) | on p50 / p99 (µs) | on/off p50 |", "|---|---|---|---|"]
for s in sizes if "lat-cross" in res else []:
    lo, ln = get("lat-cross", s, "off"), get("lat-cross", s, "on")
    cross.append(f"| {fmt_size(s)} | {latc(lo)} | {latc(ln)} | {rat(ln, lo, 'p50_us')} |")
on_maps = [open(p).read().split() for p in glob.glob(LOG + "*-on-r*.maps")]
maps_ok = sum(len(set(m)) == 3 for m in on_maps)
end, load_end = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), " ".join(open("/proc/loadavg").read().split()[:3])
meta = {"command": E["CMDLINE"], "cyclonedds_version": E["VERSION"], "source": E["CRATE"], "build": E["BUILD_NOTE"],
        "nproc": os.cpu_count(), "rmem_max": E["RMEM"], "start": E["START"], "end": end, "loadavg_start": E["LOAD_START"],
        "loadavg_end": load_end, "rounds": rounds, "seconds_per_cell": int(E["SECS"]),
        "domains": {"off": int(E["DOM_OFF"]), "on": int(E["DOM_ON"])},
        "kinds": {"lat-same": f"ping+pong both on CPU {E['LAST']}", "lat-cross": f"ping on CPU 0, pong on CPU {E['LAST']}",
                  "thr": "pub+sub unpinned"},
        "latency_unit": "one-way = RTT/2, as ddsperf prints it", "throughput_unit": "MB/s = 10^6 B/s received by sub",
        "governance": {k: E["GOV_" + k[:4].upper()] for k in ("discovery", "liveliness", "rtps", "metadata", "data")},
        "security_check": {"secure_pair_matched": True, "insecure_peer_refused": True, "plugins_mapped": E["CHECK_MAPS"].split(),
                           "on_cells_with_plugins_mapped": f"{maps_ok}/{len(on_maps)}"}, "missing": missing}
json.dump({"meta": meta, "results": res}, open(E["OUT"] + ".json", "w"), indent=1)
def span(kind, k):   # range over sizes of on/off and of on-off
    v = [(c["on"][k], c["off"][k]) for c in res.get(kind, {}).values() if c["on"][k] and c["off"][k]]
    if not v: return "n/a", "n/a"
    r, d = sorted(f"{a / b:.2f}" for a, b in v), sorted(a - b for a, b in v)
    return (r[0] if r[0] == r[-1] else f"{r[0]}–{r[-1]}") + "×", f"{d[0]:+.0f} to {d[-1]:+.0f} µs"
(ls, ld), (lc, lcd), (ts, _) = span("lat-same", "p50_us"), span("lat-cross", "p50_us"), span("thr", "MBps")
g = meta["governance"]
def on50(kind, s): c = get(kind, s, "on"); return c and c["p50_us"]
overlap = [s for s in sizes if on50("lat-cross", s) and on50("lat-same", s) and on50("lat-cross", s) < 0.9 * on50("lat-same", s)]
overlap_txt = (f" At {', '.join(map(fmt_size, overlap))} ON is >10 % faster with the ends on different CPUs than on one CPU:"
               " the sender's and the receiver's crypto then overlap instead of taking turns." if overlap else "")
md = f"""# Cyclone DDS: DDS Security OFF vs ON (ddsperf, loopback)

Reproduce: `{meta['command']}` — {meta['start']} → {end}; Cyclone DDS {meta['cyclonedds_version']} (vendored in
{meta['source']}), {meta['build']}. Machine: {meta['nproc']} vCPUs (shared), net.core.rmem_max {meta['rmem_max']},
loadavg {meta['loadavg_start']} at start, {load_end} at end.

{rounds} round(s), OFF/ON alternating, {meta['seconds_per_cell']} s a cell, ddsperf defaults (topic KS, reliable, keep-all
for pub/sub, listener mode) plus a socket receive buffer of up to 4 MiB (with Cyclone's default 1 MiB, 4 MiB samples lose
fragments on lo and wait ~100 ms for repair in either mode), domains {E["DOM_OFF"]} (OFF) and {E["DOM_ON"]} (ON),
`lo` only. Latency: `ddsperf ping size S` against `pong`, both pinned to CPU {E['LAST']}; **one-way = RTT/2, as ddsperf
prints it**; per cell the median over 1-s windows of each window's p50/p99 (first 2 windows dropped; ddsperf ranks at most
20000 round trips a window), then the median over rounds. Throughput: `ddsperf pub size S` (as fast as it can) against
`sub`, unpinned; median of sub's 1-s MB/s (10^6 B/s) windows (first 2 and the last dropped), median over rounds.
Per-round figures are in the .json.

{chr(10).join(main)}
"""
if len(cross) > 2: md += f"""
Latency with ping on CPU 0 and pong on CPU {E['LAST']} (every hop wakes the other vCPU):

{chr(10).join(cross)}
"""
md += f"""
Security ON = the builtin plugins (PKI-DH authentication with EC prime256v1 identities, access control, AES-GCM/GMAC
crypto), governance as SROS2's default: allow_unauthenticated_participants false, enable_join_access_control true,
discovery_protection_kind {g['discovery']}, liveliness_protection_kind {g['liveliness']}, rtps_protection_kind {g['rtps']};
topic `*`: metadata_protection_kind {g['metadata']}, data_protection_kind {g['data']}. Permissions allow publish and
subscribe on `*` in the ON domains. Both documents S/MIME-signed by one CA that is identity and permissions CA.

Security checked on: a secure ping/pong pair matched; an insecure ddsperf ping against the same secure pong did not
(allow_unauthenticated_participants false); the secure pong had {', '.join(meta['security_check']['plugins_mapped'])}
mapped (/proc/PID/maps), as had the peer in {maps_ok} of {len(on_maps)} ON cells.

## Reading it

With both processes on one CPU, security ON multiplies the p50 one-way latency by {ls} ({ld} per message over the sizes
run){f"; with the processes on different CPUs by {lc} ({lcd})" if len(cross) > 2 else ""}; throughput drops to {ts} of
OFF. On loopback the cost is pure CPU: with these governance settings a payload is AES-GCM encrypted (data ENCRYPT),
encrypted again inside its DATA submessage (metadata ENCRYPT), and covered by the message's AES-GMAC tag (rtps SIGN), and the
receiver undoes all three, with pub and sub sharing {meta['nproc']} vCPUs with whatever else runs.{overlap_txt} On a real link the wire would bound the large sizes, so read the ratios
as an upper bound of the relative cost and the absolute figures as this machine's. Unpinned, this VM's latency jumps
between the same-CPU and cross-CPU regimes within a run, which is why the latency pairs are pinned. Check the per-round
values in the .json before reading much into small differences.
"""
if missing: md += "\n**Cells without a figure:** " + "; ".join(missing) + "\n"
open(E["OUT"] + ".md", "w").write(md)
print("\n".join(main + [""] + (cross if len(cross) > 2 else [])))
if missing: print("no figure for:", *missing, sep="\n  "); raise SystemExit(1)
PY
