//! Socket calls the standard library does not offer for the UDP path:
//! per-datagram TOS and socket priority on send, kernel receive timestamps
//! on receive.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::priority::PacketClass;

/// Whether the kernel takes `SO_PRIORITY` as a control message (Linux 6.14+).
static CMSG_PRIORITY: AtomicBool = AtomicBool::new(true);

/// `sendmsg` with `IP_TOS` and `SO_PRIORITY` control messages (IPv4; IPv6
/// goes without). A kernel that refuses the priority cmsg gets TOS only and
/// derives the priority from it.
pub(crate) fn send_with_class(
    socket: &mio::net::UdpSocket,
    bytes: &[u8],
    to: SocketAddr,
    class: PacketClass,
) -> std::io::Result<usize> {
    let with_prio = CMSG_PRIORITY.load(Ordering::Relaxed);
    match send_cmsgs(socket, bytes, to, class, with_prio) {
        Err(e) if with_prio && e.raw_os_error() == Some(libc::EINVAL) => {
            CMSG_PRIORITY.store(false, Ordering::Relaxed);
            send_cmsgs(socket, bytes, to, class, false)
        }
        r => r,
    }
}

fn send_cmsgs(
    socket: &mio::net::UdpSocket,
    bytes: &[u8],
    to: SocketAddr,
    class: PacketClass,
    with_prio: bool,
) -> std::io::Result<usize> {
    let SocketAddr::V4(v4) = to else {
        return socket.send_to(bytes, to);
    };
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: v4.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(v4.ip().octets()),
        },
        sin_zero: [0; 8],
    };
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // Room for two cmsgs carrying an int each, 8-byte aligned.
    let mut control = [0u64; 8];
    let int = std::mem::size_of::<libc::c_int>() as u32;
    // SAFETY: every pointer refers to a live local of the right size; the
    // cmsg headers are written inside `control` by the CMSG macros.
    unsafe {
        let space = libc::CMSG_SPACE(int) as usize;
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_name = &addr as *const _ as *mut libc::c_void;
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = if with_prio { 2 * space } else { space };
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::IPPROTO_IP;
        (*cmsg).cmsg_type = libc::IP_TOS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(int) as usize;
        std::ptr::write_unaligned(
            libc::CMSG_DATA(cmsg) as *mut libc::c_int,
            libc::c_int::from(class.tos()),
        );
        if with_prio {
            let c2 = libc::CMSG_NXTHDR(&msg, cmsg);
            (*c2).cmsg_level = libc::SOL_SOCKET;
            (*c2).cmsg_type = libc::SO_PRIORITY;
            (*c2).cmsg_len = libc::CMSG_LEN(int) as usize;
            std::ptr::write_unaligned(
                libc::CMSG_DATA(c2) as *mut libc::c_int,
                class.socket_priority() as libc::c_int,
            );
        }
        let n = libc::sendmsg(socket.as_raw_fd(), &msg, 0);
        if n < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

/// Asks the kernel to stamp every received datagram (`SO_TIMESTAMPNS`).
/// Without it (an old kernel) datagrams count from when they are read.
pub(crate) fn enable_rx_timestamps(socket: &mio::net::UdpSocket) {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt on our own fd with a live int.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            &on as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Turns kernel receive stamps (wall clock) into `Instant`s: one pair of
/// clock reads per batch of datagrams.
pub(crate) struct RxClock {
    wall_ns: u64,
    mono: Instant,
}

impl RxClock {
    /// Reads both clocks now.
    pub fn now() -> RxClock {
        RxClock {
            wall_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            mono: Instant::now(),
        }
    }

    /// The monotonic reading.
    pub fn mono(&self) -> Instant {
        self.mono
    }

    /// When a datagram stamped `wall_ns` arrived (never after now; a stamp
    /// from a stepped clock or none at all counts as now).
    pub fn arrival(&self, wall_ns: Option<u64>) -> Instant {
        match wall_ns {
            Some(t) if t <= self.wall_ns && self.wall_ns - t < 1_000_000_000 => self
                .mono
                .checked_sub(std::time::Duration::from_nanos(self.wall_ns - t))
                .unwrap_or(self.mono),
            _ => self.mono,
        }
    }
}

/// `recvmsg` of one datagram with its kernel receive stamp (wall-clock ns).
pub(crate) fn recv_stamped(
    socket: &mio::net::UdpSocket,
    buf: &mut [u8],
) -> std::io::Result<(usize, SocketAddr, Option<u64>)> {
    // SAFETY: every pointer refers to a live local of the right size; the
    // kernel writes at most msg_namelen / msg_controllen bytes; cmsgs are
    // walked with the CMSG macros inside `control`.
    unsafe {
        let mut addr: libc::sockaddr_storage = std::mem::zeroed();
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        let mut control = [0u64; 8];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_name = &mut addr as *mut _ as *mut libc::c_void;
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&control);
        let n = libc::recvmsg(socket.as_raw_fd(), &mut msg, 0);
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut stamp = None;
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec =
                    std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        let from = match i32::from(addr.ss_family) {
            libc::AF_INET => {
                let a = &*(&addr as *const _ as *const libc::sockaddr_in);
                SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                    u16::from_be(a.sin_port),
                ))
            }
            libc::AF_INET6 => {
                let a = &*(&addr as *const _ as *const libc::sockaddr_in6);
                SocketAddr::V6(SocketAddrV6::new(
                    a.sin6_addr.s6_addr.into(),
                    u16::from_be(a.sin6_port),
                    a.sin6_flowinfo,
                    a.sin6_scope_id,
                ))
            }
            _ => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "datagram from an unknown address family",
                ))
            }
        };
        Ok((n as usize, from, stamp))
    }
}
