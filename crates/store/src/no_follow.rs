//! Opening a file whittle writes without following a link at its name.
//!
//! whittle writes its state as itself, outside the sandbox. A link where it
//! appends (a transcript, a session log, an output being saved) would carry
//! those writes anywhere; the start-up check refuses such links in a folder
//! not trusted, and this refuses them at every open, trusted or not.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;

/// `options`, made to fail (`ELOOP`) when the last part of the path is a
/// symbolic link instead of opening what it points to.
pub fn no_follow(options: &mut OpenOptions) -> &mut OpenOptions {
    options.custom_flags(libc::O_NOFOLLOW)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn a_link_is_refused_and_a_file_is_opened() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "mine").unwrap();
        let link = dir.path().join("log");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let err = no_follow(OpenOptions::new().append(true).create(true))
            .open(&link)
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ELOOP));
        assert_eq!(fs::read(&victim).unwrap(), b"mine");
        assert!(
            no_follow(OpenOptions::new().append(true))
                .open(&victim)
                .is_ok()
        );
    }
}
