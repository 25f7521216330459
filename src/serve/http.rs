//! One request, read whole by the reactor: the checks that keep other websites out
//! (`guard.rs`), the routes, and the answer's bytes. The handler threads run here, each one
//! request at a time; a request's trace waits for the model's thread while the handler looks
//! at whether its client is still there. Nothing here reads or writes a file: the page is
//! embedded, and a request's options are refused if they name one (`command/serve.rs`).

use super::guard::Addressed;
use super::poll::{self, Waker};
use super::queue::{Answer, Kind, Queue, Task};
use super::reactor::{Done, Job};
use super::wire::{self, shown, Request};
use super::Hooks;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};

/// The page, embedded: no CDN, no network access but this server's own API.
const PAGE: &str = include_str!("page.html");

pub struct Context {
    addressed: Addressed,
    hooks: Hooks,
    queue: Arc<Queue>,
    page: String,
}

impl Context {
    pub fn new(host: &str, port: u16, hooks: Hooks, queue: Arc<Queue>) -> Context {
        // In a <script> element: `<` escaped so that no argument can close it.
        let model = serde_json::to_string(&hooks.model_args).unwrap_or_else(|_| "[]".into()).replace('<', "\\u003c");
        let reference =
            serde_json::to_string(&hooks.reference).unwrap_or_else(|_| "null".into()).replace('<', "\\u003c");
        let page = PAGE.replace("\"__MODEL_ARGS__\"", &model).replace("\"__REFERENCE__\"", &reference);
        Context { addressed: Addressed::new(host, port), hooks, queue, page }
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TraceRequest {
    args: Vec<String>,
}

/// One handler thread: requests from the reactor until it stops, each answered back to it
/// (`None` when the client left first); `stop()` counts as the client leaving.
pub fn handle(ctx: &Context, jobs: &Mutex<Receiver<Job>>, done: &Sender<Done>, waker: &Waker, stop: &dyn Fn() -> bool) {
    loop {
        let job = match jobs.lock() {
            Ok(jobs) => jobs.recv(),
            Err(_) => return,
        };
        let Ok(Job { id, request, probe, last }) = job else { return };
        let gone = || stop() || poll::gone(&probe);
        let reply = answer(ctx, &request, &gone).map(|a| {
            let keep = request.keeps_alive() && !last;
            let kind = if a.html { "text/html; charset=utf-8" } else { "application/json" };
            (wire::answer(a.status, kind, &a.body, keep, a.allow), keep)
        });
        if done.send(Done { id, reply }).is_err() {
            return;
        }
        waker.wake();
    }
}

/// The answer to `request`, or `None` when its client left before it was ready.
fn answer(ctx: &Context, request: &Request, gone: &dyn Fn() -> bool) -> Option<Answer> {
    if let Err((status, line)) = ctx.addressed.check(request) {
        return Some(Answer::error(status, &line, 2));
    }
    let not_allowed = |allow: &'static str| {
        let line = format!("{} {}: this page answers {allow} only", request.method, request.path);
        Some(Answer { allow: Some(allow), ..Answer::error(405, &line, 2) })
    };
    match (request.method.as_str(), request.path.as_str()) {
        ("GET", "/") => Some(Answer::ok(ctx.page.clone().into_bytes(), true)),
        ("POST", "/api/trace") => traced(ctx, &request.body, Kind::Json, gone),
        ("POST", "/api/page") => traced(ctx, &request.body, Kind::Page, gone),
        ("POST", "/api/view") => traced(ctx, &request.body, Kind::View, gone),
        ("POST", "/api/compare") => compared(ctx, &request.body, gone),
        (_, "/") => not_allowed("GET"),
        (_, "/api/trace" | "/api/page" | "/api/view" | "/api/compare") => not_allowed("POST"),
        (_, path) => Some(Answer::error(404, &format!("no such page: {}", shown(path)), 2)),
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
