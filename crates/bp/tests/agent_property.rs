//! Property test: random sequences of sends, receptions, transmissions (succeeding or failing),
//! deliveries (acknowledged or not), time steps, link changes and restarts (orderly or crash)
//! never exceed the store quota and never lose a committed bundle: every bundle whose `send` or
//! `accept_from_cla` returned `Stored` is, at every point, still in the store, or was forwarded
//! (CLA success), delivered (acknowledged), or its lifetime ended.

use std::collections::BTreeMap;

use bp::{Accepted, Agent, AgentConfig, ClaOutcome, MemoryStore, SendError, SendRequest, Store};
use bpv7::{Bundle, BundleBuilder, BundleId, CreationTimestamp, Eid};
use bytes::Bytes;
use proptest::prelude::*;

const T0: u64 = 800_000_000_000;
const QUOTA: u64 = 20_000;

#[derive(Debug, Clone)]
enum OpKind {
    Send {
        size: usize,
        lifetime: u64,
        local: bool,
    },
    Rx {
        size: usize,
        lifetime: u64,
        local: bool,
    },
    RxAgain,
    Transmit {
        ok: bool,
    },
    Deliver {
        ack: bool,
    },
    Advance {
        ms: u64,
    },
    Link {
        up: bool,
    },
    Restart {
        orderly: bool,
    },
}

fn op() -> impl Strategy<Value = OpKind> {
    prop_oneof![
        3 => (0usize..4000, 200u64..5000, any::<bool>())
            .prop_map(|(size, lifetime, local)| OpKind::Send { size, lifetime, local }),
        3 => (0usize..4000, 200u64..5000, any::<bool>())
            .prop_map(|(size, lifetime, local)| OpKind::Rx { size, lifetime, local }),
        1 => Just(OpKind::RxAgain),
        4 => any::<bool>().prop_map(|ok| OpKind::Transmit { ok }),
        2 => any::<bool>().prop_map(|ack| OpKind::Deliver { ack }),
        2 => (0u64..1500).prop_map(|ms| OpKind::Advance { ms }),
        1 => any::<bool>().prop_map(|up| OpKind::Link { up }),
        1 => any::<bool>().prop_map(|orderly| OpKind::Restart { orderly }),
    ]
}

/// What the test knows about a committed bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Held { expires: u64 },
    Done,
}

fn cfg() -> AgentConfig {
    AgentConfig {
        store_quota_bytes: QUOTA,
        ..AgentConfig::new(1)
    }
}

