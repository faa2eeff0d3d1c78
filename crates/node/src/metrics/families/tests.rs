use serde::de::DeserializeOwned;

use super::*;

fn family<'a>(f: &'a Families, name: &str) -> &'a Family {
    f.families
        .iter()
        .find(|x| x.name == name)
        .unwrap_or_else(|| panic!("no {name}"))
}

fn names(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn status() -> NodeStatus {
    let mut s = NodeStatus {
        node: 7,
        ..NodeStatus::default()
    };
    s.bundles.received = 5;
    s.bundles.malformed = 3;
    s.bundles.malformed_by_reason = names(&[("crc", 2), ("too_large", 1)]);
    s.bundles.refused_store_full = 4;
    s.bundles.cla_refusals = 9;
    s.store.bundles = 1;
    s.store.commit_latency = CommitLatency {
        le_s: vec![0.001, 0.01],
        cumulative: vec![1, 2],
        count: 3,
        sum_s: 0.5,
    };
    s.ltp.segments_sent = 8;
    s.ltp.spans.insert(
        2,
        LtpSpanStatus {
            link_up: true,
            export_sessions: 3,
            import_sessions: 1,
            cancelled_here: names(&[("RLEXC", 1)]),
            cancelled_by_peer: names(&[("RLEXC", 0)]),
            ..LtpSpanStatus::default()
        },
    );
    let mut tcpcl = TcpclStatus::default();
    tcpcl.peers.insert(
        4,
        TcpclPeerStatus {
            bytes_sent: 10,
            bytes_received: 20,
            ..TcpclPeerStatus::default()
        },
    );
    s.tcpcl = Some(tcpcl);
    s.process = Some(ProcessStatus {
        rss_bytes: 4096,
        ..ProcessStatus::default()
    });
    s
}

#[test]
fn named_fields_are_typed_and_the_others_fall_back_to_untyped() {
    let f = Families::from_status(&status());
    let received = family(&f, "dtnkit_bundles_received");
    assert_eq!((received.kind, received.samples[0].1), (Kind::Counter, 5.0));
    let refused = family(&f, "dtnkit_bundles_refused");
    assert_eq!(refused.samples[0].0, vec![label("reason", "store_full")]);
    assert_eq!(family(&f, "dtnkit_bundles_malformed").samples.len(), 2);
    assert!(f
        .families
        .iter()
        .all(|x| !x.name.contains("malformed_by_reason")));
    let extra = family(&f, "dtnkit_bundles_cla_refusals");
    assert_eq!((extra.kind, extra.samples[0].1), (Kind::Untyped, 9.0));
    let sessions = family(&f, "dtnkit_ltp_span_sessions");
    assert_eq!(
        sessions.help,
        "Open LTP sessions of the span, by direction."
    );
    assert_eq!(
        sessions.samples[0].0,
        vec![label("peer", "2"), label("direction", "export")]
    );
    assert_eq!(sessions.samples.len(), 2);
    assert_eq!(family(&f, "dtnkit_ltp_span_cancels").samples.len(), 2);
    assert_eq!(family(&f, "dtnkit_ltp_span_link_up").samples[0].1, 1.0);
    assert_eq!(family(&f, "dtnkit_ltp_segments").samples[0].1, 8.0);
    assert_eq!(family(&f, "dtnkit_tcpcl_peer_bytes").samples.len(), 2);
    assert_eq!(
        family(&f, "process_resident_memory_bytes").samples[0].1,
        4096.0
    );
    let h = &f.histograms[0];
    assert_eq!(
        (h.buckets.clone(), h.count),
        (vec![(0.001, 1), (0.01, 2)], 3)
    );
    // Absent sections export nothing.
    assert!(f
        .families
        .iter()
        .all(|x| !x.name.starts_with("dtnkit_udpcl")
            && !x.name.starts_with("dtnkit_bpsec")
            && !x.name.starts_with("dtnkit_plan")));
    // The numbers no rule names, and only those, are untyped.
    let untyped: Vec<&str> = f
        .families
        .iter()
        .filter(|x| x.kind == Kind::Untyped)
        .map(|x| x.name.as_str())
        .collect();
    assert_eq!(
        untyped,
        vec![
            "dtnkit_store_failures",
            "dtnkit_store_recovered_from_disk",
            "dtnkit_store_recoveries",
            "dtnkit_bundles_cla_refusals",
            "dtnkit_ltp_checkpoint_timeouts",
            "dtnkit_ltp_data_segments_retransmitted",
            "dtnkit_ltp_exports_refused",
            "dtnkit_ltp_imports_evicted",
            "dtnkit_ltp_imports_stalled",
            "dtnkit_ltp_wrong_source",
        ]
    );
}

#[test]
fn status_reports_and_contacts_have_their_labels() {
    let mut s = NodeStatus::default();
    s.status_reports.insert(
        "ipn:3.0".into(),
        client::status::StatusReportCounts {
            delivered: 2,
            ..Default::default()
        },
    );
    s.contacts.neighbours.insert(
        3,
        client::status::NeighbourStatus {
            cla: Some(client::status::Cla::Udpcl),
            link_up: true,
            rate_bps: 1000,
        },
    );
    s.contacts.plan = Some(client::status::PlanStatus {
        contacts: vec![client::status::PlanContact {
            start_in_s: 4.0,
            ..Default::default()
        }],
        remaining: 1,
    });
    let f = Families::from_status(&s);
    let reports = family(&f, "dtnkit_status_reports_received");
    assert_eq!(reports.samples.len(), 5);
    assert!(reports.samples.contains(&(
        vec![label("from", "ipn:3.0"), label("assertion", "delivered")],
        2.0
    )));
    let up = family(&f, "dtnkit_neighbour_link_up");
    assert_eq!(
        up.samples,
        vec![(vec![label("peer", "3"), label("cla", "udpcl")], 1.0)]
    );
    assert_eq!(
        family(&f, "dtnkit_plan_contacts_remaining").samples[0].1,
        1.0
    );
    assert_eq!(
        family(&f, "dtnkit_plan_next_contact_start_seconds").samples[0].1,
        4.0
    );
}

/// Every rule of `rules` reads the field it names (the reply key the untyped fallback skips),
/// and every family's first rule carries the help text.
fn check_table<T: Default + Serialize + DeserializeOwned>(rules: &[Rule<T>]) {
    let Value::Object(blank) = serde_json::to_value(T::default()).unwrap() else {
        panic!("not an object");
    };
    for (i, r) in rules.iter().enumerate() {
        let (set, expected) = match blank.get(r.field) {
            Some(Value::Bool(_)) => (Value::Bool(true), 1.0),
            Some(Value::Number(_)) => (Value::from(7), 7.0),
            other => panic!("{}: field {} is {other:?}", r.name, r.field),
        };
        let mut m = blank.clone();
        m.insert(r.field.to_string(), set);
        let section: T = serde_json::from_value(Value::Object(m)).unwrap();
        assert_eq!((r.get)(&section), expected, "{}", r.field);
        let first = rules.iter().position(|x| x.name == r.name) == Some(i);
        assert_eq!(
            !r.help.is_empty(),
            first,
            "help of {} ({})",
            r.name,
            r.field
        );
    }
}

#[test]
fn every_rule_reads_its_field_and_every_family_has_help() {
    check_table(BUNDLES_RULES);
    check_table(BPSEC_RULES);
    check_table(STORE_RULES);
    check_table(QUEUES_RULES);
    check_table(INGRESS_RULES);
    check_table(LTP_RULES);
    check_table(TCPCL_RULES);
    check_table(UDPCL_RULES);
    check_table(PROCESS_RULES);
    check_table(SPAN_RULES);
    check_table(TCP_PEER_RULES);
    check_table(UDP_PEER_RULES);
    check_table(BIBE_RULES);
}

#[test]
fn stcp_counters_are_typed_by_direction() {
    let mut s = status();
    s.stcp = Some(StcpStatus {
        connections_out: 1,
        bundles_sent: 4,
        keepalives_received: 3,
        frames_refused: 2,
        ..StcpStatus::default()
    });
    let f = Families::from_status(&s);
    let k = family(&f, "dtnkit_stcp_keepalives");
    assert_eq!(k.kind, Kind::Counter);
    assert_eq!(
        k.samples
            .iter()
            .find(|x| x.0 == vec![label("direction", "received")])
            .map(|x| x.1),
        Some(3.0)
    );
    assert_eq!(family(&f, "dtnkit_stcp_frames_refused").samples[0].1, 2.0);
    let open = family(&f, "dtnkit_stcp_connections_open");
    assert_eq!((open.kind, open.samples.len()), (Kind::Gauge, 2));
    // Every field of the section has a rule: nothing falls back to untyped.
    assert!(f
        .families
        .iter()
        .all(|x| !(x.name.starts_with("dtnkit_stcp") && x.kind == Kind::Untyped)));
}

#[test]
fn application_counters_are_labelled_by_app_connection_and_name() {
    let mut s = NodeStatus::default();
    s.apps.push(client::status::AppStatus {
        app: "cfdp".into(),
        connection: 3,
        reported_ms: 1,
        counters: names(&[("malformed_pdus", 2), ("names_refused", 5)]),
    });
    let f = Families::from_status(&s);
    let apps = family(&f, "dtnkit_app_counter");
    assert_eq!(apps.kind, Kind::Counter);
    assert!(!apps.help.is_empty());
    let want = |counter: &str| {
        vec![
            label("app", "cfdp"),
            label("connection", 3),
            label("counter", counter),
        ]
    };
    assert_eq!(
        apps.samples,
        vec![(want("malformed_pdus"), 2.0), (want("names_refused"), 5.0)]
    );
    // No report, no family.
    let f = Families::from_status(&NodeStatus::default());
    assert!(f.families.iter().all(|x| x.name != "dtnkit_app_counter"));
}

#[test]
fn bibe_custody_counters_are_exported() {
    let mut s = status();
    s.bibe = Some(BibeStatus {
        custody_accepted: 4,
        custody_released: 3,
        timer_expirations: 2,
        custody_refused: names(&[("redundant", 1), ("depleted_storage", 5)]),
        custody_pending: 6,
        ..BibeStatus::default()
    });
    let f = Families::from_status(&s);
    assert_eq!(family(&f, "dtnkit_bibe_custody_accepted").samples[0].1, 4.0);
    assert_eq!(family(&f, "dtnkit_bibe_custody_released").samples[0].1, 3.0);
    let t = family(&f, "dtnkit_bibe_custody_timer_expirations");
    assert_eq!((t.kind, t.samples[0].1), (Kind::Counter, 2.0));
    assert_eq!(
        family(&f, "dtnkit_bibe_custody_pending_bundles").kind,
        Kind::Gauge
    );
    let refused = family(&f, "dtnkit_bibe_custody_refused");
    assert_eq!(
        refused
            .samples
            .iter()
            .find(|x| x.0 == vec![label("reason", "depleted_storage")])
            .map(|x| x.1),
        Some(5.0)
    );
    assert!(f
        .families
        .iter()
        .all(|x| !(x.name.starts_with("dtnkit_bibe") && x.kind == Kind::Untyped)));
}
