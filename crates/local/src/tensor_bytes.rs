//! The stored bytes of one weight tensor: a range of the mapped model file when the
//! kernels read its type as stored, or bytes owned by the model when the tensor was
//! converted at load (types without a kernel of their own become Q8_0).

use crate::file_map::FileMap;
use std::ops::{Deref, Range};
use std::sync::Arc;

/// Bytes of a tensor, borrowed from the file map or owned.
pub(crate) enum TensorBytes {
    /// `range` of the file; checked against the map's length when made, so reading it
    /// cannot fail.
    Mapped {
        map: Arc<FileMap>,
        range: Range<usize>,
    },
    /// Converted at load (or given by a caller, as in [`crate::quantized_matmul`]).
    Owned(Vec<u8>),
}

impl TensorBytes {
    /// `range` of `map`, or `None` when the range is not inside the file.
    pub(crate) fn mapped(map: &Arc<FileMap>, range: Range<usize>) -> Option<Self> {
        map.get(range.clone())?;
        Some(TensorBytes::Mapped {
            map: Arc::clone(map),
            range,
        })
    }
}

impl Deref for TensorBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            // In range by construction; the empty fallback is never taken.
            TensorBytes::Mapped { map, range } => map.get(range.clone()).unwrap_or_default(),
            TensorBytes::Owned(bytes) => bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A view is made only inside the file, and reads the file's bytes.
    #[test]
    fn views_are_checked_against_the_map() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"0123456789").unwrap();
        let map = Arc::new(FileMap::new(&file).unwrap());
        assert_eq!(&*TensorBytes::mapped(&map, 2..5).unwrap(), b"234");
        assert_eq!(&*TensorBytes::mapped(&map, 0..10).unwrap(), b"0123456789");
        assert!(TensorBytes::mapped(&map, 9..11).is_none());
        assert!(TensorBytes::mapped(&map, 11..11).is_none());
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = 5..3;
        assert!(TensorBytes::mapped(&map, reversed).is_none());
        let empty = tempfile::tempfile().unwrap();
        let map = Arc::new(FileMap::new(&empty).unwrap());
        assert!(map.is_empty());
        assert!(TensorBytes::mapped(&map, 0..1).is_none());
    }
}
