//! The emulator's IP mode (root, as CI runs): a TCP transfer's goodput and RTT match the configured link, BER
//! losses match their expectation, an asymmetric link limits its return direction, two dtnkit nodes exchange
//! bundles over LTP and over TCPCL through it, a splitting gateway relays a file and each leg's losses are reported,
//! STP (a BPF congestion control the emulator loads) keeps a lossy link full, and its namespaces are gone after a run
//! and after a killed run.
//!
//! These tests need root (network namespaces, TUN devices). Set DTNKIT_SKIP_ROOT_TESTS=1 to skip them as another
//! user; without it they fail with that message.

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use emu::ip::{netns, IpEmu, IpEmuConfig, IpPlan};
use lab::ipnet::{IpLabOptions, IpScenario};

fn root_or_skip() -> bool {
    // SAFETY: geteuid has no failure mode.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    if std::env::var_os("DTNKIT_SKIP_ROOT_TESTS").is_some() {
        eprintln!("skipped: not root and DTNKIT_SKIP_ROOT_TESTS is set");
        return false;
    }
    panic!(
        "the IP-mode tests need root (CI runs as root); set DTNKIT_SKIP_ROOT_TESTS=1 to skip them"
    );
}

fn dtnkit() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_dtnkit"))
}

fn work(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dtnkit-ipemu-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn plan(text: &str) -> IpPlan {
    IpEmuConfig::from_toml(text)
        .unwrap()
        .build(Path::new("."))
        .unwrap()
}

fn scenario(text: &str) -> IpScenario {
    let v: toml::Value = toml::from_str(text).unwrap();
    IpScenario::from_value(&v, "test").unwrap()
}

/// A UDP socket bound inside a node's namespace (the socket stays there; this thread does not move).
fn udp_in(ns: &Path, addr: SocketAddr) -> UdpSocket {
    let ns = ns.to_path_buf();
    netns::in_netns(&ns, move || {
        let s = UdpSocket::bind(addr)?;
        socket2::SockRef::from(&s).set_recv_buffer_size(8 << 20)?;
        Ok(s)
    })
    .unwrap()
}

#[test]
fn tcp_goodput_and_rtt_match_a_10_mbps_250_ms_link() {
    if !root_or_skip() {
        return;
    }
    // Initial window and buffers cover the 625 kB bandwidth-delay product and the modelled queue holds the whole
    // file, so the transfer runs at the link rate from the first round trip: the time is exactly predictable.
    let s = scenario(
        r#"
[transfer]
protocol = "tcp"
file_bytes = 5000000
time_limit_s = 60
[tcp]
congestion = "cubic"
sndbuf = 4000000
rcvbuf = 4000000
initcwnd = 600
initrwnd = 600
[link]
forward = { rate_bps = 10e6, delay_ms = 250, queue_bytes = 8000000 }
return = { rate_bps = 10e6, delay_ms = 250, queue_bytes = 8000000 }
"#,
    );
    let o = lab::run_ip_transfer(&s, &IpLabOptions::new(dtnkit(), work("tcp"))).unwrap();
    assert!(o.completed, "{o:?}");
    assert_eq!(o.link.unmodelled_drops, 0, "{o:?}");
    assert!(
        o.access.is_none() && o.gateway.is_none(),
        "no gateway, no access leg: {o:?}"
    );
    let rtt = o.handshake_ms.unwrap();
    assert!(
        (rtt - 500.0).abs() < 10.0,
        "handshake {rtt} ms, link RTT 500 ms"
    );
    let min_rtt = o.min_rtt_ms.unwrap();
    assert!((min_rtt - 500.0).abs() < 15.0, "min RTT {min_rtt} ms");
    // Wire packets of 1500 bytes carry 1448 payload bytes (timestamps on): the payload rate of the link.
    let payload_rate = 10e6 * 1448.0 / 1500.0;
    // The handshake (one RTT); then the first flight, limited to the SYN-ACK's unscaled window (at most 64 KiB), and
    // its ACK (another RTT); then the rest of the file at the link's payload rate; then the last packet's one-way
    // delay.
    let first_flight = 65_535.0;
    let expected = 0.5 + 0.5 + (5e6 - first_flight) * 8.0 / payload_rate + 0.25;
    assert!(
        (o.transfer_s - expected).abs() / expected < 0.03,
        "transfer {:.3} s, expected {expected:.3} s (goodput {:.3} Mb/s)",
        o.transfer_s,
        o.goodput_mbps
    );
    let steady = (5e6 - first_flight) * 8.0 / (o.transfer_s - 1.25) / 1e6;
    assert!(
        (steady - payload_rate / 1e6).abs() / (payload_rate / 1e6) < 0.03,
        "goodput after the first flight {steady:.3} Mb/s, link payload rate {:.3}",
        payload_rate / 1e6
    );
}

#[test]
fn a_splitting_gateway_relays_the_file_and_reports_each_legs_losses() {
    if !root_or_skip() {
        return;
    }
    // sender -> (ideal access link) -> gateway -> (20 Mb/s, RTT 10 ms, BER 1e-6: 1.2 % of the data packets) ->
    // receiver, in two connections. The losses happen on the gateway's leg: its connections retransmit, and the
    // sender's report cannot see them.
    let s = scenario(
        r#"
[transfer]
protocol = "tcp-gateway"
file_bytes = 3000000
blocks = 2
time_limit_s = 60
[tcp]
congestion = "cubic"
[gateway]
congestion = "cubic"
sndbuf = 1000000
rcvbuf = 1000000
[link]
forward = { rate_bps = 20e6, delay_ms = 5, queue_bytes = 1000000, loss = { model = "ber", ber = 1e-6 } }
return = { rate_bps = 20e6, delay_ms = 5, queue_bytes = 1000000 }
"#,
    );
    let o = lab::run_ip_transfer(&s, &IpLabOptions::new(dtnkit(), work("gateway"))).unwrap();
    eprintln!("{o:?}");
    assert!(o.completed, "{o:?}");
    assert_eq!(o.delivered_bytes, 3_000_000, "{o:?}");
    assert_eq!(o.link.unmodelled_drops, 0, "{o:?}");
    assert!(
        o.link.fwd_lost_channel > 0,
        "BER 1e-6 over ~2100 packets lost none: {o:?}"
    );
    let access = o.access.expect("a gateway run reports its access link");
    assert_eq!(
        (access.fwd_lost_channel, access.ret_lost_channel),
        (0, 0),
        "the access link is ideal: {o:?}"
    );
    assert!(
        access.fwd_received > 2000,
        "the file crossed the access link: {o:?}"
    );
    let gw = o.gateway.expect("the gateway's report was read");
    assert_eq!(gw.connections, 2, "one report per block: {o:?}");
    assert!(
        gw.retransmits >= 1,
        "{} packets lost on the gateway's leg, no retransmission counted: {o:?}",
        o.link.fwd_lost_channel
    );
    assert!(
        (9.5..30.0).contains(&gw.min_rtt_ms) && gw.srtt_ms >= gw.min_rtt_ms,
        "the gateway's leg has a 10 ms RTT: {o:?}"
    );
}

/// Whether the machine can load dtnkit's BPF congestion controls (root is checked by the caller).
fn bpf_congctl_or_skip() -> bool {
    for (tool, arg) in [("clang", "--version"), ("bpftool", "version")] {
        if Command::new(tool).arg(arg).output().is_err() {
            eprintln!("SKIPPED: `{tool}` is not installed (Debian package {tool}; scripts/test.sh installs it)");
            return false;
        }
    }
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        eprintln!("SKIPPED: the kernel exposes no BTF (/sys/kernel/btf/vmlinux)");
        return false;
    }
    true
}

