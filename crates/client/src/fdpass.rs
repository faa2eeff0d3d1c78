//! File descriptors over the application socket (`SCM_RIGHTS`), for [`crate::Request::SendFd`].
//!
//! The application attaches the descriptor of a file (a regular file or a memfd) to the
//! `SendFd` frame; the node reads the application data unit from it itself, so the bytes never
//! travel through the socket. A descriptor travels as ancillary data of the frame's first
//! bytes: [`send_frame_with_fd`] writes the whole frame with it, and [`FdReader`] (a `Read` over
//! the node's end of the socket) collects every descriptor that arrives while a frame is read, so
//! the reader can pair them with the frame they came with.
//!
//! On a Unix stream socket Linux never merges data sent with descriptors and data sent without
//! into one read, and reads of a frame never go past its end ([`crate::proto::read_frame`]
//! reads exactly the length prefix and then exactly the body), so the descriptors collected
//! while one frame is read are those sent with that frame.

use std::io::{self, Read};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

/// Most descriptors taken from one read; more (a client that attaches several) mark the read
/// truncated ([`FdReader::truncated`]) and the kernel closes those that did not fit.
const MAX_FDS_PER_READ: usize = 4;

/// Control buffer, aligned for `cmsghdr`: room for the header and [`MAX_FDS_PER_READ`]
/// descriptors (`CMSG_SPACE(16)` is 32 bytes on 64-bit Linux).
#[repr(C, align(8))]
struct CmsgBuf([u8; CMSG_BYTES]);

const CMSG_BYTES: usize =
    (std::mem::size_of::<libc::cmsghdr>() + MAX_FDS_PER_READ * std::mem::size_of::<RawFd>() + 7)
        & !7;

/// Writes `frame` (a whole encoded frame, length prefix included) on `sock` with `fd` attached
/// as `SCM_RIGHTS` ancillary data of its first bytes. Partial writes are continued (without
/// the descriptor again, which went with the first part).
pub fn send_frame_with_fd(sock: &UnixStream, frame: &[u8], fd: BorrowedFd<'_>) -> io::Result<()> {
    if frame.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a descriptor needs at least one byte to travel with",
        ));
    }
    let mut cbuf = CmsgBuf([0u8; CMSG_BYTES]);
    let raw = fd.as_raw_fd();
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    if space > CMSG_BYTES {
        return Err(io::Error::other(
            "control buffer too small for one descriptor",
        ));
    }
    let mut iov = libc::iovec {
        iov_base: frame.as_ptr() as *mut libc::c_void,
        iov_len: frame.len(),
    };
    // SAFETY: an all-zero msghdr is valid; every pointer set below outlives the sendmsg call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.0.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = space as _;
    // SAFETY: msg_control points to `space` bytes (checked above to fit `cbuf`), so the first
    // header and its data are inside the buffer.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut RawFd, raw);
    }
    let sent = loop {
        // SAFETY: msg is fully initialised and its buffers are live.
        let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    if sent < frame.len() {
        crate::proto::write_frame(&mut &*sock, &frame[sent..], &[])?;
    }
    Ok(())
}

/// A `Read` over a Unix stream socket that keeps the descriptors arriving with the data
/// (`recvmsg` with `SCM_RIGHTS`, close-on-exec); [`FdReader::take_fds`] hands them over.
/// Descriptors nobody takes are closed when dropped.
pub struct FdReader {
    sock: UnixStream,
    fds: Vec<OwnedFd>,
    truncated: bool,
}

impl FdReader {
    /// Reads from `sock`.
    pub fn new(sock: UnixStream) -> Self {
        FdReader {
            sock,
            fds: Vec::new(),
            truncated: false,
        }
    }

    /// The socket (for timeouts and writes).
    pub fn get_ref(&self) -> &UnixStream {
        &self.sock
    }

    /// The descriptors received since the last call, in arrival order, and whether some were
    /// dropped because more arrived in one read than this reader takes (then they were closed).
    pub fn take_fds(&mut self) -> (Vec<OwnedFd>, bool) {
        (
            std::mem::take(&mut self.fds),
            std::mem::replace(&mut self.truncated, false),
        )
    }
}

