//! A raw packet capture of one interface (AF_PACKET; needs root): what
//! actually crossed the wire, for tests that look at TOS bytes or check
//! that a payload never appears in clear.

use std::time::{Duration, Instant};

/// Every frame on one interface, from when it was opened.
pub struct Capture(i32);

impl Capture {
    /// Captures `ifname` (`lo`, a veth); `None` without the right (root).
    pub fn open(ifname: &str) -> Option<Capture> {
        let name = std::ffi::CString::new(ifname).ok()?;
        // SAFETY: plain socket calls with valid arguments; the fd is ours.
        unsafe {
            let fd = libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW,
                (libc::ETH_P_ALL as u16).to_be() as i32,
            );
            if fd < 0 {
                return None;
            }
            let mut sll: libc::sockaddr_ll = std::mem::zeroed();
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
            sll.sll_ifindex = libc::if_nametoindex(name.as_ptr()) as i32;
            let r = libc::bind(
                fd,
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            );
            if r != 0 {
                libc::close(fd);
                return None;
            }
            // Room for bursts while other tests share the interface.
            let rcvbuf: libc::c_int = 8 << 20;
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                &rcvbuf as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as u32,
            );
            let tv = libc::timeval {
                tv_sec: 0,
                tv_usec: 50_000,
            };
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as u32,
            );
            Some(Capture(fd))
        }
    }

    /// The next frame (waits at most 50 ms).
    pub fn next(&self, buf: &mut [u8]) -> Option<usize> {
        // SAFETY: buf is a valid writable buffer of its length.
        let n = unsafe { libc::recv(self.0, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
        (n > 0).then_some(n as usize)
    }

    /// Forgets what was captured so far (everything sent before now: on
    /// `lo` a frame reaches the capture while the sender is still in send).
    pub fn drain(&self) {
        let mut buf = vec![0u8; 70_000];
        // SAFETY: as in `next`, non-blocking.
        while unsafe {
            libc::recv(
                self.0,
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        } > 0
        {}
    }

    /// Reads frames for `limit` (or until `stop` says so for one of them):
    /// how many frames were read and how many contained `marker`.
    pub fn count_marker(
        &self,
        marker: &[u8],
        limit: Duration,
        mut stop: impl FnMut(&[u8]) -> bool,
    ) -> (usize, usize) {
        let end = Instant::now() + limit;
        let mut buf = vec![0u8; 70_000];
        let (mut frames, mut hits) = (0, 0);
        while Instant::now() < end {
            let Some(n) = self.next(&mut buf) else {
                continue;
            };
            frames += 1;
            let f = &buf[..n];
            if f.windows(marker.len()).any(|w| w == marker) {
                hits += 1;
            }
            if stop(f) {
                break;
            }
        }
        (frames, hits)
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        // SAFETY: our own fd.
        unsafe { libc::close(self.0) };
    }
}
