//! The README's 15-line example (compiled by `cargo test`, run with `cargo run --example quickstart`).

use ferry::msgs::{example_interfaces::srv::*, std_msgs};
use ferry::{Node, Qos};
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let node = Node::builder()
        .name("talker")
        .namespace("/robot1")
        .build()?;
    let publisher = node
        .publisher::<std_msgs::String>("chatter")
        .qos(Qos::default())
        .build()?;
    let _listener = node
        .subscriber::<std_msgs::String>("chatter")
        .callback(|s| println!("heard {} via {}", s.data, s.info.transport))
        .build()?;
    let _adder = node
        .service::<AddTwoIntsRequest, AddTwoIntsResponse, _>("add", |r| AddTwoIntsResponse {
            sum: r.a + r.b,
        })
        .build()?;
    let client = node
        .client::<AddTwoIntsRequest, AddTwoIntsResponse>("add")
        .build()?;
    publisher.publish(std_msgs::String {
        data: "hello".into(),
    })?;
    println!(
        "2 + 40 = {}",
        client
            .call(AddTwoIntsRequest { a: 2, b: 40 }, Duration::from_secs(1))?
            .sum
    );
    Ok(())
}
