//! The Rust side of the Python bindings' interop tests (`crates/ferry-py/pytest`):
//!
//! - `py_peer echo <Type> <in> <out> <count> <timeout_s>`: subscribes to
//!   `<in>` as the typed Rust message, republishes every decoded value on
//!   `<out>` with Rust's own encoding (so a Python test compares the bytes
//!   it sent with Rust's re-encoding: byte-identical CDR both ways). Types:
//!   String, Header, Twist, Image, JointState, PointCloud2, raw.
//! - `py_peer add-server <service> <timeout_s>`: an AddTwoInts service.
//! - `py_peer add-call <service> <a> <b>`: calls it and prints the sum.
//! - `py_peer pong --size S --ping-topic T1 --pong-topic T2`: echoes raw
//!   samples from T1 on T2 (from the delivery callback) until stdin closes
//!   (`bench/python/pyrtt.py`'s Rust pong).
//! - `py_peer ping --size S --ping-topic T1 --pong-topic T2`: the Rust ping
//!   of the same bench: prints `ready` once a pong answers, then for every
//!   line `N` on stdin times N round trips and prints their RTTs in ns.
//!
//! Prints `ready` once its ports exist (and the echo's output is matched),
//! and `done <n> via <transport>` at the end.

use std::io::BufRead;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::msgs::{example_interfaces::srv::*, geometry_msgs, sensor_msgs, std_msgs};
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

/// `--size S --ping-topic T1 --pong-topic T2` of the bench roles.
fn bench_args(args: &[String]) -> Result<(usize, String, String)> {
    let mut size = None;
    let (mut ping, mut pong) = (None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let v = it.next().ok_or_else(|| format!("{a} needs a value"))?;
        match a.as_str() {
            "--size" => size = Some(v.parse()?),
            "--ping-topic" => ping = Some(v.clone()),
            "--pong-topic" => pong = Some(v.clone()),
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    Ok((
        size.ok_or("--size missing")?,
        ping.ok_or("--ping-topic missing")?,
        pong.ok_or("--pong-topic missing")?,
    ))
}

/// Publishes `data` the way the Python bindings do (a loan from 4 KiB on).
fn send(p: &ferry::Publisher<RawBytes>, data: &[u8]) -> Result<()> {
    if data.len() >= 4096 {
        let mut s = p.loan(data.len());
        s.copy_from_slice(data);
        s.publish()?;
    } else {
        p.publish(RawBytes::new(data.to_vec()))?;
    }
    Ok(())
}

fn pong(node: &Node, ping: &str, pong: &str) -> Result<()> {
    let qos = Qos::default();
    let publisher = Arc::new(node.publisher::<RawBytes>(pong).qos(qos).build()?);
    let p = publisher.clone();
    let _sub = node
        .subscriber::<RawBytes>(ping)
        .qos(qos)
        .inline_callback(move |s| {
            if let Err(e) = p.publish(s.into_arc()) {
                eprintln!("pong: {e}");
            }
        })
        .build()?;
    println!("ready");
    // Until the parent closes our stdin.
    for line in std::io::stdin().lock().lines() {
        if line.is_err() {
            break;
        }
    }
    Ok(())
}

fn ping(node: &Node, size: usize, ping: &str, pong: &str) -> Result<()> {
    let qos = Qos::default();
    let publisher = node.publisher::<RawBytes>(ping).qos(qos).build()?;
    let replies = node.subscriber::<RawBytes>(pong).qos(qos).build()?;
    let mut payload = vec![0u8; size.max(8)];
    let mut seq: u64 = 1 << 62;
    let trip = |payload: &mut Vec<u8>, seq: u64| -> Result<Option<u64>> {
        payload[..8].copy_from_slice(&seq.to_le_bytes());
        let t0 = Instant::now();
        send(&publisher, payload)?;
        let end = t0 + Duration::from_secs(1);
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match replies.recv_timeout(left) {
                Ok(r) if r.len() >= 8 && r[..8] == seq.to_le_bytes() => {
                    return Ok(Some(t0.elapsed().as_nanos() as u64))
                }
                Ok(_) => continue,
                Err(_) => return Ok(None),
            }
        }
    };
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        seq += 1;
        if trip(&mut payload, seq)?.is_some() {
            break;
        }
        if Instant::now() > end {
            return Err("no reply from the pong within 10 s".into());
        }
    }
    println!("ready");
    let mut seq: u64 = 1;
    for line in std::io::stdin().lock().lines() {
        let n: usize = line?.trim().parse()?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            seq += 1;
            out.push(trip(&mut payload, seq)?.map_or("-".to_string(), |ns| ns.to_string()));
        }
        println!("{}", out.join(" "));
    }
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
        "pong" => {
            let (_, t1, t2) = bench_args(&args[1..])?;
            pong(&node, &t1, &t2)
        }
        "ping" => {
            let (size, t1, t2) = bench_args(&args[1..])?;
            ping(&node, size, &t1, &t2)
        }
        other => Err(format!("unknown role {other}").into()),
    }
}
