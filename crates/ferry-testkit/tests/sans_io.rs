//! The protocol cores stay sans-IO: ferry-wire, ferry-rudp, ferry-discovery
//! and ferry-conn take `now` and bytes from their caller and never read a
//! clock, open a socket, touch a file or start a thread themselves, outside
//! their tests. This test reads their sources and manifests and fails on
//! the first call or dependency that would break that.

use std::path::{Path, PathBuf};

/// The crates whose library code must stay free of I/O.
const CORES: [&str; 4] = ["ferry-wire", "ferry-rudp", "ferry-discovery", "ferry-conn"];

/// What library code of a core may not contain, and why.
const FORBIDDEN: [(&str, &str); 14] = [
    ("Instant::now", "reads the clock: take `now` as an argument"),
    (
        "SystemTime::now",
        "reads the clock: take the time as an argument",
    ),
    ("thread::spawn", "starts a thread"),
    ("thread::Builder", "starts a thread"),
    ("thread::sleep", "sleeps"),
    ("UdpSocket", "opens a socket: emit datagrams for the driver"),
    ("TcpStream", "opens a socket"),
    ("TcpListener", "opens a socket"),
    ("mio::", "does I/O"),
    ("socket2", "opens a socket"),
    ("tokio", "runs an async runtime"),
    ("libc::", "makes system calls"),
    ("std::fs", "touches files"),
    ("std::process", "touches processes"),
];

/// Dependencies that would bring I/O into a core.
const FORBIDDEN_DEPS: [&str; 5] = ["mio", "socket2", "tokio", "libc", "parking_lot"];

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crates/")
        .to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable source dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The library code of one file: test modules (`#[cfg(test)] mod …`, which
/// this project keeps at the end of a file, or in a `tests.rs` of their
/// own, or one whose name ends in `_tests.rs`) are cut off; comments are
/// dropped.
fn library_code(path: &Path) -> String {
    if path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n == "tests.rs" || n.ends_with("_tests.rs"))
    {
        return String::new();
    }
    let text = std::fs::read_to_string(path).expect("readable source");
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]" {
            let next = lines.peek().map(|l| l.trim()).unwrap_or("");
            assert!(
                next.starts_with("mod "),
                "{}: a #[cfg(test)] item that is not a test module; keep test code in the \
                 test module at the end of the file",
                path.display()
            );
            break;
        }
        let code = line.split("//").next().unwrap_or("");
        out.push_str(code);
        out.push('\n');
    }
    out
}

#[test]
fn protocol_cores_call_no_clock_socket_file_or_thread() {
    let mut checked = 0;
    for core in CORES {
        let mut files = Vec::new();
        rust_files(&crates_dir().join(core).join("src"), &mut files);
        assert!(!files.is_empty(), "{core} has sources");
        for file in files {
            let code = library_code(&file);
            for (pattern, why) in FORBIDDEN {
                if let Some((n, line)) = code.lines().enumerate().find(|(_, l)| l.contains(pattern))
                {
                    panic!(
                        "{}:{}: `{pattern}` in a sans-IO core ({why}):\n    {}",
                        file.display(),
                        n + 1,
                        line.trim()
                    );
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 15, "only {checked} files read");
}

#[test]
fn protocol_cores_depend_on_no_io_crate() {
    for core in CORES {
        let manifest = std::fs::read_to_string(crates_dir().join(core).join("Cargo.toml"))
            .expect("readable manifest");
        // Only [dependencies]: dev-dependencies may do anything.
        let deps: String = manifest
            .split("\n[")
            .filter(|section| section.starts_with("dependencies]"))
            .collect();
        for dep in FORBIDDEN_DEPS {
            let listed = deps
                .lines()
                .any(|l| l.split(['=', '.', ' ']).next() == Some(dep));
            assert!(
                !listed,
                "{core} depends on `{dep}`: the protocol cores do no I/O"
            );
        }
    }
}

#[test]
fn the_check_sees_a_clock_read() {
    // The scanner itself: a file that reads the clock is caught.
    let dir = std::env::temp_dir().join(format!("ferry-sans-io-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("x.rs");
    std::fs::write(
        &file,
        "fn f() { let t = std::time::Instant::now(); }\n#[cfg(test)]\nmod tests { fn g() { std::thread::spawn(|| ()); } }\n",
    )
    .expect("write");
    let code = library_code(&file);
    assert!(code.contains("Instant::now"));
    assert!(
        !code.contains("thread::spawn"),
        "test modules are not library code"
    );
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
