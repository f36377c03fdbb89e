//! Facts about this host that decide paths: which processes share memory
//! (host id) and which share a network stack (net id), and the addresses of
//! the interfaces.

use std::net::Ipv4Addr;
use std::os::unix::fs::MetadataExt;

fn fnv(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, b| (h ^ *b as u64).wrapping_mul(0x100_0000_01b3))
}

/// Processes with the same host id can share memory: same machine id, same
/// IPC namespace and the same `/dev/shm` file system. Two network namespaces
/// with their own IPC namespace and `/dev/shm` count as two hosts.
pub fn host_id() -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325;
    let machine = std::fs::read_to_string("/etc/machine-id")
        .or_else(|_| std::fs::read_to_string("/proc/sys/kernel/random/boot_id"))
        .unwrap_or_default();
    h = fnv(h, machine.trim().as_bytes());
    if let Ok(ipc) = std::fs::read_link("/proc/self/ns/ipc") {
        h = fnv(h, ipc.to_string_lossy().as_bytes());
    }
    if let Ok(m) = std::fs::metadata("/dev/shm") {
        h = fnv(h, &m.dev().to_le_bytes());
    }
    h
}

/// Processes with the same net id share a network stack (loopback works).
pub fn net_id() -> u64 {
    let mut h = fnv(0xcbf2_9ce4_8422_2325, &host_id().to_le_bytes());
    if let Ok(ns) = std::fs::read_link("/proc/self/ns/net") {
        h = fnv(h, ns.to_string_lossy().as_bytes());
    }
    h
}

/// One IPv4 interface address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Its name (`eth0`, `wlan0`).
    pub name: String,
    /// Its link MTU (IP packet size, bytes).
    pub mtu: u32,
    /// Its address.
    pub addr: Ipv4Addr,
    /// Its netmask.
    pub mask: Ipv4Addr,
    /// Loopback interface.
    pub loopback: bool,
    /// Interface is up and supports multicast.
    pub multicast: bool,
}

impl Interface {
    /// True if `ip` is on this interface's subnet.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let m = u32::from(self.mask);
        u32::from(self.addr) & m == u32::from(ip) & m
    }
}

/// The IPv4 interfaces that are up.
pub fn interfaces() -> Vec<Interface> {
    let mut out = Vec::new();
    // SAFETY: getifaddrs fills a linked list that we only read and then free
    // with freeifaddrs; every pointer is checked for null before use.
    unsafe {
        let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
        if libc::getifaddrs(&mut head) != 0 {
            return out;
        }
        let mut cur = head;
        while !cur.is_null() {
            let ifa = &*cur;
            cur = ifa.ifa_next;
            if ifa.ifa_addr.is_null() || (*ifa.ifa_addr).sa_family as i32 != libc::AF_INET {
                continue;
            }
            let flags = ifa.ifa_flags;
            if flags & libc::IFF_UP as u32 == 0 {
                continue;
            }
            let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
            let addr = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            let mask = if ifa.ifa_netmask.is_null() {
                Ipv4Addr::new(255, 255, 255, 255)
            } else {
                let m = &*(ifa.ifa_netmask as *const libc::sockaddr_in);
                Ipv4Addr::from(u32::from_be(m.sin_addr.s_addr))
            };
            let name = std::ffi::CStr::from_ptr(ifa.ifa_name)
                .to_string_lossy()
                .into_owned();
            out.push(Interface {
                mtu: link_mtu(&name),
                name,
                addr,
                mask,
                loopback: flags & libc::IFF_LOOPBACK as u32 != 0,
                multicast: flags & libc::IFF_MULTICAST as u32 != 0,
            });
        }
        libc::freeifaddrs(head);
    }
    out
}

/// The MTU of interface `name` (`/sys/class/net/<name>/mtu`; 1500 if unknown).
fn link_mtu(name: &str) -> u32 {
    std::fs::read_to_string(format!("/sys/class/net/{name}/mtu"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1500)
}

/// IPv4 + UDP headers: a datagram's payload is the link MTU minus this.
pub const IP_UDP_HEADERS: usize = 28;

/// Largest UDP payload towards `peer`: the configured size for the
/// interface that reaches it (`udp_mtu_per_interface`, else `udp_mtu`),
/// never more than that interface's own MTU allows, so IP never fragments.
/// A peer on no local subnet (routed) gets `udp_mtu` capped by the smallest
/// MTU of the non-loopback interfaces.
pub fn udp_payload_for(peer: Ipv4Addr, ifaces: &[Interface], cfg: &crate::Config) -> usize {
    let default = cfg.udp_mtu as usize;
    let fits = |i: &Interface| (i.mtu as usize).saturating_sub(IP_UDP_HEADERS);
    let via = if peer.is_loopback() {
        ifaces.iter().find(|i| i.loopback)
    } else {
        ifaces
            .iter()
            .find(|i| !i.loopback && (i.addr == peer || i.contains(peer)))
    };
    let mtu = match via {
        Some(i) => cfg
            .udp_mtu_per_interface
            .get(&i.name)
            .map_or(default, |m| *m as usize)
            .min(fits(i)),
        None => ifaces
            .iter()
            .filter(|i| !i.loopback)
            .map(fits)
            .min()
            .map_or(default, |m| m.min(default)),
    };
    mtu.max(576 - IP_UDP_HEADERS)
}

/// Name of this process (from `/proc/self/comm`).
pub fn process_name() -> String {
    std::fs::read_to_string("/proc/self/comm")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "ferry".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_listed_and_ids_are_stable() {
        let ifs = interfaces();
        assert!(ifs
            .iter()
            .any(|i| i.loopback && i.addr == Ipv4Addr::LOCALHOST));
        assert_eq!(host_id(), host_id());
        assert_ne!(host_id(), net_id());
    }

    #[test]
    fn the_udp_payload_follows_the_interface_that_reaches_the_peer() {
        let iface = |name: &str, addr: [u8; 4], mtu: u32| Interface {
            name: name.into(),
            mtu,
            addr: Ipv4Addr::from(addr),
            mask: Ipv4Addr::new(255, 255, 255, 0),
            loopback: name == "lo",
            multicast: true,
        };
        let ifs = vec![
            iface("lo", [127, 0, 0, 1], 65536),
            iface("eth0", [10, 0, 0, 1], 1500),
            iface("wg0", [10, 9, 0, 1], 1280),
            iface("jumbo", [10, 8, 0, 1], 9000),
        ];
        let mut cfg = crate::Config::default();
        let at = |ip: [u8; 4], cfg: &crate::Config| udp_payload_for(Ipv4Addr::from(ip), &ifs, cfg);
        assert_eq!(at([10, 0, 0, 7], &cfg), 1472);
        // A VPN with a 1280 B MTU: the 1472 default would fragment.
        assert_eq!(at([10, 9, 0, 7], &cfg), 1252);
        // Jumbo frames only when configured for that interface.
        assert_eq!(at([10, 8, 0, 7], &cfg), 1472);
        cfg.udp_mtu_per_interface.insert("jumbo".into(), 8972);
        assert_eq!(at([10, 8, 0, 7], &cfg), 8972);
        cfg.udp_mtu_per_interface.insert("eth0".into(), 9000);
        assert_eq!(at([10, 0, 0, 7], &cfg), 1472, "capped by eth0's own MTU");
        // Routed peer: the smallest interface MTU bounds it.
        assert_eq!(at([192, 168, 5, 5], &cfg), 1252);
        assert_eq!(at([127, 0, 0, 1], &cfg), 1472);
    }
}
