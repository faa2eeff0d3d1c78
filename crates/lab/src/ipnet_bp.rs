//! The BP half of [`crate::ipnet`]: two real `dtnkit node`s in the end namespaces, over LTP or TCPCL, and the file
//! sent as bundles from the first node's application socket to an endpoint of the second.

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use client::bytes::Bytes;
use client::{Client, SendArgs};
use toml::{Table, Value};

use crate::emulated::{io, wait_node};
use crate::ipnet::{IpOutcome, IpScenario, Protocol, LTP_PORT, TCPCL_PORT};
use crate::procs::Child;
use crate::LabError;

/// Bundles submitted and not yet answered by the sending node.
const WINDOW: usize = 64;
/// Node numbers of the sender and the receiver.
const SENDER: u64 = 1;
const RECEIVER: u64 = 2;

fn int(v: impl TryInto<i64>) -> Value {
    Value::Integer(v.try_into().unwrap_or(i64::MAX))
}

/// A node configuration (docs/node.md) for one end.
fn node_toml(s: &IpScenario, me: u64, my_addr: Ipv4Addr, peer: u64, peer_addr: Ipv4Addr) -> String {
    let sender = me == SENDER;
    let mut t = Table::new();
    t.insert("node".into(), int(me));
    t.insert(
        "bind".into(),
        Value::String(format!("{my_addr}:{LTP_PORT}")),
    );
    let mut store = Table::new();
    store.insert("path".into(), Value::String("store".into()));
    store.insert("durable".into(), Value::Boolean(false));
    t.insert("store".into(), Value::Table(store));
    // The direction this node transmits on: the forward one for the sender.
    let (out, back) = if sender {
        (&s.link.forward, &s.link.ret)
    } else {
        (&s.link.ret, &s.link.forward)
    };
    match s.transfer.protocol {
        Protocol::BpLtp => {
            let b = &s.bp;
            let owlt = (out.delay_ms + back.delay_ms) / 2.0;
            let mut span = Table::new();
            span.insert("peer".into(), int(peer));
            span.insert(
                "address".into(),
                Value::String(format!("{peer_addr}:{LTP_PORT}")),
            );
            span.insert("max_segment_size".into(), int(b.segment_bytes));
            span.insert("max_sessions".into(), int(b.max_sessions));
            span.insert(
                "aggregation_bytes".into(),
                int(b.bundle_bytes * b.bundles_per_block),
            );
            span.insert("aggregation_ms".into(), Value::Float(b.aggregation_ms));
            span.insert(
                "rto_ms".into(),
                Value::Float(b.rto_ms.unwrap_or(2.0 * owlt + 100.0)),
            );
            span.insert("owlt_ms".into(), Value::Float(owlt));
            // Paced at the rate of the direction the node sends on, as ION's contact rate would.
            let rate = out.rate_bps.unwrap_or(0.0).max(0.0) as u64;
            span.insert("rate_bps".into(), int(rate));
            span.insert("adaptive_rate".into(), Value::Boolean(false));
            t.insert("span".into(), Value::Array(vec![Value::Table(span)]));
        }
        _ => {
            let mut tcpcl = Table::new();
            if !sender {
                tcpcl.insert(
                    "listen".into(),
                    Value::String(format!("{my_addr}:{TCPCL_PORT}")),
                );
            }
            t.insert("tcpcl".into(), Value::Table(tcpcl));
            let mut p = Table::new();
            p.insert("peer".into(), int(peer));
            if sender {
                p.insert(
                    "address".into(),
                    Value::String(format!("{peer_addr}:{TCPCL_PORT}")),
                );
            }
            t.insert("tcp_peer".into(), Value::Array(vec![Value::Table(p)]));
        }
    }
    toml::to_string(&t).unwrap_or_default()
}

