//! The virtual filestore an entity reads source files from and writes received files into.
//!
//! The engine never opens a file itself: every access goes through [`Filestore`], so the same
//! entity runs on a real directory ([`NativeFilestore`], rooted: no name escapes the root), in
//! the simulator and in tests ([`MemFilestore`], optionally with a capacity so a full disk can
//! be provoked). Names are the CFDP names as sent on the wire, checked by [`check_name`]:
//! relative, `/`-separated, no `..`, no NUL.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::{Component, Path, PathBuf};

use thiserror::Error;

/// Why a filestore operation failed. The engine maps each to a CFDP condition (mostly
/// "filestore rejection") and to a filestore response status.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FilestoreError {
    /// The name is not acceptable (absolute, `..`, empty, NUL, not UTF-8).
    #[error("file name {name:?} refused: {why}")]
    InvalidName {
        /// The name as received (lossy UTF-8).
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// No such file or directory.
    #[error("{0}: not found")]
    NotFound(String),
    /// The target exists and must not.
    #[error("{0}: already exists")]
    AlreadyExists(String),
    /// The filesystem is full (or the in-memory store's capacity is reached).
    #[error("{0}: no space left")]
    NoSpace(String),
    /// Any other I/O error, with its text.
    #[error("{path}: {message}")]
    Io {
        /// File concerned.
        path: String,
        /// OS error text.
        message: String,
    },
}

impl FilestoreError {
    fn from_io(path: &str, e: io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::NotFound => FilestoreError::NotFound(path.to_owned()),
            io::ErrorKind::AlreadyExists => FilestoreError::AlreadyExists(path.to_owned()),
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => {
                FilestoreError::NoSpace(path.to_owned())
            }
            _ => FilestoreError::Io {
                path: path.to_owned(),
                message: e.to_string(),
            },
        }
    }
}

/// Check a CFDP file name and return it as a relative path string.
pub fn check_name(raw: &[u8]) -> Result<&str, FilestoreError> {
    let invalid = |why| FilestoreError::InvalidName {
        name: String::from_utf8_lossy(raw).into_owned(),
        why,
    };
    let name = std::str::from_utf8(raw).map_err(|_| invalid("not UTF-8"))?;
    if name.is_empty() {
        return Err(invalid("empty"));
    }
    if name.contains('\0') {
        return Err(invalid("contains NUL"));
    }
    if name.chars().any(char::is_control) {
        // A newline would split every line-oriented log and report that prints the name.
        return Err(invalid("contains a control character"));
    }
    if name.contains('\\') {
        // Not a separator here, but one on other systems: a name that means a path elsewhere.
        return Err(invalid("contains a backslash"));
    }
    if Path::new(name)
        .components()
        .all(|c| matches!(c, Component::CurDir))
    {
        return Err(invalid("names no file (only '.')"));
    }
    if name.starts_with('/') || name.starts_with('\\') {
        return Err(invalid("absolute path"));
    }
    for c in Path::new(name).components() {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => return Err(invalid("contains '..'")),
            Component::RootDir | Component::Prefix(_) => return Err(invalid("absolute path")),
        }
    }
    Ok(name)
}

/// File access for an entity. Paths are names already checked with [`check_name`] (or names
/// the entity made up itself for partial files).
pub trait Filestore: Send {
    /// Size of an existing file.
    fn size(&mut self, path: &str) -> Result<u64, FilestoreError>;
    /// Fill `buf` from `offset`; the file must hold that many bytes.
    fn read_at(&mut self, path: &str, offset: u64, buf: &mut [u8]) -> Result<(), FilestoreError>;
    /// Create a file (truncating an existing one), creating parent directories.
    fn create(&mut self, path: &str) -> Result<(), FilestoreError>;
    /// Write `data` at `offset` of an existing file (a sparse gap before it reads as zeros).
    fn write_at(&mut self, path: &str, offset: u64, data: &[u8]) -> Result<(), FilestoreError>;
    /// Make the file's content durable (fsync for a real directory).
    fn sync(&mut self, path: &str) -> Result<(), FilestoreError>;
    /// Rename `from` to `to`, replacing `to`; creates `to`'s parent directories.
    fn rename(&mut self, from: &str, to: &str) -> Result<(), FilestoreError>;
    /// Delete a file.
    fn remove_file(&mut self, path: &str) -> Result<(), FilestoreError>;
    /// Append the content of `source` to `target`.
    fn append(&mut self, target: &str, source: &str) -> Result<(), FilestoreError>;
    /// Create a directory (and its parents).
    fn create_dir(&mut self, path: &str) -> Result<(), FilestoreError>;
    /// Remove an empty directory.
    fn remove_dir(&mut self, path: &str) -> Result<(), FilestoreError>;
    /// Whether a file or directory exists.
    fn exists(&mut self, path: &str) -> bool;
    /// Release any cached handle on `path` (the entity calls it when a transaction ends).
    fn close(&mut self, path: &str);
    /// Names of the entries of directory `path` (not recursive), sorted.
    fn list_dir(&mut self, path: &str) -> Result<Vec<String>, FilestoreError>;
}

