//! Property tests: the trace parser never panics and its output round-trips; a direction never delivers before the
//! offer time plus the configured delay, and keeps FIFO order.

use std::time::Duration;

use channel::trace::{parse, Format, ParseOptions};
use channel::{Direction, DirectionModel, ErasureTrace, Fate, LinkDirection, LossModel};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn parser_never_panics(text in "(# dtnkit-rle period_us=[0-9]{0,4}\n)?([01 ]{0,3}[0-9]{0,3}\r?\n){0,20}") {
        let opts = ParseOptions { max_samples: 1 << 16, ..ParseOptions::default() };
        if let Ok(t) = parse(&text, &opts) {
            let again = parse(&t.to_text(Format::RunLength), &opts).expect("own output parses");
            prop_assert_eq!(again, t);
        }
    }

    #[test]
    fn runs_round_trip(runs in proptest::collection::vec((any::<bool>(), 1usize..300), 1..60)) {
        let t = ErasureTrace::from_runs(Duration::from_micros(100), runs.clone(), 1 << 20).expect("non-empty");
        let expected: usize = runs.iter().map(|&(_, n)| n).sum();
        prop_assert_eq!(t.len(), expected);
        prop_assert_eq!(t.runs().map(|(_, n)| n).sum::<usize>(), expected);
        // Maximal runs alternate.
        let values: Vec<bool> = t.runs().map(|(v, _)| v).collect();
        prop_assert!(values.windows(2).all(|w| w[0] != w[1]));
        prop_assert_eq!(parse(&t.to_text(Format::Plain), &ParseOptions::default()).expect("plain"), t);
    }

    #[test]
    fn delivery_respects_delay_and_fifo(
        gaps in proptest::collection::vec(0u64..2_000_000, 1..200),
        lens in proptest::collection::vec(1usize..9000, 200),
        rate in proptest::option::of(1_000_000u64..10_000_000_000),
        delay_us in 0u64..50_000,
        jitter_us in 0u64..5_000,
        seed in any::<u64>(),
    ) {
        let model = DirectionModel {
            rate_bps: rate,
            queue_bytes: 1 << 20,
            delay: Duration::from_micros(delay_us),
            jitter: Duration::from_micros(jitter_us),
            loss: LossModel::Iid { per: 0.1 },
            ..Default::default()
        };
        let mut d = LinkDirection::new(model, seed, Direction::Forward);
        let mut now = Duration::ZERO;
        let mut last = Duration::ZERO;
        for (gap, &len) in gaps.iter().zip(lens.iter()) {
            now += Duration::from_nanos(*gap);
            if let Fate::Deliver { at } = d.transit(now, len) {
                // Jitter may pull a delivery at most `jitter` earlier than `delay`, never before the offer.
                let floor = now + Duration::from_micros(delay_us.saturating_sub(jitter_us));
                prop_assert!(at >= floor, "delivered at {:?}, before {:?}", at, floor);
                prop_assert!(at >= last, "FIFO");
                last = at;
            }
        }
        let c = d.counters();
        prop_assert_eq!(c.offered, c.delivered + c.lost_channel + c.lost_unavailable + c.queue_full);
    }
}
