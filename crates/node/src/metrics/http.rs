//! The monitor's HTTP/1.1 listener: one thread that serves one connection at a time, one
//! request per connection (`Connection: close`), with the request head parsed by `httparse`.
//!
//! Bounds: a request head larger than [`MAX_HEAD`] is answered 431; a client that sends or
//! reads slower than [`IO_TIMEOUT`] is dropped; connections arriving meanwhile wait in the
//! kernel's listen backlog (its overflow is refused by the kernel). So a misbehaving client
//! can delay the others by at most a few seconds and never costs a thread or unbounded memory.
//!
//! Routes (GET, HEAD):
//! - `/metrics`: Prometheus text exposition of a fresh status (OpenMetrics when asked for);
//!   503 when the agent does not answer within [`super::source::STATUS_TIMEOUT`].
//! - `/api/status`: the fresh status reply as JSON (what `dtnkit status --json` prints).
//! - `/api/live?since=T`: the latest sampled status and the samples after Unix ms `T` (the
//!   web view's poll).
//! - `/`, `/app.js`, `/style.css`: the web view, embedded in the binary.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::encode::{encode, Format};
use super::families::Families;
use super::history::History;
use super::source::StatusSource;

/// Largest request head accepted (request line and headers).
pub(crate) const MAX_HEAD: usize = 16 * 1024;
/// Read and write timeout of a connection.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(2);

const INDEX_HTML: &str = include_str!("web/index.html");
const APP_JS: &str = include_str!("web/app.js");
const STYLE_CSS: &str = include_str!("web/style.css");

/// An answer: status code, content type, body.
struct Answer {
    code: u16,
    content_type: &'static str,
    body: String,
}

impl Answer {
    fn ok(content_type: &'static str, body: impl Into<String>) -> Self {
        Self {
            code: 200,
            content_type,
            body: body.into(),
        }
    }

    fn error(code: u16, msg: impl Into<String>) -> Self {
        Self {
            code,
            content_type: "text/plain; charset=utf-8",
            body: msg.into() + "\n",
        }
    }
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

/// What the request handlers need.
pub(crate) struct Routes {
    /// Fresh status for `/metrics` and `/api/status`.
    pub(crate) source: StatusSource,
    /// Sampled status and history for `/api/live`.
    pub(crate) history: Arc<Mutex<History>>,
}

impl Routes {
    fn answer(&mut self, path: &str, accept: Option<&str>) -> Answer {
        let (route, query) = path.split_once('?').unwrap_or((path, ""));
        match route {
            "/" | "/index.html" => Answer::ok("text/html; charset=utf-8", INDEX_HTML),
            "/app.js" => Answer::ok("text/javascript; charset=utf-8", APP_JS),
            "/style.css" => Answer::ok("text/css; charset=utf-8", STYLE_CSS),
            "/metrics" => match self.source.fetch() {
                Ok(status) => {
                    let format = Format::from_accept(accept);
                    match encode(Families::from_status(&status), format) {
                        Ok(text) => Answer::ok(format.content_type(), text),
                        Err(_) => Answer::error(500, "metrics encoding failed"),
                    }
                }
                Err(why) => Answer::error(503, format!("node status unavailable: {why}")),
            },
            "/api/status" => match self.source.fetch() {
                Ok(status) => Answer::ok("application/json", status.to_json()),
                Err(why) => Answer::error(503, format!("node status unavailable: {why}")),
            },
            "/api/live" => {
                let since = query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("since="))
                    .map_or(Ok(0), str::parse::<u64>);
                let Ok(since) = since else {
                    return Answer::error(400, "since: expected Unix milliseconds");
                };
                match self.history.lock() {
                    Ok(h) => Answer::ok("application/json", h.live_json(since)),
                    Err(_) => Answer::error(500, "history unavailable"),
                }
            }
            _ => Answer::error(404, format!("no such page: {route}")),
        }
    }

    /// Reads one request from `stream` and answers it.
    fn handle(&mut self, mut stream: TcpStream) {
        let _ = stream.set_read_timeout(Some(IO_TIMEOUT));
        let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
        let mut buf = vec![0u8; MAX_HEAD];
        let mut len = 0;
        let (answer, head_only) = loop {
            let n = match stream.read(buf.get_mut(len..).unwrap_or(&mut [])) {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            len += n;
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(buf.get(..len).unwrap_or(&[])) {
                Ok(httparse::Status::Complete(_)) => {
                    let method = req.method.unwrap_or("");
                    let path = req.path.unwrap_or("/");
                    let accept = req
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case("accept"))
                        .and_then(|h| std::str::from_utf8(h.value).ok());
                    break match method {
                        "GET" => (self.answer(path, accept), false),
                        "HEAD" => (self.answer(path, accept), true),
                        _ => (Answer::error(405, "only GET and HEAD"), false),
                    };
                }
                Ok(httparse::Status::Partial) if len < MAX_HEAD => continue,
                Ok(httparse::Status::Partial) => {
                    break (Answer::error(431, "request head too large"), false)
                }
                Err(e) => break (Answer::error(400, format!("malformed request: {e}")), false),
            }
        };
        let head = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
            answer.code,
            reason(answer.code),
            answer.content_type,
            answer.body.len()
        );
        let _ = stream.write_all(head.as_bytes());
        if !head_only {
            let _ = stream.write_all(answer.body.as_bytes());
        }
        let _ = stream.flush();
    }
}

/// Serves connections from `listener` one at a time until `stop` is set (the stopper then
/// connects once to unblock `accept`).
pub(crate) fn serve(listener: TcpListener, mut routes: Routes, stop: Arc<AtomicBool>) {
    for conn in listener.incoming() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        if let Ok(stream) = conn {
            routes.handle(stream);
        }
    }
}
