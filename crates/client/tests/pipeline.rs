//! The pipelined send API against a scripted fake node on a real Unix socket: answers in
//! submission order, a refusal in the middle that does not disturb the other sends, deliveries
//! interleaved with answers, large frames in both directions, and the synchronous calls mixed
//! with pending sends.

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use client::proto::{self, BundleId, ErrorKind, Request, Response, SendArgs, StreamArgs};
use client::{Client, ClientError};

/// A unique socket path in the temp directory.
fn socket_path() -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!(
        "dtnkit-client-pipeline-{}-{n}.sock",
        std::process::id()
    ))
}

fn id(seq: u64) -> BundleId {
    BundleId {
        source: "ipn:1.0".into(),
        creation_ms: 1000,
        sequence: seq,
        fragment: None,
    }
}

fn deliver(token: u64, payload: Bytes) -> Response {
    Response::Deliver {
        token,
        endpoint: "ipn:1.9".into(),
        id: id(1_000_000 + token),
        payload,
    }
}

fn args(payload: Bytes) -> SendArgs {
    SendArgs {
        source: String::new(),
        destination: "ipn:2.1".into(),
        lifetime_ms: 0,
        report_flags: 0,
        priority: 1,
        payload,
    }
}

/// A fake node: accepts one connection and answers each request with what `script` returns
/// for (request index, request), written header and payload apart like the real node does;
/// `None` closes the connection. Returns every request it read.
fn fake_node<F>(script: F) -> (PathBuf, JoinHandle<Vec<Request>>)
where
    F: FnMut(usize, &Request) -> Option<Vec<Response>> + Send + 'static,
{
    let path = socket_path();
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).expect("bind");
    let p = path.clone();
    let h = std::thread::spawn(move || {
        let mut script = script;
        let (mut s, _) = listener.accept().expect("accept");
        s.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        let _ = std::fs::remove_file(&p);
        let mut got = Vec::new();
        let mut head = BytesMut::new();
        while let Ok(Some(body)) = proto::read_frame(&mut s, proto::MAX_FRAME) {
            let req = Request::decode(&body).expect("decodable request");
            let Some(answers) = script(got.len(), &req) else {
                got.push(req);
                break;
            };
            got.push(req);
            for r in answers {
                let tail = r.encode_head(&mut head);
                if proto::write_frame(&mut s, &head, tail).is_err() {
                    // The client went away (a test may stop reading before the last answer).
                    return got;
                }
            }
        }
        let _ = s.flush();
        got
    });
    (path, h)
}

fn connect(path: &PathBuf) -> Client {
    Client::connect(path).expect("connect")
}

#[test]
fn answers_come_back_in_order_with_a_refusal_and_deliveries_interleaved() {
    let (path, node) = fake_node(|i, req| {
        let mut out = Vec::new();
        if i % 10 == 3 {
            out.push(deliver(i as u64, Bytes::from(format!("d{i}"))));
        }
        match req {
            Request::Send(_) if i == 37 => out.push(Response::Error {
                kind: ErrorKind::StoreFull,
                message: "full".into(),
            }),
            Request::Send(_) => out.push(Response::SendOk { id: id(i as u64) }),
            _ => {}
        }
        Some(out)
    });
    let mut c = connect(&path);
    for i in 0..100u64 {
        c.submit(args(Bytes::from(format!("p{i}"))))
            .expect("submit");
    }
    assert_eq!(c.pending_sends(), 100);
    for i in 0..100u64 {
        let r = c.next_send_result();
        if i == 37 {
            match r {
                Err(
                    e @ ClientError::Refused {
                        kind: ErrorKind::StoreFull,
                        ..
                    },
                ) => assert!(e.is_refusal()),
                other => panic!("send 37: {other:?}"),
            }
        } else {
            assert_eq!(r.expect("sent").sequence, i);
        }
        assert_eq!(c.pending_sends() as u64, 99 - i);
    }
    assert!(matches!(
        c.next_send_result(),
        Err(ClientError::NoPendingSend)
    ));
    let mut delivered = Vec::new();
    while let Some(r) = c.recv(Some(Duration::from_millis(50))).expect("recv") {
        delivered.push(String::from_utf8(r.payload.to_vec()).expect("utf8"));
    }
    let want: Vec<String> = (0..100)
        .filter(|i| i % 10 == 3)
        .map(|i| format!("d{i}"))
        .collect();
    assert_eq!(delivered, want);
    drop(c);
    let reqs = node.join().expect("node");
    assert_eq!(reqs.len(), 100);
    for (i, r) in reqs.iter().enumerate() {
        match r {
            Request::Send(a) => assert_eq!(a.payload, Bytes::from(format!("p{i}"))),
            other => panic!("request {i}: {other:?}"),
        }
    }
}

