//! Named shared-memory segments in `/dev/shm`, stamped with their owner.
//!
//! Every name is `ferry.<kind>.<pidns>.<pid>.<start>.<tag>`: the creating
//! process's pid namespace (inode of `/proc/self/ns/pid`), its pid and its
//! start time (clock ticks since boot, `/proc/<pid>/stat` field 22), so a
//! pid reused after a crash is not mistaken for the owner, and a process in
//! another pid namespace sharing this `/dev/shm` (containers with a shared
//! IPC namespace) is never taken for dead.
//! [`sweep_stale`] removes every ferry segment whose owner is gone; any
//! ferry process runs it at start, `ferry shm gc` on demand. Segments are
//! created owner-only (0600), reserved with `posix_fallocate` (a full
//! `/dev/shm` is an error at creation, never a SIGBUS on first touch) and
//! unlinked by their owner on drop. Readers that still map a segment after
//! it is unlinked keep reading it safely.

use std::ffi::CString;
use std::sync::OnceLock;

/// Directory of POSIX shared memory on Linux.
pub const SHM_DIR: &str = "/dev/shm";
/// Prefix of every ferry segment name.
pub const PREFIX: &str = "ferry.";

/// Why a segment could not be made or opened.
#[derive(Debug, thiserror::Error)]
pub enum ShmError {
    /// `/dev/shm` has no room for the segment.
    #[error("/dev/shm is full: {bytes} bytes for `{name}` do not fit (free space in /dev/shm, or lower the sample size)")]
    NoSpace {
        /// Segment name.
        name: String,
        /// Bytes asked for.
        bytes: usize,
    },
    /// Shared memory is not available or not permitted here.
    #[error(
        "shared memory unavailable for `{name}`: {source} (is /dev/shm mounted and writable?)"
    )]
    Unavailable {
        /// Segment name.
        name: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The segment belongs to another user: segments are 0600, so
    /// processes of different users cannot share them.
    #[error(
        "segment `{name}` belongs to another user ({source}); processes of different users \
         cannot share ferry's segments (0600): run both as one user to use shared memory"
    )]
    Denied {
        /// Segment name.
        name: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The segment is not (or no longer) there, or is not a ferry segment.
    #[error("segment `{name}` cannot be opened: {why}")]
    Open {
        /// Segment name.
        name: String,
        /// What went wrong.
        why: String,
    },
}

/// A process as segment names record it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// Pid namespace (inode of `/proc/<pid>/ns/pid`).
    pub pidns: u64,
    /// Process id.
    pub pid: u32,
    /// Start time, clock ticks since boot.
    pub start: u64,
}

impl Owner {
    /// This process.
    pub fn this() -> Owner {
        static ME: OnceLock<Owner> = OnceLock::new();
        *ME.get_or_init(|| {
            let pid = std::process::id();
            Owner {
                pidns: pid_namespace(),
                pid,
                start: start_time(pid).unwrap_or(0),
            }
        })
    }

    /// Whether this process may still be running: same pid and start time,
    /// or in another pid namespace (which we cannot see into).
    pub fn alive(&self) -> bool {
        self.pidns != Owner::this().pidns || start_time(self.pid) == Some(self.start)
    }
}

/// This process's pid namespace (0 if unknown).
fn pid_namespace() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").map_or(0, |m| m.ino())
}

/// Start time of `pid` (clock ticks since boot), if it runs.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(19)?.parse().ok()
}

/// `ferry.<kind>.<pidns>.<pid>.<start>.<tag>` for this process.
pub fn name(kind: char, tag: &str) -> String {
    let o = Owner::this();
    format!("{PREFIX}{kind}.{}.{}.{}.{tag}", o.pidns, o.pid, o.start)
}

/// The owner recorded in a ferry segment name.
pub fn owner_of(name: &str) -> Option<Owner> {
    let mut parts = name.strip_prefix(PREFIX)?.split('.');
    let _kind = parts.next()?;
    let pidns = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok()?;
    let start = parts.next()?.parse().ok()?;
    Some(Owner { pidns, pid, start })
}

/// A mapped segment.
pub struct Segment {
    ptr: *mut u8,
    len: usize,
    name: String,
    /// Unlinked on drop (the creator).
    owned: bool,
}