#[test]
fn stp_keeps_a_lossy_link_full_where_reno_does_not() {
    if !root_or_skip() || !bpf_congctl_or_skip() {
        return;
    }
    // 20 Mb/s, RTT 50 ms: the bandwidth-delay product is 83 packets; BER 1e-6 loses 1.2 % of the data packets.
    // `tcp.congestion = "stp"` reaches the sockets and the routes; the emulator loads the BPF program if needed.
    let run = |cc: &str| {
        let s = scenario(&format!(
            r#"
[transfer]
protocol = "tcp"
file_bytes = 3000000
time_limit_s = 40
[tcp]
congestion = "{cc}"
sndbuf = 1000000
rcvbuf = 1000000
initcwnd = 84
initrwnd = 200
[link]
forward = {{ rate_bps = 20e6, delay_ms = 25, queue_bytes = 1000000, loss = {{ model = "ber", ber = 1e-6 }} }}
return = {{ rate_bps = 20e6, delay_ms = 25, queue_bytes = 1000000 }}
"#
        ));
        lab::run_ip_transfer(&s, &IpLabOptions::new(dtnkit(), work(cc))).unwrap()
    };
    let stp = run("stp");
    let reno = run("reno");
    eprintln!(
        "stp: {:.2} Mb/s in {:.2} s, {:?} retransmissions; reno: {:.2} Mb/s in {:.2} s, {:?}",
        stp.goodput_mbps,
        stp.transfer_s,
        stp.retransmits,
        reno.goodput_mbps,
        reno.transfer_s,
        reno.retransmits
    );
    assert!(stp.completed && reno.completed, "{stp:?} {reno:?}");
    assert!(
        stp.retransmits.unwrap_or(0) > 0,
        "no loss happened: {stp:?}"
    );
    // STP's window stays at the bandwidth-delay product through its recoveries: most of the link's payload rate
    // (19.3 Mb/s) less the handshake and the retransmissions; Reno halves its window at every loss.
    assert!(stp.goodput_mbps > 12.0, "stp {:.2} Mb/s", stp.goodput_mbps);
    assert!(
        stp.goodput_mbps > 1.5 * reno.goodput_mbps,
        "stp {:.2} Mb/s, reno {:.2} Mb/s",
        stp.goodput_mbps,
        reno.goodput_mbps
    );
}

