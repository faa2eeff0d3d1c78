//! Names resolved beneath a root directory without following a symbolic link: the file
//! operations of [`crate::NativeFilestore`].
//!
//! A CFDP peer chooses the names an entity writes and reads. [`crate::filestore::check_name`]
//! already refuses absolute names and `..`, but a path walked by the kernel also follows symbolic
//! links: a link `ROOT/out -> /etc` made the name `out/x` a file outside the root. Here every
//! name is walked one component at a time from a descriptor of the root, each intermediate
//! component opened with `O_NOFOLLOW | O_DIRECTORY` and the last one with `O_NOFOLLOW`, and every
//! change (create, rename, unlink, mkdir) is made relative to the descriptor of the parent it
//! was walked to. A link anywhere on the way is refused with [`ELOOP`](libc::ELOOP) (reported
//! as "resolves through a symbolic link"), whatever it points to, also inside the root. The root
//! itself may be reached through links: it is the operator's choice, not the peer's.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

/// A directory whose names are resolved beneath it.
#[derive(Debug)]
pub(crate) struct Root {
    fd: OwnedFd,
}

/// The error for a name whose walk met a symbolic link (or a non-directory where a directory
/// was needed).
fn link_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "resolves through a symbolic link or a non-directory (refused: names stay beneath the root)",
    )
}

