//! Direction behaviour: queue and serialization, delay and jitter ordering, trace replay timing, schedules,
//! determinism and stream independence.

use std::sync::Arc;
use std::time::Duration;

use channel::{
    Availability, Direction, DirectionModel, ErasureTrace, Fate, GilbertElliott, Link,
    LinkDirection, LossCause, LossModel, MarkovAvailability, Schedule,
};

const MS: Duration = Duration::from_millis(1);
const US: Duration = Duration::from_micros(1);

#[test]
fn serialization_and_tail_drop() {
    // 8 Mb/s = one byte per microsecond; room for ten 1000-byte packets.
    let model = DirectionModel {
        rate_bps: Some(8_000_000),
        queue_bytes: 10_000,
        delay: 5 * MS,
        ..Default::default()
    };
    let mut d = LinkDirection::new(model, 1, Direction::Forward);
    let fates: Vec<Fate> = (0..20).map(|_| d.transit(Duration::ZERO, 1000)).collect();
    for (k, f) in fates.iter().enumerate() {
        if k < 10 {
            assert_eq!(
                *f,
                Fate::Deliver {
                    at: US * (1000 * (k as u32 + 1)) + 5 * MS
                },
                "packet {k}"
            );
        } else {
            assert_eq!(*f, Fate::Lost(LossCause::QueueFull), "packet {k}");
        }
    }
    // After 4.5 ms the backlog is 5500 bytes: four more fit, the fifth does not.
    let t = US * 4500;
    let more: Vec<Fate> = (0..5).map(|_| d.transit(t, 1000)).collect();
    assert!(more[..4].iter().all(|f| matches!(f, Fate::Deliver { .. })));
    assert_eq!(more[4], Fate::Lost(LossCause::QueueFull));
    let c = d.counters();
    assert_eq!(
        (c.offered, c.delivered, c.queue_full, c.lost_channel),
        (25, 14, 11, 0)
    );
}

#[test]
fn jitter_keeps_fifo_unless_reorder_allowed() {
    let base = DirectionModel {
        delay: 10 * MS,
        jitter: 2 * MS,
        ..Default::default()
    };
    let mut fifo = LinkDirection::new(base.clone(), 3, Direction::Forward);
    let mut prev = Duration::ZERO;
    let mut delays = Vec::new();
    for i in 0..5000u32 {
        let now = US * (100 * i);
        let Fate::Deliver { at } = fifo.transit(now, 100) else {
            panic!("no loss configured")
        };
        assert!(at >= prev, "FIFO violated at {i}");
        assert!(at >= now + 8 * MS && at <= now + 12 * MS + 2 * MS);
        delays.push(at - now);
        prev = at;
    }
    let mut reorder = LinkDirection::new(
        DirectionModel {
            allow_reorder: true,
            ..base
        },
        3,
        Direction::Forward,
    );
    let mut inversions = 0;
    let mut prev = Duration::ZERO;
    for i in 0..5000u32 {
        let Fate::Deliver { at } = reorder.transit(US * (100 * i), 100) else {
            panic!("no loss configured")
        };
        inversions += usize::from(at < prev);
        prev = at;
    }
    assert!(
        inversions > 100,
        "jitter of ±2 ms at 0.1 ms spacing must reorder, got {inversions}"
    );
}

/// A 10 ms trace at 1 ms samples: erased during [2, 4) ms and [7, 8) ms.
fn toy_trace() -> ErasureTrace {
    let samples = [0, 0, 1, 1, 0, 0, 0, 1, 0, 0].map(|s| s == 1);
    ErasureTrace::from_samples(MS, samples).expect("non-empty")
}

