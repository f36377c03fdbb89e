//! Builds the C side of ferry-dds (`csrc/ferry_dds.c`: a type that carries
//! serialized CDR as it is, and the few Cyclone calls ferry makes) against
//! Cyclone DDS's headers, and links `libddsc`.
//!
//! Cyclone DDS comes from the system (Debian: `cyclonedds-dev`, installed by
//! `scripts/setup.sh`), or from `FERRY_CYCLONEDDS_HOME` (a prefix with
//! `include/` and `lib/`, e.g. a build of Cyclone from source).

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=csrc/ferry_dds.c");
    println!("cargo:rerun-if-env-changed=FERRY_CYCLONEDDS_HOME");
    let mut build = cc::Build::new();
    build
        .file("csrc/ferry_dds.c")
        .warnings(true)
        .extra_warnings(true);
    let include = match std::env::var_os("FERRY_CYCLONEDDS_HOME") {
        Some(home) => {
            let home = PathBuf::from(home);
            let lib = home.join("lib");
            println!("cargo:rustc-link-search=native={}", lib.display());
            // Found at run time without LD_LIBRARY_PATH.
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
            home.join("include")
        }
        None => PathBuf::from("/usr/include"),
    };
    if !include.join("dds/ddsi/ddsi_serdata.h").exists() {
        panic!(
            "ferry-dds: Cyclone DDS's headers are not in {} (dds/ddsi/ddsi_serdata.h): \
             run scripts/setup.sh (Debian: apt-get install cyclonedds-dev) or set \
             FERRY_CYCLONEDDS_HOME to a Cyclone DDS 0.10 install prefix",
            include.display()
        );
    }
    build.include(&include).compile("ferry_dds");
    println!("cargo:rustc-link-lib=dylib=ddsc");
}
