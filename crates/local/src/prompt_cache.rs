//! Keys and values of a prompt's fixed prefix (the system prompt and the tools) kept on
//! disk, so a new process skips that prefill: `whittle -p` on two cores spent most of its
//! time there, on tokens identical in every run.
//!
//! An entry is named by a hash of the model file's identity (canonical path, size,
//! modification time: a replaced file is a new model) and the exact prefix tokens. It is
//! written to a temporary file and renamed into place, so a reader sees a whole entry or
//! none, and it ends with a SHA-256 of its bytes: a truncated or damaged file, or one
//! from another shape of model, is refused as a whole (the caller warns once and computes
//! the prefix instead). At most [`MAX_ENTRIES`] entries are kept, the least recently
//! written removed first.

use sha2::{Digest, Sha256};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Where the embedded model keeps prefix entries: `prompt-cache` beside the models
/// folder (`~/.cache/whittle/prompt-cache`).
pub fn prompt_cache_dir() -> Result<PathBuf, crate::LocalError> {
    let models = crate::models_dir()?;
    Ok(models
        .parent()
        .map_or_else(|| models.join("prompt-cache"), |p| p.join("prompt-cache")))
}

/// Entries kept in the folder (an entry of SmolLM2-135M is ~46 KB per prompt token).
pub(crate) const MAX_ENTRIES: usize = 8;

const MAGIC: &[u8; 8] = b"WHKVv001";

/// The shape of a model's KV cache; an entry of another shape is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KvShape {
    pub(crate) n_layer: usize,
    pub(crate) n_kv: usize,
    pub(crate) head_dim: usize,
}

impl KvShape {
    /// Values of `tokens` positions: per layer keys then values, `[kv head][pos][dim]`.
    pub(crate) fn values(&self, tokens: usize) -> usize {
        self.n_layer * 2 * self.n_kv * tokens * self.head_dim
    }
}

/// The folder of one model's prefix entries.
#[derive(Debug)]
pub(crate) struct PromptCache {
    dir: PathBuf,
    model_key: [u8; 32],
}

impl PromptCache {
    /// Entries for the model at `model_path`, in `dir` (made when first written).
    pub(crate) fn new(dir: PathBuf, model_path: &Path) -> std::io::Result<Self> {
        let path = fs::canonicalize(model_path)?;
        let meta = fs::metadata(&path)?;
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        let mut h = Sha256::new();
        h.update(path.to_string_lossy().as_bytes());
        h.update(meta.len().to_le_bytes());
        h.update(mtime.to_le_bytes());
        Ok(PromptCache {
            dir,
            model_key: h.finalize().into(),
        })
    }

    fn entry(&self, tokens: &[u32]) -> PathBuf {
        let mut h = Sha256::new();
        h.update(self.model_key);
        for t in tokens {
            h.update(t.to_le_bytes());
        }
        let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{hex}.kv"))
    }

    /// The keys and values of `tokens`, if an entry holds them; `Err` (one line) when an
    /// entry is there but cannot be used.
    pub(crate) fn load(&self, tokens: &[u32], shape: KvShape) -> Result<Option<Vec<f32>>, String> {
        let path = self.entry(tokens);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        decode(&bytes, tokens, shape)
            .map(Some)
            .map_err(|why| format!("{}: {why}", path.display()))
    }

    /// Stores the keys and values of `tokens` (see [`KvShape::values`] for the layout).
    pub(crate) fn save(&self, tokens: &[u32], shape: KvShape, kv: &[f32]) -> std::io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let mut file = tempfile::NamedTempFile::new_in(&self.dir)?;
        file.write_all(&encode(tokens, shape, kv))?;
        file.as_file().sync_all()?;
        file.persist(self.entry(tokens)).map_err(|e| e.error)?;
        self.evict();
        Ok(())
    }

    /// Removes the oldest entries beyond [`MAX_ENTRIES`] (and stray temporary files).
    fn evict(&self) {
        let Ok(read) = fs::read_dir(&self.dir) else {
            return;
        };
        let mut entries: Vec<(std::time::SystemTime, PathBuf)> = read
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "kv"))
            .filter_map(|p| Some((fs::metadata(&p).ok()?.modified().ok()?, p)))
            .collect();
        entries.sort();
        let extra = entries.len().saturating_sub(MAX_ENTRIES);
        for (_, path) in entries.into_iter().take(extra) {
            let _ = fs::remove_file(path);
        }
    }
}

