//! `lab::run_emulated_cfdp`: a scenario's `[[cfdp]]` transfers between two real entities (`dtnkit cfdp put` and
//! `serve`) through the emulator relay, with the link's models (rate, delay, IID loss both ways). The file
//! arrives intact, the losses show as NAKs and retransmissions, and the transfer takes at least what the link
//! rate allows.

use std::path::Path;

const BIN: &str = env!("CARGO_BIN_EXE_dtnkit");

const SCENARIO: &str = r#"
[sim]
duration_s = 60.0
seed = 11

[[node]]
number = 1
[[node]]
number = 2

[[link]]
a = 1
b = 2
forward = { rate_bps = 40e6, delay_ms = 5.0, loss = { model = "iid", per = 0.02 }, overhead = { bytes = 40, per_bytes = 1460 } }
return = { rate_bps = 40e6, delay_ms = 5.0, loss = { model = "iid", per = 0.02 } }

[[cfdp]]
from = 1
to = 2
file_size = 2_000_000
segment_size = 4000
class = 2
nak_mode = "immediate"
nak_timer_ms = 100.0
ack_timer_ms = 100.0
inactivity_s = 20.0

[[cfdp]]
from = 1
to = 2
file_size = 1
class = 2
"#;

fn work_dir(name: &str) -> std::path::PathBuf {
    let w = std::env::temp_dir().join(format!("dtnkit-lab-cfdp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&w);
    w
}

#[test]
fn cfdp_transfers_through_the_relay_arrive_intact() {
    let work = work_dir("ok");
    let scn = sim::Scenario::from_toml_str(SCENARIO, "lab_cfdp.toml", Path::new("."))
        .expect("valid scenario");
    let opts = lab::LabOptions::new(BIN, &work);
    let out = lab::run_emulated_cfdp(&scn, &opts).expect("emulated run");
    assert_eq!(out.transfers.len(), 2);
    let big = &out.transfers[0];
    assert!(big.completed && big.content_verified, "{big:?}");
    assert_eq!(big.condition, "NoError");
    assert_eq!(big.receiver_condition, "NoError");
    assert_eq!(big.file_pdus, 500);
    // 2 % loss of 500 PDUs each way: some are lost, NAKed and sent again.
    assert!(
        big.naks > 0 && big.file_data_pdus_retransmitted > 0,
        "{big:?}"
    );
    assert_eq!(
        big.file_data_pdus_sent,
        big.file_pdus + big.file_data_pdus_retransmitted
    );
    assert!(big.file_data_pdus_received <= big.file_data_pdus_sent);
    // At least the file's serialization time at 40 Mb/s with the 40/1460 overhead, and not absurdly more.
    let t = big.transfer_s.expect("a transfer time");
    let min = 2_000_000.0 * 8.0 * (1500.0 / 1460.0) / 40e6;
    assert!(t > min && t < 10.0 * min + 2.0, "{t} vs {min}");
    let tiny = &out.transfers[1];
    assert!(tiny.completed && tiny.content_verified, "{tiny:?}");
    // The relay saw the traffic and applied its loss model.
    assert!(out.emu.forward.received >= Some(500), "{:?}", out.emu);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn unsupported_shapes_are_named() {
    let work = work_dir("bad");
    let text = SCENARIO.replace(
        "[[cfdp]]\nfrom = 1\nto = 2\nfile_size = 1\n",
        "[[cfdp]]\nfrom = 2\nto = 1\nfile_size = 1\n",
    );
    let scn =
        sim::Scenario::from_toml_str(&text, "t.toml", Path::new(".")).expect("valid scenario");
    let e = lab::run_emulated_cfdp(&scn, &lab::LabOptions::new(BIN, &work))
        .expect_err("two directions")
        .to_string();
    assert!(e.contains("cfdp[1].from"), "{e}");
}
