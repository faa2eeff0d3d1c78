//! `dtnkit import-ion`: an ION node's `.rc` files → `node.toml` and `plan.txt`
//! (`node::config::ion_import` does the translation).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use node::config::ion_import::{self, RcFile, RcKind, PLAN_FILE};

use super::UsageError;

/// Arguments of `dtnkit import-ion`.
#[derive(Args)]
pub struct ImportIonArgs {
    /// An ION node's directory (every *ionrc, *ltprc, *bprc, *ipnrc file in it) or its files.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Directory to write node.toml and plan.txt into (created).
    #[arg(short = 'o', long, default_value = ".")]
    out_dir: PathBuf,
}

/// Reads the inputs, translates them, writes the outputs and prints every line not translated.
pub fn run(a: ImportIonArgs) -> anyhow::Result<()> {
    let mut files = Vec::new();
    for input in &a.inputs {
        let mut paths = Vec::new();
        if input.is_dir() {
            let rd = std::fs::read_dir(input).map_err(|e| {
                UsageError(format!(
                    "{}: cannot read the directory: {e}",
                    input.display()
                ))
            })?;
            for entry in rd {
                let p = entry
                    .map_err(|e| {
                        UsageError(format!(
                            "{}: cannot read the directory: {e}",
                            input.display()
                        ))
                    })?
                    .path();
                if p.is_file() && RcKind::of(&p.to_string_lossy()).is_some() {
                    paths.push(p);
                }
            }
            if paths.is_empty() {
                return Err(UsageError(format!(
                    "{}: no ION configuration file: expected files named *ionrc, *ltprc, *bprc or *ipnrc",
                    input.display()
                ))
                .into());
            }
            paths.sort();
        } else {
            paths.push(input.clone());
        }
        for p in paths {
            let name = p.display().to_string();
            let text = std::fs::read_to_string(&p)
                .map_err(|e| UsageError(format!("{name}: cannot read: {e}")))?;
            files.push(RcFile { name, text });
        }
    }
    let imp = ion_import::import(&files).map_err(|e| UsageError(e.to_string()))?;
    std::fs::create_dir_all(&a.out_dir)
        .with_context(|| format!("creating {}", a.out_dir.display()))?;
    let toml_path = a.out_dir.join("node.toml");
    std::fs::write(&toml_path, &imp.node_toml)
        .with_context(|| format!("writing {}", toml_path.display()))?;
    let plan_path = a.out_dir.join(PLAN_FILE);
    if let Some(plan) = &imp.plan {
        std::fs::write(&plan_path, plan)
            .with_context(|| format!("writing {}", plan_path.display()))?;
    }
    for n in &imp.notes {
        eprintln!("{n}");
    }
    println!(
        "node {}: wrote {}{} ({} line(s) not fully translated, listed above)",
        imp.node,
        toml_path.display(),
        if imp.plan.is_some() {
            format!(" and {}", plan_path.display())
        } else {
            String::new()
        },
        imp.notes.len()
    );
    Ok(())
}
