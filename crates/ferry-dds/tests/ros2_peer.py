"""A real ROS 2 node (rclpy, Jazzy, rmw_fastrtps_cpp from PyPI) for
ferry-dds's tests. One role per run; prints one line per event, flushed.

  listen TOPIC COUNT TIMEOUT_S [DURABILITY]
                                 print `got <data>` for each std_msgs/String
  sizes TOPIC COUNT TIMEOUT_S    print `got <length> <first 8 characters>`
                                 for each (large) std_msgs/String
  talk TOPIC COUNT HZ DURABILITY publish `hello <i>` (after a match, bounded),
                                 DURABILITY volatile or transient_local
  graph TOPIC TIMEOUT_S          print `topic <name> <types> publishers <n>` once
                                 TOPIC has a publisher
  node NAME TIMEOUT_S            print `node <ns> <name>` once node NAME shows,
                                 then `pub <topic> <types>` per publisher of it
  stay SECONDS                   only be there (a node named ros2_peer_stay)
  qos TOPIC ENDPOINT SECONDS     a reliable volatile `sub` or `pub` (ENDPOINT)
                                 of std_msgs/String for SECONDS; prints
                                 `incompatible <POLICY>` on each QoS conflict
"""
import sys
import time

import rclpy
import rclpy.duration
from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
from rclpy.qos import DurabilityPolicy, QoSProfile
from std_msgs.msg import String


DURABILITY = {"volatile": DurabilityPolicy.VOLATILE,
              "transient_local": DurabilityPolicy.TRANSIENT_LOCAL}


def main():
    role = sys.argv[1]
    rclpy.init()
    node = rclpy.create_node("ros2_peer_" + role)
    try:
        if role == "sizes":
            topic, count, timeout = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
            got = []
            node.create_subscription(String, topic, lambda m: (got.append(1), print("got", len(m.data), m.data[:8], flush=True)), QoSProfile(depth=10))
            print("ready", flush=True)
            end = time.monotonic() + timeout
            while len(got) < count and time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.05)
        elif role == "listen":
            topic, count, timeout = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
            durability = DURABILITY[sys.argv[5] if len(sys.argv) > 5 else "volatile"]
            got = []
            node.create_subscription(String, topic, lambda m: (got.append(m.data), print("got", m.data, flush=True)), QoSProfile(depth=100, durability=durability))
            print("ready", flush=True)
            end = time.monotonic() + timeout
            while len(got) < count and time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.05)
        elif role == "talk":
            topic, count, hz = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
            durability = DURABILITY[sys.argv[5]]
            pub = node.create_publisher(String, topic, QoSProfile(depth=100, durability=durability))
            end = time.monotonic() + 20.0
            while pub.get_subscription_count() == 0 and time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.05)
            print("matched", pub.get_subscription_count(), flush=True)
            for i in range(count):
                pub.publish(String(data=f"hello {i}"))
                time.sleep(1.0 / hz)
            # Reliable: stay until every matched reader has acknowledged
            # (a sample sent before the reader knew the writer is repaired
            # after the writer's next heartbeat; Fast DDS's come every 3 s).
            acked = pub.wait_for_all_acked(rclpy.duration.Duration(seconds=15))
            print("acked", acked, flush=True)
        elif role == "graph":
            topic, timeout = sys.argv[2], float(sys.argv[3])
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.1)
                found = dict(node.get_topic_names_and_types())
                publishers = node.count_publishers(topic)
                if topic in found and publishers > 0:
                    print("topic", topic, ",".join(found[topic]), "publishers", publishers, flush=True)
                    break
        elif role == "node":
            name, timeout = sys.argv[2], float(sys.argv[3])
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.1)
                found = [(n, ns) for n, ns in node.get_node_names_and_namespaces() if n == name]
                if found:
                    n, ns = found[0]
                    print("node", ns, n, flush=True)
                    # The node's publishers come from its writers' GUIDs.
                    for _ in range(50):
                        pubs = node.get_publisher_names_and_types_by_node(n, ns)
                        if pubs:
                            break
                        rclpy.spin_once(node, timeout_sec=0.1)
                    for t, types in pubs:
                        print("pub", t, ",".join(types), flush=True)
                    break
        elif role == "qos":
            topic, endpoint, seconds = sys.argv[2], sys.argv[3], float(sys.argv[4])
            said = lambda info: print("incompatible", info.last_policy_kind.name, flush=True)
            qos = QoSProfile(depth=10)  # reliable, volatile
            if endpoint == "sub":
                node.create_subscription(String, topic, lambda m: None, qos,
                                         event_callbacks=SubscriptionEventCallbacks(incompatible_qos=said))
            else:
                node.create_publisher(String, topic, qos,
                                      event_callbacks=PublisherEventCallbacks(incompatible_qos=said))
            print("ready", flush=True)
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.1)
        elif role == "stay":
            end = time.monotonic() + float(sys.argv[2])
            while time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.1)
        print("done", flush=True)
    finally:
        node.destroy_node()
        rclpy.shutdown()


if __name__ == "__main__":
    main()
