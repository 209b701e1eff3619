//! Which names a tree entry may have. A restore joins each name to its
//! folder's path and writes there, as the user, outside the sandbox; a
//! store may come from a hostile repository, so a name that is not one
//! plain entry of its folder (`..`, `a/b`, an absolute path, which
//! `Path::join` takes in place of the folder) would write anywhere. The
//! scan never records such a name: a listing gives none, and it skips
//! `.git` (at any depth) and `.whittle` (at the root), so a tree holding
//! one was forged.

/// Whether `name` can be one entry of a folder the scan recorded, at any
/// depth: not empty, `.` or `..`, free of `/` and NUL, and not `.git`.
pub(crate) fn is_plain(name: &[u8]) -> bool {
    !(name.is_empty()
        || name == b"."
        || name == b".."
        || name.contains(&b'/')
        || name.contains(&0)
        || name == b".git")
}

/// Whether `name` can be an entry of the folder at `rel` (relative to the
/// workspace, empty at its root): a plain name, and at the root not
/// `.whittle`, where the store itself and the session logs live.
pub(crate) fn is_allowed(rel: &[u8], name: &[u8]) -> bool {
    is_plain(name) && !(rel.is_empty() && name == b".whittle")
}

/// Names no scan records, each one that a forged tree could carry: for
/// every test that a reader refuses them.
#[cfg(test)]
pub(crate) const UNSAFE_NAMES: &[&[u8]] = &[
    b"",
    b".",
    b"..",
    b"a/b",
    b"/etc/passwd",
    b"../x",
    b"a\0b",
    b".git",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_pass() {
        for bad in UNSAFE_NAMES.iter().copied() {
            assert!(!is_plain(bad), "{bad:?}");
            assert!(!is_allowed(b"sub", bad), "{bad:?}");
        }
        for good in [
            &b"a"[..],
            b"...",
            b".gitignore",
            b".git2",
            b"\xff\n",
            b".whittle",
        ] {
            assert!(is_plain(good), "{good:?}");
        }
    }

    #[test]
    fn whittle_is_refused_at_the_root_only() {
        assert!(!is_allowed(b"", b".whittle"));
        assert!(is_allowed(b"sub", b".whittle"));
        assert!(is_allowed(b"", b".whittle2"));
    }
}
