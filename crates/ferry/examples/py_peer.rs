//! The Rust side of the Python bindings' interop tests (`crates/ferry-py/pytest`):
//!
//! - `py_peer echo <Type> <in> <out> <count> <timeout_s>`: subscribes to
//!   `<in>` as the typed Rust message, republishes every decoded value on
//!   `<out>` with Rust's own encoding (so a Python test compares the bytes
//!   it sent with Rust's re-encoding: byte-identical CDR both ways). Types:
//!   String, Header, Twist, Image, JointState, PointCloud2, raw.
//! - `py_peer add-server <service> <timeout_s>`: an AddTwoInts service.
//! - `py_peer add-call <service> <a> <b>`: calls it and prints the sum.
//!
//! Prints `ready` once its ports exist (and the echo's output is matched),
//! and `done <n> via <transport>` at the end.

use std::time::{Duration, Instant};

use ferry::msgs::{example_interfaces::*, geometry_msgs, sensor_msgs, std_msgs};
use ferry::{Codec, Node, Qos, RawBytes};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn echo<T: Codec>(
    node: &Node,
    input: &str,
    output: &str,
    count: usize,
    timeout: Duration,
) -> Result<()> {
    let end = Instant::now() + timeout;
    let qos = Qos::default().keep_last(100);
    let publisher = node.publisher::<T>(output).qos(qos).build()?;
    if !publisher.wait_for_subscribers(1, timeout) {
        return Err(format!("nobody subscribed to {output}").into());
    }
    let subscriber = node.subscriber::<T>(input).qos(qos).build()?;
    println!("ready");
    let mut n = 0;
    let mut via = String::from("-");
    while n < count {
        let left = end.saturating_duration_since(Instant::now());
        let s = subscriber.recv_timeout(left)?;
        via = s.info.transport.to_string();
        publisher.publish(s.into_arc())?;
        n += 1;
    }
    // Let reliable delivery finish before the process (and its paths) go.
    std::thread::sleep(Duration::from_millis(300));
    println!("done {n} via {via}");
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| -> Result<&str> {
        args.get(i)
            .map(String::as_str)
            .ok_or_else(|| format!("missing argument {i}; see the file's doc comment").into())
    };
    let node = Node::builder().name("py_peer").build()?;
    match arg(0)? {
        "echo" => {
            let (ty, input, output) = (arg(1)?, arg(2)?, arg(3)?);
            let count: usize = arg(4)?.parse()?;
            let timeout = Duration::from_secs_f64(arg(5)?.parse()?);
            match ty {
                "String" => echo::<std_msgs::String>(&node, input, output, count, timeout),
                "Header" => echo::<std_msgs::Header>(&node, input, output, count, timeout),
                "Twist" => echo::<geometry_msgs::Twist>(&node, input, output, count, timeout),
                "Image" => echo::<sensor_msgs::Image>(&node, input, output, count, timeout),
                "JointState" => {
                    echo::<sensor_msgs::JointState>(&node, input, output, count, timeout)
                }
                "PointCloud2" => {
                    echo::<sensor_msgs::PointCloud2>(&node, input, output, count, timeout)
                }
                "raw" => echo::<RawBytes>(&node, input, output, count, timeout),
                other => Err(format!("unknown type {other}").into()),
            }
        }
        "add-server" => {
            let timeout = Duration::from_secs_f64(arg(2)?.parse()?);
            let _service = node
                .service::<AddTwoIntsRequest, AddTwoIntsResponse, _>(arg(1)?, |r| {
                    AddTwoIntsResponse { sum: r.a + r.b }
                })
                .build()?;
            println!("ready");
            std::thread::sleep(timeout);
            Ok(())
        }
        "add-call" => {
            let client = node
                .client::<AddTwoIntsRequest, AddTwoIntsResponse>(arg(1)?)
                .build()?;
            let (a, b) = (arg(2)?.parse()?, arg(3)?.parse()?);
            let r = client.call(AddTwoIntsRequest { a, b }, Duration::from_secs(10))?;
            println!("sum {}", r.sum);
            Ok(())
        }
        other => Err(format!("unknown role {other}").into()),
    }
}
