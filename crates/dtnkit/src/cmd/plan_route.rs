//! `dtnkit plan route`: the decision the agent's contact graph routing (`bp::Cgr`) makes for a
//! hypothetical bundle, as JSON: next hop, best-case delivery, projected arrival and every hop with
//! its timing. One query from the options, or one per line of a `--queries` file (JSON lines out).
//! Used to compare dtnkit's routing with another implementation on the same plan.

use std::path::PathBuf;

use anyhow::Context;
use bp::{BundleSpec, Cgr, CgrLimits, ContactPlan, Exclusions, Route};
use clap::Args;
use serde_json::{json, Value};

use super::UsageError;

/// Arguments of `dtnkit plan route`.
#[derive(Args)]
pub struct RouteArgs {
    /// Contact plan (ION `a contact` / `a range` lines, or the TOML form); times count from its epoch.
    #[arg(long)]
    plan: PathBuf,
    /// Local node: where the bundle is.
    #[arg(long, required_unless_present = "queries")]
    from: Option<u64>,
    /// Destination node.
    #[arg(long, required_unless_present = "queries")]
    to: Option<u64>,
    /// When the bundle is ready to leave, seconds from the plan epoch (decimals allowed).
    #[arg(long, default_value = "0")]
    at: String,
    /// Bundle size in bytes (what contact volume must carry).
    #[arg(long, default_value_t = 0)]
    bytes: u64,
    /// Latest acceptable arrival, seconds from the plan epoch (none by default).
    #[arg(long)]
    deadline: Option<String>,
    /// Queries, one a line: `FROM TO AT_S BYTES [DEADLINE_S]` (`#` starts a comment); one JSON object a line out.
    #[arg(long, conflicts_with_all = ["from", "to"])]
    queries: Option<PathBuf>,
    /// Also list the route list the decision was taken from (SABR alternatives for a size-0 bundle).
    #[arg(long)]
    alternatives: bool,
}

/// Runs `dtnkit plan route`.
pub fn run(a: RouteArgs) -> anyhow::Result<()> {
    let plan = ContactPlan::load(&a.plan, 0).map_err(|e| UsageError(e.to_string()))?;
    let Some(path) = &a.queries else {
        let q = Query {
            from: a.from.unwrap_or(0),
            to: a.to.unwrap_or(0),
            at_ms: seconds_to_ms("--at", &a.at)?,
            bytes: a.bytes,
            deadline_ms: a
                .deadline
                .as_deref()
                .map(|d| seconds_to_ms("--deadline", d))
                .transpose()?,
        };
        println!("{}", decide(&plan, &q, a.alternatives));
        return Ok(());
    };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let q = parse_query(line)
            .map_err(|e| UsageError(format!("{}:{}: {e}", path.display(), i + 1)))?;
        println!("{}", decide(&plan, &q, a.alternatives));
    }
    Ok(())
}

/// One routing question.
#[derive(Debug)]
struct Query {
    from: u64,
    to: u64,
    at_ms: u64,
    bytes: u64,
    deadline_ms: Option<u64>,
}

fn parse_query(line: &str) -> Result<Query, String> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if !(4..=5).contains(&f.len()) {
        return Err(format!(
            "{line:?}: expected FROM TO AT_S BYTES [DEADLINE_S]"
        ));
    }
    let num = |name: &str, s: &str| {
        s.parse::<u64>()
            .map_err(|_| format!("{name} {s:?}: expected a whole number"))
    };
    Ok(Query {
        from: num("FROM", f[0])?,
        to: num("TO", f[1])?,
        at_ms: seconds_to_ms("AT_S", f[2]).map_err(|e| e.0)?,
        bytes: num("BYTES", f[3])?,
        deadline_ms: f
            .get(4)
            .map(|d| seconds_to_ms("DEADLINE_S", d).map_err(|e| e.0))
            .transpose()?,
    })
}

fn seconds_to_ms(flag: &str, s: &str) -> Result<u64, UsageError> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.0..1e15).contains(&v) => Ok((v * 1000.0).round() as u64),
        _ => Err(UsageError(format!(
            "{flag} {s:?}: expected seconds from the plan epoch, >= 0"
        ))),
    }
}

/// The decision of a fresh `Cgr` at `q.from` (what an agent with no bookings decides), as JSON.
fn decide(plan: &ContactPlan, q: &Query, alternatives: bool) -> Value {
    let mut cgr = Cgr::new(q.from, CgrLimits::default());
    let bundle = BundleSpec {
        size_bytes: q.bytes,
        now_ms: q.at_ms,
        deadline_ms: q.deadline_ms,
    };
    let mut v = json!({
        "from": q.from,
        "to": q.to,
        "at_ms": q.at_ms,
        "bytes": q.bytes,
        "deadline_ms": q.deadline_ms,
    });
    match cgr.route(plan, q.to, bundle, &Exclusions::default()) {
        Ok(r) => {
            v["route"] = route_json(&r);
        }
        Err(e) => {
            v["route"] = Value::Null;
            v["no_route"] = json!(e.to_string());
        }
    }
    if alternatives {
        let probe = BundleSpec {
            size_bytes: 0,
            deadline_ms: None,
            ..bundle
        };
        let k = cgr.limits().max_routes;
        v["alternatives"] = match cgr.routes(plan, q.to, probe, &Exclusions::default(), k) {
            Ok(list) => list.iter().map(route_json).collect(),
            Err(_) => json!([]),
        };
    }
    v
}

fn route_json(r: &Route) -> Value {
    json!({
        "next_hop": r.next_hop,
        "nodes": r.nodes(),
        "hops": r.hops.len(),
        "best_case_delivery_ms": r.best_case_delivery_ms,
        "arrival_ms": r.arrival_ms,
        "termination_ms": r.termination_ms,
        "volume_limit_bytes": r.volume_limit_bytes,
        "contacts": r.hops.iter().map(|h| json!({
            "from": h.from,
            "to": h.to,
            "start_ms": h.contact_start_ms,
            "end_ms": h.contact_end_ms,
            "rate_bytes_per_s": h.rate_bytes_per_s,
            "tx_start_ms": h.tx_start_ms,
            "tx_end_ms": h.tx_end_ms,
            "owlt_ms": h.owlt_ms,
            "arrival_ms": h.arrival_ms,
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_lines_name_the_bad_field() {
        let q = parse_query("101 102 12.5 1000").unwrap();
        assert_eq!(
            (q.from, q.to, q.at_ms, q.bytes, q.deadline_ms),
            (101, 102, 12_500, 1000, None)
        );
        assert_eq!(parse_query("1 2 0 0 60").unwrap().deadline_ms, Some(60_000));
        assert!(parse_query("1 2 0")
            .unwrap_err()
            .contains("expected FROM TO"));
        assert!(parse_query("1 x 0 0").unwrap_err().starts_with("TO \"x\""));
        assert!(parse_query("1 2 -3 0")
            .unwrap_err()
            .starts_with("AT_S \"-3\""));
    }
}
