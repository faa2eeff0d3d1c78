//! Contact-plan parsing (ION lines and TOML) and the queries/CGR on whatever parses: a plan file
//! is operator input and must never panic the node.
#![no_main]

use bp::{BundleSpec, Cgr, CgrLimits, ContactPlan, Exclusions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let limits = CgrLimits { max_contacts_explored: 10_000, ..CgrLimits::default() };
    for plan in [ContactPlan::from_ion_str(text, "fuzz.rc", 0), ContactPlan::from_toml_str(text, "fuzz.toml", 0)] {
        let plan = match plan {
            Ok(p) => p,
            Err(e) => {
                assert_eq!(e.to_string().lines().count(), 1);
                continue;
            }
        };
        let nodes: Vec<u64> = plan.contacts().map(|c| c.from).take(4).collect();
        for &n in &nodes {
            let _ = plan.link_events(n, 0).count();
            let _ = plan.next_change_after(n, 0);
            let mut cgr = Cgr::new(n, limits);
            for &d in &nodes {
                let b = BundleSpec { size_bytes: 1000, now_ms: 0, deadline_ms: None };
                if let Ok(r) = cgr.route(&plan, d, b, &Exclusions::default()) {
                    cgr.book(&r, 1000);
                }
            }
        }
    }
});
