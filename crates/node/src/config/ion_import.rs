//! `dtnkit import-ion`: translates an ION node's `.rc` files (`ionrc`, `ltprc`, `bprc`,
//! `ipnrc`) into a `dtnkit node` configuration (TOML) and a contact plan (ION lines).
//!
//! The translator is pure (text in, text out) so it is tested without files; the command line
//! only reads the inputs and writes the outputs. Every ION line that is not translated is
//! reported with its file and line and why ([`Note`]); malformed lines are an
//! [`ImportError`] naming the file, the line and the form expected.
//!
//! What is translated (docs/interop.md, "Importing an ION configuration"):
//!
//! | ION | dtnkit |
//! |---|---|
//! | ionrc `1 N` | `node = N` |
//! | ionrc `a contact`, `a range`, `d contact`, `d range` | the contact plan (`plan.txt`) |
//! | ltprc `a span E maxExp maxImp seg aggrSize aggrTime 'udplso HOST:PORT [BPS]'` | `[[span]]` |
//! | ltprc `s 'udplsi HOST:PORT'` | `bind` |
//! | bprc `a induct ltp E ltpcli` | `[ltp] engine_id` when `E` is not the node number |
//! | bprc `a induct tcp HOST:PORT tcpcli` | `[tcpcl] listen` (v3 sessions accepted by default) |
//! | bprc `a induct udp HOST:PORT udpcli` | `[udpcl] bind` |
//! | ipnrc `a plan P ltp/E` | the span to engine `E` is neighbour `P` |
//! | ipnrc `a plan P tcp/HOST:PORT`, `udp/HOST:PORT` | `[[tcp_peer]]` with `version = 3`, `[[udp_peer]]` |
//! | ipnrc `a exit FIRST LAST ipn:G.S` | `[[route]]` |

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The kind of an ION configuration file, from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RcKind {
    /// `*.ionrc` (ionadmin).
    Ion,
    /// `*.ltprc` (ltpadmin).
    Ltp,
    /// `*.bprc` (bpadmin).
    Bp,
    /// `*.ipnrc` (ipnadmin).
    Ipn,
}

impl RcKind {
    /// The kind of a file by its name (`node.ionrc`, `ltprc`, `host1.bprc`, ...), if it is one
    /// of the four that are translated.
    pub fn of(name: &str) -> Option<RcKind> {
        let base = name.rsplit('/').next().unwrap_or(name);
        let kinds = [
            ("ionrc", RcKind::Ion),
            ("ltprc", RcKind::Ltp),
            ("bprc", RcKind::Bp),
            ("ipnrc", RcKind::Ipn),
        ];
        kinds
            .into_iter()
            .find(|(suffix, _)| base.ends_with(suffix))
            .map(|(_, k)| k)
    }
}

/// One input file.
#[derive(Debug, Clone)]
pub struct RcFile {
    /// Name shown in messages (the path as given).
    pub name: String,
    /// Its text.
    pub text: String,
}

/// Why a line was not (fully) translated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteKind {
    /// Nothing to translate: dtnkit needs no counterpart (e.g. `s`, `a scheme ipn`).
    Ignored,
    /// The line's meaning is lost: it has no dtnkit counterpart or cannot be expressed.
    Untranslated,
    /// Translated, but the result behaves differently from ION (e.g. a udplso rate ION 4 ignores).
    Caveat,
}

impl NoteKind {
    /// Label used when printing.
    pub fn label(self) -> &'static str {
        match self {
            NoteKind::Ignored => "ignored",
            NoteKind::Untranslated => "not translated",
            NoteKind::Caveat => "translated with a caveat",
        }
    }
}

/// An ION line that was not (fully) translated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// File name.
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    /// The line as written (trimmed).
    pub text: String,
    /// Kind.
    pub kind: NoteKind,
    /// Why.
    pub why: String,
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: {}: `{}`: {}",
            self.file,
            self.line,
            self.kind.label(),
            self.text,
            self.why
        )
    }
}

/// Malformed input: one line naming the file, the line and the expected form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ImportError(pub String);

/// The result of an import.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The node number.
    pub node: u64,
    /// `node.toml` text. It names the plan as `plan.txt` (next to it) when there is one, and the
    /// store as `store` (relative to it).
    pub node_toml: String,
    /// `plan.txt` text (ION contact and range lines), when the ionrc had any.
    pub plan: Option<String>,
    /// Every line not (fully) translated, in input order.
    pub notes: Vec<Note>,
}

/// File name of the contact plan the generated configuration refers to.
pub const PLAN_FILE: &str = "plan.txt";

/// Default UDP port of ION's `udplsi`/`udplso` (and LTP's IANA port).
const LTP_PORT: u16 = 1113;

#[derive(Debug, Clone)]
struct Where {
    file: String,
    line: usize,
    text: String,
}

#[derive(Debug, Clone)]
struct IonSpan {
    at: Where,
    engine: u64,
    max_export: u64,
    max_import: u64,
    segment: u64,
    aggr_bytes: u64,
    aggr_s: f64,
    address: SocketAddr,
    rate_bps: u64,
}

#[derive(Debug, Clone)]
struct Peer {
    at: Where,
    node: u64,
    address: SocketAddr,
}

#[derive(Debug, Clone)]
struct Route {
    at: Where,
    first: u64,
    last: u64,
    via: u64,
}

