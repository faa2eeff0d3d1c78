//! TOML configuration: accepted forms and field-naming validation errors.

use std::path::Path;

use channel::config::LinkConfig;

fn build(text: &str) -> Result<channel::Link, String> {
    let cfg: LinkConfig = toml::from_str(text).map_err(|e| e.to_string())?;
    cfg.build(Path::new(".")).map_err(|e| e.to_string())
}

#[test]
fn full_config_builds() {
    let text = r#"
        seed = 9
        [forward]
        rate_bps = 500e6
        queue_bytes = 2000000
        delay_ms = 10
        jitter_ms = 0.5
        loss = { model = "gilbert_elliott", p = 0.01, r = 0.1, step_ms = 1.0 }
        availability = { model = "schedule", windows = [[0, 187], [600, 909]], repeat_s = 86400 }
        [return]
        delay_ms = 10
        loss = { model = "ber", ber = 1e-7 }
        availability = { model = "markov", p = 0.01, step_ms = 100, initial = "down" }
    "#;
    build(text).expect("valid");
}

#[test]
fn errors_name_field_value_and_expectation() {
    let cases = [
        ("[forward]\nloss = { model = \"iid\", per = 1.5 }", "forward.loss.per = 1.5: expected a probability in [0, 1]"),
        ("[return]\ndelay_ms = -1", "return.delay_ms = -1: expected a finite duration in milliseconds >= 0"),
        ("[forward]\nrate_bps = 0", "forward.rate_bps = 0: expected a rate in bit/s between 1 and 1e15"),
        (
            "[return]\navailability = { model = \"markov\", p = 0.1, step_ms = 0 }",
            "return.availability.step_ms = 0: expected a duration in milliseconds > 0",
        ),
        (
            "[return]\navailability = { model = \"markov\", p = 0.1, step_ms = 1, initial = \"maybe\" }",
            "return.availability.initial = \"maybe\": expected \"up\" or \"down\"",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(build(text).err().as_deref(), Some(expected), "{text}");
    }
}

#[test]
fn unknown_fields_and_models_are_rejected() {
    let e = build("[forward]\ndelay = 10").expect_err("unknown field");
    assert!(e.contains("unknown field `delay`"), "{e}");
    let e = build("[forward]\nloss = { model = \"iid\", pre = 0.1 }").expect_err("unknown field");
    assert!(e.contains("pre"), "{e}");
    let e = build("[forward]\nloss = { model = \"gaussian\" }").expect_err("unknown model");
    assert!(e.contains("gaussian"), "{e}");
}

#[test]
fn missing_trace_file_names_the_field() {
    let e = build("[forward]\nloss = { model = \"trace\", file = \"/nonexistent/trace.txt\" }")
        .expect_err("missing");
    assert!(
        e.starts_with("forward.loss.file: /nonexistent/trace.txt:"),
        "{e}"
    );
}
