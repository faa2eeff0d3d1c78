//! `SendFd`: an application data unit that the connection's reader reads from a file
//! descriptor the application passed (`SCM_RIGHTS`) instead of receiving its bytes through the
//! socket.
//!
//! Policy: the descriptor is checked before a byte is read — exactly one attached, readable, a
//! regular file or memfd, exactly `total_len` bytes long — and any failure is answered with an
//! `Error` naming the field and the value. The bytes then take the path of a streamed send
//! ([`Incoming`]): encoded around as they are read, staged in the store's files, committed in one
//! transaction by the agent thread, and only then answered `SendOk`. So durability is that of a
//! stream: nothing is acknowledged before it is stored, and a stream cut by a crash is removed at
//! the next start.
//!
//! Why this saves work: through the socket, each byte is copied by the application into the
//! socket, by the kernel into the node's read buffer and then into the staging file. Here the node
//! reads the file (`pread`, one copy into a buffer small enough to stay in cache while it is
//! checksummed and written) and the application does nothing at all. Mapping the file instead
//! would save that copy but let a client that truncates its file kill the node with `SIGBUS`.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::mpsc::SyncSender;

use client::proto::{ErrorKind, StreamArgs};

use super::stream::Incoming;
use super::{commit_ready, end_stream, finish_stream, open_stream, refusal, write_failed};
use crate::messages::AgentInput;

/// Bytes read from the descriptor at a time: small enough that the checksum pass and the write
/// to the staging file find them in cache, large enough that the calls do not matter.
const READ_BYTES: usize = 256 << 10;

/// Handles a `SendFd` request with the descriptors that came with its frame. `Err` when the
/// agent thread is gone.
pub(super) fn send_from_fd(
    tx: &SyncSender<AgentInput>,
    conn: u64,
    args: StreamArgs,
    fds: Vec<OwnedFd>,
    truncated: bool,
) -> Result<(), ()> {
    let total = args.total_len;
    let checked = check(total, fds, truncated);
    // The stream is opened whatever the check said, so that the answer (the agent's refusal of
    // the parameters, or this check's) is queued in request order by the agent thread.
    let Some(grant) = open_stream(tx, conn, args)? else {
        return Ok(());
    };
    let file = match checked {
        Ok(f) => f,
        Err(message) => {
            let answer = refusal(ErrorKind::BadRequest, message);
            end_stream(tx, conn, grant.stream, Err(Some(answer)));
            return Ok(());
        }
    };
    let stream = grant.stream;
    let mut s = match Incoming::new(grant) {
        Ok(s) => s,
        Err(e) => {
            end_stream(tx, conn, stream, Err(Some(write_failed(&e))));
            return Ok(());
        }
    };
    let mut buf = vec![0u8; READ_BYTES.min(usize::try_from(total).unwrap_or(usize::MAX))];
    while !s.is_complete() {
        let off = s.received();
        let want = usize::try_from(total - off)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let n = match file.read_at(&mut buf[..want], off) {
            Ok(0) => {
                let answer = refusal(
                    ErrorKind::BadRequest,
                    format!(
                        "SendFd: the file ended after {off} of total_len {total} bytes (it \
                         shrank while the node read it); nothing of it stays stored"
                    ),
                );
                end_stream(tx, conn, stream, Err(Some(answer)));
                return Ok(());
            }
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let answer = refusal(
                    ErrorKind::BadRequest,
                    format!(
                        "SendFd: reading the file descriptor failed at offset {off} of \
                         total_len {total}: {e}; nothing of it stays stored"
                    ),
                );
                end_stream(tx, conn, stream, Err(Some(answer)));
                return Ok(());
            }
        };
        if let Err(e) = s.push(&buf[..n]) {
            end_stream(tx, conn, stream, Err(Some(write_failed(&e))));
            return Ok(());
        }
        if !s.is_complete() {
            commit_ready(tx, &mut s);
        }
    }
    finish_stream(tx, conn, s);
    Ok(())
}