#[derive(Default)]
struct State {
    notes: Vec<Note>,
    node: Option<(u64, Where)>,
    plan: String,
    plan_lines: usize,
    plan_check: Option<bp::ContactPlan>,
    spans: Vec<IonSpan>,
    bind: Option<SocketAddr>,
    induct_engine: Option<(u64, Where)>,
    ltp_outducts: Vec<(u64, Where)>,
    tcp_listen: Option<SocketAddr>,
    tcp_outducts: Vec<(SocketAddr, Where)>,
    udp_bind: Option<SocketAddr>,
    udp_outducts: Vec<(SocketAddr, Where)>,
    ipnrc_refs: Vec<(String, Where)>,
    ltp_plans: Vec<(u64, u64, Where)>,
    tcp_peers: Vec<Peer>,
    udp_peers: Vec<Peer>,
    routes: Vec<Route>,
    sources: Vec<String>,
}

impl State {
    fn note(&mut self, at: &Where, kind: NoteKind, why: impl Into<String>) {
        self.notes.push(Note {
            file: at.file.clone(),
            line: at.line,
            text: at.text.clone(),
            kind,
            why: why.into(),
        });
    }
}

fn malformed(at: &Where, expected: &str) -> ImportError {
    ImportError(format!(
        "{}:{}: `{}`: expected {expected}",
        at.file, at.line, at.text
    ))
}

/// Splits an ION command line into words; `'...'` and `"..."` group words (ION's quoting).
/// `#` outside quotes at the start of a word starts a comment.
fn words(line: &str) -> Result<Vec<String>, &'static str> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                in_word = true;
            }
            None if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            None if c == '#' && !in_word => break,
            None => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err("a closing quote");
    }
    if in_word {
        out.push(cur);
    }
    Ok(out)
}

fn num(s: &str) -> Option<u64> {
    s.parse().ok()
}

/// `HOST[:PORT]` with an IP address (or `localhost`, or `@`/empty = any address). A host
/// name is `Err(why)` (noted, not translated); a bad port is an [`ImportError`].
fn host_port(at: &Where, s: &str, any_ok: bool) -> Result<Result<SocketAddr, String>, ImportError> {
    let (host, port) = match s.rsplit_once(':') {
        // An IPv6 literal without a port has colons too: take it whole when it parses as one.
        Some((h, p)) if s.parse::<IpAddr>().is_err() => (
            h.trim_start_matches('[').trim_end_matches(']'),
            p.parse::<u16>()
                .map_err(|_| malformed(at, &format!("HOST:PORT with a port number, not {p:?}")))?,
        ),
        _ => (s, LTP_PORT),
    };
    let ip = match host {
        "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
        "@" | "" | "0.0.0.0" if any_ok => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        h => match h.parse::<IpAddr>() {
            Ok(ip) => ip,
            Err(_) => {
                return Ok(Err(format!(
                    "dtnkit needs an IP address, not the host name {h:?}: resolve it and add the \
                     entry to node.toml by hand"
                )))
            }
        },
    };
    Ok(Ok(SocketAddr::new(ip, port)))
}

/// Translates the files (any order; they are processed ionrc, ltprc, bprc, ipnrc).
pub fn import(files: &[RcFile]) -> Result<Imported, ImportError> {
    let mut ordered: Vec<(RcKind, &RcFile)> = Vec::new();
    for f in files {
        let kind = RcKind::of(&f.name).ok_or_else(|| {
            ImportError(format!(
                "{}: not an ION configuration file this importer reads: expected a name ending \
                 in ionrc, ltprc, bprc or ipnrc (e.g. node.ionrc)",
                f.name
            ))
        })?;
        ordered.push((kind, f));
    }
    ordered.sort_by_key(|(k, _)| *k);
    let mut st = State {
        plan_check: Some(bp::ContactPlan::new(0)),
        ..State::default()
    };
    for (kind, f) in &ordered {
        st.sources.push(f.name.clone());
        for (i, raw) in f.text.lines().enumerate() {
            let at = Where {
                file: f.name.clone(),
                line: i + 1,
                text: raw.trim().to_string(),
            };
            let w = words(raw).map_err(|e| malformed(&at, e))?;
            if w.is_empty() {
                continue;
            }
            let w: Vec<&str> = w.iter().map(String::as_str).collect();
            match kind {
                RcKind::Ion => ionrc(&mut st, &at, &w)?,
                RcKind::Ltp => ltprc(&mut st, &at, &w)?,
                RcKind::Bp => bprc(&mut st, &at, &w)?,
                RcKind::Ipn => ipnrc(&mut st, &at, &w)?,
            }
        }
    }
    finish(st)
}

fn ionrc(st: &mut State, at: &Where, w: &[&str]) -> Result<(), ImportError> {
    match w {
        ["1", n, rest @ ..] if rest.len() <= 1 => {
            let n = num(n)
                .filter(|n| *n > 0)
                .ok_or_else(|| malformed(at, "`1 NODE_NUMBER [CONFIG_FILE]` with NODE_NUMBER >= 1"))?;
            if let Some((old, _)) = &st.node {
                if *old != n {
                    return Err(malformed(
                        at,
                        &format!("one node number for all the files (node {old} was set before)"),
                    ));
                }
            }
            st.node = Some((n, at.clone()));
            if !rest.is_empty() {
                st.note(
                    at,
                    NoteKind::Ignored,
                    "the node number is translated; ION's ionconfig (SDR and heap sizes) has no \
                     dtnkit counterpart (see [store] in node.toml)",
                );
            }
        }
        ["1", ..] => return Err(malformed(at, "`1 NODE_NUMBER [CONFIG_FILE]`")),
        ["a" | "d", "contact" | "range", ..] => {
            let line = w.join(" ");
            let check = st.plan_check.as_mut().expect("set at start");
            if let Err(mut e) = check.apply_ion_str(&line, &at.file) {
                e.file.clone_from(&at.file);
                e.line = at.line as u32;
                return Err(ImportError(format!(
                    "{e} (docs/contact-plan.md lists the contact-plan lines dtnkit reads)"
                )));
            }
            let _ = writeln!(st.plan, "{line}    # {}:{}", at.file, at.line);
            st.plan_lines += 1;
        }
        ["s", ..] => st.note(
            at,
            NoteKind::Ignored,
            "starts ION; a dtnkit node starts with `dtnkit node --config node.toml`",
        ),
        ["x", ..] => st.note(at, NoteKind::Ignored, "stops ION; nothing to translate"),
        ["m", "horizon", ..] => st.note(
            at,
            NoteKind::Untranslated,
            "dtnkit's routing has no horizon: contacts are routed over as soon as the plan holds them",
        ),
        ["m", ..] => st.note(
            at,
            NoteKind::Untranslated,
            "ionadmin management setting with no dtnkit counterpart",
        ),
        ["@", ..] => st.note(
            at,
            NoteKind::Untranslated,
            "ION's reference time: dtnkit counts `+SECONDS` plan times from the node's start",
        ),
        _ => st.note(
            at,
            NoteKind::Untranslated,
            "ionadmin command with no dtnkit counterpart (only `1`, `a/d contact`, `a/d range` are translated)",
        ),
    }
    Ok(())
}

