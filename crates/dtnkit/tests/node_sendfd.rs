//! `SendFd` (issue 30 item 3): the application passes a file descriptor (memfd or regular file)
//! over the application socket and the node reads the data unit itself. Real node processes:
//! the bytes arrive whole, bad descriptors are refused naming what is wrong with nothing stored,
//! `dtnkit send --file` uses it, and a SendFd that was answered survives a kill -9.

mod node_support;

use std::io::{Seek, Write};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use client::proto::{self, ErrorKind, Request, Response, StreamArgs};
use node_support::*;
use sha2::Digest;

const LIMIT: Duration = Duration::from_secs(60);

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

fn args(dst: &str, total_len: u64) -> StreamArgs {
    StreamArgs {
        source: String::new(),
        destination: dst.into(),
        lifetime_ms: 0,
        report_flags: 0,
        priority: 1,
        total_len,
    }
}

/// A memfd holding `bytes`.
fn memfd(bytes: &[u8]) -> std::fs::File {
    // SAFETY: a valid NUL-terminated name; the returned descriptor is checked and owned here.
    let fd = unsafe { libc::memfd_create(c"sendfd-test".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    // SAFETY: fd was just created and nothing else owns it.
    let mut f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    f.write_all(bytes).unwrap();
    f.rewind().unwrap();
    f
}

fn sha256(b: &[u8]) -> String {
    sha2::Sha256::digest(b)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn read_resp(s: &mut UnixStream) -> Response {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let body = proto::read_frame(s, proto::MAX_FRAME)
        .unwrap()
        .expect("an answer");
    Response::decode(&body).unwrap()
}

fn refusal(r: Response) -> (ErrorKind, String) {
    match r {
        Response::Error { kind, message } => (kind, message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_memfd_passed_by_descriptor_is_stored_and_delivered_whole() {
    let dir = TempDir::new("sendfd-memfd");
    let n = NodeProc::start(&dir.0, &NodeSpec::new(1, free_port()));
    // 30 MB: several staging reads of the node, one bundle (it fits max_bundle_size).
    let d = data(30_000_000, 11);
    let recv = Proc::spawn(&[
        "recv",
        "--socket",
        s(&n.socket),
        "--endpoint",
        "ipn:1.5",
        "--count",
        "2",
        "--timeout",
        "30",
        "--hash",
    ]);
    let mut c = client::Client::connect(&n.socket).unwrap();
    let f = memfd(&d);
    let id = c
        .send_fd(args("ipn:1.5", d.len() as u64), f.as_fd())
        .expect("stored");
    assert!(id.fragment.is_none(), "{id}");
    // An empty data unit too.
    let e = memfd(b"");
    c.send_fd(args("ipn:1.5", 0), e.as_fd())
        .expect("empty stored");
    let got = recv.wait(LIMIT);
    let text = String::from_utf8_lossy(&got.stdout);
    assert!(
        text.contains(&format!("len={} sha256={}", d.len(), sha256(&d))),
        "{text} {}",
        String::from_utf8_lossy(&got.stderr)
    );
    assert!(
        text.contains(&format!("len=0 sha256={}", sha256(b""))),
        "{text}"
    );
}

#[test]
fn bad_descriptors_are_refused_naming_the_field_and_nothing_is_stored() {
    let dir = TempDir::new("sendfd-bad");
    let n = NodeProc::start(&dir.0, &NodeSpec::new(1, free_port()));
    let mut c = UnixStream::connect(&n.socket).unwrap();
    let frame = |len: u64| Request::SendFd(args("ipn:1.5", len)).encode();
    // No descriptor at all.
    c.write_all(&frame(10)).unwrap();
    let (kind, m) = refusal(read_resp(&mut c));
    assert_eq!(kind, ErrorKind::BadRequest);
    assert!(m.contains("no file descriptor"), "{m}");
    // A length that is not the file's.
    let f = memfd(&[1u8; 1000]);
    client::fdpass::send_frame_with_fd(&c, &frame(999), f.as_fd()).unwrap();
    let (kind, m) = refusal(read_resp(&mut c));
    assert_eq!(kind, ErrorKind::BadRequest);
    assert!(
        m.contains("total_len 999 does not match the file's size of 1000 bytes"),
        "{m}"
    );
    // A descriptor that cannot be read.
    let p = dir.0.join("wo.bin");
    std::fs::write(&p, [2u8; 100]).unwrap();
    let wo = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    client::fdpass::send_frame_with_fd(&c, &frame(100), wo.as_fd()).unwrap();
    let (_, m) = refusal(read_resp(&mut c));
    assert!(m.contains("not readable (opened write-only)"), "{m}");
    // A pipe is not a file.
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors pipe() returns.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both were just created and are owned here.
    let (r, _w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    client::fdpass::send_frame_with_fd(&c, &frame(0), r.as_fd()).unwrap();
    let (_, m) = refusal(read_resp(&mut c));
    assert!(m.contains("is a pipe, not a regular file or memfd"), "{m}");
    // A descriptor attached to another request is closed and the request served as usual.
    client::fdpass::send_frame_with_fd(&c, &Request::Status.encode(), f.as_fd()).unwrap();
    assert!(matches!(read_resp(&mut c), Response::Status { .. }));
    // Nor is one that came with an ignored chunk kept for a later SendFd without one.
    let stray = Request::SendChunk {
        data: bytes::Bytes::from_static(b"x"),
    };
    client::fdpass::send_frame_with_fd(&c, &stray.encode(), f.as_fd()).unwrap();
    c.write_all(&frame(1000)).unwrap();
    let (_, m) = refusal(read_resp(&mut c));
    assert!(m.contains("no file descriptor"), "{m}");
    // The connection still works and nothing was stored or created.
    let st = n.status();
    assert_eq!(
        (st.store.bundles, st.store.bytes, st.bundles.created),
        (0, 0, 0),
        "{st}"
    );
    // Then a good one is accepted on the same connection.
    client::fdpass::send_frame_with_fd(&c, &frame(1000), f.as_fd()).unwrap();
    assert!(matches!(read_resp(&mut c), Response::SendOk { .. }));
    assert_eq!(n.status().store.bundles, 1);
}

#[test]
fn send_file_passes_the_descriptor_and_an_answered_send_survives_kill_9() {
    let dir = TempDir::new("sendfd-cli");
    let mut n = NodeProc::start(&dir.0, &NodeSpec::new(1, free_port()));
    // 40 MB: streamed by `send` (from 16 MiB on), so passed as a descriptor.
    let d = data(40_000_000, 5);
    let f = dir.0.join("in.bin");
    std::fs::write(&f, &d).unwrap();
    let out = run(
        &[
            "send",
            "--socket",
            s(&n.socket),
            "--dst",
            "ipn:1.5",
            "--file",
            s(&f),
            "--quiet",
        ],
        LIMIT,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("(streamed)") && !err.contains("through the socket"),
        "{err}"
    );
    let stored = n.status().store.bundles;
    assert_eq!(stored, 1, "one bundle of 40 MB");
    // Acknowledged means stored: it survives a kill -9 and is delivered whole afterwards.
    n.kill();
    n.restart();
    assert_eq!(n.status().store.bundles, stored);
    let recv = Proc::spawn(&[
        "recv",
        "--socket",
        s(&n.socket),
        "--endpoint",
        "ipn:1.5",
        "--count",
        "1",
        "--timeout",
        "30",
        "--hash",
    ]);
    let got = recv.wait(LIMIT);
    let text = String::from_utf8_lossy(&got.stdout);
    assert!(
        text.contains(&format!("len={} sha256={}", d.len(), sha256(&d))),
        "{text} {}",
        String::from_utf8_lossy(&got.stderr)
    );
    // --no-fd sends the same file through the socket.
    let out = run(
        &[
            "send",
            "--socket",
            s(&n.socket),
            "--dst",
            "ipn:1.6",
            "--file",
            s(&f),
            "--quiet",
            "--no-fd",
        ],
        LIMIT,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
