//! The paths one shell part has already judged, so `ls a a a …` judges each word once.
//!
//! Decides nothing itself: it only answers "was exactly this `(path, write, base)` judged in
//! this part?". A hit is confirmed on the text, never on a hash alone. An earlier version kept
//! 64-bit SipHash values with the fixed keys of `DefaultHasher::new()`: a word crafted offline
//! (a birthday search of about 2^32 hashes) whose hash equalled a harmless word's would have
//! been skipped unjudged. With the text compared, a collision costs one extra comparison and
//! the word is judged. Cannot fail: it allocates and compares.

use rustc_hash::FxHashMap;
use std::hash::BuildHasher;

/// No entry follows in this hash's chain.
const END: u32 = u32::MAX;

/// One judged key: `text[start..start + raw_len]` is the path, the base follows it.
struct Entry {
    start: usize,
    raw_len: usize,
    base_len: Option<usize>,
    write: bool,
    /// The previous entry with the same hash, or [`END`].
    next: u32,
}

/// Up to this many keys are looked up by comparing each in turn, with no hash table: most parts
/// judge a path or two, and building the table cost more than the comparisons it saves.
const LINEAR: usize = 8;

/// The keys judged so far, their text in one buffer (two allocations grow with the part, not
/// one or two per path).
#[derive(Default)]
pub(crate) struct JudgedPaths {
    /// Hash of the key → the newest entry with that hash; built once there are more than
    /// [`LINEAR`] keys.
    newest: FxHashMap<u64, u32>,
    entries: Vec<Entry>,
    text: String,
}

fn hash(raw: &str, write: bool, base: Option<&str>) -> u64 {
    rustc_hash::FxBuildHasher.hash_one((raw, write, base))
}

impl JudgedPaths {
    /// Records the key; `true` when it was not judged before (the caller judges it now).
    pub(crate) fn insert(&mut self, raw: &str, write: bool, base: Option<&str>) -> bool {
        if self.newest.is_empty() && self.entries.len() < LINEAR {
            if self.entries.iter().any(|entry| self.is(entry, raw, write, base)) {
                return false;
            }
            self.push(raw, write, base, END);
            return true;
        }
        if self.newest.is_empty() {
            // Past the linear bound: index the keys kept so far, oldest first, so each chain
            // runs from the newest entry back as [`Self::insert_hashed`] builds it.
            for index in 0..self.entries.len() {
                let (raw, write, base) = self.key(&self.entries[index]);
                let hash = hash(raw, write, base);
                let Ok(position) = u32::try_from(index) else { break };
                let next = self.newest.insert(hash, position).unwrap_or(END);
                self.entries[index].next = next;
            }
        }
        self.insert_hashed(hash(raw, write, base), raw, write, base)
    }

    /// The key an entry holds.
    fn key(&self, entry: &Entry) -> (&str, bool, Option<&str>) {
        let raw = self.text.get(entry.start..entry.start + entry.raw_len).unwrap_or_default();
        let base = entry.base_len.map(|len| {
            let from = entry.start + entry.raw_len;
            self.text.get(from..from + len).unwrap_or_default()
        });
        (raw, entry.write, base)
    }

    /// Appends an entry whose chain continues at `next`.
    fn push(&mut self, raw: &str, write: bool, base: Option<&str>, next: u32) {
        let start = self.text.len();
        self.text.push_str(raw);
        if let Some(base) = base {
            self.text.push_str(base);
        }
        self.entries.push(Entry { start, raw_len: raw.len(), base_len: base.map(str::len), write, next });
    }

    fn insert_hashed(&mut self, hash: u64, raw: &str, write: bool, base: Option<&str>) -> bool {
        let mut cursor = self.newest.get(&hash).copied().unwrap_or(END);
        while let Some(entry) = self.entries.get(cursor as usize) {
            if self.is(entry, raw, write, base) {
                return false;
            }
            cursor = entry.next;
        }
        let Ok(index) = u32::try_from(self.entries.len()) else {
            // Four billion paths in one part cannot arrive in a bounded request; judging again
            // is the safe answer if they ever did.
            return true;
        };
        let next = self.newest.insert(hash, index).unwrap_or(END);
        self.push(raw, write, base, next);
        true
    }