const SPAN_FORM: &str = "`a span PEER_ENGINE MAX_EXPORT_SESSIONS MAX_IMPORT_SESSIONS \
                         MAX_SEGMENT_SIZE AGGR_SIZE_LIMIT AGGR_TIME_LIMIT 'udplso HOST:PORT [RATE]' \
                         [QUEUING_LATENCY]` with numbers";

fn ltprc(st: &mut State, at: &Where, w: &[&str]) -> Result<(), ImportError> {
    match w {
        ["1", n, ..] if num(n).is_some() => st.note(
            at,
            NoteKind::Ignored,
            "ION's estimate of concurrent sessions; dtnkit sizes sessions per span \
             (max_sessions, max_import_sessions)",
        ),
        ["1", ..] => return Err(malformed(at, "`1 EST_MAX_EXPORT_SESSIONS [SDR_BYTES]`")),
        ["a", "span", rest @ ..] => {
            if !(7..=8).contains(&rest.len()) {
                return Err(malformed(at, SPAN_FORM));
            }
            let n: Vec<u64> = rest[..5]
                .iter()
                .map(|s| num(s))
                .collect::<Option<_>>()
                .ok_or_else(|| malformed(at, SPAN_FORM))?;
            let aggr_s: f64 = rest[5]
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| malformed(at, SPAN_FORM))?;
            if n[0] == 0 || n[1] == 0 || n[2] == 0 || n[3] == 0 || n[4] == 0 {
                return Err(malformed(at, &format!("{SPAN_FORM} above 0")));
            }
            let lso: Vec<&str> = rest[6].split_whitespace().collect();
            let (address, rate_bps) = match lso.as_slice() {
                ["udplso", args @ ..] if args.len() <= 2 => {
                    let address = match args.first() {
                        Some(a) => match host_port(at, a, false)? {
                            Ok(a) => a,
                            Err(why) => {
                                st.note(at, NoteKind::Untranslated, why);
                                return Ok(());
                            }
                        },
                        None => {
                            st.note(
                                at,
                                NoteKind::Untranslated,
                                "udplso without a remote address: dtnkit needs the peer's IP address",
                            );
                            return Ok(());
                        }
                    };
                    let rate = match args.get(1) {
                        Some(r) => num(r).ok_or_else(|| malformed(at, SPAN_FORM))?,
                        None => 0,
                    };
                    if rate > 0 {
                        st.note(
                            at,
                            NoteKind::Caveat,
                            format!(
                                "rate_bps = {rate}: ION 4 ignores udplso's rate (its rates come from \
                                 the contact plan); dtnkit paces the span at it (bit/s, as older \
                                 udplso did) whenever no contact plan governs the span"
                            ),
                        );
                    }
                    (address, rate)
                }
                ["udplso", ..] => return Err(malformed(at, SPAN_FORM)),
                _ => {
                    st.note(
                        at,
                        NoteKind::Untranslated,
                        "only the udplso link service output is translated (dtnkit runs LTP over UDP)",
                    );
                    return Ok(());
                }
            };
            if let Some(q) = rest.get(7) {
                num(q).ok_or_else(|| malformed(at, SPAN_FORM))?;
                st.note(
                    at,
                    NoteKind::Caveat,
                    "the queuing latency is not translated: dtnkit's RTO is 2 x OWLT + 100 ms \
                     (rto_ms to change it)",
                );
            }
            if st.spans.iter().any(|s| s.engine == n[0]) {
                return Err(malformed(at, "one `a span` per peer engine"));
            }
            st.spans.push(IonSpan {
                at: at.clone(),
                engine: n[0],
                max_export: n[1],
                max_import: n[2],
                segment: n[3],
                aggr_bytes: n[4],
                aggr_s,
                address,
                rate_bps,
            });
        }
        ["s", lsi, ..] => {
            let parts: Vec<&str> = lsi.split_whitespace().collect();
            match parts.as_slice() {
                ["udplsi"] => st.bind = Some(SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), LTP_PORT)),
                ["udplsi", a, ..] => match host_port(at, a, true)? {
                    Ok(a) => st.bind = Some(a),
                    Err(why) => st.note(
                        at,
                        NoteKind::Untranslated,
                        format!("{why}; the node binds to 0.0.0.0:{LTP_PORT} instead"),
                    ),
                },
                _ => st.note(
                    at,
                    NoteKind::Untranslated,
                    "only the udplsi link service input is translated (dtnkit runs LTP over UDP)",
                ),
            }
        }
        ["s"] => st.note(
            at,
            NoteKind::Untranslated,
            "starts LTP without a link service input; the node binds to 0.0.0.0:1113",
        ),
        ["x", ..] => st.note(at, NoteKind::Ignored, "stops LTP; nothing to translate"),
        _ => st.note(
            at,
            NoteKind::Untranslated,
            "ltpadmin command with no dtnkit counterpart (only `a span` and `s 'udplsi ...'` are translated)",
        ),
    }
    Ok(())
}