/// A filestore rooted at a directory of the host. Keeps a few files open so that writing a
/// transfer segment by segment is one `pwrite` each, not an open/close.
#[derive(Debug)]
pub struct NativeFilestore {
    root: PathBuf,
    /// Every name is resolved beneath this descriptor without following links.
    dir: crate::beneath::Root,
    open: HashMap<String, File>,
}

/// Files kept open at once by [`NativeFilestore`].
const MAX_OPEN_FILES: usize = 64;

impl NativeFilestore {
    /// A filestore whose names resolve under `root` (created if missing). Names never leave
    /// it: a symbolic link met while resolving one is refused, wherever it points (the root
    /// itself may be reached through links).
    pub fn new(root: impl Into<PathBuf>) -> io::Result<Self> {
        let root = root.into();
        std::fs::create_dir_all(&root)?;
        let dir = crate::beneath::Root::open(&root)?;
        Ok(Self {
            root,
            dir,
            open: HashMap::new(),
        })
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Host path of a name (the name is checked again, so a bug elsewhere cannot escape).
    pub fn host_path(&self, name: &str) -> Result<PathBuf, FilestoreError> {
        let name = check_name(name.as_bytes())?;
        Ok(self.root.join(name))
    }

    fn handle(&mut self, path: &str, write: bool) -> Result<&mut File, FilestoreError> {
        if !self.open.contains_key(path) {
            if self.open.len() >= MAX_OPEN_FILES {
                self.open.clear();
            }
            let name = check_name(path.as_bytes())?;
            let f = self
                .dir
                .open_file(name, write, false)
                .or_else(|e| {
                    // A file opened for reading first may be written later: reopen read-write.
                    if write {
                        Err(e)
                    } else {
                        self.dir.open_file(name, false, false)
                    }
                })
                .map_err(|e| FilestoreError::from_io(path, e))?;
            self.open.insert(path.to_owned(), f);
        }
        self.open
            .get_mut(path)
            .ok_or_else(|| FilestoreError::NotFound(path.to_owned()))
    }
}

impl Filestore for NativeFilestore {
    fn size(&mut self, path: &str) -> Result<u64, FilestoreError> {
        let name = check_name(path.as_bytes())?;
        let md = self
            .dir
            .metadata(name)
            .map_err(|e| FilestoreError::from_io(path, e))?;
        if !md.is_file() {
            return Err(FilestoreError::Io {
                path: path.to_owned(),
                message: "not a regular file".into(),
            });
        }
        Ok(md.len())
    }

    fn read_at(&mut self, path: &str, offset: u64, buf: &mut [u8]) -> Result<(), FilestoreError> {
        use std::os::unix::fs::FileExt;
        let f = self.handle(path, false)?;
        f.read_exact_at(buf, offset)
            .map_err(|e| FilestoreError::from_io(path, e))
    }

    fn create(&mut self, path: &str) -> Result<(), FilestoreError> {
        self.open.remove(path);
        let name = check_name(path.as_bytes())?;
        let f = self
            .dir
            .open_file(name, true, true)
            .map_err(|e| FilestoreError::from_io(path, e))?;
        self.open.insert(path.to_owned(), f);
        Ok(())
    }

    fn write_at(&mut self, path: &str, offset: u64, data: &[u8]) -> Result<(), FilestoreError> {
        use std::os::unix::fs::FileExt;
        let f = self.handle(path, true)?;
        f.write_all_at(data, offset)
            .map_err(|e| FilestoreError::from_io(path, e))
    }

