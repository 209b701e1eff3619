//! Content hashes of saved outputs: what a reference in the session log
//! checks a file against before trusting it again.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use xxhash_rust::xxh3::Xxh3;

/// A 64-bit XXH3 hash of a file's bytes. Not a defence against someone
/// forging a file (the store's files are the user's own); it tells a
/// deleted, truncated or edited file from the one that was saved, at
/// memory speed, so checking a 1 GB output on resume costs a fraction of a
/// second. Written as 16 hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ContentHash(u64);

impl ContentHash {
    /// The hash of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        ContentHash(xxhash_rust::xxh3::xxh3_64(bytes))
    }
}

/// Hashes bytes as they stream past, for outputs too big to hold.
#[derive(Clone, Default)]
pub(crate) struct StreamingHash(Xxh3);

impl StreamingHash {
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    pub(crate) fn finish(&self) -> ContentHash {
        ContentHash(self.0.digest())
    }
}

impl fmt::Debug for StreamingHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StreamingHash")
    }
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl Serialize for ContentHash {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ContentHash {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        u64::from_str_radix(&text, 16)
            .map(ContentHash)
            .map_err(|_| serde::de::Error::custom(format!("not a content hash: {text:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_equals_whole_and_round_trips() {
        let data = vec![7u8; 100_000];
        let mut s = StreamingHash::default();
        for chunk in data.chunks(999) {
            s.update(chunk);
        }
        assert_eq!(s.finish(), ContentHash::of(&data));
        let json = serde_json::to_string(&s.finish()).unwrap();
        assert_eq!(json.len(), 18);
        assert_eq!(
            serde_json::from_str::<ContentHash>(&json).unwrap(),
            s.finish()
        );
        assert!(serde_json::from_str::<ContentHash>("\"xyz\"").is_err());
    }
}
