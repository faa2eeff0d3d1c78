//! Golden JSON of every section: the keys and value types of the status reply that
//! `docs/node.md` documents and scripts, dashboards and older clients read.

use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::*;

/// `section` serialises to exactly `golden`, and `golden` parses back to `section`.
fn golden<T: Serialize + DeserializeOwned + PartialEq + fmt::Debug>(section: &T, golden: Value) {
    assert_eq!(serde_json::to_value(section).unwrap(), golden);
    assert_eq!(&serde_json::from_value::<T>(golden).unwrap(), section);
}

fn names(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn store_section() {
    let mut s = StoreStatus {
        bundles: 1,
        bytes: 2,
        quota_bytes: 3,
        commits: 4,
        commit_latency: CommitLatency {
            le_s: vec![0.0001, 0.5],
            cumulative: vec![5, 6],
            count: 7,
            sum_s: 0.25,
        },
        state: StoreState::Ok,
        degraded: None,
        failures: 8,
        recoveries: 9,
        recovered_from_disk: 10,
        hot_cache_budget_bytes: 15,
        hot_cache_held_bytes: 16,
        hot_cache_hits: 17,
        hot_cache_misses: 18,
        hot_cache_refused: 19,
        hot_cache_evicted: 20,
        hot_cache_hold_ms: 21,
        hot_cache_send_holds: 22,
        hot_cache_send_hold_timeouts: 23,
        hot_cache_send_held_ms: 24,
        commit_group_ms: 25,
        send_commits: 26,
        sends_committed: 27,
    };
    golden(
        &s,
        json!({
            "bundles": 1, "bytes": 2, "quota_bytes": 3, "commits": 4,
            "commit_latency": {"le_s": [0.0001, 0.5], "cumulative": [5, 6], "count": 7, "sum_s": 0.25},
            "state": "ok", "failures": 8, "recoveries": 9, "recovered_from_disk": 10,
            "hot_cache_budget_bytes": 15, "hot_cache_held_bytes": 16, "hot_cache_hits": 17,
            "hot_cache_misses": 18, "hot_cache_refused": 19, "hot_cache_evicted": 20,
            "hot_cache_hold_ms": 21, "hot_cache_send_holds": 22, "hot_cache_send_hold_timeouts": 23,
            "hot_cache_send_held_ms": 24, "commit_group_ms": 25, "send_commits": 26,
            "sends_committed": 27,
        }),
    );
    s.state = StoreState::Degraded;
    s.degraded = Some(DegradedStatus {
        reason: "disk full".into(),
        since_ms: 11,
        for_ms: 12,
        attempts: 13,
        retry_in_ms: 14,
    });
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(v["state"], "degraded");
    assert_eq!(
        v["degraded"],
        json!({"reason": "disk full", "since_ms": 11, "for_ms": 12, "attempts": 13, "retry_in_ms": 14})
    );
    assert_eq!(serde_json::from_value::<StoreStatus>(v).unwrap(), s);
}

#[test]
fn backoff_queues_ingress_and_reports_sections() {
    golden(
        &BackoffStatus {
            waiting_ms: 1,
            next_delay_ms: 2,
            refusals: 3,
        },
        json!({"waiting_ms": 1, "next_delay_ms": 2, "refusals": 3}),
    );
    golden(
        &QueueStatus {
            per_neighbour: [(2, 4), (10, 5)].into(),
            unrouted: 1,
            in_flight: 2,
            pending_delivery: 3,
        },
        json!({"per_neighbour": {"2": 4, "10": 5}, "unrouted": 1, "in_flight": 2, "pending_delivery": 3}),
    );
    golden(
        &IngressStatus {
            paused: true,
            pauses: 1,
            delivery_backlog_bundles: 2,
            delivery_backlog_bytes: 3,
            delivery_backlog_limit: 4,
        },
        json!({"paused": true, "pauses": 1, "delivery_backlog_bundles": 2,
               "delivery_backlog_bytes": 3, "delivery_backlog_limit": 4}),
    );
    golden(
        &StatusReportCounts {
            received: 1,
            forwarded: 2,
            delivered: 3,
            deleted: 4,
            other_records: 5,
        },
        json!({"received": 1, "forwarded": 2, "delivered": 3, "deleted": 4, "other_records": 5}),
    );
}

#[test]
fn bundles_and_bpsec_sections() {
    golden(
        &BundleStatus {
            created: 1,
            received: 2,
            forwarded: 3,
            delivered: 4,
            expired: 5,
            duplicates: 6,
            refused_store_full: 7,
            cla_failures: 8,
            cla_refusals: 9,
            malformed: 10,
            malformed_by_reason: names(&[("crc", 11)]),
            discarded: names(&[("not_a_bundle", 12)]),
            hop_limit_exceeded: 13,
            echoed: 14,
            fragmented: 15,
            created_prepared: 16,
            created_staged: 17,
        },
        json!({
            "created": 1, "received": 2, "forwarded": 3, "delivered": 4, "expired": 5,
            "duplicates": 6, "refused_store_full": 7, "cla_failures": 8, "cla_refusals": 9,
            "malformed": 10, "malformed_by_reason": {"crc": 11}, "discarded": {"not_a_bundle": 12},
            "hop_limit_exceeded": 13, "echoed": 14, "fragmented": 15, "created_prepared": 16,
            "created_staged": 17,
        }),
    );
    golden(
        &BpsecStatus {
            rules: 1,
            secured: 2,
            accepted: 3,
            failed: 4,
            last_failure: Some("integrity".into()),
        },
        json!({"rules": 1, "secured": 2, "accepted": 3, "failed": 4, "last_failure": "integrity"}),
    );
    golden(
        &BpsecStatus::default(),
        json!({"rules": 0, "secured": 0, "accepted": 0, "failed": 0, "last_failure": null}),
    );
}

#[test]
fn ltp_section_with_a_span_and_fec() {
    let span = LtpSpanStatus {
        engine_id: 1,
        link_up: true,
        export_sessions: 2,
        import_sessions: 3,
        queued_blocks: 4,
        pacing_rate_bps: 5,
        pacing_state: "receiver_limited".into(),
        segments_sent: 6,
        segments_received: 7,
        data_segments_sent: 8,
        data_bytes_sent: 9,
        data_segments_retransmitted: 10,
        reports_sent: 11,
        reports_received: 12,
        retransmission_cycles: 13,
        checkpoint_timeouts: 14,
        report_timeouts: 15,
        cancel_timeouts: 16,
        exports_completed: 17,
        export_bytes_completed: 18,
        exports_cancelled: 19,
        blocks_received: 20,
        block_bytes_received: 21,
        imports_cancelled: 22,
        imports_refused: 23,
        stale_segments: 24,
        cancelled_here: names(&[("RLEXC", 25)]),
        cancelled_by_peer: names(&[("USR_CNCLD", 26)]),
        deviations: names(&[("ltp_report_trailing_bytes", 27)]),
        auth_rejected: names(&[("bad_value", 30)]),
        rate_decreases: 28,
        rate_increases: 29,
        receiver_pause_holds: 31,
        receiver_pause_held_ms: 32,
    };
    let span_json = json!({
        "engine_id": 1, "link_up": true, "export_sessions": 2, "import_sessions": 3,
        "queued_blocks": 4, "pacing_rate_bps": 5,
        "pacing_state": "receiver_limited", "segments_sent": 6, "segments_received": 7,
        "data_segments_sent": 8, "data_bytes_sent": 9, "data_segments_retransmitted": 10,
        "reports_sent": 11, "reports_received": 12, "retransmission_cycles": 13,
        "checkpoint_timeouts": 14, "report_timeouts": 15, "cancel_timeouts": 16,
        "exports_completed": 17, "export_bytes_completed": 18, "exports_cancelled": 19,
        "blocks_received": 20, "block_bytes_received": 21, "imports_cancelled": 22,
        "imports_refused": 23, "stale_segments": 24, "cancelled_here": {"RLEXC": 25},
        "cancelled_by_peer": {"USR_CNCLD": 26}, "deviations": {"ltp_report_trailing_bytes": 27},
        "auth_rejected": {"bad_value": 30}, "rate_decreases": 28, "rate_increases": 29,
        "receiver_pause_holds": 31, "receiver_pause_held_ms": 32,
    });
    golden(&span, span_json.clone());
    let fec = FecSpanStatus {
        segments_in: 1,
        matrices_sent: 2,
        info_symbols_sent: 3,
        repair_symbols_sent: 4,
        bytes_sent: 5,
        matrices_transmitted: 6,
        matrix_tx_ns_total: 7,
        matrix_tx_ns_max: 8,
        input_dropped: 9,
        symbols_received: 10,
        repair_symbols_received: 11,
        matrices_complete: 12,
        matrices_decoded: 13,
        matrices_failed: 14,
        segments_repaired: 15,
        segments_lost: 16,
        segments_out: 17,
        sessions_cancelled: 18,
        late_symbols: 19,
        inconsistent_symbols: 20,
        matrices_evicted: 21,
        bad_rows: 22,
        feedback_raises: 23,
        feedback_repair_symbols: 24,
    };
    let fec_json = json!({
        "segments_in": 1, "matrices_sent": 2, "info_symbols_sent": 3, "repair_symbols_sent": 4,
        "bytes_sent": 5, "matrices_transmitted": 6, "matrix_tx_ns_total": 7, "matrix_tx_ns_max": 8,
        "input_dropped": 9, "symbols_received": 10, "repair_symbols_received": 11,
        "matrices_complete": 12, "matrices_decoded": 13, "matrices_failed": 14,
        "segments_repaired": 15, "segments_lost": 16, "segments_out": 17, "sessions_cancelled": 18,
        "late_symbols": 19, "inconsistent_symbols": 20, "matrices_evicted": 21, "bad_rows": 22,
        "feedback_raises": 23, "feedback_repair_symbols": 24,
    });
    golden(&fec, fec_json.clone());
    let ltp = LtpStatus {
        export_sessions: 1,
        import_sessions: 2,
        segments_sent: 3,
        segments_received: 4,
        blocks_received: 5,
        bundles_staged: 21,
        exports_completed: 6,
        exports_cancelled: 7,
        exports_refused: 8,
        malformed_datagrams: 9,
        wrong_source: 10,
        auth_rejected: 20,
        imports_refused: ImportsRefused {
            paused: 11,
            budget: 12,
            full: 13,
        },
        imports_evicted: 14,
        imports_stalled: 15,
        data_segments_retransmitted: 16,
        checkpoint_timeouts: 17,
        socket_drops: 22,
        deviations: names(&[("ltp_report_trailing_bytes", 18)]),
        adaptive_rate_bps: [(2, 19)].into(),
        spans: [(2, span)].into(),
        fec: Some([(2, fec)].into()),
    };
    golden(
        &ltp,
        json!({
            "export_sessions": 1, "import_sessions": 2, "segments_sent": 3, "segments_received": 4,
            "blocks_received": 5, "bundles_staged": 21, "exports_completed": 6, "exports_cancelled": 7,
            "exports_refused": 8, "malformed_datagrams": 9, "wrong_source": 10,
            "auth_rejected": 20, "imports_refused": {"paused": 11, "budget": 12, "full": 13},
            "imports_evicted": 14, "imports_stalled": 15, "data_segments_retransmitted": 16,
            "checkpoint_timeouts": 17, "socket_drops": 22,
            "deviations": {"ltp_report_trailing_bytes": 18},
            "adaptive_rate_bps": {"2": 19}, "spans": {"2": span_json}, "fec": {"2": fec_json},
        }),
    );
}

#[test]
fn tcpcl_and_udpcl_sections() {
    let peer = TcpclPeerStatus {
        sessions_open: 1,
        sessions_established: 2,
        bytes_sent: 3,
        bytes_received: 4,
        segments_sent: 5,
        segments_received: 6,
        transfers_acked: 7,
        transfers_refused_by_peer: 8,
        transfers_failed: 9,
        bundles_received: 10,
        transfers_refused: 11,
        keepalives_sent: 12,
        keepalives_received: 13,
    };
    let peer_json = json!({
        "sessions_open": 1, "sessions_established": 2, "bytes_sent": 3, "bytes_received": 4,
        "segments_sent": 5, "segments_received": 6, "transfers_acked": 7,
        "transfers_refused_by_peer": 8, "transfers_failed": 9, "bundles_received": 10,
        "transfers_refused": 11, "keepalives_sent": 12, "keepalives_received": 13,
    });
    golden(
        &TcpclStatus {
            sessions_established: 1,
            sessions_tls: 2,
            sessions_v3: 3,
            sessions_open: 4,
            connect_failures: 5,
            transfers_sent: 6,
            transfers_acked: 7,
            transfers_refused: 8,
            transfers_failed: 9,
            bundles_received: 10,
            transfers_refused_by_us: 11,
            bytes_sent: 12,
            bytes_received: 13,
            bundles_fragmented: 14,
            bundles_staged: 18,
            deviations: names(&[("AckFlags", 15)]),
            deviation_events: 16,
            sessions_refused: names(&[("per_address", 17)]),
            peers: [(4, peer)].into(),
        },
        json!({
            "sessions_established": 1, "sessions_tls": 2, "sessions_v3": 3, "sessions_open": 4,
            "connect_failures": 5, "transfers_sent": 6, "transfers_acked": 7,
            "transfers_refused": 8, "transfers_failed": 9, "bundles_received": 10,
            "transfers_refused_by_us": 11, "bytes_sent": 12, "bytes_received": 13,
            "bundles_fragmented": 14, "bundles_staged": 18, "deviations": {"AckFlags": 15}, "deviation_events": 16,
            "sessions_refused": {"per_address": 17}, "peers": {"4": peer_json},
        }),
    );
    golden(
        &StcpStatus {
            connections_in: 1,
            connections_out: 2,
            connect_failures: 3,
            connections_refused: 4,
            bundles_sent: 5,
            bytes_sent: 6,
            bundles_received: 7,
            bytes_received: 8,
            bundles_not_stored: 9,
            keepalives_sent: 10,
            keepalives_received: 11,
            frames_refused: 12,
            oversize_unsendable: 13,
            bundles_failed: 14,
        },
        json!({
            "connections_in": 1, "connections_out": 2, "connect_failures": 3,
            "connections_refused": 4, "bundles_sent": 5, "bytes_sent": 6,
            "bundles_received": 7, "bytes_received": 8, "bundles_not_stored": 9,
            "keepalives_sent": 10, "keepalives_received": 11, "frames_refused": 12,
            "oversize_unsendable": 13, "bundles_failed": 14,
        }),
    );
    golden(
        &UdpclStatus {
            datagrams_sent: 1,
            datagrams_received: 2,
            bundles_fragmented: 3,
            oversize_refused: 4,
            send_errors: 5,
            truncated_datagrams: 6,
            peers: [(
                3,
                UdpclPeerStatus {
                    bundles_sent: 7,
                    bytes_sent: 8,
                    send_errors: 9,
                    datagrams_received: 10,
                    bytes_received: 11,
                },
            )]
            .into(),
        },
        json!({
            "datagrams_sent": 1, "datagrams_received": 2, "bundles_fragmented": 3,
            "oversize_refused": 4, "send_errors": 5, "truncated_datagrams": 6,
            "peers": {"3": {"bundles_sent": 7, "bytes_sent": 8, "send_errors": 9,
                            "datagrams_received": 10, "bytes_received": 11}},
        }),
    );
}

#[test]
fn contacts_and_process_sections() {
    let neighbour = |cla, link_up, rate_bps| NeighbourStatus {
        cla,
        link_up,
        rate_bps,
    };
    golden(
        &ContactsStatus {
            neighbours: [
                (2, neighbour(Some(Cla::Ltp), true, 1000)),
                (3, neighbour(Some(Cla::Tcpcl), false, 0)),
                (4, neighbour(Some(Cla::Udpcl), false, 0)),
                (5, neighbour(None, true, 0)),
            ]
            .into(),
            plan: Some(PlanStatus {
                contacts: vec![PlanContact {
                    from: 1,
                    to: 2,
                    start_in_s: -5.0,
                    end_in_s: 2.5,
                    rate_bps: 8000,
                    active: true,
                }],
                remaining: 3,
            }),
        },
        json!({
            "neighbours": {
                "2": {"cla": "ltp", "link_up": true, "rate_bps": 1000},
                "3": {"cla": "tcpcl", "link_up": false, "rate_bps": 0},
                "4": {"cla": "udpcl", "link_up": false, "rate_bps": 0},
                "5": {"cla": null, "link_up": true, "rate_bps": 0},
            },
            "plan": {"contacts": [{"from": 1, "to": 2, "start_in_s": -5.0, "end_in_s": 2.5,
                                   "rate_bps": 8000, "active": true}],
                     "remaining": 3},
        }),
    );
    golden(
        &ProcessStatus {
            cpu_seconds: 1.5,
            rss_bytes: 2,
            threads: 3,
            uptime_seconds: 4.25,
        },
        json!({"cpu_seconds": 1.5, "rss_bytes": 2, "threads": 3, "uptime_seconds": 4.25}),
    );
}

#[test]
fn the_apps_section_lists_each_reporting_connection() {
    golden(
        &AppStatus {
            app: "cfdp".into(),
            connection: 3,
            reported_ms: 4,
            counters: names(&[("malformed_pdus", 5)]),
        },
        json!({"app": "cfdp", "connection": 3, "reported_ms": 4, "counters": {"malformed_pdus": 5}}),
    );
    let v = serde_json::to_value(NodeStatus::default()).unwrap();
    assert_eq!(v["apps"], json!([]));
}

#[test]
fn absent_sections_are_null_and_every_section_is_there() {
    let v = serde_json::to_value(NodeStatus::default()).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "apps",
            "backoff",
            "bibe",
            "bpsec",
            "bundles",
            "contacts",
            "ingress",
            "ltp",
            "node",
            "process",
            "queues",
            "status_reports",
            "stcp",
            "store",
            "tcpcl",
            "udpcl",
        ]
    );
    for null in ["tcpcl", "udpcl", "stcp", "bibe", "bpsec", "process"] {
        assert!(v[null].is_null(), "{null}: {v}");
    }
    assert!(v["ltp"]["fec"].is_null());
    assert!(v["contacts"]["plan"].is_null());
    assert!(v["store"].get("degraded").is_none(), "absent while healthy");
}

