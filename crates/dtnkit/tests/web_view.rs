//! The node's web view in a real browser: headless Chromium loads the page from a node that
//! receives an LTP transfer, runs its JavaScript for a few seconds of virtual time
//! (`--virtual-time-budget`, several polls of `/api/live`) and dumps the DOM; the values must
//! be there (node, bundle counters and rates, the neighbour's link, graph points) and a second
//! load later must show larger totals.
//!
//! Requires Chromium (`DTNKIT_CHROMIUM`, else `chromium` on PATH): `scripts/test.sh` installs the
//! Debian package.

mod node_support;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use node_support::monitor::{paced_pair, spawn_sender};
use node_support::*;

/// The Chromium binary.
fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("DTNKIT_CHROMIUM") {
        return PathBuf::from(p);
    }
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .flat_map(|d| ["chromium", "chromium-browser"].map(|n| d.join(n)))
            .find(|p| p.is_file())
    });
    found.expect(
        "Chromium not found: run scripts/test.sh (it installs the Debian package `chromium`) or set DTNKIT_CHROMIUM",
    )
}

/// Loads `url` in headless Chromium, lets the page run for `budget_ms` of virtual time and
/// returns the DOM. Killed after 90 s.
fn dump_dom(dir: &TempDir, url: &str, budget_ms: u64) -> String {
    static LOADS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = LOADS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // A fresh profile per load: nothing cached, no state from an earlier run.
    let profile = dir.0.join(format!("chromium-profile-{n}"));
    let mut cmd = Command::new(chromium());
    // Without the background-networking switches Chromium keeps contacting Google services.
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .arg(format!("--virtual-time-budget={budget_ms}"))
    .arg("--dump-dom")
    .arg(url);
    let out = Proc::spawn_command(cmd).wait(Duration::from_secs(90));
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && dom.contains("</html>"),
        "chromium failed ({}); stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&profile);
    dom
}

/// The value of attribute `attr` of the first element after `anchor` that has it.
fn attr_after(dom: &str, anchor: &str, attr: &str) -> Option<String> {
    let at = dom.find(anchor)?;
    let rest = dom.get(at..)?;
    let key = format!("{attr}=\"");
    let start = rest.find(&key)? + key.len();
    let end = rest.get(start..)?.find('"')?;
    rest.get(start..start + end).map(str::to_string)
}

/// The `data-value` of cell `n` (0-based) of the table row `data-key="key"` in table `table`.
fn cell_value(dom: &str, table: &str, key: &str, n: usize) -> Option<f64> {
    let t = dom.find(&format!("id=\"{table}\""))?;
    let rest = dom.get(t..)?;
    let row_at = rest.find(&format!("<tr data-key=\"{key}\">"))?;
    let row = rest.get(row_at..)?;
    let row = row.get(..row.find("</tr>")?)?;
    let cell = row.split("<td").nth(n + 1)?;
    attr_after(cell, "", "data-value")?.parse().ok()
}

/// What one load of the page showed.
#[derive(Debug)]
struct View {
    updates: u64,
    received: f64,
    received_rate: Option<f64>,
    goodput_points: u64,
    goodput_max: f64,
}

fn read_view(dom: &str) -> View {
    assert!(
        dom.contains("<span id=\"node\">ipn:2</span>"),
        "node id missing:\n{dom}"
    );
    // The error line keeps its `hidden` attribute unless a poll failed.
    assert!(
        dom.contains("<p id=\"error\" class=\"error\" hidden"),
        "the page shows an error:\n{dom}"
    );
    let neighbour = dom
        .find("<tr data-key=\"1\">")
        .map(|i| &dom[i..i + dom[i..].find("</tr>").unwrap_or(0)])
        .unwrap_or_else(|| panic!("no row for neighbour 1:\n{dom}"));
    assert!(
        neighbour.contains("class=\"up\""),
        "neighbour 1 not up: {neighbour}"
    );
    View {
        updates: attr_after(dom, "id=\"updated\"", "data-updates")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        received: cell_value(dom, "bundles", "received", 1)
            .unwrap_or_else(|| panic!("no received total:\n{dom}")),
        received_rate: cell_value(dom, "bundles", "received", 2),
        goodput_points: attr_after(dom, "id=\"chart-goodput\"", "data-points")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        goodput_max: attr_after(dom, "id=\"chart-goodput\"", "data-max")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0),
    }
}

#[test]
fn the_web_view_shows_a_transfer_and_updates() {
    let dir = TempDir::new("webview");
    // 200 bundles of 50 kB at 4 Mbit/s: about 20 s of transfer, longer than both page loads.
    let (n1, n2, _m1, m2, _) = paced_pair(&dir, 4_000_000);
    let recv = spawn_recv(&n2.socket, "ipn:2.1", 200);
    let _sender = spawn_sender(&n1, 50_000, 200);
    let deadline = Instant::now() + Duration::from_secs(30);
    while n2.status().bundles.received < 3 {
        assert!(Instant::now() < deadline, "the transfer did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    let url = format!("http://{m2}/");
    let first = read_view(&dump_dom(&dir, &url, 5000));
    assert!(
        first.updates >= 2,
        "the page polled fewer than twice: {first:?}"
    );
    assert!(first.received >= 3.0, "{first:?}");
    assert!(first.goodput_points > 0, "no goodput graph: {first:?}");
    // Wait for more bundles, then load the page again: the totals moved.
    let seen = first.received as u64;
    let deadline = Instant::now() + Duration::from_secs(30);
    while n2.status().bundles.received < seen + 10 {
        assert!(Instant::now() < deadline, "the transfer stalled at {seen}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let second = read_view(&dump_dom(&dir, &url, 5000));
    assert!(
        second.received > first.received,
        "no update: {first:?} then {second:?}"
    );
    // Under traffic the page computed a receive rate and drew goodput above zero.
    let rate = first
        .received_rate
        .into_iter()
        .chain(second.received_rate)
        .fold(0.0, f64::max);
    assert!(rate > 0.0, "no receive rate: {first:?} {second:?}");
    assert!(second.goodput_max > 0.0, "goodput graph flat: {second:?}");
    drop(recv);
}