#[test]
fn send_register_and_status_settle_pending_sends_first() {
    let (path, node) = fake_node(|i, req| {
        Some(match req {
            Request::Send(_) => vec![Response::SendOk { id: id(i as u64) }],
            Request::Register { .. } => vec![Response::Ok],
            Request::Status => vec![Response::Status {
                json: "{\"n\":1}".into(),
            }],
            Request::Ack { .. }
            | Request::SendBegin(_)
            | Request::SendChunk { .. }
            | Request::SendFd(_)
            | Request::Counters { .. } => Vec::new(),
        })
    });
    let mut c = connect(&path);
    for _ in 0..3 {
        c.submit(args(Bytes::from_static(b"a"))).expect("submit");
    }
    // `send` returns its own outcome; the three before it stay queued.
    assert_eq!(
        c.send(args(Bytes::from_static(b"b")))
            .expect("send")
            .sequence,
        3
    );
    assert_eq!(c.pending_sends(), 3);
    c.submit(args(Bytes::from_static(b"c"))).expect("submit");
    c.register("ipn:1.9").expect("register");
    c.submit(args(Bytes::from_static(b"d"))).expect("submit");
    assert_eq!(c.status().expect("status"), "{\"n\":1}");
    let seqs: Vec<u64> = (0..5)
        .map(|_| c.next_send_result().expect("ok").sequence)
        .collect();
    assert_eq!(seqs, [0, 1, 2, 4, 6]);
    assert_eq!(c.pending_sends(), 0);
    drop(c);
    assert_eq!(node.join().expect("node").len(), 8);
}

#[test]
fn recv_keeps_send_answers_for_next_send_result() {
    let (path, node) = fake_node(|i, req| {
        Some(match req {
            Request::Send(_) => vec![
                Response::SendOk { id: id(i as u64) },
                deliver(i as u64, Bytes::from_static(b"x")),
            ],
            _ => Vec::new(),
        })
    });
    let mut c = connect(&path);
    c.submit(args(Bytes::from_static(b"a"))).expect("submit");
    c.submit(args(Bytes::from_static(b"b"))).expect("submit");
    let r = c
        .recv(Some(Duration::from_secs(10)))
        .expect("recv")
        .expect("a delivery");
    assert_eq!(r.token, 0);
    assert_eq!(c.next_send_result().expect("ok").sequence, 0);
    assert_eq!(c.next_send_result().expect("ok").sequence, 1);
    drop(c);
    node.join().expect("node");
}

#[test]
fn large_frames_cross_intact_in_both_directions() {
    // Payloads of several sizes around and far above the client's direct-read threshold; the
    // fake node echoes them all as deliveries just before answering a status request (so the
    // client reads them while it waits, never while it writes).
    let sizes = [1usize, 65_535, 65_536, 300_001, 2_000_000];
    let payload = |n: usize, salt: u8| -> Bytes {
        Bytes::from(
            (0..n)
                .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt))
                .collect::<Vec<u8>>(),
        )
    };
    let mut seen: Vec<Bytes> = Vec::new();
    let (path, node) = fake_node(move |i, req| {
        Some(match req {
            Request::Send(a) => {
                seen.push(a.payload.clone());
                vec![Response::SendOk { id: id(i as u64) }]
            }
            Request::Status => {
                let mut out: Vec<Response> = seen
                    .drain(..)
                    .enumerate()
                    .map(|(k, p)| deliver(k as u64, p))
                    .collect();
                out.push(Response::Status { json: "{}".into() });
                out
            }
            _ => Vec::new(),
        })
    });
    let mut c = connect(&path);
    for (k, &n) in sizes.iter().enumerate() {
        c.submit(args(payload(n, k as u8))).expect("submit");
    }
    assert_eq!(c.status().expect("status"), "{}");
    for (k, &n) in sizes.iter().enumerate() {
        assert_eq!(c.next_send_result().expect("ok").sequence, k as u64);
        let r = c
            .recv(Some(Duration::from_secs(10)))
            .expect("recv")
            .expect("delivery");
        assert_eq!(r.payload.len(), n);
        assert!(r.payload == payload(n, k as u8), "payload {k} differs");
    }
    drop(c);
    node.join().expect("node");
}

