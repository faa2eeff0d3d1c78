//! Where a results directory came from: the commit of the code that produced it, whether that checkout had
//! uncommitted changes, the command line and the time, written as `OUT/provenance.json` by `dtnkit bench` and
//! shown by `dtnkit bench check` beside the committed results it compares with.

use std::path::Path;
use std::process::Command;

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// The file in an output directory.
pub const FILE: &str = "provenance.json";

/// The environment variable that names the commit when the runner is not started from a git checkout (a packaged
/// binary, a copy on a cluster); also read when `dtnkit` is built, as the fallback of last resort.
pub const COMMIT_VAR: &str = "DTNKIT_COMMIT";

/// Where a results directory came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// The commit of the code that ran: `$DTNKIT_COMMIT`, else the commit dtnkit was built from (recorded at build
    /// time), else `git rev-parse HEAD` of the experiment's checkout, else the value of `DTNKIT_COMMIT` when dtnkit
    /// was built; `None` when none is known.
    pub commit: Option<String>,
    /// Whether the code (the crates, `Cargo.toml`, `Cargo.lock`) had uncommitted changes when dtnkit was built (or,
    /// without a build record, when the runs started); `None`: unknown. Results and experiment files do not count.
    pub dirty: Option<bool>,
    /// `git rev-parse HEAD` of the experiment's checkout when the runs started, when it differs from `commit` (the
    /// checkout moved on after the build; the experiment and scenario files are read from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkout: Option<String>,
    /// The command line.
    pub command: Vec<String>,
    /// dtnkit's version.
    pub version: String,
    /// When the runs started, seconds since the Unix epoch.
    pub started_unix_s: u64,
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl Provenance {
    /// The provenance of runs starting now with `command`, for an experiment in `dir` (where git looks for the
    /// checkout).
    pub fn capture(command: Vec<String>, dir: &Path) -> Provenance {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let from_git = git(dir, &["rev-parse", "HEAD"]);
        let built = option_env!("DTNKIT_BUILD_COMMIT").map(String::from);
        let commit = std::env::var(COMMIT_VAR)
            .ok()
            .filter(|c| !c.is_empty())
            .or_else(|| built.clone())
            .or_else(|| from_git.clone())
            .or_else(|| option_env!("DTNKIT_COMMIT").map(String::from));
        let dirty = match (&built, option_env!("DTNKIT_BUILD_DIRTY")) {
            (Some(b), Some(d)) if commit.as_ref() == Some(b) => Some(d == "true"),
            _ => from_git
                .as_ref()
                .and_then(|_| {
                    let top = git(dir, &["rev-parse", "--show-toplevel"])?;
                    git(
                        dir,
                        &[
                            "-C",
                            &top,
                            "status",
                            "--porcelain",
                            "--untracked-files=no",
                            "--",
                            "crates",
                            "Cargo.toml",
                            "Cargo.lock",
                        ],
                    )
                })
                .map(|s| !s.is_empty()),
        };
        let checkout = from_git.filter(|h| commit.as_ref() != Some(h));
        Provenance {
            commit,
            dirty,
            checkout,
            command,
            version: env!("CARGO_PKG_VERSION").to_string(),
            started_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        }
    }

    /// Writes `out/provenance.json`.
    pub fn write(&self, out: &Path) -> anyhow::Result<()> {
        let path = out.join(FILE);
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(&path, text + "\n").with_context(|| format!("writing {}", path.display()))
    }

    /// Reads `out/provenance.json`; `None` when the directory has none (results written before it existed).
    pub fn read(out: &Path) -> anyhow::Result<Option<Provenance>> {
        let path = out.join(FILE);
        if !path.exists() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text)
            .map(Some)
            .with_context(|| format!("parsing {}", path.display()))
    }

    /// One line: "commit abc123def456 (uncommitted changes), `dtnkit bench ...`".
    pub fn summary(&self) -> String {
        let commit = match &self.commit {
            Some(c) => format!("commit {}", c.get(..12).unwrap_or(c)),
            None => "an unknown commit".to_string(),
        };
        let dirty = match self.dirty {
            Some(true) => " with uncommitted changes",
            _ => "",
        };
        format!("{commit}{dirty}, `{}`", self.command.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provenance_is_captured_written_and_read_back() {
        let dir = std::env::temp_dir().join(format!("bench-provenance-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(Provenance::read(&dir).unwrap(), None);
        // This crate is built from a git checkout (or with DTNKIT_COMMIT set): a commit is known.
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let p = Provenance::capture(vec!["dtnkit".into(), "bench".into(), "x.toml".into()], here);
        if std::env::var_os(COMMIT_VAR).is_none() && git(here, &["rev-parse", "HEAD"]).is_some() {
            let c = p.commit.clone().expect("commit");
            assert!(
                c.len() == 40 && c.chars().all(|c| c.is_ascii_hexdigit()),
                "{c}"
            );
            assert!(p.dirty.is_some());
        }
        p.write(&dir).unwrap();
        assert_eq!(Provenance::read(&dir).unwrap(), Some(p.clone()));
        assert!(
            p.summary().ends_with(", `dtnkit bench x.toml`"),
            "{}",
            p.summary()
        );
        std::fs::write(dir.join(FILE), "{").unwrap();
        let err = Provenance::read(&dir).unwrap_err();
        assert!(format!("{err:#}").contains("provenance.json"), "{err:#}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