fn encode(tokens: &[u32], shape: KvShape, kv: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + 16 + tokens.len() * 4 + kv.len() * 4 + 32);
    out.extend_from_slice(MAGIC);
    for n in [shape.n_layer, shape.n_kv, shape.head_dim, tokens.len()] {
        out.extend_from_slice(&(n as u32).to_le_bytes());
    }
    for t in tokens {
        out.extend_from_slice(&t.to_le_bytes());
    }
    for v in kv {
        out.extend_from_slice(&v.to_le_bytes());
    }
    let digest: [u8; 32] = Sha256::digest(&out).into();
    out.extend_from_slice(&digest);
    out
}

fn decode(bytes: &[u8], tokens: &[u32], shape: KvShape) -> Result<Vec<f32>, String> {
    let values = shape.values(tokens.len());
    let want = 8 + 16 + tokens.len() * 4 + values * 4 + 32;
    if bytes.len() != want {
        return Err(format!("{} bytes, expected {want}", bytes.len()));
    }
    let (body, digest) = bytes.split_at(want - 32);
    if Sha256::digest(body).as_slice() != digest {
        return Err("checksum mismatch".into());
    }
    if &body[..8] != MAGIC {
        return Err("not a prompt-cache entry of this version".into());
    }
    let mut words = body[8..].chunks_exact(4).map(|c| {
        let mut w = [0u8; 4];
        w.copy_from_slice(c);
        w
    });
    let header: Vec<usize> = words
        .by_ref()
        .take(4)
        .map(|w| u32::from_le_bytes(w) as usize)
        .collect();
    if header != [shape.n_layer, shape.n_kv, shape.head_dim, tokens.len()] {
        return Err("made for another model shape".into());
    }
    if !words
        .by_ref()
        .take(tokens.len())
        .map(u32::from_le_bytes)
        .eq(tokens.iter().copied())
    {
        return Err("made for other tokens".into());
    }
    Ok(words.map(f32::from_le_bytes).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SHAPE: KvShape = KvShape {
        n_layer: 2,
        n_kv: 1,
        head_dim: 4,
    };

    fn cache(dir: &Path) -> PromptCache {
        let model = dir.join("m.gguf");
        fs::write(&model, b"model").unwrap();
        PromptCache::new(dir.join("cache"), &model).unwrap()
    }

    #[test]
    fn an_entry_round_trips_and_others_are_missing_or_refused() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(dir.path());
        let tokens = [5, 6, 7];
        let kv: Vec<f32> = (0..SHAPE.values(3)).map(|i| i as f32 * 0.5).collect();
        assert_eq!(c.load(&tokens, SHAPE), Ok(None));
        c.save(&tokens, SHAPE, &kv).unwrap();
        assert_eq!(c.load(&tokens, SHAPE), Ok(Some(kv.clone())));
        assert_eq!(
            c.load(&[5, 6], SHAPE),
            Ok(None),
            "other tokens, other entry"
        );
        let other = KvShape { n_kv: 2, ..SHAPE };
        assert!(
            c.load(&tokens, other).is_err(),
            "same tokens, another shape"
        );
        // Damage: flipped bytes and truncation are refused, never a panic.
        let path = c.entry(&tokens);
        let mut bytes = fs::read(&path).unwrap();
        bytes[40] ^= 1;
        fs::write(&path, &bytes).unwrap();
        assert!(c.load(&tokens, SHAPE).unwrap_err().contains("checksum"));
        fs::write(&path, &bytes[..10]).unwrap();
        assert!(c.load(&tokens, SHAPE).is_err());
    }

    #[test]
    fn only_the_newest_entries_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(dir.path());
        for i in 0..MAX_ENTRIES as u32 + 3 {
            c.save(&[i], SHAPE, &vec![0.0; SHAPE.values(1)]).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let kept = fs::read_dir(dir.path().join("cache")).unwrap().count();
        assert_eq!(kept, MAX_ENTRIES);
        assert_eq!(c.load(&[0], SHAPE), Ok(None), "the oldest went");
        assert!(c.load(&[MAX_ENTRIES as u32 + 2], SHAPE).unwrap().is_some());
    }

    proptest! {
        /// Any bytes in an entry's place are an error or the entry, never a panic.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = decode(&bytes, &[1, 2], SHAPE);
        }
    }
}
