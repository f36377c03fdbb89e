//! What the `[ros2]` bench examples share (`ros2_ping`, `ros2_flood`):
//! their arguments and their node, reachable over DDS only.

use ferry::config::ros2::Ros2Config;
use ferry::{BuildError, Config, DiscoveryRange, Node};

/// `DOMAIN SIZE SECS` from the command line, or
/// the usage on stderr and exit 2.
pub fn args(usage: &str) -> (u16, usize, f64) {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| -> &str { args.get(i).map(String::as_str).unwrap_or("") };
    match (arg(1).parse(), arg(2).parse(), arg(3).parse()) {
        (Ok(domain), Ok(size), Ok(secs)) => (domain, size, secs),
        _ => {
            eprintln!("usage: {usage}");
            std::process::exit(2);
        }
    }
}

/// Node `name` in `domain` with `[ros2]` on and ferry's own discovery off:
/// only DDS reaches it.
pub fn node(name: &str, domain: u16) -> Result<Node, BuildError> {
    Node::builder()
        .name(name)
        .config(Config {
            domain_id: domain,
            discovery: DiscoveryRange::Off,
            shared_memory: false,
            keep_all_block_ms: 1000,
            ros2: Some(Ros2Config::default()),
            ..Config::default()
        })
        .build()
}
