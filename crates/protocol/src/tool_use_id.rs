//! Tool-call ids for calls that came without one.

use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// A tool_use id unique within the process and, with overwhelming
/// likelihood, across processes: `prefix`, then a per-process random part
/// and a counter. For calls whose id the model's side did not give (the
/// embedded model; a server that leaves `id` out): an id that repeats
/// (`call_0` in every answer) pairs a result with the wrong call, and
/// names another call's saved output file. Only `[A-Za-z0-9_]` besides
/// the prefix.
pub fn fresh_tool_use_id(prefix: &str) -> String {
    static PROCESS: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let process = *PROCESS.get_or_init(|| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        if let Ok(d) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            h.write_u128(d.as_nanos());
        }
        h.finish()
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{process:016x}{n:06x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn fresh_ids_never_repeat_and_keep_to_plain_characters() {
        let ids: HashSet<String> = (0..10_000).map(|_| fresh_tool_use_id("call_")).collect();
        assert_eq!(ids.len(), 10_000);
        for id in &ids {
            let rest = id.strip_prefix("call_").unwrap();
            assert!(rest.chars().all(|c| c.is_ascii_alphanumeric()), "{id}");
        }
    }
}