fn bprc(st: &mut State, at: &Where, w: &[&str]) -> Result<(), ImportError> {
    match w {
        ["1", ..] => st.note(at, NoteKind::Ignored, "initialises BP in ION; nothing to translate"),
        ["s", ..] => st.note(at, NoteKind::Ignored, "starts BP in ION; nothing to translate"),
        ["x", ..] => st.note(at, NoteKind::Ignored, "stops BP in ION; nothing to translate"),
        ["a", "scheme", "ipn", ..] => st.note(
            at,
            NoteKind::Ignored,
            "dtnkit forwards ipn endpoints without configuration",
        ),
        ["a", "scheme", ..] => st.note(
            at,
            NoteKind::Untranslated,
            "dtnkit node ids are ipn:N.0; other schemes are forwarded only by explicit destination, not configured",
        ),
        ["a", "endpoint", ..] => st.note(
            at,
            NoteKind::Ignored,
            "dtnkit endpoints are registered by the application that receives \
             (`dtnkit recv --endpoint`); bundles for an endpoint nobody receives wait in the store",
        ),
        ["a", "protocol", ..] => st.note(
            at,
            NoteKind::Ignored,
            "convergence layers are configured per neighbour in node.toml",
        ),
        ["a", "induct", "ltp", e, ..] => {
            let e = num(e)
                .filter(|e| *e > 0)
                .ok_or_else(|| malformed(at, "`a induct ltp ENGINE_NUMBER ltpcli`"))?;
            st.induct_engine = Some((e, at.clone()));
        }
        ["a", "outduct", "ltp", e, ..] => {
            let e = num(e)
                .filter(|e| *e > 0)
                .ok_or_else(|| malformed(at, "`a outduct ltp PEER_ENGINE_NUMBER ltpclo`"))?;
            st.ltp_outducts.push((e, at.clone()));
        }
        // ION's tcpcli speaks TCPCLv3; the listener accepts v3 (and v4) contact headers.
        ["a", "induct", "tcp", a, ..] => match host_port(at, a, true)? {
            Ok(a) => st.tcp_listen = Some(a),
            Err(why) => st.note(at, NoteKind::Untranslated, why),
        },
        ["a", "outduct", "tcp", a, ..] => match host_port(at, a, false)? {
            Ok(a) => st.tcp_outducts.push((a, at.clone())),
            Err(why) => st.note(at, NoteKind::Untranslated, why),
        },
        ["a", "induct", "udp", a, ..] => match host_port(at, a, true)? {
            Ok(a) => {
                st.udp_bind = Some(a);
                st.note(
                    at,
                    NoteKind::Caveat,
                    "[udpcl] bind: one bundle per datagram as in ION's udpcl; not tried against ION",
                );
            }
            Err(why) => st.note(at, NoteKind::Untranslated, why),
        },
        ["a", "outduct", "udp", a, ..] => match host_port(at, a, false)? {
            Ok(a) => st.udp_outducts.push((a, at.clone())),
            Err(why) => st.note(at, NoteKind::Untranslated, why),
        },
        ["a", "induct" | "outduct", p, ..] => st.note(
            at,
            NoteKind::Untranslated,
            format!("dtnkit has no {p} convergence layer (it has LTP over UDP, TCPCL v4 and v3, and UDPCL)"),
        ),
        ["r", cmd] if cmd.split_whitespace().next() == Some("ipnadmin") => {
            let file = cmd.split_whitespace().nth(1).unwrap_or("").to_string();
            st.ipnrc_refs.push((file, at.clone()));
        }
        _ => st.note(
            at,
            NoteKind::Untranslated,
            "bpadmin command with no dtnkit counterpart",
        ),
    }
    Ok(())
}

