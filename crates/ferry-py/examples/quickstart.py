"""The README's Python example (run by crates/ferry-py/pytest/test_interop.py)."""
import ferry, numpy as np
from ferry.msgs.std_msgs import String
from ferry.msgs.example_interfaces import AddTwoInts

node = ferry.Node("talker", namespace="/robot1")
pub = node.create_publisher(String, "chatter", 10)
node.create_subscription(String, "chatter", lambda m: print("heard", m.data), 10)
node.create_service(AddTwoInts, "add", lambda req, resp: AddTwoInts.Response(sum=req.a + req.b))
client = node.create_client(AddTwoInts, "add")
node.create_timer(0.5, lambda: pub.publish(String(data="hello")))
frames = node.create_subscription(np.ndarray, "/camera/raw", None, ferry.qos.sensor_data)  # zero-copy views
future = client.call_async(AddTwoInts.Request(a=2, b=40))
ferry.spin_until_future_complete(node, future, timeout_sec=1.0)  # the service answers while we spin
print("2 + 40 =", future.result().sum)
ferry.spin(node)   # callbacks run here until Ctrl-C, which returns cleanly
