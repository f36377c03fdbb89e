//! Records which ferry sources the binary was built from (the repository
//! moves while benches run): commit, and a digest of uncommitted edits under
//! crates/, as FERRY_BENCH_SOURCE.

use std::process::Command;

fn git(args: &[&str]) -> String {
    Command::new("git")
        .args(["-C", ".."])
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim_end().to_string())
        .unwrap_or_default()
}

fn main() {
    println!("cargo:rerun-if-changed=../crates");
    println!("cargo:rerun-if-changed=../.git/HEAD");
    println!("cargo:rerun-if-changed=../.git/logs/HEAD");
    let head: String = git(&["log", "-1", "--format=%h %cI %s"])
        .chars()
        .take(90)
        .collect();
    let dirty = git(&["status", "--porcelain", "--", "crates"]);
    let state = if dirty.is_empty() {
        format!("{head} (crates/ clean at build time)")
    } else {
        // FNV-1a of the diff: tells two dirty builds apart.
        let diff = git(&["diff", "--", "crates"]);
        let h = diff.bytes().fold(0xcbf29ce484222325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100000001b3)
        });
        let files: Vec<&str> = dirty
            .lines()
            .map(|l| l.get(3..).unwrap_or(l).trim())
            .collect();
        format!(
            "{head} + uncommitted edits at build time in {} (diff fnv {h:016x})",
            files.join(", ")
        )
    };
    println!("cargo:rustc-env=FERRY_BENCH_SOURCE={state}");
}
