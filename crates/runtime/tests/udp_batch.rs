//! Batched UDP: recvmmsg/sendmmsg and GSO runs deliver every datagram intact, with kernel timestamps.

use std::net::UdpSocket;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use runtime::udp::{self, RecvBatch, RecvMeta, SendBatch};

fn pair() -> (UdpSocket, UdpSocket) {
    let (tx, _) = udp::bind("127.0.0.1:0".parse().expect("addr"), 8 << 20).expect("bind tx");
    let (rx, _) = udp::bind("127.0.0.1:0".parse().expect("addr"), 8 << 20).expect("bind rx");
    (tx, rx)
}

/// Datagram `i` of a test: its index in the first two bytes, then a pattern; lengths vary per `len_of`.
fn datagram(i: usize, len: usize) -> Vec<u8> {
    let mut d: Vec<u8> = (0..len).map(|k| (k * 7 + i) as u8).collect();
    d[..2].copy_from_slice(&(i as u16).to_be_bytes());
    d
}

fn roundtrip(gso: bool, lens: &[usize]) {
    let (tx, rx) = pair();
    udp::enable_rx_timestamps(&rx).expect("timestamps");
    let dgrams: Vec<Vec<u8>> = lens
        .iter()
        .enumerate()
        .map(|(i, &l)| datagram(i, l))
        .collect();
    let mut send = SendBatch::new(64);
    send.set_gso(gso);
    let before = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock");
    let out = send
        .send(&tx, &dgrams, rx.local_addr().expect("addr"))
        .expect("send");
    assert_eq!((out.sent, out.failed), (dgrams.len(), 0));
    // Linux >= 4.18 accepts UDP_SEGMENT: the GSO path really ran instead of silently falling back.
    assert_eq!(send.gso(), gso);
    let mut recv = RecvBatch::new(64);
    let mut bufs: Vec<Vec<u8>> = (0..64).map(|_| vec![0u8; 2048]).collect();
    let mut meta = [RecvMeta::default(); 64];
    let mut got = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while got < dgrams.len() && std::time::Instant::now() < deadline {
        if !udp::wait_readable(&rx, Duration::from_millis(100)).expect("poll") {
            continue;
        }
        let n = recv.recv(&rx, &mut bufs, &mut meta).expect("recv");
        for k in 0..n {
            let m = meta[k];
            let data = &bufs[k][..m.len];
            assert_eq!(data, dgrams[got].as_slice(), "datagram {got} (gso {gso})");
            assert_eq!(m.src, Some(tx.local_addr().expect("addr")));
            let ts = m.timestamp.expect("kernel timestamp");
            assert!(
                ts + Duration::from_millis(50) >= before,
                "timestamp {ts:?} before send {before:?}"
            );
            got += 1;
        }
    }
    assert_eq!(got, dgrams.len());
}

#[test]
fn sendmmsg_and_recvmmsg_keep_order_and_content() {
    let lens: Vec<usize> = (0..150).map(|i| 16 + (i * 37) % 1400).collect();
    roundtrip(false, &lens);
}

#[test]
fn gso_runs_are_split_back_into_datagrams() {
    // Runs of equal sizes, a short tail ending a run, then a larger size starting a new run.
    let mut lens = vec![1024; 100];
    lens.push(300);
    lens.extend([1200; 20]);
    lens.push(5);
    roundtrip(true, &lens);
}
