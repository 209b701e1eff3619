//! Links the debug `whittle` binary as a position-dependent executable.
//!
//! Why: every sandboxed command starts whittle's own binary twice (the
//! helper's two stages, see `whittle_sandbox::helper`), and the end-to-end
//! tests start thousands of them. A debug build as a PIE carries 160,000
//! relocations that the dynamic loader applies at every start, dirtying 2 MB
//! of pages: 3 ms of CPU a start instead of 1.8 ms (`perf stat whittle
//! --version`). Linked without PIE, the linker resolves them once. Release
//! builds stay PIE (address randomisation of the binary itself).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let debug = std::env::var("PROFILE").is_ok_and(|p| p == "debug");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if debug && linux {
        println!("cargo:rustc-link-arg-bin=whittle=-no-pie");
    }
}
