//! Reads a file whole into memory, up to a size cap, without trusting the
//! size it claims: a sparse file can claim terabytes (allocating that up
//! front aborts the process), and a file can grow while it is read.

use std::io::{self, Read};

/// What a capped read found.
pub(crate) enum Capped {
    /// The whole content, at most the cap.
    Content(Vec<u8>),
    /// More than the cap (whatever the size said before the read), or more
    /// than memory can hold.
    TooLarge,
}

/// The most allocated before any byte is read: the default size cap
/// ([`Options::max_file_size`](crate::Options)), so a file under it is
/// read into a buffer of its size at once, and a larger one's buffer grows
/// with what is read, not with what its size claims.
const FIRST_ALLOCATION: u64 = 16 * 1024 * 1024;

/// Reads `reader` to its end, expecting `size_hint` bytes, unless it holds
/// more than `cap`. The buffer grows fallibly (std's `read_to_end` asks
/// with `try_reserve`), so running out of memory is [`Capped::TooLarge`],
/// not an abort.
pub(crate) fn read_capped(reader: impl Read, size_hint: u64, cap: u64) -> io::Result<Capped> {
    let first = usize::try_from(size_hint.min(cap).min(FIRST_ALLOCATION)).unwrap_or(0);
    let mut bytes = Vec::new();
    if bytes.try_reserve_exact(first).is_err() {
        return Ok(Capped::TooLarge);
    }
    // One byte past the cap tells a file over it, grown while read or not.
    match reader.take(cap.saturating_add(1)).read_to_end(&mut bytes) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::OutOfMemory => return Ok(Capped::TooLarge),
        Err(e) => return Err(e),
    }
    if bytes.len() as u64 > cap {
        return Ok(Capped::TooLarge);
    }
    Ok(Capped::Content(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(content: &[u8], hint: u64, cap: u64) -> Option<Vec<u8>> {
        match read_capped(content, hint, cap).unwrap() {
            Capped::Content(bytes) => Some(bytes),
            Capped::TooLarge => None,
        }
    }

    #[test]
    fn a_file_up_to_the_cap_is_read_whole() {
        assert_eq!(read(b"abcd", 4, 4).as_deref(), Some(&b"abcd"[..]));
        assert_eq!(read(b"", 0, 0).as_deref(), Some(&b""[..]));
        assert_eq!(read(b"ab", 2, u64::MAX).as_deref(), Some(&b"ab"[..]));
    }

    #[test]
    fn a_file_grown_past_the_cap_while_read_is_too_large() {
        // Its size said 2 bytes; 5 came.
        assert_eq!(read(b"abcde", 2, 4), None);
    }

    #[test]
    fn a_huge_claimed_size_allocates_no_more_than_the_first_allocation() {
        let Capped::Content(bytes) = read_capped(&b"ab"[..], 8 << 40, u64::MAX).unwrap() else {
            panic!("too large");
        };
        assert_eq!(bytes, b"ab");
        assert!(bytes.capacity() as u64 <= FIRST_ALLOCATION);
    }
}
