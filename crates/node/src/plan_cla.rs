//! Start-up check of a TOML contact plan's per-contact `cla` against the node configuration.
//!
//! The node configuration is what binds a neighbour to a convergence layer (`[[span]]`,
//! `[[tcp_peer]]`, `[[udp_peer]]`, `[[stcp_peer]]`). A plan may state which layer it assumes for a contact
//! (`cla = "ltp"`); when that disagrees with the configuration the node refuses to start rather
//! than carry the contact over another layer than the one the plan was written for (LTP contacts
//! also set pacing rate and OWLT, TCPCL and UDPCL contacts only gate forwarding).

use bp::contact_plan::PlanCla;
use bp::ContactPlan;

use crate::config::Validated;

/// The layer the configuration binds `peer` to, with the section that does it (for messages).
fn configured(cfg: &Validated, peer: u64) -> Option<(PlanCla, &'static str)> {
    if cfg.spans.iter().any(|s| s.peer == peer) {
        Some((PlanCla::Ltp, "[[span]]"))
    } else if cfg.tcp_peers.iter().any(|t| t.peer == peer) {
        Some((PlanCla::Tcpcl, "[[tcp_peer]]"))
    } else if cfg.udp_peers.iter().any(|u| u.peer == peer) {
        Some((PlanCla::Udpcl, "[[udp_peer]]"))
    } else if cfg.stcp_peers.iter().any(|u| u.peer == peer) {
        Some((PlanCla::Stcp, "[[stcp_peer]]"))
    } else {
        None
    }
}

/// Checks every contact from or to this node that states a `cla`. A neighbour configured on
/// another layer is an error naming both; a neighbour configured on none is an error for LTP and
/// UDPCL (nothing could carry the contact), not for TCPCL (an unconfigured peer may open a
/// session to us, and is then routed by its node id).
pub(crate) fn check(plan: &ContactPlan, plan_file: &str, cfg: &Validated) -> Result<(), String> {
    let node = cfg.raw.node;
    for c in plan.contacts() {
        let Some(want) = c.cla else { continue };
        let peer = if c.from == node {
            c.to
        } else if c.to == node {
            c.from
        } else {
            continue;
        };
        match configured(cfg, peer) {
            Some((have, _)) if have == want => {}
            Some((have, section)) => {
                return Err(format!(
                    "{plan_file}:{}: field `cla` = \"{want}\": the contact {}→{} says {want}, but the node \
                     configuration binds node {peer} to {have} ({section} with peer = {peer}); \
                     make them agree",
                    c.line, c.from, c.to
                ))
            }
            None if want == PlanCla::Tcpcl => {}
            None => {
                let section = match want {
                    PlanCla::Ltp => "[[span]]",
                    PlanCla::Stcp => "[[stcp_peer]]",
                    _ => "[[udp_peer]]",
                };
                return Err(format!(
                    "{plan_file}:{}: field `cla` = \"{want}\": the contact {}→{} says {want}, but the node \
                     configuration has no {section} with peer = {peer}",
                    c.line, c.from, c.to
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::NodeConfig;
    use std::path::Path;

    const CFG: &str = r#"
node = 1
bind = "127.0.0.1:4556"
[store]
path = "store"
[[span]]
peer = 2
address = "127.0.0.1:4557"
[tcpcl]
listen = "127.0.0.1:4560"
[[tcp_peer]]
peer = 3
address = "127.0.0.1:4561"
[udpcl]
bind = "127.0.0.1:4562"
[[udp_peer]]
peer = 4
address = "127.0.0.1:4563"
[stcp]
[[stcp_peer]]
peer = 5
address = "127.0.0.1:4564"
"#;

    fn plan(entries: &[(u64, u64, &str)]) -> ContactPlan {
        let mut text = String::new();
        for (from, to, cla) in entries {
            text.push_str(&format!(
                "[[contact]]\nstart_s = 0\nend_s = 10\nfrom = {from}\nto = {to}\n\
                 rate_bytes_per_s = 100\ncla = \"{cla}\"\n"
            ));
        }
        match ContactPlan::from_toml_str(&text, "plan.toml", 0) {
            Ok(p) => p,
            Err(e) => panic!("test plan: {e}"),
        }
    }

    fn check_plan(entries: &[(u64, u64, &str)]) -> Result<(), String> {
        let cfg = NodeConfig::parse(CFG, "n.toml", Path::new("/tmp")).map_err(|e| e.to_string())?;
        check(&plan(entries), "plan.toml", &cfg)
    }

    #[test]
    fn matching_layers_pass() {
        let ok = [
            (1, 2, "ltp"),
            (2, 1, "ltp"),
            (1, 3, "tcpcl"),
            (1, 4, "udpcl"),
            (5, 1, "stcp"),
            // Unconfigured TCPCL neighbour (may connect in), and contacts between other nodes.
            (1, 9, "tcpcl"),
            (6, 7, "ltp"),
        ];
        assert_eq!(check_plan(&ok), Ok(()));
    }

    #[test]
    fn disagreement_names_plan_and_config() {
        let e = check_plan(&[(1, 2, "ltp"), (1, 3, "udpcl")]).unwrap_err();
        assert!(e.starts_with("plan.toml:8: field `cla` = \"udpcl\""), "{e}");
        assert!(e.contains("[[tcp_peer]] with peer = 3"), "{e}");
        assert!(e.contains("binds node 3 to tcpcl"), "{e}");
        let e = check_plan(&[(2, 1, "tcpcl")]).unwrap_err();
        assert!(e.contains("[[span]] with peer = 2"), "{e}");
    }

    #[test]
    fn unconfigured_ltp_udpcl_or_stcp_neighbour_is_an_error() {
        let e = check_plan(&[(1, 7, "ltp")]).unwrap_err();
        assert!(e.contains("no [[span]] with peer = 7"), "{e}");
        let e = check_plan(&[(1, 7, "udpcl")]).unwrap_err();
        assert!(e.contains("no [[udp_peer]] with peer = 7"), "{e}");
        let e = check_plan(&[(1, 7, "stcp")]).unwrap_err();
        assert!(e.contains("no [[stcp_peer]] with peer = 7"), "{e}");
        let e = check_plan(&[(1, 5, "tcpcl")]).unwrap_err();
        assert!(
            e.contains("binds node 5 to stcp ([[stcp_peer]] with peer = 5)"),
            "{e}"
        );
    }
}

#[cfg(test)]
mod start_tests {
    use crate::config::NodeConfig;
    use crate::{Node, NodeError};

    #[test]
    fn node_refuses_to_start_on_a_cla_mismatch() {
        let dir = std::env::temp_dir().join(format!("dtnkit-plan-cla-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("plan.toml"),
            "[[contact]]\nstart_s = 0\nend_s = 10\nfrom = 1\nto = 2\nrate_bytes_per_s = 100\ncla = \"tcpcl\"\n",
        )
        .unwrap();
        let cfg = "node = 1\nbind = \"127.0.0.1:0\"\ncontact_plan = \"plan.toml\"\n[store]\npath = \"store\"\n\
                   [[span]]\npeer = 2\naddress = \"127.0.0.1:9\"\n";
        let v = NodeConfig::parse(cfg, "n.toml", &dir).unwrap();
        let r = Node::start(v);
        let _ = std::fs::remove_dir_all(&dir);
        match r {
            Err(NodeError::Config(e)) => {
                assert!(e.contains("plan.toml:1: field `cla` = \"tcpcl\""), "{e}");
                assert!(e.contains("[[span]] with peer = 2"), "{e}");
            }
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }
}
