//! An attacker's admin request over a raw TCP connection whose Hello
//! claims to come from the victim's own runtime (attack tests).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use ferry::admin::{service_name, AdminRequest};
use ferry::{Codec, Config, DiscoveryRange, EndpointKind, Node};
use ferry_wire::frame::{FrameHeader, FrameKind, Hello, FLAG_ERROR, HEADER_LEN};
use ferry_wire::EndpointId;

/// Finds node `victim` in `domain`, connects to its admin service at its
/// TCP address (its loopback one when `loopback`, else another host's),
/// says Hello as a client of the victim's own runtime, and asks to `set`
/// `topic`'s priority to `critical`. Returns `accepted`, `denied: …` or
/// what went wrong.
pub fn admin_with_forged_hello(domain: u16, victim: &str, topic: &str, loopback: bool) -> String {
    let node = match Node::builder()
        .name("forger")
        .config(Config {
            domain_id: domain,
            discovery: DiscoveryRange::Subnet,
            ..Config::default()
        })
        .build()
    {
        Ok(n) => n,
        Err(e) => return format!("error: {e}"),
    };
    let admin = service_name(victim);
    let t0 = Instant::now();
    let target = loop {
        let g = node.graph();
        let service = g
            .endpoints
            .iter()
            .find(|e| e.topic == admin && e.kind == EndpointKind::Service);
        let owner =
            service.and_then(|s| g.nodes.iter().find(|n| n.participant == s.id.participant));
        if let (Some(s), Some(n)) = (service, owner) {
            let addr = n.locators.iter().find_map(|l| {
                let a: SocketAddr = l.strip_prefix("tcp/")?.parse().ok()?;
                (a.ip().is_loopback() == loopback).then_some(a)
            });
            if let Some(a) = addr {
                break (s.id, a);
            }
        }
        if t0.elapsed() > Duration::from_secs(10) {
            return format!("error: {admin} not found with a TCP address");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (service, addr) = target;
    match forge(service, addr, topic) {
        Ok(r) => r,
        Err(e) => format!("error: {e}"),
    }
}

fn forge(service: EndpointId, addr: SocketAddr, topic: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(3))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let hello = Hello {
        // The victim's own participant id: "same process, same host".
        from: EndpointId {
            participant: service.participant,
            entity: 0xF0_0001,
        },
        from_kind: EndpointKind::Client,
        to: service,
    }
    .encode();
    let frame = |kind, seq, body: &[u8]| {
        let mut f = FrameHeader {
            kind,
            flags: 0,
            body_len: body.len() as u32,
            seq,
            stamp_ns: 0,
        }
        .encode()
        .to_vec();
        f.extend_from_slice(body);
        f
    };
    let req = AdminRequest {
        command: "set".into(),
        topic: topic.into(),
        to: "*".into(),
        priority: "critical".into(),
        sched: String::new(),
    }
    .encode()
    .map_err(std::io::Error::other)?;
    s.write_all(&frame(FrameKind::Hello, 0, &hello))?;
    s.write_all(&frame(FrameKind::Request, 1, &req))?;
    let mut head = [0u8; HEADER_LEN];
    s.read_exact(&mut head)?;
    let h = FrameHeader::parse(&head, 1 << 20).map_err(std::io::Error::other)?;
    let mut body = vec![0u8; h.body_len as usize];
    s.read_exact(&mut body)?;
    Ok(if h.flags & FLAG_ERROR != 0 {
        format!("denied: {}", String::from_utf8_lossy(&body))
    } else {
        "accepted".into()
    })
}
