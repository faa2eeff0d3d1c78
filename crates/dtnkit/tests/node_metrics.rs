//! The node's monitor (`[metrics] listen`): Prometheus metrics scraped during an LTP transfer
//! between two `dtnkit node` processes parse with a Prometheus text parser (the
//! `prometheus-parse` crate and a strict line-grammar check) and move as the transfer does;
//! the JSON endpoints and error answers; `dtnkit status --watch` shows rates.

mod node_support;

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use node_support::monitor::{http, paced_pair, spawn_sender};
use node_support::*;

/// Bundles and their size: 3 MB at 12 Mbit/s is about two seconds of transfer, long enough
/// for several scrapes to see it under way.
const COUNT: u64 = 30;
const SIZE: usize = 100_000;

/// Series key: name and sorted labels.
type Key = (String, Vec<(String, String)>);

/// A strict check of the Prometheus text format 0.0.4: every line is a HELP, a TYPE or a sample
/// whose name, labels and value follow the grammar; each family has one HELP and one TYPE before
/// its samples; sample names fit their family's type; no series twice; histogram buckets are
/// cumulative and end with `+Inf` equal to `_count`. Returns the samples by series.
fn strict_parse(text: &str) -> BTreeMap<Key, f64> {
    fn name_ok(n: &str) -> bool {
        let mut c = n.chars();
        c.next()
            .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
            && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
    }
    fn value(v: &str) -> f64 {
        match v {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            _ => v
                .parse()
                .unwrap_or_else(|_| panic!("bad sample value {v:?}")),
        }
    }
    let mut types: HashMap<String, String> = HashMap::new();
    let mut helps: HashMap<String, String> = HashMap::new();
    let mut samples: BTreeMap<Key, f64> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("HELP name text");
            assert!(name_ok(name) && !help.is_empty(), "bad HELP line {line:?}");
            assert!(
                helps.insert(name.into(), help.into()).is_none(),
                "second HELP for {name}"
            );
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').expect("TYPE name type");
            assert!(name_ok(name), "bad TYPE name {line:?}");
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&ty),
                "bad type {line:?}"
            );
            assert!(helps.contains_key(name), "TYPE before HELP for {name}");
            assert!(
                types.insert(name.into(), ty.into()).is_none(),
                "second TYPE for {name}"
            );
            continue;
        }
        assert!(
            !line.starts_with('#') && !line.is_empty(),
            "unexpected line {line:?}"
        );
        // name{labels} value
        let (series, v) = line.rsplit_once(' ').expect("sample without value");
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => (n, l.strip_suffix('}').expect("unclosed labels")),
            None => (series, ""),
        };
        assert!(name_ok(name), "bad sample name {line:?}");
        let mut parsed = Vec::new();
        let mut rest = labels;
        while !rest.is_empty() {
            let (k, after) = rest.split_once("=\"").expect("label without =\"");
            assert!(
                name_ok(k) && !k.contains(':'),
                "bad label name {k:?} in {line:?}"
            );
            let mut val = String::new();
            let mut chars = after.char_indices();
            let end = loop {
                match chars.next().expect("unterminated label value") {
                    (i, '"') => break i,
                    (_, '\\') => match chars.next().expect("dangling escape").1 {
                        '\\' => val.push('\\'),
                        '"' => val.push('"'),
                        'n' => val.push('\n'),
                        e => panic!("bad escape \\{e} in {line:?}"),
                    },
                    (_, c) => val.push(c),
                }
            };
            parsed.push((k.to_string(), val));
            rest = after.get(end + 1..).unwrap_or("");
            rest = rest.strip_prefix(',').unwrap_or(rest);
        }
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| types.get(*f).is_some_and(|t| t == "histogram"))
            })
            .unwrap_or(name);
        let ty = types
            .get(family)
            .unwrap_or_else(|| panic!("sample {name} before its TYPE"));
        if ty == "counter" {
            assert!(name.ends_with("_total"), "counter {name} without _total");
        }
        parsed.sort();
        let key = (name.to_string(), parsed);
        assert!(
            samples.insert(key, value(v)).is_none(),
            "series twice: {line:?}"
        );
    }
    // Histograms: cumulative buckets, +Inf == _count.
    for (fam, _) in types.iter().filter(|(_, t)| *t == "histogram") {
        let mut buckets: Vec<(f64, f64)> = samples
            .iter()
            .filter(|((n, _), _)| *n == format!("{fam}_bucket"))
            .map(|((_, l), v)| {
                let le = &l
                    .iter()
                    .find(|(k, _)| k == "le")
                    .expect("bucket without le")
                    .1;
                (value(le), *v)
            })
            .collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert!(
            buckets.windows(2).all(|w| w[0].1 <= w[1].1),
            "{fam}: buckets not cumulative"
        );
        let inf = buckets.last().expect("no buckets");
        assert_eq!(inf.0, f64::INFINITY, "{fam}: no +Inf bucket");
        let count = samples[&(format!("{fam}_count"), Vec::new())];
        assert_eq!(inf.1, count, "{fam}: +Inf bucket != count");
    }
    samples
}

