//! One request: the checks that keep other websites and oversized input out (Host, Origin,
//! body size), the routes, and the reply. Nothing here reads or writes a file: the page is
//! embedded, and a request's options are refused if they name one (`command.rs`).

use super::wire::{self, Failed, Request};
use super::worker::{Alive, Answer, Kind, Queue};
use super::Hooks;
use std::net::TcpStream;
use std::time::Instant;

/// Largest request body: a prompt and its options, not a document.
pub const MAX_BODY: usize = 64 << 10;

/// The page, embedded: no CDN, no network access but this server's own API.
const PAGE: &str = include_str!("page.html");

pub struct Context {
    /// Host header values that name this server (`host:port`).
    hosts: Vec<String>,
    hooks: Hooks,
    queue: Queue,
    page: String,
}

impl Context {
    pub fn new(host: &str, port: u16, hooks: Hooks, queue: Queue) -> Context {
        let mut hosts: Vec<String> =
            ["127.0.0.1", "localhost", "[::1]"].iter().map(|h| format!("{h}:{port}")).collect();
        let shown = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
        if !hosts.contains(&shown) {
            hosts.push(shown);
        }
        // In a <script> element: `<` escaped so that no argument can close it.
        let model = serde_json::to_string(&hooks.model_args).unwrap_or_else(|_| "[]".into()).replace('<', "\\u003c");
        let page = PAGE.replace("\"__MODEL_ARGS__\"", &model);
        Context { hosts, hooks, queue, page }
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TraceRequest {
    args: Vec<String>,
}

/// Reads one request from `stream` (accepted at `accepted`) and answers it; a client that left
/// is not an error.
pub fn handle(ctx: &Context, mut stream: TcpStream, accepted: Instant) {
    let request = wire::read_request(&mut stream, accepted + wire::READ_LIMIT, MAX_BODY);
    let (answer, unread) = match request {
        Ok(request) => {
            // The model's thread asks before a queued trace runs whether its client is still there.
            let probe = stream.try_clone().ok();
            let alive: Option<Alive> = probe.map(|s| Box::new(move || !wire::gone(&s)) as Alive);
            (answer(ctx, &request, alive), false)
        }
        Err(Failed::Gone) => return,
        Err(Failed::Answer(status, line)) => (Answer::error(status, &line, 2), true),
    };
    let kind = if answer.html { "text/html; charset=utf-8" } else { "application/json" };
    wire::respond(stream, answer.status, kind, &answer.body, unread);
}

fn answer(ctx: &Context, request: &Request, alive: Option<Alive>) -> Answer {
    // DNS rebinding: another site's name resolving to 127.0.0.1 still sends its own Host.
    if !request.header("Host").is_some_and(|h| ctx.hosts.iter().any(|ok| ok == h)) {
        return Answer::error(403, "this server answers only requests addressed to it (Host)", 2);
    }
    let post = request.method == "POST";
    // Cross-site requests: a browser names the page that sends them.
    if post && request.header("Origin").is_some_and(|o| !ctx.hosts.iter().any(|ok| o == format!("http://{ok}"))) {
        return Answer::error(403, "this server answers only its own page (Origin)", 2);
    }
    match (request.method.as_str(), request.path.as_str()) {
        ("GET", "/") => Answer { status: 200, body: ctx.page.clone().into_bytes(), html: true },
        ("POST", "/api/trace") => traced(ctx, &request.body, Kind::Json, alive),
        ("POST", "/api/page") => traced(ctx, &request.body, Kind::Page, alive),
        ("POST", "/api/view") => traced(ctx, &request.body, Kind::View, alive),
        (_, path) => Answer::error(404, &format!("no such page: {path}"), 2),
    }
}

/// `{"args": [...]}` traced as the command line would.
fn traced(ctx: &Context, body: &[u8], kind: Kind, alive: Option<Alive>) -> Answer {
    let asked: TraceRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return Answer::error(400, &format!("the body must be {{\"args\": [\"...\"]}}: {e}"), 2),
    };
    let settings = match (ctx.hooks.parse)(&asked.args) {
        Ok(s) => s,
        Err(line) => return Answer::error(400, &line, 2),
    };
    ctx.queue.submit(settings, kind, alive).unwrap_or_else(|| Answer {
        status: 503,
        body: br#"{"error":"busy"}"#.to_vec(),
        html: false,
    })
}
