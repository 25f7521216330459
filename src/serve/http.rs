//! One request: the checks that keep other websites and oversized input out (Host, Origin,
//! body size), the routes, and the reply. Nothing here reads or writes a file: the page is
//! embedded, and a request's options are refused if they name one (`command.rs`).

use super::wire::{self, Conn, Failed, Request};
use super::worker::{Answer, Kind, Queue, Task};
use super::Hooks;
use std::net::TcpStream;
use std::time::Instant;

/// Largest request body: a prompt and its options, not a document.
pub const MAX_BODY: usize = 64 << 10;
/// Most requests answered on one kept-alive connection; the last answer closes it.
pub const MAX_PER_CONNECTION: usize = 100;

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
        let reference =
            serde_json::to_string(&hooks.reference).unwrap_or_else(|_| "null".into()).replace('<', "\\u003c");
        let page = PAGE.replace("\"__MODEL_ARGS__\"", &model).replace("\"__REFERENCE__\"", &reference);
        Context { hosts, hooks, queue, page }
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TraceRequest {
    args: Vec<String>,
}

/// Answers the requests of one connection (accepted at `accepted`) in turn, while the client
/// keeps it alive and no more than [`MAX_PER_CONNECTION`]; a client that left is not an error,
/// and one that leaves while its trace waits or runs cancels it (`worker.rs`).
pub fn handle(ctx: &Context, stream: TcpStream, accepted: Instant) {
    let mut conn = Conn::new(stream);
    let mut deadline = accepted + wire::READ_LIMIT;
    for served in 1..=MAX_PER_CONNECTION {
        let (answer, keep, unread) = match conn.read_request(deadline, MAX_BODY) {
            Ok(request) => {
                let keep = request.keeps_alive() && served < MAX_PER_CONNECTION;
                // While the trace waits or runs, the handler asks whether its client is there.
                let probe = &conn.stream;
                match answer(ctx, &request, &|| wire::gone(probe)) {
                    Some(answer) => (answer, keep, false),
                    None => return,
                }
            }
            Err(Failed::Gone) => return,
            Err(Failed::Answer(status, line)) => (Answer::error(status, &line, 2), false, true),
        };
        let kind = if answer.html { "text/html; charset=utf-8" } else { "application/json" };
        if !wire::respond(&mut conn, (answer.status, kind), &answer.body, keep, unread) {
            return;
        }
        // Idle between requests: given up after the keep-alive limit, or at once when the
        // server stops or other connections wait for a handler thread.
        if !conn.next(&super::yielding) {
            return;
        }
        deadline = Instant::now() + wire::READ_LIMIT;
    }
}

/// The answer to `request`, or `None` when its client left before it was ready.
fn answer(ctx: &Context, request: &Request, gone: &dyn Fn() -> bool) -> Option<Answer> {
    // DNS rebinding: another site's name resolving to 127.0.0.1 still sends its own Host.
    if !request.header("Host").is_some_and(|h| ctx.hosts.iter().any(|ok| ok == h)) {
        return Some(Answer::error(403, "this server answers only requests addressed to it (Host)", 2));
    }
    let post = request.method == "POST";
    // Cross-site requests: a browser names the page that sends them.
    if post && request.header("Origin").is_some_and(|o| !ctx.hosts.iter().any(|ok| o == format!("http://{ok}"))) {
        return Some(Answer::error(403, "this server answers only its own page (Origin)", 2));
    }
    match (request.method.as_str(), request.path.as_str()) {
        ("GET", "/") => Some(Answer { status: 200, body: ctx.page.clone().into_bytes(), html: true }),
        ("POST", "/api/trace") => traced(ctx, &request.body, Kind::Json, gone),
        ("POST", "/api/page") => traced(ctx, &request.body, Kind::Page, gone),
        ("POST", "/api/view") => traced(ctx, &request.body, Kind::View, gone),
        ("POST", "/api/compare") => compared(ctx, &request.body, gone),
        (_, path) => Some(Answer::error(404, &format!("no such page: {path}"), 2)),
    }
}

/// The options of a request's body, `{"args": [...]}`; else the 400 answer.
fn args_of(body: &[u8]) -> Result<Vec<String>, Answer> {
    match serde_json::from_slice::<TraceRequest>(body) {
        Ok(r) => Ok(r.args),
        Err(e) => Err(Answer::error(400, &format!("the body must be {{\"args\": [\"...\"]}}: {e}"), 2)),
    }
}

/// `{"args": [...]}` traced as the command line would.
fn traced(ctx: &Context, body: &[u8], kind: Kind, gone: &dyn Fn() -> bool) -> Option<Answer> {
    let settings = args_of(body).and_then(|args| (ctx.hooks.parse)(&args).map_err(|line| Answer::error(400, &line, 2)));
    match settings {
        Ok(settings) => ctx.queue.submit(Task::Trace(Box::new(settings), kind), gone),
        Err(answer) => Some(answer),
    }
}

/// `{"args": [...]}` compared with the server's reference model: `attn-trace compare`'s
/// `--html` page.
fn compared(ctx: &Context, body: &[u8], gone: &dyn Fn() -> bool) -> Option<Answer> {
    let Some(compare) = &ctx.hooks.compare else {
        let line = "this server has no model to compare with: start it with --compare-with MODEL";
        return Some(Answer::error(404, line, 2));
    };
    match args_of(body).and_then(|args| compare(&args).map_err(|line| Answer::error(400, &line, 2))) {
        Ok(work) => ctx.queue.submit(Task::Page(work), gone),
        Err(answer) => Some(answer),
    }
}