/// A large delivery handed back with `recycle` is the buffer the next large delivery that fits
/// is read into (no fresh mapping to fault in), and the data is the new delivery's; a larger
/// one gets a buffer of its own, and a payload still shared is not taken back.
#[test]
fn a_recycled_delivery_buffer_takes_the_next_large_delivery() {
    let payload = |n: usize, salt: u8| -> Bytes {
        Bytes::from(
            (0..n)
                .map(|i| (i as u8).wrapping_mul(7).wrapping_add(salt))
                .collect::<Vec<u8>>(),
        )
    };
    let sizes = [2_000_000usize, 1_500_000, 3_000_000, 1_000_000, 1_000_000];
    let (path, node) = fake_node(move |i, req| {
        Some(match req {
            // One delivery before each status answer, read while the client waits for it.
            Request::Status => vec![
                deliver(i as u64, payload(sizes[i], i as u8)),
                Response::Status { json: "{}".into() },
            ],
            _ => Vec::new(),
        })
    });
    let mut c = connect(&path);
    let next = |c: &mut Client, k: usize| {
        assert_eq!(c.status().expect("status"), "{}");
        let r = c
            .recv(Some(Duration::from_secs(10)))
            .expect("recv")
            .expect("delivery");
        assert!(
            r.payload == payload(sizes[k], k as u8),
            "delivery {k} differs"
        );
        r
    };
    let first = next(&mut c, 0);
    let at = first.payload.as_ptr();
    c.recycle(first);
    let second = next(&mut c, 1);
    assert_eq!(second.payload.as_ptr(), at, "read into the recycled buffer");
    c.recycle(second);
    // Larger than the spare: a buffer of its own, which becomes the spare.
    let third = next(&mut c, 2);
    assert_ne!(third.payload.as_ptr(), at);
    let at = third.payload.as_ptr();
    c.recycle(third);
    // Still shared: not taken back, and the spare stays as it was.
    let fourth = next(&mut c, 3);
    assert_eq!(fourth.payload.as_ptr(), at);
    let kept = fourth.payload.clone();
    c.recycle(fourth);
    let fifth = next(&mut c, 4);
    assert_ne!(fifth.payload.as_ptr(), at, "the shared buffer was reused");
    assert!(
        kept == payload(sizes[3], 3),
        "the kept payload was overwritten"
    );
    drop(c);
    node.join().expect("node");
}

#[test]
fn an_oversized_send_is_refused_before_anything_is_written() {
    let (path, node) = fake_node(|i, _| Some(vec![Response::SendOk { id: id(i as u64) }]));
    let mut c = connect(&path);
    let big = Bytes::from(vec![0u8; proto::MAX_FRAME]);
    match c.submit(args(big)) {
        Err(e @ ClientError::TooLarge(..)) => assert!(e.is_refusal()),
        other => panic!("{other:?}"),
    }
    assert_eq!(c.pending_sends(), 0);
    assert_eq!(
        c.send(args(Bytes::from_static(b"ok")))
            .expect("ok")
            .sequence,
        0
    );
    drop(c);
    assert_eq!(node.join().expect("node").len(), 1);
}

#[test]
fn a_closed_connection_fails_pending_sends() {
    // The node answers the first send, then closes the connection on the second one.
    let (path, node) = fake_node(|i, _| (i == 0).then(|| vec![Response::SendOk { id: id(0) }]));
    let mut c = connect(&path);
    c.submit(args(Bytes::from_static(b"a"))).expect("submit");
    assert_eq!(c.next_send_result().expect("ok").sequence, 0);
    c.submit(args(Bytes::from_static(b"b"))).expect("submit");
    let e = c.next_send_result();
    assert!(e.as_ref().is_err_and(|e| !e.is_refusal()), "{e:?}");
    assert_eq!(c.pending_sends(), 1, "its outcome is unknown");
    assert_eq!(node.join().expect("node").len(), 2);
}

fn stream_args(total_len: u64) -> StreamArgs {
    StreamArgs {
        source: String::new(),
        destination: "ipn:2.1".into(),
        lifetime_ms: 0,
        report_flags: 0,
        priority: 1,
        total_len,
    }
}