/// Scrapes `/metrics`, checks it with both parsers and returns the samples.
fn scrape(addr: SocketAddr) -> BTreeMap<Key, f64> {
    let (code, ctype, body) = http(addr, "GET", "/metrics", None);
    assert_eq!(code, 200, "{body}");
    assert!(ctype.starts_with("text/plain; version=0.0.4"), "{ctype}");
    let strict = strict_parse(&body);
    let lines = body.lines().map(|l| Ok(l.to_string()));
    let parsed = prometheus_parse::Scrape::parse(lines).expect("prometheus-parse");
    // The lenient parser groups a histogram's buckets into one sample (its _sum and _count stay
    // samples of their own): as many values as the strict parse found.
    let flat: usize = parsed
        .samples
        .iter()
        .map(|s| match &s.value {
            prometheus_parse::Value::Histogram(b) => b.len(),
            _ => 1,
        })
        .sum();
    assert_eq!(flat, strict.len(), "prometheus-parse skipped samples");
    for s in &parsed.samples {
        if s.metric.ends_with("_total") {
            assert!(
                matches!(s.value, prometheus_parse::Value::Counter(_)),
                "{} typed {:?}",
                s.metric,
                s.value
            );
        }
    }
    strict
}

/// Scrapes `addr` until `cond` holds (at most 10 s; `what` names the condition).
fn scrape_until(
    addr: SocketAddr,
    what: &str,
    cond: impl Fn(&BTreeMap<Key, f64>) -> bool,
) -> BTreeMap<Key, f64> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = scrape(addr);
        if cond(&m) {
            return m;
        }
        assert!(Instant::now() < deadline, "{what}: not reached in 10 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn get(m: &BTreeMap<Key, f64>, name: &str, labels: &[(&str, &str)]) -> f64 {
    let mut l: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    l.sort();
    *m.get(&(name.to_string(), l))
        .unwrap_or_else(|| panic!("no series {name} {labels:?}"))
}

