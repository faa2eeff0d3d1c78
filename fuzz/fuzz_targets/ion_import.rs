//! `dtnkit import-ion`: ION's .rc files (ionrc, bprc, ltprc, ipnrc, ...) are foreign operator input; any text
//! under any of the file names must give an imported configuration or one error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use node::config::ion_import::{import, RcFile};

const NAMES: [&str; 4] = ["node.ionrc", "node.bprc", "node.ltprc", "node.ipnrc"];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    // One file, or the same text under two names (cross-file checks).
    let first = NAMES[usize::from(pick) % NAMES.len()];
    let mut files = vec![RcFile { name: first.into(), text: text.into() }];
    if pick & 0x80 != 0 {
        let second = NAMES[usize::from(pick >> 3) % NAMES.len()];
        files.push(RcFile { name: second.into(), text: text.into() });
    }
    let _ = import(&files);
});