impl FdReader {
    /// The next frame, as [`crate::proto::read_frame`] reads it (same format, limit and
    /// errors), with its body received straight into the spare capacity of its buffer. Through
    /// `Read`, std zero-fills that room before every read: with 1 MB `Send`s that memset was
    /// 2 % of a sending node's CPU samples (measured, TCPCL 1 MB bundles).
    pub fn read_frame(&mut self, limit: usize) -> io::Result<Option<bytes::Bytes>> {
        let Some(n) = crate::proto::read_frame_len(self, limit)? else {
            return Ok(None);
        };
        let mut body: Vec<u8> = Vec::with_capacity(n);
        while body.len() < n {
            let want = n - body.len();
            let room = body.spare_capacity_mut();
            let len = room.len().min(want);
            // SAFETY: `room` (capacity `n`) is valid for writes of `len` octets; `recv` writes
            // at most that many and returns how many it wrote, which `set_len` then covers.
            match unsafe { self.recv(room.as_mut_ptr().cast(), len) } {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(k) => unsafe { body.set_len(body.len() + k.min(want)) },
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Some(bytes::Bytes::from(body)))
    }

    /// One `recvmsg` into `len` octets at `buf`, keeping the descriptors that came with them.
    ///
    /// # Safety
    /// `buf` must be valid for writes of `len` octets (initialised or not) for the call.
    unsafe fn recv(&mut self, buf: *mut u8, len: usize) -> io::Result<usize> {
        let mut cbuf = CmsgBuf([0u8; CMSG_BYTES]);
        let mut iov = libc::iovec {
            iov_base: buf as *mut libc::c_void,
            iov_len: len,
        };
        // SAFETY: an all-zero msghdr is valid; the buffers outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.0.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = cbuf.0.len() as _;
        // SAFETY: msg describes live buffers of the given sizes.
        let n = unsafe { libc::recvmsg(self.sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if msg.msg_flags & libc::MSG_CTRUNC != 0 {
            self.truncated = true;
        }
        // SAFETY: the kernel filled msg_control with msg_controllen bytes of well-formed
        // headers; CMSG_NXTHDR stays within them.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(cmsg);
                    let bytes = (*cmsg).cmsg_len as usize - (data as usize - cmsg as usize);
                    for k in 0..bytes / std::mem::size_of::<RawFd>() {
                        let fd = std::ptr::read_unaligned(
                            data.add(k * std::mem::size_of::<RawFd>()) as *const RawFd,
                        );
                        // The kernel installed it in this process: it is ours to close.
                        self.fds.push(OwnedFd::from_raw_fd(fd));
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        Ok((n as usize).min(len))
    }
}

impl Read for FdReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `buf` is valid for writes of its length.
        unsafe { self.recv(buf.as_mut_ptr(), buf.len()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Seek, Write};
    use std::os::fd::AsFd;

    #[test]
    fn a_descriptor_travels_with_its_frame_and_only_with_it() {
        let (a, b) = UnixStream::pair().expect("pair");
        let mut f = tempfile_in_tmp();
        f.write_all(b"hello").expect("write");
        f.rewind().expect("rewind");
        (&a).write_all(b"0123").expect("plain bytes");
        send_frame_with_fd(&a, b"4567", f.as_fd()).expect("send with fd");
        (&a).write_all(b"89").expect("plain bytes");
        let mut r = FdReader::new(b);
        let mut buf = [0u8; 4];
        r.read_exact(&mut buf).expect("first frame");
        assert_eq!(&buf, b"0123");
        assert!(
            r.take_fds().0.is_empty(),
            "no descriptor came with plain bytes"
        );
        r.read_exact(&mut buf).expect("second frame");
        assert_eq!(&buf, b"4567");
        let (fds, truncated) = r.take_fds();
        assert!(!truncated);
        assert_eq!(fds.len(), 1);
        let mut got = String::new();
        std::fs::File::from(fds.into_iter().next().expect("fd"))
            .read_to_string(&mut got)
            .expect("read through the passed descriptor");
        assert_eq!(got, "hello");
        let mut rest = [0u8; 2];
        r.read_exact(&mut rest).expect("rest");
        assert!(r.take_fds().0.is_empty());
    }

    #[test]
    fn frames_read_into_uninitialised_room_match_the_generic_reader() {
        use crate::proto::{read_frame, write_frame};
        // Frames of 0, 1 and 3 MB+1 bytes (more than a socket buffer: many reads each), a
        // descriptor with the second, then a clean end of the stream.
        let sizes = [0usize, 1, (3 << 20) + 1];
        let frames: Vec<Vec<u8>> = sizes
            .iter()
            .map(|&n| (0..n).map(|i| (i * 7 + n) as u8).collect())
            .collect();
        let (a, b) = UnixStream::pair().expect("pair");
        let expect = frames.clone();
        let writer = std::thread::spawn(move || {
            let mut w = &a;
            for (i, f) in expect.iter().enumerate() {
                let len = (f.len() as u32).to_be_bytes();
                if i == 1 {
                    let mut frame = len.to_vec();
                    frame.extend_from_slice(f);
                    let file = tempfile_in_tmp();
                    send_frame_with_fd(&a, &frame, file.as_fd()).expect("with fd");
                } else {
                    write_frame(&mut w, &len, f).expect("frame");
                }
            }
        });
        let mut r = FdReader::new(b);
        for (i, f) in frames.iter().enumerate() {
            let got = r.read_frame(4 << 20).expect("read").expect("a frame");
            assert_eq!(&got[..], &f[..], "frame {i}");
            assert_eq!(
                r.take_fds().0.len(),
                usize::from(i == 1),
                "frame {i}'s descriptors"
            );
        }
        writer.join().expect("writer");
        assert!(r.read_frame(4 << 20).expect("clean end").is_none());

        // A frame above the limit is refused as the generic reader refuses it; a stream that
        // ends inside a frame is UnexpectedEof for both.
        for cut in [false, true] {
            let (a, b) = UnixStream::pair().expect("pair");
            let mut bytes = 100u32.to_be_bytes().to_vec();
            bytes.extend_from_slice(&[1u8; 40]);
            (&a).write_all(&bytes).expect("write");
            drop(a);
            let limit = if cut { 1000 } else { 99 };
            let mine = FdReader::new(b).read_frame(limit).expect_err("refused");
            let generic = read_frame(&mut std::io::Cursor::new(bytes), limit).expect_err("refused");
            assert_eq!(mine.kind(), generic.kind(), "cut {cut}");
            let want = if cut {
                io::ErrorKind::UnexpectedEof
            } else {
                io::ErrorKind::InvalidData
            };
            assert_eq!(mine.kind(), want);
        }
    }

    fn tempfile_in_tmp() -> std::fs::File {
        let p = std::env::temp_dir().join(format!(
            "fdpass-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&p)
            .expect("temp file");
        let _ = std::fs::remove_file(&p);
        f
    }
}
