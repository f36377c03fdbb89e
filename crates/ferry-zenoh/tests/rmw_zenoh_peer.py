#!/usr/bin/env python3
"""A ROS 2 node as rmw_zenoh (Jazzy >= 0.2.4) puts it on the wire, with
eclipse-zenoh 1.10.2 (no rmw_zenoh is packaged for this machine): a peer
session connected to a router, a node token and an endpoint token under
`@ros2_lv`, the topic's key `<domain>/<name>/<type>/<hash>`, and the 33-byte
attachment (sequence, source time, GID) on every sample. Written from
rmw_zenoh's docs/design.md and liveliness_utils.cpp (see docs/ZENOH.md),
not from ferry's code, so the two check each other.

    rmw_zenoh_peer.py --connect tcp/127.0.0.1:7447 --domain 5 talker N
    rmw_zenoh_peer.py --connect ... --domain 5 listener N
    rmw_zenoh_peer.py --connect ... --domain 5 --topic /adder server N [--mute]
    rmw_zenoh_peer.py --connect ... --domain 5 --topic /adder caller N
    rmw_zenoh_peer.py --connect ... --domain 5 forger N   (puts as another's publisher)
    rmw_zenoh_peer.py ... --claim <16 hex>:<id> listener|talker N
        (also declares ferry's `@ferry_lv` token claiming to be that ferry
        participant, and numbers its endpoint <id>: a forged claim to be a
        ferry reader or publisher that ferry must not believe)

Services are example_interfaces/srv/AddTwoInts as rmw_zenoh carries them
(rmw_service_data.cpp, rmw_client_data.cpp): a complete queryable and an
`SS` token; a querier (all complete queryables, no consolidation) and an
`SC` token; the request's attachment (sequence, time, client GID) echoed
by the reply.

Prints one line per event:
    ready <zid>                       tokens declared, endpoint up
    token <key expr>                  a token of another session (graph)
    heard <seq> <data> <gid hex>      (listener) a sample and its attachment
    bad <why>                         (listener) a sample rmw_zenoh would reject
    sent <n>                          (talker) after each put
    asked <seq> <a> <b> <gid hex>     (server) a request
    answer <seq> <sum>                (caller) a reply that echoes the call
    error <text>                      (caller) an error reply
    bad <why>                         (caller) a reply rmw_zenoh would reject
"""

import argparse
import random
import struct
import sys
import threading
import time

import xxhash
import zenoh
from zenoh.ext import Int64, z_serialize, z_deserialize

STRING = "std_msgs::msg::dds_::String_"
STRING_HASH = "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"
ADD = "example_interfaces::srv::dds_::AddTwoInts_"
ADD_HASH = "RIHS01_e118de6bf5eeb66a2491b5bda11202e7b68f198d6f67922cf30364858239c81a"


def mangle(s):
    return s.replace("/", "%")


def gid(token):
    # XXH3-128 of the token; rmw_zenoh copies the 128-bit value's low then
    # high 64 bits in host (little-endian) order: the reverse of the
    # canonical big-endian digest.
    return xxhash.xxh3_128_digest(token.encode())[::-1]


def cdr_string(text):
    b = text.encode() + b"\0"
    return b"\x00\x01\x00\x00" + struct.pack("<I", len(b)) + b