    fn sync(&mut self, path: &str) -> Result<(), FilestoreError> {
        let f = self.handle(path, true)?;
        f.sync_data().map_err(|e| FilestoreError::from_io(path, e))
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<(), FilestoreError> {
        self.open.remove(from);
        self.open.remove(to);
        let (a, b) = (check_name(from.as_bytes())?, check_name(to.as_bytes())?);
        self.dir
            .rename(a, b)
            .map_err(|e| FilestoreError::from_io(from, e))
    }

    fn remove_file(&mut self, path: &str) -> Result<(), FilestoreError> {
        self.open.remove(path);
        let name = check_name(path.as_bytes())?;
        self.dir
            .remove_file(name)
            .map_err(|e| FilestoreError::from_io(path, e))
    }

    fn append(&mut self, target: &str, source: &str) -> Result<(), FilestoreError> {
        self.open.remove(target);
        let (t, s) = (
            check_name(target.as_bytes())?,
            check_name(source.as_bytes())?,
        );
        let mut src = self
            .dir
            .open_file(s, false, false)
            .map_err(|e| FilestoreError::from_io(source, e))?;
        let mut dst = self
            .dir
            .open_append(t)
            .map_err(|e| FilestoreError::from_io(target, e))?;
        io::copy(&mut src, &mut dst).map_err(|e| FilestoreError::from_io(target, e))?;
        Ok(())
    }

    fn create_dir(&mut self, path: &str) -> Result<(), FilestoreError> {
        let name = check_name(path.as_bytes())?;
        self.dir
            .create_dir_all(name)
            .map_err(|e| FilestoreError::from_io(path, e))
    }

    fn remove_dir(&mut self, path: &str) -> Result<(), FilestoreError> {
        let name = check_name(path.as_bytes())?;
        self.dir
            .remove_dir(name)
            .map_err(|e| FilestoreError::from_io(path, e))
    }

    fn exists(&mut self, path: &str) -> bool {
        check_name(path.as_bytes()).is_ok_and(|n| self.dir.metadata(n).is_ok())
    }

    fn close(&mut self, path: &str) {
        self.open.remove(path);
    }

    fn list_dir(&mut self, path: &str) -> Result<Vec<String>, FilestoreError> {
        let name = check_name(path.as_bytes())?;
        self.dir
            .list_dir(name)
            .map_err(|e| FilestoreError::from_io(path, e))
    }
}

/// An in-memory filestore for the simulator and tests. With a capacity, writes that would
/// grow the total beyond it fail with [`FilestoreError::NoSpace`], like a full disk.
#[derive(Debug, Default, Clone)]
pub struct MemFilestore {
    files: HashMap<String, Vec<u8>>,
    dirs: std::collections::HashSet<String>,
    capacity: Option<u64>,
    /// Synthetic files: name → (size, seed). Their content is generated on read, so a
    /// simulated multi-gigabyte source file costs no memory.
    synthetic: HashMap<String, (u64, u64)>,
}

impl MemFilestore {
    /// An empty, unbounded store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Limit the total bytes held (None: unbounded).
    pub fn set_capacity(&mut self, capacity: Option<u64>) {
        self.capacity = capacity;
    }

    /// Put a file.
    pub fn insert(&mut self, name: &str, data: Vec<u8>) {
        self.files.insert(name.to_owned(), data);
    }

    /// Declare a read-only file of `size` bytes whose content is a deterministic function of
    /// `seed` and the offset ([`synthetic_byte`]); no memory is used for it.
    pub fn insert_synthetic(&mut self, name: &str, size: u64, seed: u64) {
        self.synthetic.insert(name.to_owned(), (size, seed));
    }

    /// A file's content.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.files.get(name).map(Vec::as_slice)
    }

    /// Names of the files held, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.files.keys().cloned().collect();
        v.sort();
        v
    }

    fn used(&self) -> u64 {
        self.files.values().map(|f| f.len() as u64).sum()
    }
}

