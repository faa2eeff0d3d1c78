//! Records the commit the runner is built from (`DTNKIT_BUILD_COMMIT`) and whether the code under
//! it had uncommitted changes (`DTNKIT_BUILD_DIRTY`), so a results directory names the code that
//! produced it even when the checkout moved on between the build and the run.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    // The code that runs: every crate, the lock file, the workspace manifest.
    let code = ["../../crates", "../../Cargo.toml", "../../Cargo.lock"];
    if let Some(top) = git(&["rev-parse", "--show-toplevel"]) {
        for p in [".git/HEAD", ".git/index"] {
            println!("cargo:rerun-if-changed={top}/{p}");
        }
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={top}/.git/{head}");
        }
    }
    for p in code {
        println!("cargo:rerun-if-changed={p}");
    }
    if let Some(commit) = git(&["rev-parse", "HEAD"]) {
        println!("cargo:rustc-env=DTNKIT_BUILD_COMMIT={commit}");
        let mut args = vec!["status", "--porcelain", "--untracked-files=no", "--"];
        args.extend(code);
        if let Some(s) = git(&args) {
            println!("cargo:rustc-env=DTNKIT_BUILD_DIRTY={}", !s.is_empty());
        }
    }
}