// SAFETY: the mapping is plain shared memory; all concurrent access goes
// through atomics or through slots handed over with release/acquire.
unsafe impl Send for Segment {}
unsafe impl Sync for Segment {}

fn cname(name: &str) -> CString {
    // Names are built from digits, letters and dots: no interior NUL.
    CString::new(format!("/{name}")).unwrap_or_default()
}

impl Segment {
    /// Creates segment `name` of `len` bytes (zeroed), owner-only, reserved.
    pub fn create(name: &str, len: usize) -> Result<Segment, ShmError> {
        let c = cname(name);
        let unavailable = |e: std::io::Error| ShmError::Unavailable {
            name: name.to_string(),
            source: e,
        };
        // SAFETY: plain libc calls on a valid C string and our own fd.
        unsafe {
            let fd = libc::shm_open(
                c.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o600,
            );
            if fd < 0 {
                return Err(unavailable(std::io::Error::last_os_error()));
            }
            libc::fchmod(fd, 0o600);
            let r = libc::posix_fallocate(fd, 0, len as libc::off_t);
            if r != 0 {
                libc::close(fd);
                libc::shm_unlink(c.as_ptr());
                return Err(if r == libc::ENOSPC {
                    ShmError::NoSpace {
                        name: name.to_string(),
                        bytes: len,
                    }
                } else {
                    unavailable(std::io::Error::from_raw_os_error(r))
                });
            }
            let ptr = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            );
            libc::close(fd);
            if ptr == libc::MAP_FAILED {
                let e = std::io::Error::last_os_error();
                libc::shm_unlink(c.as_ptr());
                return Err(unavailable(e));
            }
            Ok(Segment {
                ptr: ptr as *mut u8,
                len,
                name: name.to_string(),
                owned: true,
            })
        }
    }

    /// Opens an existing segment; `writable` maps it read-write, otherwise
    /// read-only (a write through it faults instead of corrupting).
    pub fn open(name: &str, writable: bool) -> Result<Segment, ShmError> {
        if !name.starts_with(PREFIX) || name.contains('/') {
            return Err(ShmError::Open {
                name: name.to_string(),
                why: "not a ferry segment name".into(),
            });
        }
        let c = cname(name);
        let err = |why: String| ShmError::Open {
            name: name.to_string(),
            why,
        };
        // SAFETY: plain libc calls on a valid C string and our own fd.
        unsafe {
            let flags = if writable {
                libc::O_RDWR
            } else {
                libc::O_RDONLY
            };
            let fd = libc::shm_open(c.as_ptr(), flags | libc::O_CLOEXEC, 0);
            if fd < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::PermissionDenied {
                    return Err(ShmError::Denied {
                        name: name.to_string(),
                        source: e,
                    });
                }
                return Err(err(e.to_string()));
            }
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd, &mut st) != 0 || st.st_size <= 0 {
                libc::close(fd);
                return Err(err("empty or unreadable".into()));
            }
            let len = st.st_size as usize;
            let prot = if writable {
                libc::PROT_READ | libc::PROT_WRITE
            } else {
                libc::PROT_READ
            };
            let ptr = libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, 0);
            libc::close(fd);
            if ptr == libc::MAP_FAILED {
                return Err(err(std::io::Error::last_os_error().to_string()));
            }
            Ok(Segment {
                ptr: ptr as *mut u8,
                len,
                name: name.to_string(),
                owned: false,
            })
        }
    }

    /// Its name (without the leading slash).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: segments have at least one byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Start of the mapping.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// A `T` at `offset`, which must be in bounds and aligned for `T`.
    /// Only types made of atomics are placed in shared memory.
    pub(crate) fn at<T>(&self, offset: usize) -> &T {
        assert!(
            offset + std::mem::size_of::<T>() <= self.len
                && (self.ptr as usize + offset).is_multiple_of(std::mem::align_of::<T>()),
            "segment layout out of bounds"
        );
        // SAFETY: in bounds and aligned (checked); T is made of atomics, for
        // which any bit pattern is valid and shared access is sound.
        unsafe { &*(self.ptr.add(offset) as *const T) }
    }

    /// The bytes `offset..offset + len` (bounds checked).
    pub fn bytes(&self, offset: usize, len: usize) -> Option<&[u8]> {
        if offset.checked_add(len)? > self.len {
            return None;
        }
        // SAFETY: in bounds; the caller owns the slot (handed over with
        // acquire), so the writer does not touch these bytes meanwhile.
        Some(unsafe { std::slice::from_raw_parts(self.ptr.add(offset), len) })
    }

    /// Mutable bytes `offset..offset + len` of a writable segment whose
    /// range the caller owns exclusively (a free slot).
    ///
    /// # Safety
    /// No other reference to this range may exist while the slice lives.
    // Shared memory is written through a shared mapping by design; the
    // contract above is what makes the exclusive borrow sound.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn bytes_mut(&self, offset: usize, len: usize) -> &mut [u8] {
        assert!(offset + len <= self.len, "slot out of bounds");
        std::slice::from_raw_parts_mut(self.ptr.add(offset), len)
    }

    /// Keeps the segment in `/dev/shm` after drop (another process owns it).
    pub fn disown(&mut self) {
        self.owned = false;
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: our own mapping; the name is ours when owned.
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.len);
            if self.owned {
                libc::shm_unlink(cname(&self.name).as_ptr());
            }
        }
    }
}