#[test]
fn trace_replay_follows_timestamps_offset_and_loops() {
    let trace = Arc::new(toy_trace());
    let model = |offset| DirectionModel {
        loss: LossModel::Trace {
            trace: trace.clone(),
            offset,
        },
        ..Default::default()
    };
    let mut d = LinkDirection::new(model(Duration::ZERO), 0, Direction::Forward);
    for i in 0..300u32 {
        let t = US * (100 * i); // every 0.1 ms for 30 ms = three loops
        let ms_in_trace = (i / 10) % 10;
        let expect_lost = matches!(ms_in_trace, 2 | 3 | 7);
        let lost = d.transit(t, 64) == Fate::Lost(LossCause::Channel);
        assert_eq!(lost, expect_lost, "t = {t:?}");
    }
    // A 2 ms offset shifts the pattern: link time 0 is trace time 2 ms.
    let mut d = LinkDirection::new(model(2 * MS), 0, Direction::Forward);
    let lost: Vec<bool> = (0..10u32)
        .map(|i| {
            d.transit(MS * i + US * 500, 64)
                != Fate::Deliver {
                    at: MS * i + US * 500,
                }
        })
        .collect();
    assert_eq!(
        lost,
        [true, true, false, false, false, true, false, false, false, false]
    );
}

#[test]
fn trace_is_sampled_at_transmission_start() {
    // With serialization, a packet queued behind others is judged when it starts transmitting.
    let trace = Arc::new(toy_trace());
    let model = DirectionModel {
        rate_bps: Some(8_000_000),
        queue_bytes: 1_000_000,
        loss: LossModel::Trace {
            trace,
            offset: Duration::ZERO,
        },
        ..Default::default()
    };
    let mut d = LinkDirection::new(model, 0, Direction::Forward);
    // Three 1000-byte packets at t=0 start at 0, 1 and 2 ms: the third falls in the erased [2, 4) ms.
    let f: Vec<Fate> = (0..3).map(|_| d.transit(Duration::ZERO, 1000)).collect();
    assert!(matches!(f[0], Fate::Deliver { .. }) && matches!(f[1], Fate::Deliver { .. }));
    assert_eq!(f[2], Fate::Lost(LossCause::Channel));
}

#[test]
fn schedule_windows_and_repeat() {
    let s =
        Schedule::new(vec![(MS * 10, MS * 20), (MS * 50, MS * 60)], Some(MS * 100)).expect("valid");
    let model = DirectionModel {
        availability: Availability::Schedule(s),
        ..Default::default()
    };
    let mut d = LinkDirection::new(model, 0, Direction::Return);
    let up = |d: &mut LinkDirection, t: Duration| matches!(d.transit(t, 10), Fate::Deliver { .. });
    for (t, expect) in [
        (5, false),
        (10, true),
        (19, true),
        (20, false),
        (55, true),
        (60, false),
        (115, true),
        (170, false),
    ] {
        assert_eq!(up(&mut d, MS * t), expect, "t = {t} ms");
    }
    assert_eq!(d.counters().lost_unavailable, 4);
    assert!(Schedule::new(vec![(MS, MS * 5), (MS * 4, MS * 6)], None).is_err());
    assert!(Schedule::new(vec![(MS * 5, MS * 5)], None).is_err());
}

fn busy_model() -> DirectionModel {
    DirectionModel {
        rate_bps: Some(60_000_000),
        queue_bytes: 64_000,
        delay: 3 * MS,
        jitter: MS / 2,
        allow_reorder: false,
        loss: LossModel::GilbertElliott(GilbertElliott {
            p: 0.01,
            r: 0.2,
            loss_good: 0.01,
            loss_bad: 0.7,
            step: None,
        }),
        availability: Availability::Markov(MarkovAvailability {
            p: 0.05,
            q: 0.01,
            step: MS,
            initial_up: true,
        }),
        overhead: channel::Overhead::default(),
    }
}

/// A pseudo-random but fixed arrival pattern with bursts (so the queue matters too).
fn arrivals() -> Vec<(Duration, usize)> {
    let mut t = Duration::ZERO;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..50_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            t += Duration::from_nanos(x % 150_000);
            (t, 64 + (x % 1400) as usize)
        })
        .collect()
}