#[test]
fn send_stream_writes_bounded_chunks_after_the_pending_sends_and_returns_the_answer() {
    let total = 3 * proto::MAX_CHUNK as u64 + 12_345;
    let mut got = 0u64;
    let (path, node) = fake_node(move |i, req| {
        Some(match req {
            Request::Send(_) => vec![Response::SendOk { id: id(i as u64) }],
            Request::SendChunk { data } => {
                assert!(data.len() <= proto::MAX_CHUNK);
                got += data.len() as u64;
                if got == total {
                    vec![Response::SendOk { id: id(77) }]
                } else {
                    Vec::new()
                }
            }
            _ => Vec::new(),
        })
    });
    let mut c = connect(&path);
    c.submit(args(Bytes::from_static(b"before")))
        .expect("submit");
    let data: Vec<u8> = (0..total).map(|i| (i % 251) as u8).collect();
    let mut seen = Vec::new();
    let id = c
        .send_stream(stream_args(total), &mut &data[..], &mut |n| seen.push(n))
        .expect("stream stored");
    assert_eq!(id.sequence, 77);
    assert_eq!(seen.last().copied(), Some(total));
    assert_eq!(seen.len(), 4);
    // The send submitted before the stream is still reported.
    assert_eq!(c.next_send_result().expect("ok").sequence, 0);
    drop(c);
    let reqs = node.join().expect("node");
    assert!(matches!(&reqs[1], Request::SendBegin(a) if a.total_len == total));
    let sum: usize = reqs[2..]
        .iter()
        .map(|r| match r {
            Request::SendChunk { data } => data.len(),
            other => panic!("unexpected {other:?}"),
        })
        .sum();
    assert_eq!(sum as u64, total);
}

#[test]
fn a_stream_refused_at_once_stops_sending_and_short_data_is_an_error() {
    let (path, node) = fake_node(|_, req| {
        Some(match req {
            Request::SendBegin(a) if a.total_len > 1 << 30 => vec![Response::Error {
                kind: ErrorKind::StoreFull,
                message: "full".into(),
            }],
            _ => Vec::new(),
        })
    });
    let mut c = connect(&path);
    // 8 GiB of zeros: the refusal must stop the writing long before the end.
    let mut zeros = std::io::repeat(0).take_bytes(8 << 30);
    let e = c
        .send_stream(stream_args(8 << 30), &mut zeros, &mut |_| {})
        .expect_err("refused");
    assert!(
        matches!(
            &e,
            ClientError::Refused {
                kind: ErrorKind::StoreFull,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(c.pending_sends(), 0);
    // Data shorter than declared fails locally.
    let e = c
        .send_stream(stream_args(100), &mut &[1u8; 40][..], &mut |_| {})
        .expect_err("short");
    assert!(matches!(&e, ClientError::Source(_)), "{e:?}");
    drop(c);
    let reqs = node.join().expect("node");
    let chunks = reqs
        .iter()
        .filter(|r| matches!(r, Request::SendChunk { .. }))
        .count();
    assert!(chunks < 1000, "{chunks} chunks written after the refusal");
}

/// `Read::take` for an owned reader, spelled out so the test reads plainly.
trait TakeBytes: std::io::Read + Sized {
    fn take_bytes(self, n: u64) -> std::io::Take<Self> {
        std::io::Read::take(self, n)
    }
}
impl<R: std::io::Read> TakeBytes for R {}

#[test]
fn an_answer_that_comes_right_after_the_last_chunk_is_the_streams_answer() {
    // The node commits and answers as soon as the last chunk is in; the client, slow to look
    // (its progress callback sleeps), must take that answer as the stream's, not as one that
    // came before the stream's end.
    let total = 2 * proto::MAX_CHUNK as u64 + 10;
    let mut got = 0u64;
    let (path, node) = fake_node(move |_, req| {
        Some(match req {
            Request::SendChunk { data } => {
                got += data.len() as u64;
                if got == total {
                    vec![Response::SendOk { id: id(5) }]
                } else {
                    Vec::new()
                }
            }
            _ => Vec::new(),
        })
    });
    let mut c = connect(&path);
    let data = vec![7u8; total as usize];
    let id = c
        .send_stream(stream_args(total), &mut &data[..], &mut |n| {
            if n == total {
                std::thread::sleep(Duration::from_millis(300));
            }
        })
        .expect("the answer after the last chunk is the stream's");
    assert_eq!(id.sequence, 5);
    assert_eq!(c.pending_sends(), 0);
    drop(c);
    node.join().expect("node");
}