#[test]
fn metrics_scraped_during_a_transfer_parse_and_move() {
    let dir = TempDir::new("metrics");
    let (n1, n2, m1, m2, udpcl) = paced_pair(&dir, 12_000_000);
    let before1 = scrape(m1);
    let before2 = scrape(m2);
    assert_eq!(
        get(
            &before2,
            "dtnkit_node_info",
            &[("node", "2"), ("version", env!("CARGO_PKG_VERSION"))]
        ),
        1.0
    );
    assert_eq!(
        get(
            &before2,
            "dtnkit_neighbour_link_up",
            &[("peer", "1"), ("cla", "ltp")]
        ),
        1.0
    );
    assert_eq!(
        get(&before2, "dtnkit_ltp_span_link_up", &[("peer", "1")]),
        1.0
    );
    assert!(get(&before2, "process_resident_memory_bytes", &[]) > 1e6);

    // A malformed bundle over UDPCL is counted by reason.
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    u.send_to(b"\x9f\x00garbage", ("127.0.0.1", udpcl)).unwrap();

    let recv = spawn_recv(&n2.socket, "ipn:2.1", COUNT);
    let sender = spawn_sender(&n1, SIZE, COUNT);
    // Scrape node 2 while the transfer runs.
    let received = |m: &BTreeMap<Key, f64>| get(m, "dtnkit_bundles_received_total", &[]);
    let mut during = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let m = scrape(m2);
        let r = received(&m) - received(&before2);
        during.push(m);
        if r >= COUNT as f64 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "transfer did not finish in 60 s ({r} bundles)"
        );
        std::thread::sleep(Duration::from_millis(150));
    }
    let out = recv.wait(Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = sender.wait(Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Seen under way: some scrape between the start and the end of the transfer.
    let partial = during
        .iter()
        .map(|m| received(m) - received(&before2))
        .filter(|r| *r > 0.0 && *r < COUNT as f64)
        .count();
    assert!(
        partial >= 1,
        "no scrape saw the transfer under way ({} scrapes)",
        during.len()
    );
    // Deliveries are counted at the application's acknowledgment, which may trail its exit,
    // and the span counters are copied from the LTP engine every 200 ms.
    let expected = (COUNT as usize * SIZE) as f64;
    let rx_bytes = |m: &BTreeMap<Key, f64>| {
        let l = [("peer", "1"), ("direction", "received")];
        get(m, "dtnkit_ltp_span_block_bytes_total", &l)
            - get(&before2, "dtnkit_ltp_span_block_bytes_total", &l)
    };
    let after2 = scrape_until(m2, "deliveries and span bytes", |m| {
        get(m, "dtnkit_bundles_delivered_total", &[]) >= COUNT as f64 && rx_bytes(m) >= expected
    });
    // Counters never go down from one scrape to the next.
    let mut all = vec![before2.clone()];
    all.extend(during.iter().cloned());
    all.push(after2.clone());
    for w in all.windows(2) {
        for (k, v) in &w[0] {
            if k.0.ends_with("_total") || k.0.ends_with("_bucket") || k.0.ends_with("_count") {
                let next = w[1]
                    .get(k)
                    .copied()
                    .unwrap_or_else(|| panic!("series {k:?} disappeared"));
                assert!(next >= *v, "{k:?} went down: {v} -> {next}");
            }
        }
    }

    // Receiver: every bundle received and delivered, the span's goodput and segments moved.
    let d = |name: &str, l: &[(&str, &str)]| get(&after2, name, l) - get(&before2, name, l);
    assert_eq!(d("dtnkit_bundles_received_total", &[]), COUNT as f64);
    assert_eq!(d("dtnkit_bundles_delivered_total", &[]), COUNT as f64);
    // Block bytes: the bundles' encoded size, a little more than their payload.
    assert!(rx_bytes(&after2) < 1.01 * expected, "{}", rx_bytes(&after2));
    assert!(
        d(
            "dtnkit_ltp_span_segments_total",
            &[("peer", "1"), ("direction", "received")]
        ) >= (COUNT as usize * SIZE / 1500) as f64
    );
    assert!(
        d(
            "dtnkit_ltp_span_blocks_total",
            &[("peer", "1"), ("direction", "received")]
        ) >= 1.0
    );
    assert!(d("dtnkit_store_commit_seconds_count", &[]) >= 1.0);
    assert!(d("dtnkit_store_commits_total", &[]) >= 1.0);
    assert!(d("process_cpu_seconds_total", &[]) > 0.0);
    assert_eq!(
        get(
            &after2,
            "dtnkit_bundles_malformed_total",
            &[("reason", "cbor")]
        ),
        1.0
    );
    assert_eq!(
        get(
            &after2,
            "dtnkit_ltp_span_cancels_total",
            &[("peer", "1"), ("by", "here"), ("reason", "RLEXC")]
        ),
        0.0
    );

    // Sender: every bundle forwarded (reported once the receiver's final report arrived), the
    // span's goodput counted once per byte and no export session left open.
    let tx = [("peer", "2"), ("direction", "sent")];
    let tx_bytes = |m: &BTreeMap<Key, f64>| {
        get(m, "dtnkit_ltp_span_block_bytes_total", &tx)
            - get(&before1, "dtnkit_ltp_span_block_bytes_total", &tx)
    };
    let export = [("peer", "2"), ("direction", "export")];
    let after1 = scrape_until(m1, "forwarding and span bytes", |m| {
        get(m, "dtnkit_bundles_forwarded_total", &[]) >= COUNT as f64
            && tx_bytes(m) >= expected
            && get(m, "dtnkit_ltp_span_sessions", &export) == 0.0
    });
    let d1 = |name: &str, l: &[(&str, &str)]| get(&after1, name, l) - get(&before1, name, l);
    assert_eq!(d1("dtnkit_bundles_created_total", &[]), COUNT as f64);
    assert_eq!(d1("dtnkit_bundles_forwarded_total", &[]), COUNT as f64);
    assert!(tx_bytes(&after1) < 1.01 * expected, "{}", tx_bytes(&after1));
    assert!(d1("dtnkit_ltp_span_data_bytes_sent_total", &[("peer", "2")]) >= tx_bytes(&after1));
    drop(n1);
    drop(n2);
}

#[test]
fn monitor_endpoints_answer_json_openmetrics_and_errors() {
    let dir = TempDir::new("metrics-api");
    let (_n1, _n2, _m1, m2, _) = paced_pair(&dir, 0);
    let (code, ctype, body) = http(m2, "GET", "/api/status", None);
    assert_eq!((code, ctype.as_str()), (200, "application/json"));
    let st: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(st["node"], 2);
    assert_eq!(st["ltp"]["spans"]["1"]["link_up"], true);
    assert_eq!(st["contacts"]["neighbours"]["1"]["cla"], "ltp");
    assert!(st["store"]["commit_latency"]["le_s"].is_array());
    // The monitor serves the reply it parsed into the typed structs, losslessly.
    let typed = client::NodeStatus::from_json(&body).unwrap();
    assert_eq!(typed.to_json(), body);
    assert_eq!(serde_json::to_value(&typed).unwrap(), st);

    let (code, ctype, body) = http(
        m2,
        "GET",
        "/metrics",
        Some("application/openmetrics-text; version=1.0.0"),
    );
    assert_eq!(code, 200);
    assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
    assert!(body.ends_with("# EOF\n"));
    assert!(body.contains("# TYPE dtnkit_bundles_received counter\n"));

    // The sampler fills the history once per second.
    let deadline = Instant::now() + Duration::from_secs(15);
    let live = loop {
        let (code, _, body) = http(m2, "GET", "/api/live?since=0", None);
        assert_eq!(code, 200);
        let live: serde_json::Value = serde_json::from_str(&body).unwrap();
        if live["samples"].as_array().is_some_and(|s| s.len() >= 2) {
            break live;
        }
        assert!(Instant::now() < deadline, "no samples: {live}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(live["capacity"], 60);
    assert_eq!(live["status"]["node"], 2);
    let t = live["samples"][0]["t"].as_u64().unwrap();
    let (_, _, body) = http(m2, "GET", &format!("/api/live?since={t}"), None);
    let newer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(newer["samples"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["t"].as_u64().unwrap() > t));

    let (code, ctype, page) = http(m2, "GET", "/", None);
    assert_eq!((code, ctype.as_str()), (200, "text/html; charset=utf-8"));
    assert!(page.contains("<script src=\"app.js\">"));
    assert_eq!(http(m2, "GET", "/app.js", None).0, 200);
    assert_eq!(http(m2, "HEAD", "/metrics", None).2, "", "HEAD has no body");
    assert_eq!(http(m2, "GET", "/nope", None).0, 404);
    assert_eq!(http(m2, "POST", "/metrics", None).0, 405);
    assert_eq!(http(m2, "GET", "/api/live?since=yesterday", None).0, 400);
    // A garbage request gets 400, and the listener still serves afterwards.
    let mut s = TcpStream::connect(m2).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"\x00\x01 nonsense\r\n\r\n").unwrap();
    let mut raw = String::new();
    let _ = s.read_to_string(&mut raw);
    assert!(raw.starts_with("HTTP/1.1 400"), "{raw:?}");
    assert_eq!(http(m2, "GET", "/metrics", None).0, 200);
}

#[test]
fn a_bad_metrics_address_is_a_configuration_error() {
    let dir = TempDir::new("metrics-bad");
    let cfg = dir.0.join("node.toml");
    std::fs::write(
        &cfg,
        "node = 1\nbind = \"127.0.0.1:0\"\n[store]\npath = \"store\"\n[metrics]\nlisten = \"localhost:9464\"\n",
    )
    .unwrap();
    let out = run(
        &["node", "--config", cfg.to_str().unwrap(), "--check"],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("field `metrics.listen` = \"localhost:9464\""),
        "{err}"
    );
}

#[test]
fn status_watch_shows_rates_during_a_transfer() {
    let dir = TempDir::new("watch");
    let (n1, n2, _, _, _) = paced_pair(&dir, 4_000_000);
    let recv = spawn_recv(&n2.socket, "ipn:2.1", COUNT);
    let sender = spawn_sender(&n1, SIZE, COUNT);
    // 3 MB at 4 Mbit/s: about 6 s of transfer; watch 4 frames half a second apart.
    let out = run(
        &[
            "status",
            "--socket",
            n2.socket.to_str().unwrap(),
            "--watch",
            "--interval",
            "0.5",
            "--count",
            "4",
        ],
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let frames: Vec<&str> = text.split("dtnkit node ipn:2").skip(1).collect();
    assert_eq!(frames.len(), 4, "{text}");
    // Later frames carry rates; at least one shows goodput from node 1 and received bundles.
    let received_rate = frames.iter().skip(1).any(|f| {
        f.lines()
            .find(|l| l.trim_start().starts_with("received"))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|r| r.strip_suffix("/s"))
            .and_then(|r| r.parse::<f64>().ok())
            .is_some_and(|r| r > 0.0)
    });
    assert!(received_rate, "no received rate > 0:\n{text}");
    assert!(
        frames
            .iter()
            .any(|f| f.contains("b/s") && f.contains("ipn:1")),
        "{text}"
    );
    assert!(frames[0].contains("per second"));
    let out = recv.wait(Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = sender.wait(Duration::from_secs(60));
}
