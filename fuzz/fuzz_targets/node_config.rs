//! The node configuration (TOML) and its validation: a configuration file is operator input; any
//! text must give a validated configuration or one error line naming the file, never a panic.
//! Paths resolve against a directory that does not exist, so key, certificate and plan files are
//! never read from the fuzzing host.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use node::NodeConfig;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match NodeConfig::parse(text, "fuzz.toml", Path::new("/nonexistent-dtnkit-fuzz")) {
        Ok(v) => {
            // Derived values of a valid configuration never panic either.
            let _ = (v.window_bytes(), v.delivery_backlog_bytes(), v.ltp_max_import_bytes());
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.starts_with("fuzz.toml"), "error does not name the file: {msg}");
            assert_eq!(msg.lines().count(), 1, "error is not one line: {msg}");
        }
    }
});