/// Byte at `offset` of a synthetic file with `seed` (see [`MemFilestore::insert_synthetic`]).
pub fn synthetic_byte(seed: u64, offset: u64) -> u8 {
    let x = (offset / 8)
        .wrapping_add(seed)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let x = (x ^ (x >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    (x >> (8 * (offset % 8))) as u8
}

impl Filestore for MemFilestore {
    fn size(&mut self, path: &str) -> Result<u64, FilestoreError> {
        if let Some((size, _)) = self.synthetic.get(path) {
            return Ok(*size);
        }
        self.files
            .get(path)
            .map(|f| f.len() as u64)
            .ok_or_else(|| FilestoreError::NotFound(path.to_owned()))
    }

    fn read_at(&mut self, path: &str, offset: u64, buf: &mut [u8]) -> Result<(), FilestoreError> {
        if let Some(&(size, seed)) = self.synthetic.get(path) {
            if offset.saturating_add(buf.len() as u64) > size {
                return Err(FilestoreError::Io {
                    path: path.to_owned(),
                    message: "read past end of file".into(),
                });
            }
            for (i, b) in buf.iter_mut().enumerate() {
                *b = synthetic_byte(seed, offset + i as u64);
            }
            return Ok(());
        }
        let f = self
            .files
            .get(path)
            .ok_or_else(|| FilestoreError::NotFound(path.to_owned()))?;
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let src = start
            .checked_add(buf.len())
            .and_then(|end| f.get(start..end))
            .ok_or_else(|| FilestoreError::Io {
                path: path.to_owned(),
                message: "read past end of file".into(),
            })?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn create(&mut self, path: &str) -> Result<(), FilestoreError> {
        self.files.insert(path.to_owned(), Vec::new());
        Ok(())
    }

    fn write_at(&mut self, path: &str, offset: u64, data: &[u8]) -> Result<(), FilestoreError> {
        let used = self.used();
        let cap = self.capacity;
        let f = self
            .files
            .get_mut(path)
            .ok_or_else(|| FilestoreError::NotFound(path.to_owned()))?;
        let end = offset.saturating_add(data.len() as u64);
        let growth = end.saturating_sub(f.len() as u64);
        if cap.is_some_and(|c| used + growth > c) {
            return Err(FilestoreError::NoSpace(path.to_owned()));
        }
        let end = usize::try_from(end).map_err(|_| FilestoreError::NoSpace(path.to_owned()))?;
        if f.len() < end {
            f.resize(end, 0);
        }
        f[end - data.len()..end].copy_from_slice(data);
        Ok(())
    }

    fn sync(&mut self, _path: &str) -> Result<(), FilestoreError> {
        Ok(())
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<(), FilestoreError> {
        let f = self
            .files
            .remove(from)
            .ok_or_else(|| FilestoreError::NotFound(from.to_owned()))?;
        self.files.insert(to.to_owned(), f);
        Ok(())
    }

    fn remove_file(&mut self, path: &str) -> Result<(), FilestoreError> {
        self.files
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| FilestoreError::NotFound(path.to_owned()))
    }

    fn append(&mut self, target: &str, source: &str) -> Result<(), FilestoreError> {
        let src = self
            .files
            .get(source)
            .cloned()
            .ok_or_else(|| FilestoreError::NotFound(source.to_owned()))?;
        let t = self
            .files
            .get_mut(target)
            .ok_or_else(|| FilestoreError::NotFound(target.to_owned()))?;
        t.extend_from_slice(&src);
        Ok(())
    }

    fn create_dir(&mut self, path: &str) -> Result<(), FilestoreError> {
        self.dirs.insert(path.to_owned());
        Ok(())
    }

    fn remove_dir(&mut self, path: &str) -> Result<(), FilestoreError> {
        if self.dirs.remove(path) {
            Ok(())
        } else {
            Err(FilestoreError::NotFound(path.to_owned()))
        }
    }

    fn exists(&mut self, path: &str) -> bool {
        self.files.contains_key(path)
            || self.dirs.contains(path)
            || self.synthetic.contains_key(path)
    }

    fn close(&mut self, _path: &str) {}

    fn list_dir(&mut self, path: &str) -> Result<Vec<String>, FilestoreError> {
        let prefix = format!("{}/", path.trim_end_matches('/'));
        let mut names: Vec<String> = self
            .files
            .keys()
            .chain(self.dirs.iter())
            .chain(self.synthetic.keys())
            .filter_map(|k| k.strip_prefix(&prefix))
            .map(|rest| rest.split('/').next().unwrap_or(rest).to_owned())
            .collect();
        if names.is_empty() && !self.dirs.contains(path) {
            return Err(FilestoreError::NotFound(path.to_owned()));
        }
        names.sort();
        names.dedup();
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_escape_the_root_are_refused() {
        for bad in [
            &b"../x"[..],
            b"/etc/passwd",
            b"a/../../b",
            b"",
            b"a\0b",
            b"\xff",
            b".",
            b"./.",
            b"a\nb.txt",
            b"a\x7fb",
            b"dir\\x.bin",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        for good in ["a.txt", "dir/sub/f.bin", "./x"] {
            assert_eq!(check_name(good.as_bytes()).unwrap(), good);
        }
    }

    #[test]
    fn native_filestore_round_trip_and_no_escape() {
        let dir = std::env::temp_dir().join(format!("cfdp-fs-{}", std::process::id()));
        let mut fs = NativeFilestore::new(&dir).unwrap();
        fs.create("sub/a.part").unwrap();
        fs.write_at("sub/a.part", 4, b"world").unwrap();
        fs.write_at("sub/a.part", 0, b"hell").unwrap();
        fs.rename("sub/a.part", "b.txt").unwrap();
        let mut buf = [0u8; 9];
        fs.read_at("b.txt", 0, &mut buf).unwrap();
        assert_eq!(&buf, b"hellworld");
        assert_eq!(fs.size("b.txt").unwrap(), 9);
        assert!(matches!(
            fs.create("../evil"),
            Err(FilestoreError::InvalidName { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn mem_filestore_capacity_reports_no_space() {
        let mut fs = MemFilestore::new();
        fs.set_capacity(Some(10));
        fs.create("a").unwrap();
        fs.write_at("a", 0, &[1; 10]).unwrap();
        assert_eq!(
            fs.write_at("a", 10, &[1]),
            Err(FilestoreError::NoSpace("a".into()))
        );
        fs.insert_synthetic("big", 1 << 40, 7);
        let mut b = [0u8; 4];
        fs.read_at("big", (1 << 40) - 4, &mut b).unwrap();
        assert_eq!(b[0], synthetic_byte(7, (1 << 40) - 4));
    }
}