#[test]
fn same_seed_same_decisions() {
    let run = |seed| {
        let mut d = LinkDirection::new(busy_model(), seed, Direction::Forward);
        arrivals()
            .into_iter()
            .map(|(t, l)| d.transit(t, l))
            .collect::<Vec<Fate>>()
    };
    let a = run(7);
    assert_eq!(a, run(7));
    assert_ne!(a, run(8));
    // Every cause occurs in this scenario, so the comparison covers all of them.
    for cause in [
        LossCause::Channel,
        LossCause::Unavailable,
        LossCause::QueueFull,
    ] {
        assert!(a.contains(&Fate::Lost(cause)), "{cause:?} never happened");
    }
}

#[test]
fn directions_and_models_have_independent_streams() {
    let fwd = |ret_model: DirectionModel| {
        let mut link = Link::new(busy_model(), ret_model, 11);
        let mut out = Vec::new();
        for (t, l) in arrivals() {
            out.push(link.forward.transit(t, l));
            let _ = link.ret.transit(t, 100);
        }
        out
    };
    // Changing the return direction's models must not change any forward decision.
    let a = fwd(DirectionModel::default());
    let b = fwd(DirectionModel {
        loss: LossModel::Iid { per: 0.3 },
        jitter: MS,
        delay: MS * 2,
        ..Default::default()
    });
    assert_eq!(a, b);
    // Forward and return with the same model under the same seed still draw different streams.
    let mut link = Link::new(busy_model(), busy_model(), 11);
    let (f, r): (Vec<Fate>, Vec<Fate>) = arrivals()
        .into_iter()
        .map(|(t, l)| (link.forward.transit(t, l), link.ret.transit(t, l)))
        .unzip();
    assert_ne!(f, r);
}

#[test]
fn overhead_lengthens_serialization_and_ber_exposure() {
    // Seed 004's accounting: 40 header bytes per 1460 bytes of data at 102.4 Mb/s make 306.6 MB take 24.61 s.
    let o = channel::Overhead {
        bytes: 40,
        per_bytes: Some(1460),
    };
    assert_eq!(o.wire_len(1460), 1500);
    assert_eq!(o.wire_len(7300), 7500);
    assert_eq!(o.wire_len(1), 2);
    let fixed = channel::Overhead {
        bytes: 20,
        per_bytes: None,
    };
    assert_eq!(fixed.wire_len(100), 120);
    let model = DirectionModel {
        rate_bps: Some(102_400_000),
        queue_bytes: u64::MAX,
        overhead: o,
        ..Default::default()
    };
    let mut d = LinkDirection::new(model, 1, Direction::Forward);
    let mut last = Duration::ZERO;
    for _ in 0..(306_600_000 / 7300) {
        let Fate::Deliver { at } = d.transit(Duration::ZERO, 7300) else {
            panic!("lossless direction lost a packet");
        };
        last = at;
    }
    assert!((last.as_secs_f64() - 24.609).abs() < 0.001, "{last:?}");
    let c = d.counters();
    assert_eq!(c.offered_bytes, 306_600_000);
    assert_eq!(c.delivered_bytes, 306_600_000);
    assert_eq!(c.wire_bytes, 306_600_000 / 1460 * 1500);
    // The loss process sees the wire length: at BER 1e-6 a 7300-byte packet with 200 header bytes is lost with
    // 1 - (1 - 1e-6)^(8 * 7500) = 5.82 %.
    let lossy = DirectionModel {
        loss: LossModel::Ber { ber: 1e-6 },
        overhead: o,
        ..Default::default()
    };
    let mut d = LinkDirection::new(lossy, 7, Direction::Forward);
    let n = 200_000;
    let lost = (0..n)
        .filter(|_| matches!(d.transit(Duration::ZERO, 7300), Fate::Lost(_)))
        .count();
    let p = lost as f64 / n as f64;
    let expect = channel::loss::ber_packet_loss(1e-6, 7500);
    let sigma = (expect * (1.0 - expect) / n as f64).sqrt();
    assert!((p - expect).abs() < 4.0 * sigma, "{p} vs {expect}");
}
