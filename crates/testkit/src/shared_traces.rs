//! Where the recorded sessions of `../shared/traces` are, for the suites
//! that read them when they exist.

use std::path::PathBuf;

/// Where the recorded sessions of `../shared/traces` (beside the repository)
/// would be; `WHITTLE_SHARED_TRACES` names them when the checkout is
/// somewhere else (a worktree). Found from the package directory cargo gives
/// the test at run time: `env!` would bake in the path of whichever checkout
/// compiled the binary, which breaks when clones share one target directory.
/// Every package sits at `crates/<name>`, so the path is the same from each.
pub fn shared_traces_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("WHITTLE_SHARED_TRACES") {
        return PathBuf::from(dir);
    }
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("../../../shared/traces")
}