    fn is(&self, entry: &Entry, raw: &str, write: bool, base: Option<&str>) -> bool {
        let stored_raw = self.text.get(entry.start..entry.start + entry.raw_len);
        let stored_base = entry.base_len.map(|len| {
            let from = entry.start + entry.raw_len;
            self.text.get(from..from + len)
        });
        entry.write == write
            && stored_raw == Some(raw)
            && match (stored_base, base) {
                (None, None) => true,
                (Some(stored), Some(base)) => stored == Some(base),
                _ => false,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_key_is_judged_once() {
        let mut judged = JudgedPaths::default();
        assert!(judged.insert("a", false, Some("/w")));
        assert!(!judged.insert("a", false, Some("/w")));
        assert!(judged.insert("a", true, Some("/w")), "a write is another key");
        assert!(judged.insert("a", false, Some("/x")), "another base is another key");
        assert!(judged.insert("a", false, None));
        assert!(!judged.insert("a", false, None));
        // The text is split where it was joined: `ab` + `/w` is not `a` + `b/w`.
        assert!(judged.insert("ab", false, Some("/w")));
        assert!(judged.insert("a", false, Some("b/w")));
    }

    #[test]
    fn keys_sharing_a_hash_are_told_apart_by_their_text() {
        // Every key forced onto one hash: only exact repeats are skipped.
        let mut judged = JudgedPaths::default();
        assert!(judged.insert_hashed(7, "README.md", false, Some("/workspace")));
        assert!(judged.insert_hashed(7, "/home/dev/.ssh/id_rsa", false, Some("/workspace")));
        assert!(judged.insert_hashed(7, "README.md", true, Some("/workspace")));
        assert!(!judged.insert_hashed(7, "README.md", false, Some("/workspace")));
        assert!(!judged.insert_hashed(7, "/home/dev/.ssh/id_rsa", false, Some("/workspace")));
    }

    #[test]
    fn keys_past_the_linear_bound_are_still_found() {
        let mut judged = JudgedPaths::default();
        let keys: Vec<String> = (0..3 * LINEAR).map(|index| format!("src/{index}.rs")).collect();
        for key in &keys {
            assert!(judged.insert(key, false, Some("/w")));
        }
        for key in &keys {
            assert!(!judged.insert(key, false, Some("/w")), "{key}");
            assert!(judged.insert(key, true, Some("/w")), "{key}");
        }
    }

    proptest::proptest! {
        /// Through the linear lookup and the hash table it switches to, against an exact set.
        #[test]
        fn insert_agrees_with_an_exact_set(keys in proptest::collection::vec(("[ab/]{0,3}", proptest::bool::ANY, proptest::option::of("[ab/]{0,2}")), 0..40)) {
            let mut judged = JudgedPaths::default();
            let mut exact = std::collections::HashSet::new();
            for (raw, write, base) in &keys {
                let new = judged.insert(raw, *write, base.as_deref());
                proptest::prop_assert_eq!(new, exact.insert((raw.clone(), *write, base.clone())));
            }
        }

        /// Against a set of the keys themselves, under a hash that collides often.
        #[test]
        fn agrees_with_an_exact_set(keys in proptest::collection::vec(("[ab/]{0,3}", proptest::bool::ANY, proptest::option::of("[ab/]{0,2}")), 0..40)) {
            let mut judged = JudgedPaths::default();
            let mut exact = std::collections::HashSet::new();
            for (raw, write, base) in &keys {
                let hash = (raw.len() + base.as_ref().map_or(0, String::len)) as u64 % 3;
                let new = judged.insert_hashed(hash, raw, *write, base.as_deref());
                proptest::prop_assert_eq!(new, exact.insert((raw.clone(), *write, base.clone())));
            }
        }
    }
}