fn ipnrc(st: &mut State, at: &Where, w: &[&str]) -> Result<(), ImportError> {
    const PLAN_FORM: &str = "`a plan NODE_NUMBER PROTOCOL/DUCT [NOMINAL_RATE]`";
    match w {
        ["a", "plan", node, duct, rest @ ..] if rest.len() <= 1 => {
            let node = num(node)
                .filter(|n| *n > 0)
                .ok_or_else(|| malformed(at, PLAN_FORM))?;
            if !rest.is_empty() {
                st.note(
                    at,
                    NoteKind::Caveat,
                    "the nominal rate is not translated: rates come from the contact plan or the span's rate_bps",
                );
            }
            let Some((proto, name)) = duct.split_once('/') else {
                return Err(malformed(at, PLAN_FORM));
            };
            match proto {
                "ltp" => {
                    let e = num(name)
                        .filter(|e| *e > 0)
                        .ok_or_else(|| malformed(at, "`a plan NODE_NUMBER ltp/ENGINE_NUMBER`"))?;
                    st.ltp_plans.push((node, e, at.clone()));
                }
                "tcp" | "udp" => match host_port(at, name, false)? {
                    Ok(address) => {
                        let p = Peer {
                            at: at.clone(),
                            node,
                            address,
                        };
                        if proto == "tcp" {
                            st.tcp_peers.push(p);
                        } else {
                            st.udp_peers.push(p);
                        }
                    }
                    Err(why) => st.note(at, NoteKind::Untranslated, why),
                },
                _ => st.note(
                    at,
                    NoteKind::Untranslated,
                    format!("dtnkit has no {proto} convergence layer"),
                ),
            }
        }
        ["a", "plan", ..] => return Err(malformed(at, PLAN_FORM)),
        ["a", "exit", first, last, eid] => {
            const EXIT_FORM: &str = "`a exit FIRST_NODE LAST_NODE ipn:GATEWAY.SERVICE`";
            let first = num(first).ok_or_else(|| malformed(at, EXIT_FORM))?;
            let last = num(last)
                .filter(|l| *l >= first)
                .ok_or_else(|| malformed(at, EXIT_FORM))?;
            let via = eid
                .strip_prefix("ipn:")
                .and_then(|r| r.split('.').next())
                .and_then(num);
            match via {
                Some(via) => st.routes.push(Route {
                    at: at.clone(),
                    first,
                    last,
                    via,
                }),
                None => st.note(
                    at,
                    NoteKind::Untranslated,
                    "the gateway is not an ipn endpoint; dtnkit routes via a neighbour's node number",
                ),
            }
        }
        ["a", "exit", ..] => {
            return Err(malformed(
                at,
                "`a exit FIRST_NODE LAST_NODE ipn:GATEWAY.SERVICE`",
            ))
        }
        _ => st.note(
            at,
            NoteKind::Untranslated,
            "ipnadmin command with no dtnkit counterpart (only `a plan` and `a exit` are translated)",
        ),
    }
    Ok(())
}