#[test]
fn ber_losses_match_their_expectation() {
    if !root_or_skip() {
        return;
    }
    let emu = IpEmu::start(plan(
        "seed = 5\n[forward]\nloss = { model = 'ber', ber = 1e-5 }\n",
    ))
    .unwrap();
    let (a, b) = (emu.nodes()[0].clone(), emu.nodes()[1].clone());
    let to: SocketAddr = (b.addrs[0], 7000).into();
    let rx = udp_in(&b.netns_path(), to);
    let tx = udp_in(&a.netns_path(), (a.addrs[0], 7001).into());
    rx.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    // The receiver counts while the sender sends (its socket buffer could not hold them all).
    let counter = std::thread::spawn(move || {
        let mut got = 0u64;
        let mut buf = [0u8; 2000];
        while rx.recv(&mut buf).is_ok() {
            got += 1;
        }
        got
    });
    let n = 20_000;
    let payload = [0x33u8; 1000];
    for i in 0..n {
        tx.send_to(&payload, to).unwrap();
        if i % 100 == 99 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let got = counter.join().unwrap();
    let s = emu.stop().unwrap();
    let f = s.links[0].forward;
    assert_eq!(f.received, n, "{f:?}");
    assert_eq!(f.sent, got, "every delivered datagram arrived: {f:?}");
    assert_eq!(s.unmodelled_drops, 0);
    // IP length 1028 bytes: loss probability 1 - (1 - 1e-5)^(8 * 1028).
    let p = 1.0 - (1.0f64 - 1e-5).powf(8.0 * 1028.0);
    let lost = f.lost_channel as f64 / n as f64;
    let sigma = (p * (1.0 - p) / n as f64).sqrt();
    assert!(
        (lost - p).abs() < 4.0 * sigma,
        "loss {lost:.4}, expected {p:.4} ± {:.4} (4 sigma)",
        4.0 * sigma
    );
}

/// Sends `n` datagrams of 1000 bytes at once and returns the rate at which they arrived (IP bytes, bit/s).
fn arrival_rate(tx: &UdpSocket, rx: &UdpSocket, to: SocketAddr, n: usize) -> f64 {
    for _ in 0..n {
        tx.send_to(&[7u8; 1000], to).unwrap();
    }
    rx.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut times = Vec::new();
    let mut buf = [0u8; 2000];
    while times.len() < n {
        match rx.recv(&mut buf) {
            Ok(_) => times.push(Instant::now()),
            Err(_) => break,
        }
    }
    assert_eq!(times.len(), n, "every datagram arrived");
    let span = (times[n - 1] - times[0]).as_secs_f64();
    (n - 1) as f64 * 1028.0 * 8.0 / span
}

#[test]
fn an_asymmetric_link_limits_the_return_direction() {
    if !root_or_skip() {
        return;
    }
    let emu = IpEmu::start(plan(
        "[forward]\nrate_bps = 10e6\n[return]\nrate_bps = 200e3\n",
    ))
    .unwrap();
    let (a, b) = (emu.nodes()[0].clone(), emu.nodes()[1].clone());
    let a_addr: SocketAddr = (a.addrs[0], 7000).into();
    let b_addr: SocketAddr = (b.addrs[0], 7000).into();
    let sa = udp_in(&a.netns_path(), a_addr);
    let sb = udp_in(&b.netns_path(), b_addr);
    let ret = arrival_rate(&sb, &sa, a_addr, 40);
    let fwd = arrival_rate(&sa, &sb, b_addr, 400);
    let s = emu.stop().unwrap();
    assert_eq!(s.unmodelled_drops, 0);
    assert!(
        (ret - 200e3).abs() / 200e3 < 0.03,
        "return {ret:.0} b/s, configured 200 kb/s"
    );
    assert!(
        (fwd - 10e6).abs() / 10e6 < 0.05,
        "forward {fwd:.0} b/s, configured 10 Mb/s"
    );
}

#[test]
fn two_nodes_exchange_bundles_over_ltp_and_tcpcl() {
    if !root_or_skip() {
        return;
    }
    for protocol in ["bp-ltp", "bp-tcpcl"] {
        let s = scenario(&format!(
            r#"
[transfer]
protocol = "{protocol}"
file_bytes = 400000
time_limit_s = 60
[link]
forward = {{ rate_bps = 10e6, delay_ms = 10 }}
return = {{ rate_bps = 1e6, delay_ms = 10 }}
"#
        ));
        let o = lab::run_ip_transfer(&s, &IpLabOptions::new(dtnkit(), work(protocol))).unwrap();
        assert!(o.completed, "{protocol}: {o:?}");
        assert_eq!(o.delivered_bytes, 400_000, "{protocol}");
        assert!(
            o.link.fwd_sent > 280,
            "{protocol}: the bundles crossed the emulated link: {o:?}"
        );
        assert_eq!(o.link.unmodelled_drops, 0, "{protocol}");
        // 400 kB at 10 Mb/s is 0.32 s; anything under the limit with the link's shape is fine here.
        assert!(
            o.transfer_s > 0.32 && o.transfer_s < 30.0,
            "{protocol}: {o:?}"
        );
    }
}

fn ours_of(pid: u32) -> Vec<String> {
    netns::list_ours()
        .into_iter()
        .filter(|n| n.starts_with(&format!("dtnk{pid}-")) || n.starts_with(&format!("dtnk{pid}_")))
        .collect()
}

#[test]
fn namespaces_are_gone_after_a_run_and_after_a_killed_run() {
    if !root_or_skip() {
        return;
    }
    // A normal run: the command ends, the emulator deletes its namespaces and exits with the command's status.
    let out = Command::new(dtnkit())
        .args([
            "emu",
            "--ip",
            "--",
            "sh",
            "-c",
            "test -e /run/netns/$DTNKIT_NS_A && exit 3",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let ns = stderr
        .lines()
        .find_map(|l| {
            l.split_whitespace()
                .skip_while(|w| *w != "namespace")
                .nth(1)
        })
        .unwrap()
        .to_string();
    assert!(
        !Path::new("/run/netns").join(&ns).exists(),
        "{ns} left behind"
    );

    // A killed run leaves its namespaces and a process inside one; the next run removes both.
    let dir = work("killed");
    std::fs::create_dir_all(&dir).unwrap();
    let err = std::fs::File::create(dir.join("err")).unwrap();
    let mut child = Command::new(dtnkit())
        .args(["emu", "--ip", "--in", "b", "--", "sleep", "120"])
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(dir.join("err"))
        .unwrap_or_default()
        .contains("ipemu: ready")
    {
        assert!(Instant::now() < deadline, "the emulator did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = ours_of(pid);
    assert_eq!(left.len(), 2, "{left:?}");
    let b_path = netns::netns_path(&format!("dtnk{pid}-b"));
    let deadline = Instant::now() + Duration::from_secs(5);
    while netns::pids_in(&b_path).is_empty() {
        assert!(Instant::now() < deadline, "the command did not start in b");
        std::thread::sleep(Duration::from_millis(20));
    }
    let sleeper = netns::pids_in(&b_path);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(ours_of(pid).len(), 2, "a SIGKILL leaves the namespaces");
    let out = Command::new(dtnkit())
        .args(["emu", "--cleanup"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(ours_of(pid).is_empty(), "the stale namespaces were removed");
    for p in sleeper {
        assert!(
            !Path::new(&format!("/proc/{p}")).exists()
                || std::fs::read_to_string(format!("/proc/{p}/stat"))
                    .is_ok_and(|s| s.contains(") Z ")),
            "the process left in the namespace was ended"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_runs_an_ip_mode_grid() {
    if !root_or_skip() {
        return;
    }
    let dir = work("bench");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("scn.toml"),
        r#"
[transfer]
protocol = "tcp"
file_bytes = 300000
time_limit_s = 30
[link]
forward = { rate_bps = 20e6, delay_ms = 2 }
return = { rate_bps = 20e6, delay_ms = 2 }
"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("exp.toml"),
        r#"
name = "ip_ci"
scenario = "scn.toml"
mode = "ip"
[[axis]]
name = "cc"
path = "tcp.congestion"
values = ["reno", "bbr"]
[[axis]]
name = "blocks"
path = "transfer.blocks"
values = [1, 3]
"#,
    )
    .unwrap();
    let out = Command::new(dtnkit())
        .args(["bench", "exp.toml", "--quiet", "--out", "out"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(dir.join("out/runs.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 4);
    for r in &rows {
        assert_eq!(r[col("completed")], "1.000000", "{r:?}");
        assert_eq!(r[col("unmodelled_drops")], "0.000000", "{r:?}");
        let g: f64 = r[col("goodput_mbps")].parse().unwrap();
        assert!(
            g > 0.5 && g < 20.0,
            "goodput {g} within the 20 Mb/s link: {r:?}"
        );
    }
    // A congestion control the kernel lacks is refused before anything runs, naming the field.
    let bad = std::fs::read_to_string(dir.join("exp.toml"))
        .unwrap()
        .replace("\"bbr\"", "\"hybla-not-here\"");
    std::fs::write(dir.join("bad.toml"), bad).unwrap();
    let out = Command::new(dtnkit())
        .args(["bench", "bad.toml", "--quiet", "--out", "out2"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("tcp.congestion"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_root_one_clear_error() {
    if !root_or_skip() {
        return;
    }
    // Drop to nobody with util-linux's setpriv (part of every Debian system).
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(dtnkit())
        .args(["emu", "--ip", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("the IP mode needs root"), "{err}");
}
