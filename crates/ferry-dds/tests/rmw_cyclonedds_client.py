"""A ROS 2 service client or server as rmw_cyclonedds (Jazzy) puts one on the wire,
with Cyclone DDS through the PyPI `cyclonedds` package (no rmw_cyclonedds
build is available from a package registry): a writer of
`rq/<service>Request` and a reader of `rr/<service>Reply`, both with
`clientid=<id>;` in their user data, and every sample prefixed by the
request header {u64 client id, i64 sequence number} after the
encapsulation header (rmw_cyclonedds_cpp/src/serdata.hpp,
rmw_node.cpp: rmw_send_request / rmw_take_response).

  call SERVICE COUNT DOMAIN   call example_interfaces/srv/AddTwoInts COUNT
                              times (a=i, b=100); print `sum <s>` per reply
                              that carries this client's id and the call's
                              number; `stray <n>` for replies to others
  serve SERVICE SECONDS DOMAIN [mute]
                              answer AddTwoInts (sum = a + b) for SECONDS,
                              echoing each request's header; `served <n>`;
                              `mute`: take requests, answer none (`taken
                              <n>`), then leave cleanly
"""
import random
import sys
import time
from dataclasses import dataclass

from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.idl.types import int64, uint64
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration


@dataclass
class AddTwoInts_Request_(IdlStruct, typename="example_interfaces::srv::dds_::AddTwoInts_Request_"):
    client: uint64  # the request header, then the message
    seq: int64
    a: int64
    b: int64


@dataclass
class AddTwoInts_Response_(IdlStruct, typename="example_interfaces::srv::dds_::AddTwoInts_Response_"):
    client: uint64
    seq: int64
    sum: int64


def serve(service, seconds, domain, mute=False):
    csid = " 1.10." + ".".join(f"{random.getrandbits(8):x}" for _ in range(14))
    qos = Qos(Policy.Reliability.Reliable(duration(seconds=1)), Policy.History.KeepLast(10),
              Policy.DataRepresentation(use_cdrv0_representation=True),
              Policy.Userdata(f"serviceid={csid};".encode()))
    dp = DomainParticipant(domain, qos=Qos(Policy.Userdata(b"enclave=/;")))
    rd = DataReader(dp, Topic(dp, f"rq{service}Request", AddTwoInts_Request_), qos=qos)
    wr = DataWriter(dp, Topic(dp, f"rr{service}Reply", AddTwoInts_Response_), qos=qos)
    print("ready", flush=True)
    served, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        for s in rd.take(N=10):
            if isinstance(s, AddTwoInts_Request_):
                if mute:
                    print("taken", s.seq, flush=True)
                    continue
                wr.write(AddTwoInts_Response_(client=s.client, seq=s.seq, sum=s.a + s.b))
                served += 1
        time.sleep(0.002)
    print("served", served, flush=True)
    print("done", flush=True)


def main():
    role, service = sys.argv[1], sys.argv[2]
    if role == "serve":
        return serve(service, float(sys.argv[3]), int(sys.argv[4]),
                     mute=sys.argv[5:6] == ["mute"])
    count, domain = int(sys.argv[3]), int(sys.argv[4])
    assert role == "call"
    client = random.getrandbits(63) | 1
    csid = " 1.10." + ".".join(f"{random.getrandbits(8):x}" for _ in range(14))
    user = f"clientid={csid};".encode()
    qos = Qos(Policy.Reliability.Reliable(duration(seconds=1)), Policy.History.KeepLast(10),
              Policy.DataRepresentation(use_cdrv0_representation=True), Policy.Userdata(user))
    dp = DomainParticipant(domain, qos=Qos(Policy.Userdata(b"enclave=/;")))
    wr = DataWriter(dp, Topic(dp, f"rq{service}Request", AddTwoInts_Request_), qos=qos)
    rd = DataReader(dp, Topic(dp, f"rr{service}Reply", AddTwoInts_Response_), qos=qos)
    end = time.monotonic() + 20.0
    while time.monotonic() < end and (wr.get_publication_matched_status().current_count == 0
                                      or rd.get_subscription_matched_status().current_count == 0):
        time.sleep(0.02)
    print("available", wr.get_publication_matched_status().current_count,
          rd.get_subscription_matched_status().current_count, flush=True)
    time.sleep(0.5)  # the service's side of the match (discovery is per side)
    stray = 0
    for i in range(count):
        seq = i + 1
        wr.write(AddTwoInts_Request_(client=client, seq=seq, a=i, b=100))
        deadline = time.monotonic() + 5.0
        answered = False
        while not answered and time.monotonic() < deadline:
            for s in rd.take(N=10):
                if not isinstance(s, AddTwoInts_Response_):
                    continue
                if s.client == client and s.seq == seq:
                    print("sum", s.sum, flush=True)
                    answered = True
                else:
                    stray += 1
            time.sleep(0.005)
        if not answered:
            print("timeout", seq, flush=True)
    print("stray", stray, flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
