//! Transaction state on disk, so a killed entity process resumes its class-2 transactions.
//!
//! One file per transaction (`s-SOURCE-SEQ.snap` for sending, `r-SOURCE-SEQ.snap` for
//! receiving), written to a temporary name and renamed, so a kill leaves either the old or the
//! new state, never a torn one; plus `next-seq` so a restarted sender never reuses a
//! transaction sequence number. The received data itself is in the partial file, written
//! before the state that claims it.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use cfdp::pdu::TransactionId;
use cfdp::{Role, Snapshot};

/// A directory of transaction states.
#[derive(Debug)]
pub struct StateDir {
    dir: PathBuf,
}

impl StateDir {
    /// Use (and create) `dir`.
    pub fn open(dir: impl Into<PathBuf>) -> io::Result<Self> {
        let dir = dir.into();
        fs::create_dir_all(&dir)?;
        Ok(Self { dir })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn file(&self, role: Role, id: TransactionId) -> PathBuf {
        let r = match role {
            Role::Sender => 's',
            Role::Receiver => 'r',
        };
        self.dir.join(format!("{r}-{}-{}.snap", id.source, id.seq))
    }

    fn write_atomic(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let tmp = path.with_extension("tmp");
        fs::write(&tmp, data)?;
        fs::rename(&tmp, path)
    }

    /// Store (Some) or forget (None) a transaction's state.
    pub fn save(&self, role: Role, id: TransactionId, snap: Option<&Snapshot>) -> io::Result<()> {
        let path = self.file(role, id);
        match snap {
            Some(s) => self.write_atomic(&path, &s.encode()),
            None => match fs::remove_file(&path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            },
        }
    }

    /// Every stored state; unreadable ones are renamed `*.bad` and reported in the second list.
    pub fn load(&self) -> io::Result<(Vec<Snapshot>, Vec<String>)> {
        let mut good = Vec::new();
        let mut bad = Vec::new();
        let mut names: Vec<PathBuf> = fs::read_dir(&self.dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "snap"))
            .collect();
        names.sort();
        for p in names {
            match fs::read(&p)
                .map_err(|e| e.to_string())
                .and_then(|b| Snapshot::decode(&b).map_err(|e| e.to_string()))
            {
                Ok(s) => good.push(s),
                Err(e) => {
                    bad.push(format!("{}: {e}", p.display()));
                    let _ = fs::rename(&p, p.with_extension("bad"));
                }
            }
        }
        Ok((good, bad))
    }

    /// The next transaction sequence number stored (1 if none).
    pub fn next_seq(&self) -> u64 {
        fs::read_to_string(self.dir.join("next-seq"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1)
    }

    /// Store the next transaction sequence number.
    pub fn set_next_seq(&self, seq: u64) -> io::Result<()> {
        self.write_atomic(&self.dir.join("next-seq"), seq.to_string().as_bytes())
    }
}