/// The descriptor to read, or the message refusing the request.
fn check(total: u64, fds: Vec<OwnedFd>, truncated: bool) -> Result<File, String> {
    if truncated || fds.len() > 1 {
        return Err(format!(
            "SendFd carries {}{} file descriptors; exactly one must be attached",
            fds.len(),
            if truncated { " or more" } else { "" }
        ));
    }
    let Some(fd) = fds.into_iter().next() else {
        return Err(
            "SendFd carries no file descriptor; exactly one (a regular file or memfd) \
                    must be attached to its frame as SCM_RIGHTS ancillary data"
                .into(),
        );
    };
    // SAFETY: F_GETFL on a descriptor this process owns only reads its flags.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(format!(
            "SendFd: the file descriptor's flags cannot be read: {}",
            std::io::Error::last_os_error()
        ));
    }
    if flags & libc::O_PATH != 0 || flags & libc::O_ACCMODE == libc::O_WRONLY {
        return Err(format!(
            "SendFd: the file descriptor is not readable (opened {}); open the file for reading",
            if flags & libc::O_PATH != 0 {
                "with O_PATH"
            } else {
                "write-only"
            }
        ));
    }
    let file = File::from(fd);
    let meta = file
        .metadata()
        .map_err(|e| format!("SendFd: fstat of the file descriptor failed: {e}"))?;
    if !meta.file_type().is_file() {
        return Err(format!(
            "SendFd: the file descriptor is {}, not a regular file or memfd",
            kind_of(&meta.file_type())
        ));
    }
    if meta.len() != total {
        return Err(format!(
            "SendFd: total_len {total} does not match the file's size of {} bytes",
            meta.len()
        ));
    }
    Ok(file)
}

fn kind_of(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a pipe"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a file"
    }
}

/// The answer a request gets when it is refused before the stream is opened (for tests).
#[cfg(test)]
fn check_message(total: u64, fds: Vec<OwnedFd>, truncated: bool) -> Option<String> {
    check(total, fds, truncated).err()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn temp(len: usize) -> (std::path::PathBuf, File) {
        let p = std::env::temp_dir().join(format!(
            "sendfd-{}-{len}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let mut f = File::create(&p).expect("create");
        f.write_all(&vec![7u8; len]).expect("write");
        (p, f)
    }

    #[test]
    fn every_bad_descriptor_is_refused_naming_what_is_wrong() {
        let m = check_message(5, Vec::new(), false).expect("missing");
        assert!(m.contains("no file descriptor"), "{m}");

        let (p, w) = temp(5);
        let r = File::open(&p).expect("open");
        let m = check_message(5, vec![w.into(), r.into()], false).expect("two");
        assert!(m.contains("carries 2 file descriptors"), "{m}");

        let w = std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .expect("write-only");
        let m = check_message(5, vec![w.into()], false).expect("write-only");
        assert!(m.contains("not readable (opened write-only)"), "{m}");

        let r = File::open(&p).expect("open");
        let m = check_message(6, vec![r.into()], false).expect("length");
        assert!(
            m.contains("total_len 6 does not match the file's size of 5 bytes"),
            "{m}"
        );

        let (a, _b) = std::os::unix::net::UnixStream::pair().expect("pair");
        let m = check_message(0, vec![OwnedFd::from(a)], false).expect("socket");
        assert!(m.contains("is a socket, not a regular file"), "{m}");

        let d = File::open(std::env::temp_dir()).expect("dir");
        let m = check_message(0, vec![d.into()], false).expect("dir");
        assert!(m.contains("a directory"), "{m}");

        let r = File::open(&p).expect("open");
        assert!(check_message(5, vec![r.into()], false).is_none());
        let r = File::open(&p).expect("open");
        let m = check_message(5, vec![r.into()], true).expect("truncated");
        assert!(m.contains("or more"), "{m}");
        let _ = std::fs::remove_file(&p);
    }
}
