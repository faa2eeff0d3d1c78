//! Simulator scenarios and experiment files (`dtnkit sim`, `dtnkit bench`): TOML written by users; any text
//! must give a validated scenario/experiment or a typed error, never a panic.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let base = Path::new("/nonexistent-dtnkit-fuzz");
    let _ = sim::scenario::Scenario::from_toml_str(text, "fuzz.toml", base);
    let _ = analyze::experiment::Experiment::from_toml_str(text, "fuzz.toml", base);
});