def read_cdr_string(buf):
    if len(buf) < 8 or buf[:2] != b"\x00\x01":
        raise ValueError("not little-endian CDR")
    (n,) = struct.unpack_from("<I", buf, 4)
    if n == 0 or 8 + n > len(buf):
        raise ValueError("bad string length")
    return buf[8 : 8 + n - 1].decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--connect", required=True)
    ap.add_argument("--domain", type=int, default=0)
    ap.add_argument("--topic", default="/chatter")
    ap.add_argument("--node", default=None)
    ap.add_argument("--period", type=float, default=0.02)
    ap.add_argument("--mute", action="store_true", help="server: never answer")
    ap.add_argument("--hash", default=None,
                    help="talker/listener: this type hash instead of std_msgs/String's")
    ap.add_argument("--junk", action="store_true",
                    help="caller: first send 3 requests a server must refuse")
    ap.add_argument("--claim", default=None,
                    help="PARTICIPANT:ENTITY: claim to be this ferry endpoint")
    ap.add_argument(
        "role", choices=["talker", "listener", "hostile", "server", "caller", "forger"])
    ap.add_argument("count", type=int)
    a = ap.parse_args()

    conf = zenoh.Config()
    conf.insert_json5("mode", '"peer"')
    conf.insert_json5("connect/endpoints", '["%s"]' % a.connect)
    conf.insert_json5("listen/endpoints", '["tcp/127.0.0.1:0"]')
    conf.insert_json5("scouting/multicast/enabled", "false")
    s = zenoh.open(conf)
    zid = str(s.zid())
    # As rmw_zenoh: make sure the router is there before reading the graph
    # (a liveliness subscriber's history covers the sessions connected now).
    end = time.time() + 10
    while not list(s.info.routers_zid()) and time.time() < end:
        time.sleep(0.02)
    d = a.domain
    node = a.node or ("py_" + a.role)
    # Node id 0, endpoint id 10 (rmw_zenoh's counter would give 0, 1, ...).
    nn = "@ros2_lv/%d/%s/0/0/NN/%%/%%/%s" % (d, zid, node)
    kind = {"listener": "MS", "server": "SS", "caller": "SC"}.get(a.role, "MP")
    qos = "::,10:,:,:,,"  # reliable, volatile, keep last 10
    ty, ty_hash = (ADD, ADD_HASH) if a.role in ("server", "caller") else (STRING, STRING_HASH)
    if a.hash:
        ty_hash = a.hash
    eid = a.claim.split(":")[1] if a.claim else "10"
    ep = "@ros2_lv/%d/%s/0/%s/%s/%%/%%/%s/%s/%s/%s/%s" % (
        d, zid, eid, kind, node, mangle(a.topic), ty, ty_hash, qos)
    key = "%d/%s/%s/%s" % (d, a.topic.strip("/"), ty, ty_hash)
    lock = threading.Lock()

    def say(line):
        with lock:
            print(line, flush=True)

    seen = set()

    def on_token(sample):
        k = str(sample.key_expr)
        if sample.kind == zenoh.SampleKind.PUT and k not in seen:
            seen.add(k)
            say("token " + k)

    # As rmw_zenoh at init: ask for the graph, then follow it.
    for reply in s.liveliness().get("@ros2_lv/%d/**" % d, timeout=2.0):
        if reply.ok is not None:
            on_token(reply.ok)
    graph = s.liveliness().declare_subscriber("@ros2_lv/%d/**" % d, on_token, history=True)
    # rmw_zenoh declares the endpoint, then its token.
    tokens = [s.liveliness().declare_token(nn)]
    if a.claim:
        tokens.append(s.liveliness().declare_token(
            "@ferry_lv/%d/%s/%s" % (d, zid, a.claim.split(":")[0])))

    if a.role == "hostile":
        # What a broken or hostile peer can put on the key, then `count`
        # good samples as a talker: none of the junk may reach the reader,
        # stop it, or grow its memory without bound.
        pub = s.declare_publisher(key)
        tokens.append(s.liveliness().declare_token(ep))
        me = gid(ep)
        time.sleep(1.0)
        good = cdr_string("junk")
        now = time.time_ns()
        junk = [
            (good, None),  # no attachment
            (good, b"\x01\x02\x03\x04\x05"),  # too short
            (good, b"\x00" * 77),  # rmw_zenoh 0.2.0-0.2.3's keyed layout size
            (good, z_serialize((Int64(-1), Int64(now), me))),  # negative sequence
            (good, z_serialize((Int64(0), Int64(now), me))),  # sequence 0
            (good, z_serialize((Int64(1), Int64(-5), me))),  # negative time
            (b"\xff" * 3, z_serialize((Int64(1), Int64(now), me))),  # not CDR
            (b"\x00\x01\x00\x00\xff\xff\xff\x7f", z_serialize((Int64(2), Int64(now), me))),  # 2 GiB string
        ]
        for payload, att in junk:
            pub.put(payload, attachment=att)
        # Publishers without tokens, each claiming its own GID: more than a
        # reader keeps records for.
        # (Well-formed samples: a reader may take them, but keeps at most
        # its bound of connection records.)
        flood = cdr_string("flood")
        for i in range(1500):
            fake = struct.pack("<QQ", i + 1, 0xFEED)
            pub.put(flood, attachment=z_serialize((Int64(1), Int64(now), fake)))
        say("junk sent")
        time.sleep(1.2)
        for i in range(1, a.count + 1):
            att = z_serialize((Int64(100 + i), Int64(time.time_ns()), me))
            pub.put(cdr_string("good %d" % i), attachment=att)
            time.sleep(a.period)
        say("sent %d" % a.count)
        time.sleep(0.5)
    elif a.role == "forger":
        # Puts as another session's publisher on the topic (its GID, from
        # its token) with sequence numbers far ahead of any real ones.
        end = time.time() + 20
        victim = None
        while victim is None and time.time() < end:
            victim = next((k for k in list(seen)
                           if "/MP/" in k and ("/%s/%s/" % (mangle(a.topic), STRING)) in k), None)
            time.sleep(0.05)
        if victim is None:
            say("no publisher to forge")
            return 1
        pub = s.declare_publisher(key)
        time.sleep(1.0)
        g = gid(victim)
        for i in range(1, a.count + 1):
            att = z_serialize((Int64((1 << 62) + i), Int64(time.time_ns()), g))
            pub.put(cdr_string("forged %d" % i), attachment=att)
            time.sleep(a.period)
        say("forged %d as %s" % (a.count, g.hex()))
        time.sleep(0.5)
    elif a.role == "server":
        held = []
        asked = [0]
        done = threading.Event()

        def on_query(query):
            if query.attachment is None:
                query.reply_err("no attachment")
                return
            seq, ts, g = z_deserialize(tuple[Int64, Int64, bytes], query.attachment)
            buf = query.payload.to_bytes() if query.payload is not None else b""
            if len(buf) != 20 or buf[:2] != b"\x00\x01":
                query.reply_err("not an AddTwoInts request")
                return
            x, y = struct.unpack_from("<qq", buf, 4)
            say("asked %d %d %d %s" % (int(seq), x, y, bytes(g).hex()))
            if a.mute:
                held.append(query)  # never answered, never finished
            else:
                att = z_serialize((Int64(int(seq)), Int64(time.time_ns()), bytes(g)))
                query.reply(key, b"\x00\x01\x00\x00" + struct.pack("<q", x + y), attachment=att)
                query.drop()
            asked[0] += 1
            if asked[0] >= a.count:
                done.set()

        qbl = s.declare_queryable(key, on_query, complete=True)
        tokens.append(s.liveliness().declare_token(ep))
        say("ready " + zid)
        done.wait(60)
        if a.mute:
            time.sleep(60)  # until killed
        time.sleep(0.5)
        qbl.undeclare()
    elif a.role == "caller":
        querier = s.declare_querier(
            key,
            target=zenoh.QueryTarget.ALL_COMPLETE,
            consolidation=zenoh.ConsolidationMode.NONE,
            timeout=10.0,
        )
        tokens.append(s.liveliness().declare_token(ep))
        me = gid(ep)
        say("ready " + zid)
        # As rmw_zenoh's service_is_available: an SS token on the name and
        # type (the hash is not compared).
        prefix = "@ros2_lv/%d/" % d
        want = "/SS/"
        end = time.time() + 20
        while time.time() < end and not any(
            k.startswith(prefix) and want in k and ("/%s/%s/" % (mangle(a.topic), ADD)) in k
            for k in list(seen)
        ):
            time.sleep(0.05)
        time.sleep(0.5)  # the route follows the token
        if a.junk:
            now = time.time_ns()
            good = b"\x00\x01\x00\x00" + struct.pack("<qq", 1, 2)
            for payload, att in [
                (good, None),  # no attachment
                (good, z_serialize((Int64(-1), Int64(now), me))),  # negative sequence
                (b"\xff", z_serialize((Int64(1000), Int64(now), me))),  # not CDR
            ]:
                for reply in querier.get(payload=payload, attachment=att):
                    if reply.ok is None:
                        say("error " + reply.err.payload.to_bytes().decode(errors="replace"))
                    else:
                        say("bad junk answered")
            # Calls under 50 made-up client GIDs (no token): answered, but
            # they must not fill the service's client records.
            answered = 0
            for i in range(50):
                att = z_serialize((Int64(1), Int64(now), bytes(random.getrandbits(8) for _ in range(16))))
                for reply in querier.get(payload=good, attachment=att):
                    answered += reply.ok is not None
            say("made-up clients answered %d" % answered)
        for i in range(1, a.count + 1):
            att = z_serialize((Int64(i), Int64(time.time_ns()), me))
            req = b"\x00\x01\x00\x00" + struct.pack("<qq", i, 100)
            for reply in querier.get(payload=req, attachment=att):
                if reply.ok is None:
                    say("error " + reply.err.payload.to_bytes().decode(errors="replace"))
                    continue
                r = reply.ok
                if r.attachment is None:
                    say("bad reply without attachment")
                    continue
                seq, ts, g = z_deserialize(tuple[Int64, Int64, bytes], r.attachment)
                if int(seq) != i or bytes(g) != me:
                    say("bad reply echoing %d %s" % (int(seq), bytes(g).hex()))
                    continue
                buf = r.payload.to_bytes()
                (total,) = struct.unpack_from("<q", buf, 4)
                say("answer %d %d" % (i, total))
        querier.undeclare()
    elif a.role == "talker":
        pub = s.declare_publisher(key)
        tokens.append(s.liveliness().declare_token(ep))
        say("ready " + zid)
        me = gid(ep)
        time.sleep(1.0)
        for i in range(1, a.count + 1):
            att = z_serialize((Int64(i), Int64(time.time_ns()), me))
            pub.put(cdr_string("py %d" % i), attachment=att)
            say("sent %d" % i)
            time.sleep(a.period)
        time.sleep(0.5)
    else:
        done = threading.Event()
        got = [0]

        def on_sample(sample):
            if sample.attachment is None:
                say("bad no attachment")
                return
            raw = sample.attachment.to_bytes()
            if len(raw) != 33 or raw[16] != 16:
                say("bad attachment of %d bytes" % len(raw))
                return
            seq, ts, g = z_deserialize(tuple[Int64, Int64, bytes], sample.attachment)
            try:
                text = read_cdr_string(sample.payload.to_bytes())
            except ValueError as e:
                say("bad payload: %s" % e)
                return
            if int(seq) < 1 or int(ts) <= 0 or len(g) != 16:
                say("bad attachment values %s %s" % (seq, ts))
                return
            say("heard %d %s %s" % (int(seq), text, bytes(g).hex()))
            got[0] += 1
            if got[0] >= a.count:
                done.set()

        sub = s.declare_subscriber(key, on_sample)
        tokens.append(s.liveliness().declare_token(ep))
        say("ready " + zid)
        done.wait(30)
        sub.undeclare()
    del tokens, graph
    s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
