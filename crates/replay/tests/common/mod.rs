//! What the importer and replay suites share: where the fixtures are, and
//! the checks made on them and on the recorded sessions (found with
//! `testkit::shared_traces_dir`).
#![allow(dead_code)]

pub mod checks;
pub mod corruption;

use std::path::PathBuf;

/// The package directory, as cargo gives it to the test at run time: `env!`
/// would bake in the path of whichever checkout compiled the binary, which
/// breaks when clones share one target directory.
fn package_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// `traces/` at the repository's root: the sessions we recorded for the
/// README's replay and report examples.
pub fn shipped_traces() -> PathBuf {
    package_dir().join("../../traces")
}

/// The repository's README, whose first replay table is of [`shipped_traces`].
pub fn readme() -> PathBuf {
    package_dir().join("../../README.md")
}

/// `tests/fixtures`: small sessions we wrote in each format, in the repository.
pub fn fixtures() -> PathBuf {
    package_dir().join("tests/fixtures")
}
