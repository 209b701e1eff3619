use std::fmt;

/// The blake3 hash naming an object (a file's content, a symlink's target
/// or a directory's tree) in the store.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId(pub(crate) [u8; 32]);

impl ObjectId {
    pub(crate) fn of(bytes: &[u8]) -> ObjectId {
        ObjectId(*blake3::hash(bytes).as_bytes())
    }

    /// The hash as 64 lowercase hex digits, as objects are named on disk.
    pub fn to_hex(&self) -> String {
        let mut out = String::with_capacity(64);
        for b in self.0 {
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        }
        out
    }

    pub(crate) fn from_hex(text: &str) -> Option<ObjectId> {
        let bytes = text.as_bytes();
        if bytes.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks(2).enumerate() {
            let hi = hex_value(pair[0])?;
            let lo = hex_value(pair[1])?;
            out[i] = (hi << 4) | lo;
        }
        Some(ObjectId(out))
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", &self.to_hex()[..12])
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}