#[test]
fn a_reply_parses_with_keys_missing_or_unknown_and_round_trips() {
    // An older node lacks keys; a newer one has more: both parse.
    let s = NodeStatus::from_json(r#"{"node": 7, "bundles": {"received": 3, "new_counter": 1}}"#)
        .unwrap();
    assert_eq!((s.node, s.bundles.received, s.bundles.created), (7, 3, 0));
    assert!(s.tcpcl.is_none());
    let text = s.to_json();
    assert_eq!(NodeStatus::from_json(&text).unwrap(), s);
    assert_eq!(s.to_string(), text);
    // Floats survive the round trip exactly.
    let p = ProcessStatus {
        cpu_seconds: 0.1 + 0.2,
        uptime_seconds: 1.0 / 3.0,
        ..ProcessStatus::default()
    };
    let back: ProcessStatus = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
    assert_eq!(back, p);
    assert!(NodeStatus::from_json("\"up\"").is_err());
    assert!(NodeStatus::from_json(r#"{"node": "one"}"#).is_err());
}

#[test]
fn bibe_section() {
    let s = BibeStatus {
        encapsulated: 1,
        decapsulated: 2,
        custody_accepted: 3,
        custody_refused: names(&[("redundant", 4)]),
        custody_released: 5,
        custody_refused_by_peer: names(&[("depleted_storage", 6)]),
        timer_expirations: 7,
        retransmissions: 8,
        expired_in_custody: 9,
        signals_sent: 10,
        signals_received: 11,
        signal_ids_unknown: 12,
        malformed: 13,
        ion_record_codes: 17,
        outbound_not_stored: 14,
        custody_pending: 15,
        custody_pending_bytes: 16,
        pending_per_tunnel: [(102, 15)].into_iter().collect(),
    };
    golden(
        &s,
        json!({
            "encapsulated": 1, "decapsulated": 2, "custody_accepted": 3,
            "custody_refused": {"redundant": 4}, "custody_released": 5,
            "custody_refused_by_peer": {"depleted_storage": 6}, "timer_expirations": 7,
            "retransmissions": 8, "expired_in_custody": 9, "signals_sent": 10,
            "signals_received": 11, "signal_ids_unknown": 12, "malformed": 13,
            "ion_record_codes": 17, "outbound_not_stored": 14, "custody_pending": 15, "custody_pending_bytes": 16,
            "pending_per_tunnel": {"102": 15}
        }),
    );
    assert_eq!(Cla::Bibe.name(), "bibe");
}
