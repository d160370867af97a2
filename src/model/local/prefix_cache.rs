//! Reuse of key/value state across decisions: a few cached token sequences, least recently used
//! first out, bounded by a token budget (the bytes per token are fixed by the model's shape).
//!
//! Every prompt starts with the same policy, and the screen and review of one request share the
//! transcript, so a new prompt usually shares a long prefix with one that was just run. The
//! cache finds the longest common prefix over its entries and returns that entry's state cut
//! back to it (a view, no copy); the decision then pays only for its new tokens.
//!
//! It never fails: a lookup with nothing in common returns an empty state.

use super::transformer::KvCache;

struct Entry {
    tokens: Vec<u32>,
    state: KvCache,
    last_used: u64,
}

pub struct PrefixCache {
    entries: Vec<Entry>,
    budget_tokens: usize,
    clock: u64,
}

fn common_prefix(left: &[u32], right: &[u32]) -> usize {
    left.iter().zip(right).take_while(|(a, b)| a == b).count()
}

impl PrefixCache {
    pub fn new(budget_tokens: usize) -> Self {
        PrefixCache { entries: Vec::new(), budget_tokens, clock: 0 }
    }

    /// The state of the longest cached prefix of `tokens`, at most `limit` tokens long (the
    /// caller keeps at least one token to feed, for the logits of the last position).
    pub fn lookup(&mut self, tokens: &[u32], limit: usize) -> candle_core::Result<KvCache> {
        self.clock += 1;
        let best = self
            .entries
            .iter_mut()
            .map(|entry| (common_prefix(&entry.tokens, tokens).min(limit).min(entry.state.len()), entry))
            .max_by_key(|(shared, _)| *shared);
        match best {
            Some((shared, entry)) if shared > 0 => {
                entry.last_used = self.clock;
                entry.state.truncated(shared)
            }
            _ => Ok(KvCache::default()),
        }
    }

    /// Keeps the state of `tokens`. Entries that are prefixes of it are superseded; then the
    /// least recently used go until the budget holds. A sequence over the budget is not kept.
    pub fn store(&mut self, tokens: &[u32], state: KvCache) {
        if tokens.len() > self.budget_tokens || tokens.len() != state.len() {
            return;
        }
        self.clock += 1;
        self.entries.retain(|entry| !tokens.starts_with(&entry.tokens));
        self.entries.push(Entry { tokens: tokens.to_vec(), state, last_used: self.clock });
        while self.cached_tokens() > self.budget_tokens {
            let Some(oldest) =
                self.entries.iter().enumerate().min_by_key(|(_, entry)| entry.last_used).map(|(index, _)| index)
            else {
                break;
            };
            self.entries.swap_remove(oldest);
        }
    }

    pub fn cached_tokens(&self) -> usize {
        self.entries.iter().map(|entry| entry.tokens.len()).sum()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state whose length matches `tokens` (the cache only looks at lengths and tokens).
    fn state(len: usize) -> KvCache {
        use candle_core::{Device, Tensor};
        let mut cache = KvCache::default();
        if len > 0 {
            let keys = Tensor::zeros((1, 1, len, 2), candle_core::DType::F32, &Device::Cpu).unwrap();
            cache = KvCache::from_layers(vec![(keys.clone(), keys)], len);
        }
        cache
    }

    #[test]
    fn the_longest_shared_prefix_wins_and_limits_apply() {
        let mut cache = PrefixCache::new(100);
        cache.store(&[1, 2, 3, 4], state(4));
        cache.store(&[1, 2, 9, 9, 9], state(5));
        assert_eq!(cache.lookup(&[1, 2, 3, 4, 5], 100).unwrap().len(), 4);
        assert_eq!(cache.lookup(&[1, 2, 9, 9, 7], 100).unwrap().len(), 4);
        assert_eq!(cache.lookup(&[1, 2, 3, 4], 3).unwrap().len(), 3);
        assert_eq!(cache.lookup(&[7, 7], 100).unwrap().len(), 0);
    }

    #[test]
    fn prefixes_are_superseded_and_the_budget_evicts_least_recently_used() {
        let mut cache = PrefixCache::new(10);
        cache.store(&[1, 2], state(2));
        cache.store(&[1, 2, 3], state(3));
        assert_eq!((cache.len(), cache.cached_tokens()), (1, 3));
        cache.store(&[5, 6, 7, 8], state(4));
        cache.lookup(&[1, 2, 3], 10).unwrap(); // [1, 2, 3] is now the most recent.
        cache.store(&[9, 9, 9, 9], state(4));
        assert_eq!(cache.cached_tokens(), 7);
        assert_eq!(cache.lookup(&[5, 6, 7, 8], 10).unwrap().len(), 0);
        assert_eq!(cache.lookup(&[1, 2, 3], 10).unwrap().len(), 3);
        cache.store(&[4; 11], state(11));
        assert_eq!(cache.cached_tokens(), 7, "a sequence over the budget is not kept");
    }
}