/// What a sweep found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SweepReport {
    /// Segments (and sockets) of dead owners, removed.
    pub removed: Vec<String>,
    /// Segments of running processes, kept.
    pub kept: usize,
}

/// Removes every ferry segment (and control socket) in `/dev/shm` whose
/// owner process is gone.
pub fn sweep_stale() -> SweepReport {
    let mut report = SweepReport::default();
    let Ok(dir) = std::fs::read_dir(SHM_DIR) else {
        return report;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(owner) = owner_of(&name) else {
            continue;
        };
        if owner.alive() {
            report.kept += 1;
        } else if std::fs::remove_file(entry.path()).is_ok() {
            report.removed.push(name);
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_record_a_live_owner() {
        let n = name('d', "test");
        let o = owner_of(&n).unwrap();
        assert_eq!(o, Owner::this());
        assert!(o.alive());
        assert!(!Owner {
            start: o.start + 1,
            ..o
        }
        .alive());
        // Another pid namespace: never taken for dead.
        assert!(Owner {
            pidns: o.pidns + 1,
            start: o.start + 1,
            ..o
        }
        .alive());
        assert_eq!(owner_of("ferry.d.1.x.1.t"), None);
        assert_eq!(owner_of("other.d.1.1.t"), None);
    }

    #[test]
    fn create_open_read_only_and_unlink_on_drop() {
        let n = name('t', &format!("seg{}", line!()));
        let s = Segment::create(&n, 4096).unwrap();
        unsafe { s.bytes_mut(0, 4) }.copy_from_slice(b"abcd");
        let r = Segment::open(&n, false).unwrap();
        assert_eq!(r.bytes(0, 4).unwrap(), b"abcd");
        assert!(r.bytes(4090, 10).is_none());
        let mode = std::fs::metadata(format!("{SHM_DIR}/{n}")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(mode.permissions().mode() & 0o777, 0o600);
        drop(s);
        assert!(!std::path::Path::new(&format!("{SHM_DIR}/{n}")).exists());
        // The reader's mapping survives the unlink.
        assert_eq!(r.bytes(0, 4).unwrap(), b"abcd");
        assert!(Segment::open(&n, false).is_err());
        assert!(Segment::open("../etc/passwd", false).is_err());
    }

    #[test]
    fn sweep_removes_segments_of_dead_owners_only() {
        let live = Segment::create(&name('t', "live"), 4096).unwrap();
        // A dead owner: pid of ours with a start time that never was.
        let o = Owner::this();
        let dead = format!("{PREFIX}t.{}.{}.{}.dead", o.pidns, o.pid, o.start + 12345);
        let mut d = Segment::create(&dead, 4096).unwrap();
        d.disown();
        drop(d);
        let r = sweep_stale();
        assert!(r.removed.contains(&dead), "{r:?}");
        assert!(std::path::Path::new(&format!("{SHM_DIR}/{}", live.name())).exists());
    }
}
