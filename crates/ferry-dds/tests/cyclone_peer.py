"""A DDS node as rmw_cyclonedds makes one (Cyclone DDS through the PyPI
`cyclonedds` package, which bundles its own libddsc, a newer Cyclone than
ferry's): ROS 2's topic and type names, a keyless final struct in XCDR1.

  listen TOPIC COUNT TIMEOUT_S   print `got <data>` per std_msgs/String
  talk TOPIC COUNT HZ            publish `cyclone <i>` after a match (bounded)
"""
import sys
import time
from dataclasses import dataclass

from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration


@dataclass
class String_(IdlStruct, typename="std_msgs::msg::dds_::String_"):
    data: str


def main():
    role, topic = sys.argv[1], sys.argv[2]
    qos = Qos(Policy.Reliability.Reliable(duration(seconds=1)), Policy.History.KeepLast(100),
              Policy.DataRepresentation(use_cdrv0_representation=True))
    dp = DomainParticipant(int(sys.argv[-1]))
    tp = Topic(dp, "rt" + topic, String_)
    if role == "listen":
        count, timeout = int(sys.argv[3]), float(sys.argv[4])
        rd = DataReader(dp, tp, qos=qos)
        print("ready", flush=True)
        got, end = 0, time.monotonic() + timeout
        while got < count and time.monotonic() < end:
            for s in rd.take(N=100):
                if isinstance(s, String_):
                    got += 1
                    print("got", s.data, flush=True)
            time.sleep(0.01)
    elif role == "talk":
        count, hz = int(sys.argv[3]), float(sys.argv[4])
        wr = DataWriter(dp, tp, qos=qos)
        end = time.monotonic() + 20.0
        while wr.get_publication_matched_status().current_count == 0 and time.monotonic() < end:
            time.sleep(0.02)
        print("matched", wr.get_publication_matched_status().current_count, flush=True)
        time.sleep(0.5)  # the reader's side of the match (DDS discovery is per side)
        for i in range(count):
            wr.write(String_(data=f"cyclone {i}"))
            time.sleep(1.0 / hz)
        wr.wait_for_acks(duration(seconds=10))
    print("done", flush=True)


if __name__ == "__main__":
    main()
