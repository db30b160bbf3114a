//! [`Gates`], on the primitives of `super::prim` (std's in the crate, shuttle's in the model
//! check `super::shuttle_check`, which builds this same file).
//!
//! Why an entry counts the threads that use it: a gate may leave the map only when nobody
//! is queued on it. Removed earlier, a thread still queued on the old gate and a newcomer on
//! a fresh one would both work on the key at once, and the first to finish would remove the
//! other's gate (so [`Gates::busy`] would say no work was under way while some was).

use std::collections::HashMap;
use std::hash::Hash;

use super::prim::{waiting, Arc, Mutex, MutexGuard};

/// Per-unit gates: concurrent first reads of one unit (a page, a chunk, a row, a record) wait
/// for a single decode, charged once, instead of each decoding it.
#[derive(Debug)]
pub struct Gates<K> {
    open: Mutex<HashMap<K, Gate>>,
}

/// A key's gate and the threads working or queued on it.
#[derive(Debug)]
struct Gate {
    turn: Arc<Mutex<()>>,
    users: usize,
}

impl<K: Hash + Eq + Clone> Default for Gates<K> {
    fn default() -> Self {
        Gates {
            open: Mutex::new(HashMap::new()),
        }
    }
}

/// A thread's use of a key's gate, given up when dropped (also when the work panics).
struct Use<'a, K: Hash + Eq + Clone> {
    gates: &'a Gates<K>,
    key: K,
    turn: Arc<Mutex<()>>,
}

impl<K: Hash + Eq + Clone> Drop for Use<'_, K> {
    fn drop(&mut self) {
        let mut open = self.gates.lock();
        let Some(gate) = open.get_mut(&self.key) else {
            return;
        };
        // Always this use's gate (an entry leaves only with its last user); checked anyway.
        if Arc::ptr_eq(&gate.turn, &self.turn) {
            gate.users -= 1;
            if gate.users == 0 {
                open.remove(&self.key);
            }
        }
    }
}

impl<K: Hash + Eq + Clone> Gates<K> {
    fn lock(&self) -> MutexGuard<'_, HashMap<K, Gate>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `work` for `key` while no other thread runs work for the same key. `work` should
    /// first look for what a previous holder produced (the caller's cache).
    pub fn one_at_a_time<R>(&self, key: K, work: impl FnOnce() -> R) -> R {
        let turn = {
            let mut open = self.lock();
            let gate = open.entry(key.clone()).or_insert_with(|| Gate {
                turn: Arc::new(Mutex::new(())),
                users: 0,
            });
            gate.users += 1;
            gate.turn.clone()
        };
        let using = Use {
            gates: self,
            key,
            turn,
        };
        let only_worker = waiting(|| using.turn.lock().unwrap_or_else(|e| e.into_inner()));
        let result = work();
        drop(only_worker);
        drop(using);
        result
    }

    /// Whether work for `key` is under way (or queued).
    pub fn busy(&self, key: &K) -> bool {
        self.lock().contains_key(key)
    }
}
