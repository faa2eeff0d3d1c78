//! The analyzer's CSV readers (`crates/analyze`): LTP segment logs (docs/ltp-segment-log.md) and bundle event
//! logs (docs/bundle-event-log.md, node and simulator forms) are files from other runs, possibly truncated or
//! edited; any bytes must give a summary or a typed error, never a panic. The first input byte splits the rest
//! into a segment log and a bundle log.
#![no_main]

use std::io::Cursor;

use analyze::{Analyzer, Options};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let at = (usize::from(split) * rest.len()) / 255;
    let (segments, bundles) = rest.split_at(at.min(rest.len()));
    let mut a = Analyzer::new(Options::default());
    a.add_segment_log("segments.csv", Cursor::new(segments.to_vec()));
    let _ = a.feed_bundle_log("bundles.csv", Cursor::new(bundles));
    let _ = a.run(&mut |s| {
        let _ = s.clone();
        Ok(())
    });
});
