//! Values computed from one message each, kept through edits of the others.
//!
//! A tool call's parsed facts, a marker's ledger read back, a message's
//! transcript line: each depends on its message alone. An edit of another
//! message (a snip of the middle, a placeholder further back) moves the
//! value with its message instead of dropping it, so it is computed once in
//! the message's life, not once per edit before it. snip_compact edits the
//! history near its head on every call once it runs: dropping everything
//! after the edit meant computing the whole tail again each time.

use std::ops::Range;

/// A value per message index, `None` where none was computed (or its
/// message changed since). Told of every edit of the history it follows.
#[derive(Clone, Debug)]
pub(crate) struct PerMessage<T> {
    values: Vec<Option<T>>,
}

impl<T> Default for PerMessage<T> {
    fn default() -> Self {
        PerMessage { values: Vec::new() }
    }
}

impl<T> PerMessage<T> {
    /// The value of message `k`, if one was kept.
    pub(crate) fn get(&self, k: usize) -> Option<&T> {
        self.values.get(k)?.as_ref()
    }

    /// Whether message `k` has a value.
    pub(crate) fn has(&self, k: usize) -> bool {
        self.get(k).is_some()
    }

    /// Keeps `value` as message `k`'s.
    pub(crate) fn set(&mut self, k: usize, value: T) {
        if k >= self.values.len() {
            self.values.resize_with(k + 1, || None);
        }
        self.values[k] = Some(value);
    }

    /// Message `k`'s value, kept no longer.
    pub(crate) fn take(&mut self, k: usize) -> Option<T> {
        self.values.get_mut(k)?.take()
    }

    /// Message `k`'s value, computed by `of` when none was kept.
    pub(crate) fn get_or_set_with(&mut self, k: usize, of: impl FnOnce() -> T) -> &T {
        if k >= self.values.len() {
            self.values.resize_with(k + 1, || None);
        }
        self.values[k].get_or_insert_with(of)
    }

    /// Message `k` changed: its value no longer holds.
    pub(crate) fn changed(&mut self, k: usize) {
        if let Some(v) = self.values.get_mut(k) {
            *v = None;
        }
    }

    /// Messages `range` were replaced by `inserted` new ones: their values
    /// go, the new ones have none, and the values after move with their
    /// messages.
    pub(crate) fn spliced(&mut self, range: Range<usize>, inserted: usize) {
        let len = self.values.len();
        let start = range.start.min(len);
        let end = range.end.clamp(start, len);
        if start == len {
            return;
        }
        self.values
            .splice(start..end, std::iter::repeat_with(|| None).take(inserted));
    }

    /// The history was cut to its first `len` messages.
    pub(crate) fn truncated(&mut self, len: usize) {
        self.values.truncate(len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Push,
        Pop,
        Change(u8),
        Splice(u8, u8, u8),
        Compute(u8),
        Take(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            Just(Op::Push),
            Just(Op::Pop),
            any::<u8>().prop_map(Op::Change),
            (any::<u8>(), any::<u8>(), 0u8..4).prop_map(|(a, b, n)| Op::Splice(a, b, n)),
            any::<u8>().prop_map(Op::Compute),
            any::<u8>().prop_map(Op::Take),
        ]
    }

    proptest! {
        /// Through any edits, a value kept for message `k` is the one
        /// computed from the message now at `k`: messages are ids here,
        /// each new or changed one a fresh id, and the value is the id.
        #[test]
        fn values_follow_their_messages(ops in prop::collection::vec(op(), 1..80)) {
            let mut messages: Vec<u32> = Vec::new();
            let mut next = 0u32;
            let mut fresh = || { next += 1; next };
            let mut kept = PerMessage::<u32>::default();
            for op in ops {
                let len = messages.len();
                let at = |x: u8| x as usize * len / 255;
                match op {
                    Op::Push => messages.push(fresh()),
                    Op::Pop => {
                        messages.pop();
                        kept.truncated(messages.len());
                    }
                    Op::Change(k) if len > 0 => {
                        let k = k as usize % len;
                        messages[k] = fresh();
                        kept.changed(k);
                    }
                    Op::Change(_) => {}
                    Op::Splice(a, b, n) => {
                        let (a, b) = (at(a.min(b)), at(a.max(b)));
                        let new: Vec<u32> = (0..n).map(|_| fresh()).collect();
                        messages.splice(a..b, new);
                        kept.spliced(a..b, n as usize);
                    }
                    Op::Compute(k) if len > 0 => {
                        let k = k as usize % len;
                        prop_assert_eq!(*kept.get_or_set_with(k, || messages[k]), messages[k]);
                    }
                    Op::Compute(_) => {}
                    Op::Take(k) => {
                        let k = at(k);
                        if let Some(v) = kept.take(k) {
                            prop_assert_eq!(v, messages[k]);
                        }
                        prop_assert!(!kept.has(k));
                    }
                }
                for (k, m) in messages.iter().enumerate() {
                    if let Some(v) = kept.get(k) {
                        prop_assert_eq!(v, m);
                    }
                }
                prop_assert!(kept.get(messages.len()).is_none());
            }
        }
    }
}