fn finish(mut st: State) -> Result<Imported, ImportError> {
    let Some((node, _)) = st.node.clone() else {
        let files = st.sources.join(", ");
        return Err(ImportError(format!(
            "{files}: no node number: expected a line `1 NODE_NUMBER [CONFIG_FILE]` in the node's \
             .ionrc (give the ionrc too)"
        )));
    };
    // ipnadmin references: translated when the named file is among the inputs.
    for (file, at) in std::mem::take(&mut st.ipnrc_refs) {
        let base = file.rsplit('/').next().unwrap_or(&file).to_string();
        let given = st
            .sources
            .iter()
            .any(|s| s.rsplit('/').next() == Some(base.as_str()));
        if !given {
            st.note(
                &at,
                NoteKind::Untranslated,
                format!("{file:?} is not among the inputs: give the ipnrc too to translate its plans and exits"),
            );
        }
    }
    let mut engine_id = None;
    if let Some((e, at)) = st.induct_engine.clone() {
        if e != node {
            engine_id = Some(e);
            st.note(
                &at,
                NoteKind::Caveat,
                format!("[ltp] engine_id = {e}: this node's LTP engine number differs from its node number {node}"),
            );
        }
    }
    let own_engine = engine_id.unwrap_or(node);
    let mut out = String::new();
    let mut used: Vec<u64> = Vec::new();
    let mut spans = String::new();
    for s in std::mem::take(&mut st.spans) {
        if s.engine == own_engine {
            st.note(
                &s.at,
                NoteKind::Ignored,
                "a span to this node's own engine (ION's loopback): dtnkit delivers its own bundles locally",
            );
            continue;
        }
        let plans: Vec<(u64, Where)> = st
            .ltp_plans
            .iter()
            .filter(|(_, e, _)| *e == s.engine)
            .map(|(n, _, at)| (*n, at.clone()))
            .collect();
        let peer = match plans.first() {
            Some((p, _)) => *p,
            None => {
                st.note(
                    &s.at,
                    NoteKind::Caveat,
                    format!(
                        "no ipnrc `a plan NODE ltp/{}`: the span's neighbour is taken to be node {}",
                        s.engine, s.engine
                    ),
                );
                s.engine
            }
        };
        for (p, at) in plans.iter().skip(1) {
            st.note(
                at,
                NoteKind::Untranslated,
                format!("node {p} through engine {} too: dtnkit has one neighbour per span; add a [[route]] dest = {p} via = {peer} by hand", s.engine),
            );
        }
        if peer == node || used.contains(&peer) {
            st.note(
                &s.at,
                NoteKind::Untranslated,
                format!("node {peer} is this node or already a neighbour"),
            );
            continue;
        }
        if !st.ltp_outducts.iter().any(|(e, _)| *e == s.engine) {
            st.note(
                &s.at,
                NoteKind::Caveat,
                format!(
                    "no bprc `a outduct ltp {}`: translated anyway (dtnkit sends over every span)",
                    s.engine
                ),
            );
        }
        used.push(peer);
        let seg = s.segment.clamp(ltp::MIN_SEGMENT_SIZE as u64, 65_507);
        if seg != s.segment {
            st.note(
                &s.at,
                NoteKind::Caveat,
                format!(
                    "max_segment_size {} is outside dtnkit's {}..=65507: set to {seg}",
                    s.segment,
                    ltp::MIN_SEGMENT_SIZE
                ),
            );
        }
        let clamp = |v: u64| v.min(100_000);
        let _ = writeln!(spans, "\n[[span]]    # {}:{}", s.at.file, s.at.line);
        let _ = writeln!(spans, "peer = {peer}");
        let _ = writeln!(spans, "peer_kind = \"ion\"");
        let _ = writeln!(spans, "address = \"{}\"", s.address);
        if peer != s.engine {
            let _ = writeln!(spans, "engine_id = {}", s.engine);
        }
        let _ = writeln!(spans, "max_segment_size = {seg}");
        let _ = writeln!(spans, "max_sessions = {}", clamp(s.max_export));
        let _ = writeln!(spans, "max_import_sessions = {}", clamp(s.max_import));
        let _ = writeln!(spans, "aggregation_bytes = {}", s.aggr_bytes);
        let _ = writeln!(spans, "aggregation_ms = {:?}", s.aggr_s * 1000.0);
        if s.rate_bps > 0 {
            let _ = writeln!(spans, "rate_bps = {}", s.rate_bps);
        }
    }
    for (e, at) in std::mem::take(&mut st.ltp_outducts) {
        if e != own_engine
            && !used
                .iter()
                .any(|p| st.ltp_plans.iter().any(|(n, pe, _)| n == p && *pe == e) || *p == e)
        {
            st.note(
                &at,
                NoteKind::Untranslated,
                format!(
                    "no ltprc `a span {e} ...` with a udplso address translated for this outduct"
                ),
            );
        }
    }
    for (n, e, at) in std::mem::take(&mut st.ltp_plans) {
        if e == own_engine || n == node {
            st.note(
                &at,
                NoteKind::Ignored,
                "a plan for this node itself: dtnkit delivers its own bundles locally",
            );
        } else if !used.contains(&n)
            && !st
                .notes
                .iter()
                .any(|x| x.file == at.file && x.line == at.line)
        {
            st.note(
                &at,
                NoteKind::Untranslated,
                format!("no translated ltprc span for engine {e}"),
            );
        }
    }
    let mut peers_toml = String::new();
    let tcp_peers = std::mem::take(&mut st.tcp_peers);
    let udp_peers = std::mem::take(&mut st.udp_peers);
    let mut have_tcp = false;
    let mut have_udp = false;
    for (table, list) in [("tcp_peer", &tcp_peers), ("udp_peer", &udp_peers)] {
        for p in list {
            if p.node == node || used.contains(&p.node) {
                st.note(&p.at, NoteKind::Untranslated, format!("node {} is this node or already a neighbour (dtnkit: one convergence layer per neighbour)", p.node));
                continue;
            }
            used.push(p.node);
            let _ = writeln!(peers_toml, "\n[[{table}]]    # {}:{}", p.at.file, p.at.line);
            let _ = writeln!(peers_toml, "peer = {}", p.node);
            let _ = writeln!(peers_toml, "address = \"{}\"", p.address);
            if table == "tcp_peer" {
                have_tcp = true;
                // A neighbour in an ION configuration is an ION node: TCPCLv3 (RFC 7242).
                let _ = writeln!(peers_toml, "peer_kind = \"ion\"");
                let _ = writeln!(peers_toml, "version = 3");
            } else {
                have_udp = true;
            }
        }
    }
    for (a, at) in std::mem::take(&mut st.tcp_outducts) {
        if !tcp_peers.iter().any(|p| p.address == a) {
            st.note(&at, NoteKind::Untranslated, "no ipnrc `a plan NODE tcp/HOST:PORT` names this outduct, so its neighbour's node number is unknown");
        }
    }
    for (a, at) in std::mem::take(&mut st.udp_outducts) {
        if !udp_peers.iter().any(|p| p.address == a) {
            st.note(&at, NoteKind::Untranslated, "no ipnrc `a plan NODE udp/HOST:PORT` names this outduct, so its neighbour's node number is unknown");
        }
    }
    let mut routes = String::new();
    for r in std::mem::take(&mut st.routes) {
        if !used.contains(&r.via) {
            st.note(
                &r.at,
                NoteKind::Untranslated,
                format!("the gateway node {} is not a translated neighbour", r.via),
            );
            continue;
        }
        let _ = writeln!(routes, "\n[[route]]    # {}:{}", r.at.file, r.at.line);
        let _ = writeln!(routes, "dest = {}", r.first);
        if r.last != r.first {
            let _ = writeln!(routes, "dest_last = {}", r.last);
        }
        let _ = writeln!(routes, "via = {}", r.via);
    }

    let bind = st
        .bind
        .unwrap_or(SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), LTP_PORT));
    let _ = writeln!(
        out,
        "# Generated by `dtnkit import-ion` from {}.",
        st.sources.join(", ")
    );
    let _ = writeln!(
        out,
        "# docs/node.md describes every key; docs/interop.md what was not translated."
    );
    let _ = writeln!(out, "node = {node}");
    let _ = writeln!(out, "bind = \"{bind}\"");
    let plan = (st.plan_lines > 0).then(|| {
        format!(
            "# Contact plan generated by `dtnkit import-ion` (ION lines; +SECONDS count from the node's start).\n{}",
            st.plan
        )
    });
    if plan.is_some() {
        let _ = writeln!(out, "contact_plan = \"{PLAN_FILE}\"");
    }
    let _ = writeln!(out, "\n[store]\npath = \"store\"");
    if let Some(e) = engine_id {
        let _ = writeln!(out, "\n[ltp]\nengine_id = {e}");
    }
    if have_tcp || st.tcp_listen.is_some() {
        let _ = writeln!(out, "\n[tcpcl]");
        if let Some(l) = st.tcp_listen {
            let _ = writeln!(out, "listen = \"{l}\"");
        }
    }
    if have_udp || st.udp_bind.is_some() {
        let b = st
            .udp_bind
            .unwrap_or(SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), 4556));
        let _ = writeln!(out, "\n[udpcl]\nbind = \"{b}\"");
    }
    out.push_str(&spans);
    out.push_str(&peers_toml);
    out.push_str(&routes);
    // Input order: ionrc, ltprc, bprc, ipnrc, then by line.
    let sources = st.sources.clone();
    let rank = |f: &str| sources.iter().position(|s| s == f).unwrap_or(usize::MAX);
    st.notes.sort_by_key(|n| (rank(&n.file), n.line));
    Ok(Imported {
        node,
        node_toml: out,
        plan,
        notes: st.notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{NodeConfig, PeerKind, Validated};
    use std::path::{Path, PathBuf};

    fn testdata(dir: &str) -> Vec<RcFile> {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/ion")
            .join(dir);
        let mut files: Vec<RcFile> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| RcKind::of(&p.to_string_lossy()).is_some())
            .map(|p| RcFile {
                name: format!("{dir}/{}", p.file_name().unwrap().to_string_lossy()),
                text: std::fs::read_to_string(&p).unwrap(),
            })
            .collect();
        files.sort_by(|a, b| a.name.cmp(&b.name));
        files
    }

    fn load(imp: &Imported) -> Validated {
        let v = NodeConfig::parse(&imp.node_toml, "node.toml", Path::new("/out"))
            .unwrap_or_else(|e| panic!("{e}\n{}", imp.node_toml));
        if let Some(p) = &imp.plan {
            bp::ContactPlan::from_ion_str(p, "plan.txt", 0).unwrap();
        }
        v
    }

    fn note<'a>(imp: &'a Imported, file_line: &str) -> &'a Note {
        imp.notes
            .iter()
            .find(|n| format!("{}:{}", n.file, n.line) == file_line)
            .unwrap_or_else(|| panic!("no note at {file_line}: {:#?}", imp.notes))
    }

    #[test]
    fn peers_md_minimal_ion_node_translates_to_a_loadable_config() {
        let imp = import(&testdata("peers-md")).unwrap();
        let v = load(&imp);
        assert_eq!(imp.node, 1);
        assert_eq!(v.bind, "127.0.0.1:1113".parse().unwrap());
        assert_eq!(v.spans.len(), 1);
        let s = &v.spans[0];
        assert_eq!((s.peer, s.engine_id), (2, 2));
        assert_eq!(s.address, "127.0.0.1:1114".parse().unwrap());
        assert_eq!(s.cfg.max_segment_size, 1024);
        assert_eq!((s.cfg.max_sessions, s.cfg.max_import_sessions), (64, 64));
        assert_eq!(s.aggregation_bytes, 100_000);
        assert_eq!(s.aggregation_time, std::time::Duration::from_secs(1));
        // The ION profile: several bundles per block, bursts capped for ION's socket buffer.
        assert_eq!(s.cfg.peer_kind, PeerKind::Ion);
        assert_eq!((s.max_bundles_per_block, s.max_burst_bytes), (0, 65_536));
        assert_eq!(v.contact_plan, Some(PathBuf::from("/out/plan.txt")));
        let plan = bp::ContactPlan::from_ion_str(imp.plan.as_ref().unwrap(), "p", 0).unwrap();
        assert_eq!((plan.contact_count(), plan.range_count()), (2, 1));
        // Every line either translated or named.
        assert_eq!(
            note(&imp, "peers-md/node.ionrc:3").kind,
            NoteKind::Untranslated
        ); // m horizon
        assert_eq!(note(&imp, "peers-md/node.bprc:2").kind, NoteKind::Ignored); // a scheme ipn
        assert!(
            imp.notes.iter().all(|n| n.kind != NoteKind::Caveat),
            "{:#?}",
            imp.notes
        );
    }

    #[test]
    fn two_ltp_nodes_with_contacts_ranges_and_an_exit() {
        let a = import(&testdata("ltp-a")).unwrap();
        let b = import(&testdata("ltp-b")).unwrap();
        let (va, vb) = (load(&a), load(&b));
        assert_eq!((va.raw.node, vb.raw.node), (10, 20));
        assert_eq!(va.spans[0].address, vb.bind);
        assert_eq!(vb.spans[0].address, va.bind);
        let s = &va.spans[0];
        assert_eq!(
            (s.peer, s.cfg.max_segment_size, s.cfg.rate_bps),
            (20, 8192, 50_000_000)
        );
        assert_eq!((s.cfg.max_sessions, s.cfg.max_import_sessions), (32, 16));
        assert_eq!(va.raw.route.len(), 1);
        assert_eq!(
            (
                va.raw.route[0].dest,
                va.raw.route[0].dest_last,
                va.raw.route[0].via
            ),
            (30, Some(39), 20)
        );
        let plan = bp::ContactPlan::from_ion_str(a.plan.as_ref().unwrap(), "p", 0).unwrap();
        assert_eq!((plan.contact_count(), plan.range_count()), (4, 2));
        // The loopback span and plan of node 10 to itself are named, not translated.
        assert!(a
            .notes
            .iter()
            .any(|n| n.text.starts_with("a span 10") && n.kind == NoteKind::Ignored));
        assert!(a
            .notes
            .iter()
            .any(|n| n.text.starts_with("a plan 10") && n.kind == NoteKind::Ignored));
        assert!(b.plan.is_none(), "node 20 has no contact lines");
    }

    #[test]
    fn tcp_outduct_and_unsupported_lines_are_named() {
        let imp = import(&testdata("tcp")).unwrap();
        let v = load(&imp);
        assert_eq!(v.tcp_peers.len(), 1);
        assert_eq!(v.tcp_peers[0].peer, 5);
        assert_eq!(
            v.tcp_peers[0].address,
            Some("127.0.0.1:4557".parse().unwrap())
        );
        assert_eq!(
            v.tcpcl.as_ref().unwrap().listen,
            Some("0.0.0.0:4556".parse().unwrap())
        );
        // ION's neighbours speak TCPCLv3: translated as such, without a caveat.
        assert_eq!(v.tcp_peers[0].version, tcpcl::Version::V3);
        assert!(v.tcpcl.as_ref().unwrap().accept_v3);
        assert!(imp.node_toml.contains("version = 3"), "{}", imp.node_toml);
        assert!(
            imp.notes.iter().all(|n| !n.text.starts_with("a induct tcp")
                && !n.text.starts_with("a outduct tcp")
                && !n.text.contains(" tcp/")),
            "{:#?}",
            imp.notes
        );
        let stcp = imp
            .notes
            .iter()
            .find(|n| n.text.contains("outduct stcp"))
            .unwrap();
        assert_eq!(stcp.kind, NoteKind::Untranslated);
        assert!(stcp.why.contains("no stcp convergence layer"));
        let dtn = imp
            .notes
            .iter()
            .find(|n| n.text.contains("scheme dtn"))
            .unwrap();
        assert_eq!(dtn.kind, NoteKind::Untranslated);
        let shown = stcp.to_string();
        assert!(
            shown.starts_with("tcp/node.bprc:") && shown.contains("not translated"),
            "{shown}"
        );
    }

    #[test]
    fn malformed_lines_name_file_line_and_form() {
        let f = |name: &str, text: &str| RcFile {
            name: name.into(),
            text: text.into(),
        };
        let ion = f("n.ionrc", "1 1\n");
        let cases = [
            (vec![f("n.ionrc", "1 x\n")], "n.ionrc:1", "NODE_NUMBER"),
            (
                vec![ion.clone(), f("n.ltprc", "1 8\na span 2 64 64 1024\n")],
                "n.ltprc:2",
                "a span PEER_ENGINE",
            ),
            (
                vec![
                    ion.clone(),
                    f(
                        "n.ltprc",
                        "a span 2 64 64 1024 1000 1 'udplso 127.0.0.1:x'\n",
                    ),
                ],
                "n.ltprc:1",
                "a span",
            ),
            (
                vec![ion.clone(), f("n.ltprc", "s 'udplsi 127.0.0.1:1113\n")],
                "n.ltprc:1",
                "closing quote",
            ),
            (
                vec![f("n.ionrc", "1 1\na contact +0 +10 1 2 -5\n")],
                "n.ionrc:2",
                "rate",
            ),
            (
                vec![ion.clone(), f("n.ipnrc", "a plan two ltp/2\n")],
                "n.ipnrc:1",
                "a plan NODE_NUMBER",
            ),
            (
                vec![ion.clone(), f("n.ipnrc", "a exit 9 3 ipn:2.0\n")],
                "n.ipnrc:1",
                "a exit",
            ),
            (vec![f("n.bprc", "1\n")], "n.bprc", "no node number"),
            (vec![ion, f("notes.txt", "")], "notes.txt", "ionrc, ltprc"),
        ];
        for (files, at, needle) in cases {
            let e = import(&files).unwrap_err().to_string();
            assert!(
                e.starts_with(at) && e.contains(needle),
                "{e:?} should start with {at} and mention {needle}"
            );
            assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn words_follow_ion_quoting() {
        assert_eq!(
            words("a span 2 'udplso 1.2.3.4:5 100' # c").unwrap(),
            ["a", "span", "2", "udplso 1.2.3.4:5 100"]
        );
        assert_eq!(words("   # only a comment").unwrap(), Vec::<String>::new());
        assert!(words("s 'udplsi").is_err());
    }

    #[test]
    fn hostnames_are_named_not_guessed() {
        let files = [
            RcFile { name: "n.ionrc".into(), text: "1 1\n".into() },
            RcFile {
                name: "n.ltprc".into(),
                text: "a span 2 8 8 1024 1000 1 'udplso ground.example:1113'\ns 'udplsi localhost:1113'\n".into(),
            },
        ];
        let imp = import(&files).unwrap();
        let v = load(&imp);
        assert!(v.spans.is_empty());
        assert_eq!(v.bind, "127.0.0.1:1113".parse().unwrap());
        assert!(note(&imp, "n.ltprc:1").why.contains("ground.example"));
    }

    #[test]
    fn engine_numbers_udp_ducts_and_missing_ipnrc() {
        let f = |name: &str, text: &str| RcFile {
            name: name.into(),
            text: text.into(),
        };
        let files = [
            f("n.ionrc", "1 1\n"),
            f(
                "n.ltprc",
                "a span 200 8 8 20 1000 0 'udplso 10.0.0.2:1113 8000000' 2\ns 'udplsi @:1113'\n",
            ),
            f(
                "n.bprc",
                "a induct ltp 100 ltpcli\na outduct ltp 200 ltpclo\na induct udp 0.0.0.0:4556 udpcli\n\
                 a outduct udp 10.0.0.3:4556 udpclo\nr 'ipnadmin other.ipnrc'\n",
            ),
            f("n.ipnrc", "a plan 2 ltp/200\na plan 3 udp/10.0.0.3:4556\na exit 7 7 ipn:9.0\n"),
        ];
        let imp = import(&files).unwrap();
        let v = load(&imp);
        assert_eq!(v.engine_id, 100);
        assert_eq!(v.bind, "0.0.0.0:1113".parse().unwrap());
        let s = &v.spans[0];
        assert_eq!((s.peer, s.engine_id, s.cfg.rate_bps), (2, 200, 8_000_000));
        assert_eq!(s.cfg.max_segment_size, ltp::MIN_SEGMENT_SIZE, "clamped");
        assert_eq!(v.udp_peers[0].peer, 3);
        assert_eq!(note(&imp, "n.ltprc:1").kind, NoteKind::Caveat);
        assert!(note(&imp, "n.bprc:5").why.contains("not among the inputs"));
        assert!(note(&imp, "n.ipnrc:3").why.contains("gateway node 9"));
        assert!(v.raw.route.is_empty());
    }
}