fn run(ops: Vec<OpKind>) -> Result<(), TestCaseError> {
    let mut agent = Agent::open(cfg(), MemoryStore::new(), T0).expect("open");
    agent.register(Eid::ipn(1, 1)).expect("register");
    let mut now = T0;
    let mut fates: BTreeMap<BundleId, Fate> = BTreeMap::new();
    let mut rx_seq = 0u64;
    let mut last_rx: Option<Bytes> = None;
    let mut last_rx_expires = 0u64;
    let mut link = false;
    for op in ops {
        match op {
            OpKind::Send {
                size,
                lifetime,
                local,
            } => {
                let dst = if local {
                    Eid::ipn(1, 1)
                } else {
                    Eid::ipn(2, 1)
                };
                let mut r = SendRequest::new(Eid::ipn(1, 1), dst, Bytes::from(vec![1u8; size]));
                r.lifetime_ms = lifetime;
                match agent.send(now, r) {
                    Ok(id) => {
                        fates.insert(
                            id,
                            Fate::Held {
                                expires: now + lifetime,
                            },
                        );
                    }
                    Err(SendError::StoreFull { needed, free }) => prop_assert!(needed > free),
                    Err(e) => return Err(TestCaseError::fail(format!("send: {e}"))),
                }
            }
            OpKind::Rx {
                size,
                lifetime,
                local,
            } => {
                rx_seq += 1;
                let dst = if local {
                    Eid::ipn(1, 1)
                } else {
                    Eid::ipn(3, 1)
                };
                let b = BundleBuilder::new(Eid::ipn(9, 1), dst)
                    .creation(CreationTimestamp::new(now, rx_seq))
                    .lifetime_ms(lifetime)
                    .payload(Bytes::from(vec![2u8; size]))
                    .build()
                    .expect("build");
                let wire = Bytes::from(b.encode());
                last_rx = Some(wire.clone());
                last_rx_expires = now + lifetime;
                match agent.accept_from_cla(now, Some(9), wire) {
                    Ok(Accepted::Stored { id, .. }) => {
                        fates.insert(
                            id,
                            Fate::Held {
                                expires: now + lifetime,
                            },
                        );
                    }
                    Ok(other) => return Err(TestCaseError::fail(format!("rx: {other:?}"))),
                    Err(e) => prop_assert!(e.is_transient(), "rx: {e}"),
                }
            }
            OpKind::RxAgain => {
                if let Some(w) = last_rx.clone() {
                    match agent.accept_from_cla(now, Some(9), w) {
                        Ok(Accepted::Stored { id, .. }) => {
                            // Only possible if the first copy was refused (store full).
                            prop_assert!(!fates.contains_key(&id), "duplicate stored twice");
                            fates.insert(
                                id,
                                Fate::Held {
                                    expires: last_rx_expires,
                                },
                            );
                        }
                        Ok(_) => {}
                        Err(e) => prop_assert!(e.is_transient(), "rx again: {e}"),
                    }
                }
            }
            OpKind::Transmit { ok } => {
                if let Some(f) = agent.poll_transmit(now) {
                    prop_assert!(f.neighbour == 2 || f.neighbour == 3);
                    let id = Bundle::decode(f.bundle).expect("decode").id();
                    let outcome = if ok {
                        ClaOutcome::Sent
                    } else {
                        ClaOutcome::Failed
                    };
                    agent.cla_result(now, f.key, outcome).expect("cla");
                    if ok {
                        fates.insert(id, Fate::Done);
                    }
                }
            }
            OpKind::Deliver { ack } => {
                if let Some(d) = agent.poll_delivery() {
                    if ack {
                        agent.delivered(now, d.key).expect("ack");
                        fates.insert(d.id, Fate::Done);
                    }
                }
            }
            OpKind::Advance { ms } => {
                now += ms;
                agent.handle_timeout(now).expect("timeout");
            }
            OpKind::Link { up } => {
                link = up;
                if up {
                    agent.link_up(now, 2, 1000);
                    agent.link_up(now, 3, 1000);
                } else {
                    agent.link_down(now, 2);
                    agent.link_down(now, 3);
                }
            }
            OpKind::Restart { orderly } => {
                let store = if orderly {
                    agent.close().expect("close")
                } else {
                    agent.into_store()
                };
                agent = Agent::open(cfg(), store, now).expect("reopen");
                agent.register(Eid::ipn(1, 1)).expect("register");
                if link {
                    agent.link_up(now, 2, 1000);
                    agent.link_up(now, 3, 1000);
                }
            }
        }
        // Invariants.
        prop_assert!(agent.store().used_bytes() <= QUOTA);
        prop_assert!(agent.status().stored_bytes <= QUOTA);
        let mut snapshot = agent.store().clone();
        let held: Vec<BundleId> = snapshot
            .contents()
            .expect("contents")
            .bundles
            .into_iter()
            .map(|(_, m)| m.id)
            .collect();
        for (id, fate) in &fates {
            if let Fate::Held { expires } = fate {
                prop_assert!(
                    held.contains(id) || *expires <= now,
                    "bundle {id} lost at {now}"
                );
            }
        }
    }
    // After an orderly flush, the agent's accounting equals the store's.
    agent.flush().expect("flush");
    prop_assert_eq!(agent.status().stored_bytes, agent.store().used_bytes());
    prop_assert_eq!(agent.status().stored_bundles, agent.store().bundle_count());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn never_exceeds_quota_nor_loses_a_committed_bundle(ops in prop::collection::vec(op(), 1..80)) {
        run(ops)?;
    }
}
