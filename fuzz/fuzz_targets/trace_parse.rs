//! Fuzzes the erasure-trace parser (plain and run-length): any input must give a trace or a typed error, never a
//! panic or an allocation beyond the sample limit; a parsed trace must survive a run-length round trip.
#![no_main]

use channel::trace::{parse, Format, ParseOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let opts = ParseOptions {
        max_samples: 1 << 20,
        ..ParseOptions::default()
    };
    if let Ok(trace) = parse(text, &opts) {
        let again = parse(&trace.to_text(Format::RunLength), &opts).expect("own output parses");
        assert_eq!(again, trace);
    }
});
