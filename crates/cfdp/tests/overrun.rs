//! Recovery when the sender overruns the path: a 100 Mb/s bottleneck whose queue holds 2 ms
//! (a full socket buffer drops the rest) and 10 % iid loss each way besides, the sender paced
//! below, at twice and at four times the bottleneck's rate, in virtual time.
//!
//! Measured on the code before a receiver learnt that a retransmission overtaking an earlier
//! request means the earlier one is not coming, took loose round-trip samples from requests
//! that were never alone, and a sender judged crossing NAKs with its current round trip: of
//! the first nine transfers here eight took 2.0–34 s and the tenth was cancelled by the
//! sender's inactivity timer, where the selective-repeat bound is 0.18 s — every range whose
//! copy was lost waited for a deadline computed from the configured timers (seconds).

mod common;

use std::time::Duration;

use cfdp::pdu::ConditionCode;
use cfdp::{EntityConfig, PutRequest, RemoteConfig};
use common::*;

/// Drop each PDU, either way, with probability `per` (a seeded 64-bit LCG).
fn iid(seed: u64, per: f64) -> DropRule {
    let mut s = seed;
    Box::new(move |_, _, _| {
        s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((s >> 11) as f64 / (1u64 << 53) as f64) < per
    })
}

/// Default settings (timers, adaptive timers, immediate NAKs), A paced at `rate` bit/s.
fn cfg(local: u64, peer: u64, rate: u64) -> EntityConfig {
    let mut c = EntityConfig::new(local);
    let mut r = RemoteConfig::new(peer);
    r.rate_bps = rate;
    c.add_remote(r);
    c
}

#[test]
fn an_overrun_path_with_loss_each_way_is_recovered_near_the_bound() {
    const SIZE: usize = 2_000_000;
    const LINK: u64 = 100_000_000;
    // Selective repeat over a channel erasing 10 %: SIZE / (0.9 × LINK).
    let bound = Duration::from_secs_f64(SIZE as f64 * 8.0 / (0.9 * LINK as f64));
    let data = pattern(SIZE, 7);
    let mut worst: f64 = 0.0;
    for send in [90_000_000, 200_000_000, 400_000_000] {
        for seed in 1..=5 {
            let mut n = Net::new(cfg(A, B, send), cfg(B, A, 0), &[("f", data.clone())]);
            n.delay = Duration::from_micros(100);
            n.rate_ab = Some(LINK);
            n.queue_ab = Some(ms(2));
            n.drop = iid(seed, 0.1);
            n.a.put(n.now, PutRequest::new(B, "f")).unwrap();
            n.run(ms(120_000));
            let (at, condition, complete, _) = n.finished(A).expect("the sender finished");
            let what = format!("sender at {send} bit/s, loss seed {seed}");
            assert_eq!(
                (condition, complete),
                (ConditionCode::NoError, true),
                "{what}"
            );
            assert_eq!(
                n.finished(B).map(|f| f.1),
                Some(ConditionCode::NoError),
                "{what}"
            );
            assert_eq!(n.file_b("f").as_deref(), Some(&data[..]), "{what}");
            if send > LINK {
                assert!(n.overflow_ab > 0, "{what}: the queue overflowed");
            }
            let ratio = at.as_secs_f64() / bound.as_secs_f64();
            worst = worst.max(ratio);
            assert!(ratio < 2.0, "{what}: {at:?}, {ratio:.2} × the bound");
        }
    }
    eprintln!("worst transfer time: {worst:.2} × the selective-repeat bound");
}
