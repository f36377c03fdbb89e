//! The whole of what a ferry user's build script needs: Rust types for
//! the ROS 2 packages in `interfaces/`. (The second file, every shipped
//! type with a catalog, is only for this crate's tests.)

fn main() {
    ferry_idl::codegen::build(&["interfaces"]).unwrap_or_else(|e| panic!("{e}"));

    // Tests go over every type: the shipped packages and ours, generated
    // again with a catalog (name, hash, default and re-encoding of each).
    let mut all = ferry_idl::Interfaces::common();
    let problems = all.add_dir(std::path::Path::new("interfaces"));
    assert!(problems.is_empty(), "{problems:?}");
    let text = ferry_idl::codegen::RustCodegen::new(&all)
        .catalog(true)
        .generate()
        .unwrap_or_else(|e| panic!("{e}"));
    let out =
        std::path::Path::new(&std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("catalog.rs");
    std::fs::write(out, text).expect("write catalog.rs");
}
