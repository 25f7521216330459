//! One request: the checks that keep other websites and oversized input out (Host, Origin,
//! body size), the routes, and the reply. Nothing here reads or writes a file: the page is
//! embedded, and a request's options are refused if they name one (`command.rs`).

use super::worker::{Answer, Kind, Queue};
use super::Hooks;
use std::io::Read;

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

/// Answers `request`; a client that left is not an error.
pub fn handle(ctx: &Context, mut request: tiny_http::Request) {
    let answer = answer(ctx, &mut request);
    let kind = if answer.html { "text/html; charset=utf-8" } else { "application/json" };
    // One Content-Length rather than chunks: every answer is whole before it is sent.
    let mut response =
        tiny_http::Response::from_data(answer.body).with_status_code(answer.status).with_chunked_threshold(usize::MAX);
    for (name, value) in [("Content-Type", kind), ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff")]
    {
        if let Ok(h) = tiny_http::Header::from_bytes(name, value) {
            response.add_header(h);
        }
    }
    let _ = request.respond(response);
}

fn header<'a>(request: &'a tiny_http::Request, name: &'static str) -> Option<&'a str> {
    request.headers().iter().find(|h| h.field.equiv(name)).map(|h| h.value.as_str())
}

fn answer(ctx: &Context, request: &mut tiny_http::Request) -> Answer {
    // DNS rebinding: another site's name resolving to 127.0.0.1 still sends its own Host.
    if !header(request, "Host").is_some_and(|h| ctx.hosts.iter().any(|ok| ok == h)) {
        return Answer::error(403, "this server answers only requests addressed to it (Host)", 2);
    }
    let post = *request.method() == tiny_http::Method::Post;
    // Cross-site requests: a browser names the page that sends them.
    if post && header(request, "Origin").is_some_and(|o| !ctx.hosts.iter().any(|ok| o == format!("http://{ok}"))) {
        return Answer::error(403, "this server answers only its own page (Origin)", 2);
    }
    let url = request.url().split('?').next().unwrap_or("").to_string();
    match (post, url.as_str()) {
        (false, "/") => Answer { status: 200, body: ctx.page.clone().into_bytes(), html: true },
        (true, "/api/trace") => traced(ctx, request, Kind::Json),
        (true, "/api/page") => traced(ctx, request, Kind::Page),
        _ => Answer::error(404, &format!("no such page: {url}"), 2),
    }
}

/// `{"args": [...]}` traced as the command line would.
fn traced(ctx: &Context, request: &mut tiny_http::Request, kind: Kind) -> Answer {
    if request.body_length().is_some_and(|n| n > MAX_BODY) {
        return too_large();
    }
    let mut body = Vec::new();
    if request.as_reader().take(MAX_BODY as u64 + 1).read_to_end(&mut body).is_err() {
        return Answer::error(400, "the request's body could not be read", 2);
    }
    if body.len() > MAX_BODY {
        return too_large();
    }
    let asked: TraceRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return Answer::error(400, &format!("the body must be {{\"args\": [\"...\"]}}: {e}"), 2),
    };
    let settings = match (ctx.hooks.parse)(&asked.args) {
        Ok(s) => s,
        Err(line) => return Answer::error(400, &line, 2),
    };
    ctx.queue.submit(settings, kind).unwrap_or_else(|| Answer {
        status: 503,
        body: br#"{"error":"busy"}"#.to_vec(),
        html: false,
    })
}

fn too_large() -> Answer {
    Answer::error(413, &format!("the request is larger than {} KiB", MAX_BODY >> 10), 2)
}
