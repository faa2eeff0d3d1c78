//! Contact-plan parsing, link-event derivation and CGR search on a generated mission-sized plan:
//! 50 nodes, 24 h, ~5 000 contacts (random passes of 5-20 min), one range per pair.

use std::fmt::Write;
use std::hint::black_box;

use bp::{BundleSpec, Cgr, CgrLimits, ContactPlan, Exclusions};
use criterion::{criterion_group, criterion_main, Criterion};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

const NODES: u64 = 50;

fn ion_text(contacts: usize) -> String {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut text = String::new();
    let mut next_free = std::collections::BTreeMap::<(u64, u64), u64>::new();
    let mut written = 0;
    while written < contacts {
        let from = rng.random_range(1..=NODES);
        let to = rng.random_range(1..=NODES);
        if from == to {
            continue;
        }
        let free = next_free.entry((from, to)).or_insert(0);
        let start = *free + rng.random_range(0..3_600);
        let end = start + rng.random_range(300..1_200);
        if end > 86_400 {
            continue;
        }
        *free = end;
        let rate = rng.random_range(10_000..10_000_000);
        let _ = writeln!(text, "a contact +{start} +{end} {from} {to} {rate}");
        written += 1;
    }
    for a in 1..=NODES {
        for b in a + 1..=NODES {
            let _ = writeln!(
                text,
                "a range +0 +86400 {a} {b} {}.{:03}",
                rng.random_range(0..3),
                rng.random_range(0..1000)
            );
        }
    }
    text
}

fn benches(c: &mut Criterion) {
    let text = ion_text(5_000);
    c.bench_function("parse_ion_5000_contacts", |b| {
        b.iter(|| {
            ContactPlan::from_ion_str(black_box(&text), "bench.rc", 0).map(|p| p.contact_count())
        })
    });
    let Ok(plan) = ContactPlan::from_ion_str(&text, "bench.rc", 0) else {
        return;
    };
    c.bench_function("link_events_one_node", |b| {
        b.iter(|| plan.link_events(black_box(1), 0).count())
    });
    let bundle = BundleSpec {
        size_bytes: 100_000,
        now_ms: 0,
        deadline_ms: None,
    };
    let cgr = Cgr::new(1, CgrLimits::default());
    c.bench_function("cgr_route_exact_50_nodes", |b| {
        b.iter(|| {
            (2..=NODES)
                .filter(|&d| {
                    cgr.route_exact(&plan, black_box(d), bundle, &Exclusions::default())
                        .is_ok()
                })
                .count()
        })
    });
    let mut cached = Cgr::new(1, CgrLimits::default());
    c.bench_function("cgr_route_cached_50_nodes", |b| {
        b.iter(|| {
            (2..=NODES)
                .filter(|&d| {
                    cached
                        .route(&plan, black_box(d), bundle, &Exclusions::default())
                        .is_ok()
                })
                .count()
        })
    });
}

criterion_group!(cgr_benches, benches);
criterion_main!(cgr_benches);
