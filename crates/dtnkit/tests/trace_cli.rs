//! `dtnkit trace gen` / `dtnkit trace stats` through the binary.

use std::path::PathBuf;
use std::process::{Command, Output};

fn dtnkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dtnkit"))
        .args(args)
        .output()
        .expect("run dtnkit")
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dtnkit-trace-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(name)
}

fn json_number(json: &str, key: &str) -> f64 {
    let at = json.find(&format!("\"{key}\":")).expect("key present") + key.len() + 3;
    let rest = &json[at..];
    let end = rest.find([',', '}']).expect("value end");
    rest[..end].parse().expect("number")
}

#[test]
fn gen_preset_then_stats_json_and_plot() {
    let out = tmp("h.rle");
    let o = dtnkit(
        &[
            "trace",
            "gen",
            "--preset",
            "H",
            "--duration-s",
            "20",
            "--format",
            "rle",
            "--seed",
            "3",
            "-o",
        ]
        .iter()
        .copied()
        .chain([out.to_str().expect("utf-8 path")])
        .collect::<Vec<_>>(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).expect("written");
    assert!(text.starts_with("# dtnkit-rle period_us=100\n"));
    let svg = tmp("cdf.svg");
    let o = dtnkit(&[
        "trace",
        "stats",
        out.to_str().expect("utf-8"),
        "--json",
        "--plot",
        svg.to_str().expect("utf-8"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let json = String::from_utf8(o.stdout).expect("utf-8");
    assert_eq!(json_number(&json, "samples"), 200_000.0);
    for (key, table) in [
        ("bad_percent", 28.8),
        ("bad_mean_ms", 5.46),
        ("bad_std_ms", 5.02),
        ("good_mean_ms", 13.48),
    ] {
        let v = json_number(&json, key);
        assert!(
            (v / table - 1.0).abs() < 0.05,
            "{key} = {v}, Table I {table}"
        );
    }
    let svg_text = std::fs::read_to_string(&svg).expect("plot written");
    assert!(
        svg_text.contains("<svg") && svg_text.contains("bad-state duration"),
        "axis label rendered"
    );
}

#[test]
fn stats_text_compares_with_table_i() {
    let out = tmp("a.txt");
    let o = dtnkit(&[
        "trace",
        "gen",
        "--preset",
        "a",
        "--duration-s",
        "10",
        "-o",
        out.to_str().expect("utf-8"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = dtnkit(&[
        "trace",
        "stats",
        out.to_str().expect("utf-8"),
        "--compare",
        "A",
    ]);
    let text = String::from_utf8(o.stdout).expect("utf-8");
    assert!(
        text.contains("Table I A") && text.contains("bad median") && text.contains("fades"),
        "{text}"
    );
}

#[test]
fn bad_input_is_a_usage_error_naming_file_and_line() {
    let bad = tmp("bad.txt");
    std::fs::write(&bad, "0\n1\n7\n").expect("write");
    let o = dtnkit(&["trace", "stats", bad.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("{}:3:", bad.display())) && err.contains("\"7\""),
        "{err}"
    );

    let o = dtnkit(&[
        "trace",
        "gen",
        "--good-mean-ms",
        "10",
        "-o",
        tmp("x.txt").to_str().expect("utf-8"),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--good-std-ms is required"));

    let o = dtnkit(&[
        "trace",
        "gen",
        "--preset",
        "Z",
        "-o",
        tmp("z.txt").to_str().expect("utf-8"),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("expected A, F or H"));
}