/// Runs a BP transfer between the first (`a`) and last (`b`) node of a running emulator.
pub(crate) fn run_bp(
    s: &IpScenario,
    dtnkit: &Path,
    work: &Path,
    a: (&Path, Option<Ipv4Addr>),
    b: (&Path, Option<Ipv4Addr>),
    limit: Duration,
    startup: Duration,
) -> Result<IpOutcome, LabError> {
    let (Some(a_addr), Some(b_addr)) = (a.1, b.1) else {
        return Err(LabError::Scenario("the end nodes have no addresses".into()));
    };
    let mut children = Vec::new();
    let mut sockets = Vec::new();
    for (me, addr, peer, peer_addr, ns) in [
        (SENDER, a_addr, RECEIVER, b_addr, a.0),
        (RECEIVER, b_addr, SENDER, a_addr, b.0),
    ] {
        let dir = work.join(format!("node{me}"));
        std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        let cfg = dir.join("node.toml");
        std::fs::write(&cfg, node_toml(s, me, addr, peer, peer_addr))
            .map_err(io(format!("writing {}", cfg.display())))?;
        let cfg_s = cfg.to_string_lossy().into_owned();
        children.push(Child::spawn_in(
            "node",
            dtnkit,
            &["node", "--config", &cfg_s],
            &dir,
            Some(ns),
        )?);
        sockets.push(dir.join("store").join("app.sock"));
    }
    for (c, sock) in children.iter_mut().zip(&sockets) {
        wait_node(c, sock, startup)?;
    }
    let size = s.bp.bundle_bytes;
    let count = s.transfer.file_bytes.div_ceil(size as u64);
    let dst = format!("ipn:{RECEIVER}.1");
    let mut rx = Client::connect(&sockets[1]).map_err(|e| LabError::Startup {
        name: "receiver".into(),
        reason: e.to_string(),
    })?;
    rx.register(&dst).map_err(|e| LabError::Startup {
        name: "receiver".into(),
        reason: e.to_string(),
    })?;
    let start = Instant::now();
    let deadline = start + limit;
    let payload = Bytes::from(vec![0x5au8; size]);
    let sender_sock = sockets[0].clone();
    let file = s.transfer.file_bytes;
    // The sender: all bundles, at most WINDOW unanswered.
    let sender = std::thread::spawn(move || -> Result<(), String> {
        let mut tx = Client::connect(&sender_sock).map_err(|e| e.to_string())?;
        let mut sent = 0u64;
        while sent < count {
            if Instant::now() >= deadline {
                return Ok(());
            }
            let len = (file - sent * size as u64).min(size as u64) as usize;
            tx.submit(SendArgs {
                source: format!("ipn:{SENDER}.1"),
                destination: format!("ipn:{RECEIVER}.1"),
                lifetime_ms: 3_600_000,
                report_flags: 0,
                priority: 1,
                payload: payload.slice(..len),
            })
            .map_err(|e| e.to_string())?;
            sent += 1;
            if tx.pending_sends() >= WINDOW {
                tx.next_send_result().map_err(|e| e.to_string())?;
            }
        }
        while tx.pending_sends() > 0 {
            tx.next_send_result().map_err(|e| e.to_string())?;
        }
        Ok(())
    });
    let mut got = 0u64;
    let mut bytes = 0u64;
    let mut last = start;
    while got < count {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        match rx.recv(Some((deadline - now).min(Duration::from_millis(200)))) {
            Ok(Some(r)) => {
                last = Instant::now();
                got += 1;
                bytes += r.payload.len() as u64;
                let _ = rx.ack(&r);
                // The next large delivery is read into this one's memory (`Client::recycle`).
                rx.recycle(r);
            }
            Ok(None) => {}
            Err(e) => {
                return Err(LabError::Startup {
                    name: "receiver".into(),
                    reason: e.to_string(),
                })
            }
        }
    }
    let completed = got == count && bytes == file;
    let send_result = sender
        .join()
        .unwrap_or_else(|_| Err("sender panicked".into()));
    for mut c in children {
        c.stop(Duration::from_secs(5));
    }
    if let Err(e) = send_result {
        return Err(LabError::Startup {
            name: "sender".into(),
            reason: e,
        });
    }
    let transfer_s = if completed {
        (last - start).as_secs_f64()
    } else {
        limit.as_secs_f64()
    };
    Ok(IpOutcome {
        completed,
        delivered_bytes: bytes,
        transfer_s,
        goodput_mbps: bytes as f64 * 8.0 / transfer_s.max(1e-9) / 1e6,
        ..IpOutcome::default()
    })
}
