//! `dtnkit bench --executor slurm` on a private single-node Slurm cluster (scripts/slurm-localhost.sh starts
//! munged, slurmctld and slurmd for this machine in a temporary directory; the test stops them):
//!
//! - a sim grid (testdata/experiments/slurm_ci_sim.toml) gives the same outputs as the local executor: tables
//!   equal but for the wall-clock column, plots byte for byte, the report but for its run-time line;
//! - an emulated grid (testdata/experiments/slurm_ci_emu.toml) with one array task cancelled mid-run: the
//!   aggregation finds the run missing, `dtnkit bench status` shows it failed with its log, a second invocation
//!   submits only that run, the report completes and its means agree with the local executor's within the
//!   confidence intervals.
//!
//! Needs root and the Debian packages slurmctld, slurmd and munge (scripts/test.sh installs them).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_dtnkit");

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn work(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dtnkit-slurm-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("work dir");
    d
}

/// A private cluster, stopped (jobs cancelled, daemons ended, directory removed) when dropped.
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
}

const HELPER: &str = "scripts/slurm-localhost.sh";

impl Cluster {
    /// Starts a cluster in a directory named after `name` and this process; `conf` lines are added to its
    /// slurm.conf. Clusters left behind by test processes that died without stopping them are stopped first.
    fn start(name: &str, conf: &[&str]) -> Cluster {
        let prefix = format!("dtnkit-slurmd-{name}-");
        for e in std::fs::read_dir(std::env::temp_dir())
            .expect("temp dir")
            .flatten()
        {
            let file = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = file.strip_prefix(&prefix) else {
                continue;
            };
            if !Path::new("/proc").join(pid).exists() {
                let _ = Command::new(root().join(HELPER))
                    .arg("stop")
                    .arg(e.path())
                    .status();
            }
        }
        let dir = std::env::temp_dir().join(format!("{prefix}{}", std::process::id()));
        let o = Command::new(root().join(HELPER))
            .arg("start")
            .arg(&dir)
            .args(conf)
            .output()
            .expect("run scripts/slurm-localhost.sh");
        assert!(
            o.status.success(),
            "starting the cluster failed: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let conf = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
        assert!(conf.is_file(), "no slurm.conf at {}", conf.display());
        Cluster { dir, conf }
    }

    /// A command with this cluster's configuration and the dtnkit under test first on PATH (the batch scripts
    /// call `dtnkit`; sbatch passes the environment on).
    fn command(&self, program: &str) -> Command {
        let bin_dir = Path::new(BIN).parent().expect("bin dir");
        let path = format!(
            "{}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf).env("PATH", path);
        c
    }

    /// `dtnkit bench EXPERIMENT --executor slurm --out slurm [--wait]` in `cwd`.
    fn bench(&self, experiment: &str, wait: bool, cwd: &Path, limit: Duration) -> Output {
        let mut args = vec!["bench", experiment, "--executor", "slurm", "--out", "slurm"];
        if wait {
            args.push("--wait");
        }
        self.dtnkit(&args, cwd, limit)
    }

    fn dtnkit(&self, args: &[&str], cwd: &Path, limit: Duration) -> Output {
        let mut c = self.command(BIN);
        c.args(args).current_dir(cwd);
        bounded(c, limit)
    }

    /// `squeue` lines `ID|STATE` of every job in the cluster.
    fn queue(&self) -> Vec<String> {
        let o = self
            .command("squeue")
            .args(["--noheader", "--array", "--format=%i|%T"])
            .output()
            .expect("squeue");
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Waits (at most `limit`) until no job is left in the queue.
    fn drain(&self, limit: Duration) {
        let end = Instant::now() + limit;
        while !self.queue().is_empty() {
            assert!(
                Instant::now() < end,
                "jobs still queued after {limit:?}: {:?}",
                self.queue()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(root().join(HELPER))
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}

/// Runs `c` to its end, killing it after `limit`.
fn bounded(mut c: Command, limit: Duration) -> Output {
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let end = Instant::now() + limit;
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if Instant::now() > end {
            let _ = child.kill();
            let o = child.wait_with_output().expect("output");
            panic!(
                "{c:?} still running after {limit:?}: {}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn ok(o: &Output, what: &str) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{what} failed ({}): {text}", o.status);
    text
}

fn local_bench(experiment: &str, out: &Path) {
    let o = bounded(
        {
            let mut c = Command::new(BIN);
            c.arg("bench")
                .arg(root().join("testdata/experiments").join(experiment))
                .arg("--out")
                .arg(out)
                .args(["--jobs", "2", "--quiet"]);
            c
        },
        Duration::from_secs(240),
    );
    ok(&o, "local dtnkit bench");
}

/// A CSV without the columns whose header starts with `wall_s` (the only ones that depend on the machine).
fn csv_without_wall(path: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let rows: Vec<Vec<String>> = text
        .lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    let keep: Vec<bool> = rows[0].iter().map(|h| !h.starts_with("wall_s")).collect();
    rows.iter()
        .map(|r| {
            r.iter()
                .zip(&keep)
                .filter(|(_, k)| **k)
                .map(|(v, _)| v.clone())
                .collect()
        })
        .collect()
}

fn files_with_ext(dir: &Path, ext: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(ext))
        .collect();
    v.sort();
    v
}

#[test]
fn sim_grid_through_slurm_equals_the_local_executor() {
    // Arrays of at most 5 tasks: the 8 runs go out as two arrays, the second with offset 5.
    let cluster = Cluster::start("sim", &["MaxArraySize=5"]);
    let dir = work("sim");
    let local = dir.join("local");
    local_bench("slurm_ci_sim.toml", &local);
    let exp = root().join("testdata/experiments/slurm_ci_sim.toml");
    let exp = exp.to_str().expect("utf-8 path");
    let t = Instant::now();
    // Without --wait: sbatch --wait polls at growing intervals (2 s, then 8 s, then 32 s) and would add up to
    // half a minute here; the queue is watched instead.
    let o = cluster.bench(exp, false, &dir, Duration::from_secs(60));
    let text = ok(&o, "dtnkit bench --executor slurm");
    cluster.drain(Duration::from_secs(240));
    eprintln!("slurm executor: {:.1} s\n{text}", t.elapsed().as_secs_f64());
    assert!(
        text.contains("8 of 8 runs submitted as job array ") && text.contains(", "),
        "two arrays: {text}"
    );
    let slurm = dir.join("slurm");
    for f in ["aggregate.csv", "runs.csv"] {
        assert_eq!(
            csv_without_wall(&slurm.join(f)),
            csv_without_wall(&local.join(f)),
            "{f} differs from the local executor's"
        );
    }
    let plots = files_with_ext(&local, ".svg");
    // The line plot, and the stacked one per RTO.
    assert_eq!(plots.len(), 3, "plots of the local run: {plots:?}");
    for ext in [".svg", ".png"] {
        let names = files_with_ext(&local, ext);
        assert_eq!(names, files_with_ext(&slurm, ext), "{ext} files");
        for n in names {
            assert!(
                std::fs::read(local.join(&n)).ok() == std::fs::read(slurm.join(&n)).ok(),
                "{n} differs from the local executor's"
            );
        }
    }
    let report = |p: &Path| -> Vec<String> {
        std::fs::read_to_string(p.join("report.md"))
            .expect("report.md")
            .lines()
            .filter(|l| !l.contains("s of run time in total"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(report(&slurm), report(&local), "report.md");
    let st = ok(
        &cluster.dtnkit(&["bench", "status", "slurm"], &dir, Duration::from_secs(30)),
        "dtnkit bench status",
    );
    assert!(
        st.contains("8 done, 0 failed, 0 missing, 0 pending or running"),
        "{st}"
    );
    // Run again on the finished directory: nothing is submitted.
    let again = ok(
        &cluster.bench(exp, false, &dir, Duration::from_secs(60)),
        "second dtnkit bench --executor slurm",
    );
    assert!(again.contains("nothing to submit"), "{again}");
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `(mean, ci95)` of `metric` per grid point (keyed by labels) in an output directory's aggregate.json.
fn means(out: &Path, metric: &str) -> BTreeMap<String, (f64, f64)> {
    let text = std::fs::read_to_string(out.join("aggregate.json")).expect("aggregate.json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("aggregate.json parses");
    v.as_array()
        .expect("array")
        .iter()
        .map(|p| {
            let m = &p["metrics"][metric];
            (
                p["labels"].to_string(),
                (
                    m["mean"].as_f64().expect("mean"),
                    m["ci95"].as_f64().unwrap_or(0.0),
                ),
            )
        })
        .collect()
}

#[test]
fn emu_grid_through_slurm_resubmits_a_killed_task_and_agrees_with_local() {
    let cluster = Cluster::start("emu", &[]);
    let dir = work("emu");
    let exp = root().join("testdata/experiments/slurm_ci_emu.toml");
    let exp = exp.to_str().expect("utf-8 path");
    let t = Instant::now();
    let first = ok(
        &cluster.bench(exp, false, &dir, Duration::from_secs(60)),
        "dtnkit bench --executor slurm",
    );
    assert!(first.contains("4 of 4 runs submitted"), "{first}");
    // Cancel array task 1 once it has run for a second (the runs take 2 s of emulation plus start and drain).
    let end = Instant::now() + Duration::from_secs(120);
    let victim = loop {
        let q = cluster.queue();
        if let Some(line) = q.iter().find(|l| l.ends_with("_1|RUNNING")) {
            break line.split('|').next().expect("id").to_string();
        }
        assert!(Instant::now() < end, "task 1 never ran: {q:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    std::thread::sleep(Duration::from_secs(1));
    let o = cluster
        .command("scancel")
        .arg(&victim)
        .output()
        .expect("scancel");
    ok(&o, "scancel");
    cluster.drain(Duration::from_secs(180));
    assert!(
        !dir.join("slurm/report.md").exists(),
        "a report without run 1"
    );
    let st = ok(
        &cluster.dtnkit(&["bench", "status", "slurm"], &dir, Duration::from_secs(30)),
        "dtnkit bench status",
    );
    eprintln!("{st}");
    assert!(
        st.contains("3 done, 1 failed, 0 missing, 0 pending or running"),
        "{st}"
    );
    assert!(st.contains("CANCELLED"), "the failed run's log: {st}");
    let second = ok(
        &cluster.bench(exp, true, &dir, Duration::from_secs(180)),
        "second dtnkit bench --executor slurm",
    );
    eprintln!(
        "slurm executor, both invocations: {:.1} s\n{second}",
        t.elapsed().as_secs_f64()
    );
    assert!(second.contains("1 of 4 runs submitted"), "{second}");
    let slurm = dir.join("slurm");
    assert!(
        slurm.join("report.md").is_file(),
        "report after resubmission"
    );
    let local = dir.join("local");
    local_bench("slurm_ci_emu.toml", &local);
    let (s, l) = (means(&slurm, "goodput_mbps"), means(&local, "goodput_mbps"));
    assert_eq!(s.len(), 2, "points: {s:?}");
    // The 95 % intervals must overlap. Two real-time repetitions at the same seed can agree to 0.02 Mb/s while the
    // machine's load moves both by more between the two executors, so 2 % of the local mean is allowed beside
    // the half-widths.
    for (point, (ms, cs)) in &s {
        let (ml, cl) = l[point];
        eprintln!("{point}: slurm {ms:.3} ± {cs:.3} Mb/s, local {ml:.3} ± {cl:.3} Mb/s");
        assert!(
            (ms - ml).abs() <= cs + cl + 0.02 * ml,
            "{point}: goodput {ms:.3} ± {cs:.3} (slurm) and {ml:.3} ± {cl:.3} (local) do not agree"
        );
    }
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}
