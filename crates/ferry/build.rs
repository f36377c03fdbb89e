//! Generates `ferry::msgs` from the ROS 2 interfaces ferry ships
//! (`crates/ferry-idl/interfaces`), with the same generator users run on
//! their own packages.

fn main() {
    let ifaces = ferry_idl::Interfaces::common();
    let text = ferry_idl::codegen::RustCodegen::new(&ifaces)
        .runtime("crate")
        .generate()
        .unwrap_or_else(|e| panic!("generating ferry::msgs: {e}"));
    let out = std::path::Path::new(&std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("msgs.rs");
    std::fs::write(&out, text).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    println!("cargo:rerun-if-changed=build.rs");
}
