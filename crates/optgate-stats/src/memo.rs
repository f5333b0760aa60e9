//! A small process-wide memo for the sequential plans: a plan is a pure function of a few
//! numbers but costs a numerical integration (~0.2 s optimised), and one process asks for
//! the same plan many times — the daemon at every submit, every engine start and every
//! stage of a campaign. Bounded, and only successful results are kept.

use std::collections::VecDeque;
use std::sync::Mutex;

/// Plans each memo keeps; the oldest is forgotten first. Far more than the distinct
/// designs one daemon sees at once, and each entry is a few kilobytes.
pub const PLANS_REMEMBERED: usize = 32;

/// Values of type `V` by a key compared with `==` (keys hold `f64`s, so no hashing).
pub(crate) struct Memo<K, V> {
    entries: Mutex<VecDeque<(K, V)>>,
}

impl<K: PartialEq, V: Clone> Memo<K, V> {
    pub(crate) const fn new() -> Self {
        Memo {
            entries: Mutex::new(VecDeque::new()),
        }
    }

    /// The value remembered for `key`, or `compute()`'s, remembered when it is `Ok`. The
    /// lock is not held while computing: two threads asking at once may both compute, and
    /// both get the same value.
    pub(crate) fn get_or_try<E>(
        &self,
        key: K,
        compute: impl FnOnce() -> Result<V, E>,
    ) -> Result<V, E> {
        if let Some(v) = self.find(&key) {
            return Ok(v);
        }
        let value = compute()?;
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if !entries.iter().any(|(k, _)| *k == key) {
            if entries.len() == PLANS_REMEMBERED {
                entries.pop_front();
            }
            entries.push_back((key, value.clone()));
        }
        Ok(value)
    }

    fn find(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_computed_once_per_key_and_errors_are_not_kept() {
        let memo: Memo<(u32, f64), u32> = Memo::new();
        let calls = std::cell::Cell::new(0);
        let compute = |v: u32| {
            calls.set(calls.get() + 1);
            Ok::<_, ()>(v)
        };
        assert_eq!(memo.get_or_try((1, 0.05), || compute(10)), Ok(10));
        assert_eq!(memo.get_or_try((1, 0.05), || compute(99)), Ok(10));
        assert_eq!(memo.get_or_try((1, 0.10), || compute(20)), Ok(20));
        assert_eq!(calls.get(), 2);
        assert_eq!(
            memo.get_or_try((2, 0.05), || Err::<u32, _>("no")),
            Err("no")
        );
        assert_eq!(memo.get_or_try((2, 0.05), || compute(30)), Ok(30));
        assert_eq!(calls.get(), 3);
    }

    #[test]
    fn the_oldest_plan_is_forgotten_past_the_limit() {
        let memo: Memo<usize, usize> = Memo::new();
        for k in 0..=PLANS_REMEMBERED {
            memo.get_or_try(k, || Ok::<_, ()>(k)).unwrap();
        }
        assert_eq!(memo.len(), PLANS_REMEMBERED);
        // Key 0 went first: asked again, it is computed again.
        assert_eq!(memo.get_or_try(0, || Ok::<_, ()>(7)), Ok(7));
        assert_eq!(memo.get_or_try(1, || Ok::<_, ()>(7)), Ok(7));
        assert_eq!(
            memo.get_or_try(PLANS_REMEMBERED, || Ok::<_, ()>(7)),
            Ok(PLANS_REMEMBERED)
        );
    }
}
