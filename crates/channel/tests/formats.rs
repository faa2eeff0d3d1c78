//! Trace file formats: plain and run-length parsing, error reporting, round trips and limits.

use std::time::Duration;

use channel::trace::{self, parse, parse_plain, parse_rle, Format, LoadError, ParseOptions};
use channel::{ErasureTrace, TraceError};

fn opts() -> ParseOptions {
    ParseOptions::default()
}

#[test]
fn plain_with_crlf_and_trailing_blank_lines() {
    let t = parse_plain("0\r\n1\r\n1\r\n0\r\n\r\n\n", &opts()).expect("valid");
    assert_eq!(t.len(), 4);
    assert_eq!(
        (0..4).map(|i| t.sample(i)).collect::<Vec<_>>(),
        [false, true, true, false]
    );
    assert_eq!(t.period(), Duration::from_micros(100));
    assert_eq!(
        t.runs().collect::<Vec<_>>(),
        [(false, 1), (true, 2), (false, 1)]
    );
}

#[test]
fn plain_rejects_other_content_with_line_and_value() {
    assert_eq!(
        parse_plain("0\n1\n2\n", &opts()),
        Err(TraceError::Syntax {
            line: 3,
            value: "2".into(),
            expected: "0 or 1"
        })
    );
    assert_eq!(
        parse_plain("0\n 1\n", &opts()),
        Err(TraceError::Syntax {
            line: 2,
            value: " 1".into(),
            expected: "0 or 1"
        })
    );
    assert!(matches!(
        parse_plain("0\n\n1\n", &opts()),
        Err(TraceError::Syntax { line: 2, .. })
    ));
    assert_eq!(parse_plain("", &opts()), Err(TraceError::Empty));
    assert_eq!(parse_plain("\n\n", &opts()), Err(TraceError::Empty));
}

#[test]
fn rle_round_trip_and_header_period() {
    let samples: Vec<bool> = (0..10_000)
        .map(|i| (i / 37) % 5 == 0 || i % 1000 == 999)
        .collect();
    let t = ErasureTrace::from_samples(Duration::from_micros(250), samples.clone()).expect("valid");
    let rle = t.to_text(Format::RunLength);
    assert!(rle.starts_with("# dtnkit-rle period_us=250\n"));
    let back = parse(&rle, &opts()).expect("valid");
    assert_eq!(back, t);
    let plain = t.to_text(Format::Plain);
    let back = parse(
        &plain,
        &ParseOptions {
            period: Duration::from_micros(250),
            ..opts()
        },
    )
    .expect("valid");
    assert_eq!(back, t);
    assert_eq!(back.erased_count(), samples.iter().filter(|&&s| s).count());
}

#[test]
fn rle_errors() {
    let bad_header = parse_rle("# dtnkit-rle period_us=0\n0 5\n", &opts());
    assert!(matches!(
        bad_header,
        Err(TraceError::Syntax { line: 1, .. })
    ));
    let bad_value = parse_rle("# dtnkit-rle period_us=100\n0 5\n2 3\n", &opts());
    assert!(matches!(bad_value, Err(TraceError::Syntax { line: 3, .. })));
    let zero_count = parse_rle("# dtnkit-rle period_us=100\n1 0\n", &opts());
    assert!(matches!(
        zero_count,
        Err(TraceError::Syntax { line: 2, .. })
    ));
    let extra = parse_rle("# dtnkit-rle period_us=100\n1 4 x\n", &opts());
    assert!(matches!(extra, Err(TraceError::Syntax { line: 2, .. })));
}

#[test]
fn huge_counts_are_refused_before_allocating() {
    let text = "# dtnkit-rle period_us=100\n1 18446744073709551615\n";
    assert_eq!(
        parse(text, &opts()),
        Err(TraceError::TooLong {
            limit: trace::DEFAULT_MAX_SAMPLES
        })
    );
    let small = ParseOptions {
        max_samples: 10,
        ..opts()
    };
    assert_eq!(
        parse("# dtnkit-rle period_us=100\n0 6\n1 5\n", &small),
        Err(TraceError::TooLong { limit: 10 })
    );
    assert_eq!(
        parse(&"0\n".repeat(11), &small),
        Err(TraceError::TooLong { limit: 10 })
    );
}

#[test]
fn load_reports_file_and_line() {
    let dir = std::env::temp_dir().join(format!("channel-formats-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("bad.txt");
    std::fs::write(&path, "0\n1\nx\n").expect("write");
    let err = trace::load(&path, &opts()).expect_err("invalid");
    assert!(matches!(err, LoadError::Syntax { line: 3, .. }));
    let msg = err.to_string();
    assert!(msg.starts_with(&format!("{}:3:", path.display())), "{msg}");
    assert!(msg.contains("\"x\""), "{msg}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn large_plain_trace_loads_fast_enough() {
    // 1 000 000 samples (100 s at 0.1 ms) parse in well under a second even in debug builds.
    let text: String = (0..1_000_000)
        .map(|i| if (i / 91) % 20 == 0 { "1\n" } else { "0\n" })
        .collect();
    let t = parse(&text, &opts()).expect("valid");
    assert_eq!(t.len(), 1_000_000);
    assert_eq!(t.duration(), Duration::from_secs(100));
}