fn cstr(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "contains NUL"))
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// `openat` retried on `EINTR`, returning an owned descriptor.
fn openat(
    dir: RawFd,
    name: &CString,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    loop {
        // SAFETY: `name` is a NUL-terminated string that outlives the call; `dir` is a valid
        // descriptor borrowed for the call.
        let fd = unsafe {
            libc::openat(
                dir,
                name.as_ptr(),
                flags | libc::O_CLOEXEC,
                libc::c_uint::from(mode),
            )
        };
        if fd >= 0 {
            // SAFETY: `openat` returned a new descriptor that nothing else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// A walk error: a link or a non-directory met on the way becomes [`link_error`].
fn walk_error(e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::ELOOP) | Some(libc::ENOTDIR) => link_error(),
        _ => e,
    }
}

/// The components of a checked name, without `.` and empty ones.
fn components(name: &str) -> Vec<&str> {
    name.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect()
}

impl Root {
    /// Opens `path` (links in it are followed: the root is the operator's choice).
    pub(crate) fn open(path: &Path) -> io::Result<Root> {
        let c = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "root path contains NUL"))?;
        let fd = openat(libc::AT_FDCWD, &c, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        Ok(Root { fd })
    }

    /// The descriptor of `name`'s parent directory (walked without following links; created
    /// on the way when `create` is set) and the name's last component. An empty name, or one of
    /// `.` only, has no last component: refused.
    fn parent(&self, name: &str, create: bool) -> io::Result<(OwnedFd, CString)> {
        let parts = components(name);
        let Some((last, dirs)) = parts.split_last() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "names no file (empty or only '.')",
            ));
        };
        let mut cur = self.fd.try_clone()?;
        for d in dirs {
            let c = cstr(d)?;
            if create {
                // SAFETY: `c` is NUL-terminated and outlives the call; `cur` is a valid
                // directory descriptor.
                let r = unsafe { libc::mkdirat(cur.as_raw_fd(), c.as_ptr(), 0o777) };
                if r < 0 {
                    let e = io::Error::last_os_error();
                    if e.raw_os_error() != Some(libc::EEXIST) {
                        return Err(walk_error(e));
                    }
                }
            }
            cur = openat(
                cur.as_raw_fd(),
                &c,
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                0,
            )
            .map_err(walk_error)?;
        }
        Ok((cur, cstr(last)?))
    }

    /// Opens the regular file `name` for reading, and writing when `write`; with `create` it is
    /// created or truncated (its parent directories created).
    pub(crate) fn open_file(&self, name: &str, write: bool, create: bool) -> io::Result<File> {
        let (dir, last) = self.parent(name, create)?;
        let mut flags = if write { libc::O_RDWR } else { libc::O_RDONLY };
        flags |= libc::O_NOFOLLOW;
        if create {
            flags |= libc::O_CREAT | libc::O_TRUNC;
        }
        let fd = openat(dir.as_raw_fd(), &last, flags, 0o666).map_err(walk_error)?;
        let f = File::from(fd);
        if !f.metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        Ok(f)
    }

    /// Opens `name` for appending (it must exist).
    pub(crate) fn open_append(&self, name: &str) -> io::Result<File> {
        let (dir, last) = self.parent(name, false)?;
        let fd = openat(
            dir.as_raw_fd(),
            &last,
            libc::O_WRONLY | libc::O_APPEND | libc::O_NOFOLLOW,
            0,
        )
        .map_err(walk_error)?;
        Ok(File::from(fd))
    }

    /// Metadata of `name` itself (a link is refused, not followed).
    pub(crate) fn metadata(&self, name: &str) -> io::Result<std::fs::Metadata> {
        let (dir, last) = self.parent(name, false)?;
        let fd = openat(dir.as_raw_fd(), &last, libc::O_PATH | libc::O_NOFOLLOW, 0)?;
        let md = File::from(fd).metadata()?;
        if md.file_type().is_symlink() {
            return Err(link_error());
        }
        Ok(md)
    }

    /// Renames `from` to `to` (replacing it), creating `to`'s parent directories.
    pub(crate) fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (fdir, flast) = self.parent(from, false)?;
        let (tdir, tlast) = self.parent(to, true)?;
        // SAFETY: both names are NUL-terminated and outlive the call; both descriptors are valid.
        check(unsafe {
            libc::renameat(
                fdir.as_raw_fd(),
                flast.as_ptr(),
                tdir.as_raw_fd(),
                tlast.as_ptr(),
            )
        })
        .map(drop)
    }

    /// Removes the file `name` (a link named so is removed itself, never its target).
    pub(crate) fn remove_file(&self, name: &str) -> io::Result<()> {
        let (dir, last) = self.parent(name, false)?;
        // SAFETY: `last` is NUL-terminated and outlives the call; `dir` is valid.
        check(unsafe { libc::unlinkat(dir.as_raw_fd(), last.as_ptr(), 0) }).map(drop)
    }

    /// Removes the empty directory `name`.
    pub(crate) fn remove_dir(&self, name: &str) -> io::Result<()> {
        let (dir, last) = self.parent(name, false)?;
        // SAFETY: as in `remove_file`.
        check(unsafe { libc::unlinkat(dir.as_raw_fd(), last.as_ptr(), libc::AT_REMOVEDIR) })
            .map(drop)
    }

    /// Names of the entries of directory `name` (without `.` and `..`), walked without
    /// following links.
    pub(crate) fn list_dir(&self, name: &str) -> io::Result<Vec<String>> {
        let (dir, last) = self.parent(name, false)?;
        let fd = openat(
            dir.as_raw_fd(),
            &last,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )
        .map_err(walk_error)?;
        // SAFETY: `fd` is a valid directory descriptor whose ownership passes to the stream
        // (closed by `closedir` below, never by `fd`'s drop).
        let stream = unsafe { libc::fdopendir(fd.as_raw_fd()) };
        if stream.is_null() {
            return Err(io::Error::last_os_error());
        }
        std::mem::forget(fd);
        let mut names = Vec::new();
        loop {
            // SAFETY: `stream` is a valid open directory stream until `closedir`.
            let ent = unsafe { libc::readdir(stream) };
            if ent.is_null() {
                break;
            }
            // SAFETY: `readdir` returned a valid entry whose `d_name` is NUL-terminated and
            // lives until the next `readdir` on this stream; it is copied at once.
            let n = unsafe { std::ffi::CStr::from_ptr((*ent).d_name.as_ptr()) };
            let n = n.to_string_lossy();
            if n != "." && n != ".." {
                names.push(n.into_owned());
            }
        }
        // SAFETY: `stream` is valid and closed exactly once.
        unsafe { libc::closedir(stream) };
        names.sort();
        Ok(names)
    }

    /// Creates the directory `name` and its parents (existing ones are fine).
    pub(crate) fn create_dir_all(&self, name: &str) -> io::Result<()> {
        let (dir, last) = self.parent(name, true)?;
        // SAFETY: as in `remove_file`.
        let r = unsafe { libc::mkdirat(dir.as_raw_fd(), last.as_ptr(), 0o777) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(e);
            }
            // It exists: it must be a directory, not a link to one.
            if !self.metadata(name)?.is_dir() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "exists and is not a directory",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_are_refused_wherever_they_are_and_nothing_is_written_outside() {
        let base = tempfile::tempdir().expect("tempdir");
        let root = base.path().join("root");
        let outside = base.path().join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), b"s").unwrap();
        symlink(&outside, root.join("out")).unwrap();
        symlink(outside.join("secret"), root.join("file-link")).unwrap();
        std::fs::create_dir_all(root.join("in")).unwrap();
        symlink(root.join("in"), root.join("inner-link")).unwrap();
        let r = Root::open(&root).unwrap();
        for name in [
            "out/x.bin",
            "out/sub/x.bin",
            "file-link",
            "inner-link/x.bin",
        ] {
            let e = r.open_file(name, true, true).expect_err(name);
            assert!(e.to_string().contains("symbolic link"), "{name}: {e}");
        }
        assert!(r.open_file("file-link", false, false).is_err());
        assert!(r.metadata("file-link").is_err());
        assert!(r.open_append("file-link").is_err());
        assert!(r.rename("in", "out/moved").is_err());
        assert!(r.create_dir_all("out/d").is_err());
        assert!(r.create_dir_all("inner-link").is_err());
        // Nothing appeared outside, the target is untouched, the link itself can be removed.
        let listed: Vec<_> = std::fs::read_dir(&outside).unwrap().collect();
        assert_eq!(listed.len(), 1);
        assert_eq!(std::fs::read(outside.join("secret")).unwrap(), b"s");
        r.remove_file("file-link").unwrap();
        assert!(outside.join("secret").exists());
        // Ordinary names work: nested creation, write, rename, metadata, removal.
        let mut f = r.open_file("a/b/c.bin", true, true).unwrap();
        io::Write::write_all(&mut f, b"data").unwrap();
        r.rename("a/b/c.bin", "d/e.bin").unwrap();
        assert_eq!(r.metadata("d/e.bin").unwrap().len(), 4);
        assert_eq!(r.metadata("./d/./e.bin").unwrap().len(), 4);
        r.remove_file("d/e.bin").unwrap();
        r.remove_dir("d").unwrap();
        assert!(r.open_file("", false, false).is_err());
        assert!(r.open_file(".", true, true).is_err());
    }
}
