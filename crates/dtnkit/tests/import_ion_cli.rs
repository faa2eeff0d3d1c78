//! `dtnkit import-ion` end to end: the sample ION nodes of `testdata/ion/` become configurations
//! `dtnkit node` accepts (and runs: two imported LTP nodes answer each other's pings), every line
//! not translated is printed with its file and line, malformed input exits with 2.

mod node_support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use node_support::*;

const LIMIT: Duration = Duration::from_secs(60);

fn sample(dir: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/ion")
        .join(dir)
        .to_string_lossy()
        .into_owned()
}

fn import(args: &[&str], out: &Path) -> std::process::Output {
    let mut a = vec!["import-ion"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-o", out.to_str().unwrap()]);
    run(&a, LIMIT)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn peers_md_node_imports_and_passes_the_node_check() {
    let tmp = TempDir::new("import-ion");
    let out_dir = tmp.0.join("out");
    let out = import(&[&sample("peers-md")], &out_dir);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {err}");
    assert!(
        text(&out.stdout).contains("node 1: wrote"),
        "{}",
        text(&out.stdout)
    );
    let toml = std::fs::read_to_string(out_dir.join("node.toml")).unwrap();
    assert!(
        toml.contains("node = 1") && toml.contains("[[span]]"),
        "{toml}"
    );
    let plan = std::fs::read_to_string(out_dir.join("plan.txt")).unwrap();
    assert_eq!(
        plan.lines().filter(|l| l.starts_with("a ")).count(),
        3,
        "{plan}"
    );
    // Lines not translated are named with file:line.
    assert!(
        err.contains("node.ionrc:3: not translated: `m horizon +0`"),
        "{err}"
    );
    assert!(
        err.contains("node.bprc:3: ignored: `a endpoint ipn:1.1 q`"),
        "{err}"
    );
    let cfg = out_dir.join("node.toml");
    let check = run(
        &["node", "--config", cfg.to_str().unwrap(), "--check"],
        LIMIT,
    );
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stderr));
}

struct Node(Child, PathBuf);

impl Node {
    fn start(config: &Path) -> Node {
        let log = std::fs::File::create(config.with_extension("err")).unwrap();
        let child = Command::new(BIN)
            .args(["node", "--config"])
            .arg(config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let socket = config.parent().unwrap().join("store/app.sock");
        let deadline = Instant::now() + Duration::from_secs(30);
        while client::Client::connect(&socket)
            .and_then(|mut c| c.status())
            .is_err()
        {
            assert!(
                Instant::now() < deadline,
                "node {} did not come up",
                config.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Node(child, socket)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn two_imported_ltp_nodes_run_and_ping_each_other() {
    let tmp = TempDir::new("import-ion-ltp");
    let (pa, pb) = (free_port(), free_port());
    let mut configs = Vec::new();
    for (dir, out_name) in [("ltp-a", "a"), ("ltp-b", "b")] {
        let out_dir = tmp.0.join(out_name);
        let out = import(&[&sample(dir)], &out_dir);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        // The samples use fixed ports; move them to free ones for the test.
        let cfg = out_dir.join("node.toml");
        let t = std::fs::read_to_string(&cfg)
            .unwrap()
            .replace("127.0.0.1:2113", &format!("127.0.0.1:{pa}"))
            .replace("127.0.0.1:2114", &format!("127.0.0.1:{pb}"));
        std::fs::write(&cfg, t).unwrap();
        configs.push(cfg);
    }
    let a = Node::start(&configs[0]);
    let b = Node::start(&configs[1]);
    for (from, to) in [(&a, "ipn:20.7"), (&b, "ipn:10.7")] {
        let out = run(
            &[
                "ping",
                "--socket",
                from.1.to_str().unwrap(),
                "--dst",
                to,
                "--count",
                "2",
            ],
            LIMIT,
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "ping {to}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
}

#[test]
fn tcp_node_becomes_tcpclv3_peers_and_names_untranslatable_lines() {
    let tmp = TempDir::new("import-ion-tcp");
    let files: Vec<String> = ["node.ionrc", "node.bprc", "node.ipnrc"]
        .iter()
        .map(|f| format!("{}/{f}", sample("tcp")))
        .collect();
    let args: Vec<&str> = files.iter().map(String::as_str).collect();
    let out = import(&args, &tmp.0);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        !tmp.0.join("plan.txt").exists(),
        "no contact lines, no plan"
    );
    // ION's TCP induct and plan are translated (the plan as a TCPCLv3 peer), without a note.
    assert!(!err.contains("a induct tcp"), "{err}");
    assert!(!err.contains("tcp/127.0.0.1:4557"), "{err}");
    let toml = std::fs::read_to_string(tmp.0.join("node.toml")).unwrap();
    assert!(
        toml.contains("[[tcp_peer]]") && toml.contains("version = 3"),
        "{toml}"
    );
    assert!(
        err.contains("node.bprc:9: not translated: `a outduct stcp 127.0.0.1:4558 stcpclo`"),
        "{err}"
    );
    assert!(err.contains("node.ipnrc:2: not translated"), "{err}");
    let cfg = tmp.0.join("node.toml");
    let check = run(
        &["node", "--config", cfg.to_str().unwrap(), "--check"],
        LIMIT,
    );
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stderr));
}

#[test]
fn malformed_or_unreadable_input_exits_2_naming_file_and_line() {
    let tmp = TempDir::new("import-ion-bad");
    let ionrc = tmp.0.join("bad.ionrc");
    std::fs::write(&ionrc, "1 7\na contact +0 +10 7 8\n").unwrap();
    let out = import(&[ionrc.to_str().unwrap()], &tmp.0.join("out"));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err:?}");
    assert!(err.contains("bad.ionrc:2"), "{err}");
    assert!(!tmp.0.join("out/node.toml").exists());
    let ltprc = tmp.0.join("bad.ltprc");
    std::fs::write(&ltprc, "a span 2 64\n").unwrap();
    std::fs::write(&ionrc, "1 7\n").unwrap();
    let out = import(
        &[ionrc.to_str().unwrap(), ltprc.to_str().unwrap()],
        &tmp.0.join("out"),
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("bad.ltprc:1") && err.contains("a span PEER_ENGINE"),
        "{err}"
    );
    let missing = import(&["/nonexistent/node.ionrc"], &tmp.0.join("out"));
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing.stderr).contains("/nonexistent/node.ionrc"));
}
