//! `dtnkit emu` through the binary: configuration errors and a short relayed run with its summary.

use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn dtnkit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dtnkit"))
}

fn config_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("dtnkit-emu-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p
}

const RELAY: &str =
    "[relay]\nlisten_a = \"127.0.0.1:0\"\nlisten_b = \"127.0.0.1:0\"\nb = \"127.0.0.1:9\"\n";

#[test]
fn invalid_fields_are_usage_errors_naming_the_field() {
    let cases = [
        (
            "per.toml",
            "[forward]\nloss = { model = \"iid\", per = 1.5 }\n",
            "forward.loss.per = 1.5: expected a probability in [0, 1]",
        ),
        (
            "slots.toml",
            "[forward]\n",
            "relay.slots = 1: expected a number of datagram slots",
        ),
        (
            "unknown.toml",
            "[forward]\nlatency_ms = 3\n",
            "unknown field `latency_ms`",
        ),
    ];
    for (name, body, expected) in cases {
        let mut text = RELAY.to_string();
        if name == "slots.toml" {
            text.push_str("slots = 1\n");
        }
        text.push_str(body);
        let p = config_file(name, &text);
        let o = dtnkit()
            .args([
                "emu",
                "--config",
                p.to_str().expect("utf-8"),
                "--duration",
                "1",
            ])
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(2), "{name}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(expected), "{name}: {err}");
    }
    let o = dtnkit()
        .args(["emu", "--listen-a", "127.0.0.1:0"])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--listen-b is required"));
}

fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

#[test]
fn relays_datagrams_and_prints_a_summary() {
    let b = UdpSocket::bind("127.0.0.1:0").expect("bind b");
    b.set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    let a = UdpSocket::bind("127.0.0.1:0").expect("bind a");
    let (la, lb) = (free_port(), free_port());
    let log = std::env::temp_dir().join(format!("dtnkit-emu-cli-{}.csv", std::process::id()));
    let child = dtnkit()
        .args([
            "emu",
            "--listen-a",
            &format!("127.0.0.1:{la}"),
            "--listen-b",
            &format!("127.0.0.1:{lb}"),
        ])
        .args([
            "--b",
            &b.local_addr().expect("addr").to_string(),
            "--delay-ms",
            "5",
            "--duration",
            "2.5",
        ])
        .args(["--log", log.to_str().expect("utf-8")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Keep sending until the relay is up and passes traffic, then send a counted burst.
    let start = Instant::now();
    let mut buf = [0u8; 64];
    let mut up = false;
    while !up && start.elapsed() < Duration::from_millis(1500) {
        a.send_to(b"probe", ("127.0.0.1", la)).expect("send");
        up = b.recv(&mut buf).is_ok();
    }
    assert!(up, "relay never passed traffic");
    while b.recv(&mut buf).is_ok() {}
    for _ in 0..100 {
        a.send_to(&[7u8; 200], ("127.0.0.1", la)).expect("send");
    }
    let mut got = 0;
    while b.recv(&mut buf).is_ok() {
        got += 1;
    }
    assert_eq!(got, 100);
    let out = child
        .wait_with_output()
        .expect("relay exits after --duration");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        summary.contains("forward") && summary.contains("model: channel 0"),
        "{summary}"
    );
    // The kernel's drops at the relay's input are reported per direction (none at this rate), and the total of
    // everything that was not a model decision is checkable from the relay's own output.
    assert_eq!(
        summary.matches("not model: kernel 0 ").count(),
        2,
        "{summary}"
    );
    assert!(
        summary.contains("drops other than the models' decisions: 0"),
        "{summary}"
    );
    let csv = std::fs::read_to_string(&log).expect("log written");
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("time_ns,dir,size,fate,release_ns"));
    assert_eq!(
        csv.lines()
            .filter(|l| l.contains(",fwd,200,deliver,"))
            .count(),
        100,
        "{csv}"
    );
    std::fs::remove_file(&log).ok();
}
