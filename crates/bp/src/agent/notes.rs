//! Notes: small keyed records with an expiry that a convergence-layer adapter keeps in the
//! agent's store, durable together with the agent's next commit (BIBE keeps its pending
//! custody there: transmission IDs survive a crash).
//!
//! They live in the store's duplicate-suppression table under keys no bundle identity can
//! have: an encoded [`crate::store::dedup_key`] has a fragment flag of 0 or 1 after its two
//! 8-byte numbers, a note has 0xFF there. So a note never suppresses a bundle, is read back
//! when the store is opened, and is forgotten at its expiry like any duplicate record. Under
//! [`crate::AgentConfig::max_dedup_records`] pressure the records closest to expiry go first,
//! notes included: a note is a hint that makes recovery cheaper, never what keeps a bundle.

use super::Agent;
use crate::store::{Op, Store};

/// Sixteen 0xFF bytes, then the 0xFF flag that no bundle identity's key has.
const NOTE_PREFIX: [u8; 17] = [0xFF; 17];

fn note_key(name: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(NOTE_PREFIX.len() + name.len());
    k.extend_from_slice(&NOTE_PREFIX);
    k.extend_from_slice(name);
    k
}

impl<S: Store> Agent<S> {
    /// Keeps note `name` until DTN time `expires_at_ms`. It is written with the agent's next
    /// commit (so a note put before [`Agent::accept_from_cla`] becomes durable in the same
    /// transaction as that bundle).
    pub fn put_note(&mut self, name: &[u8], expires_at_ms: u64) {
        let k = note_key(name);
        if let Some(old) = self.dedup.insert(k.clone(), expires_at_ms) {
            self.dedup_expiry.remove(&(old, k.clone()));
        }
        self.dedup_expiry.insert((expires_at_ms, k.clone()));
        self.pending.push(Op::PutDedup {
            id: k,
            expires_at_ms,
        });
    }

    /// Forgets note `name` (written with the next commit; no-op if absent).
    pub fn delete_note(&mut self, name: &[u8]) {
        let k = note_key(name);
        if let Some(old) = self.dedup.remove(&k) {
            self.dedup_expiry.remove(&(old, k.clone()));
            self.pending.push(Op::DeleteDedup(k));
        }
    }

    /// The notes whose names start with `prefix`, with their expiries, in name order (the
    /// names without the agent's own prefix).
    pub fn notes(&self, prefix: &[u8]) -> Vec<(Vec<u8>, u64)> {
        let start = note_key(prefix);
        self.dedup
            .range(start.clone()..)
            .take_while(|(k, _)| k.starts_with(&start))
            .map(|(k, e)| (k[NOTE_PREFIX.len()..].to_vec(), *e))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::store::dedup_key;
    use crate::{Agent, AgentConfig, MemoryStore};
    use bpv7::{BundleId, CreationTimestamp, Eid};

    #[test]
    fn notes_survive_a_reopen_and_never_look_like_a_bundle() {
        let mut a = Agent::open(AgentConfig::new(1), MemoryStore::new(), 1_000).unwrap();
        a.put_note(b"x/1", 5_000);
        a.put_note(b"x/2", 6_000);
        a.put_note(b"y/1", 6_000);
        a.delete_note(b"x/2");
        // Written with the next commit (here a local send).
        a.send(
            1_000,
            crate::SendRequest::new(Eid::ipn(1, 1), Eid::ipn(2, 1), vec![1u8; 10].into()),
        )
        .unwrap();
        let store = a.into_store();
        let a = Agent::open(AgentConfig::new(1), store, 2_000).unwrap();
        assert_eq!(a.notes(b"x/"), vec![(b"x/1".to_vec(), 5_000)]);
        assert_eq!(
            a.notes(b""),
            vec![(b"x/1".to_vec(), 5_000), (b"y/1".to_vec(), 6_000)]
        );
        // Expired at its time.
        let mut a = a;
        a.handle_timeout(5_000).unwrap();
        assert!(a.notes(b"x/").is_empty());
        // A bundle identity's key always has 0 or 1 where a note has 0xFF.
        let id = BundleId {
            source: Eid::ipn(u64::MAX, u64::MAX),
            timestamp: CreationTimestamp::new(u64::MAX, u64::MAX),
            fragment: Some((u64::MAX, u64::MAX)),
        };
        assert_eq!(dedup_key(&id)[16], 1);
    }
}
