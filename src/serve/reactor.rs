//! Every connection on one thread: the server's main thread accepts connections, reads each
//! one's requests and writes each answer, waiting on all their sockets at once (`poll.rs`),
//! and hands a request read whole to the handler threads (`http.rs`). A connection costs a
//! buffer, not a thread, so hundreds of idle or slow clients hold nothing another client
//! needs, and a request is handled only once it has arrived whole.
//!
//! The limits: a request must arrive whole within [`READ_LIMIT`] of its connection's accept (of
//! its first byte, for the next request on a kept-alive connection), else 408; an answer must
//! be taken by the client within [`WRITE_LIMIT`] in all, else the connection is dropped (a
//! client that never reads, or reads a byte now and then, holds a buffer for that long and no
//! more); a kept-alive connection may be idle for [`KEEP_ALIVE`]. At most [`MAX_CONNECTIONS`]
//! are open: past it a new connection takes the place of the one that has waited longest
//! without a request being handled (idle ones first, then ones still sending, then ones not
//! reading their answer), so that a flood of connections cannot lock a healthy client out.

use super::poll::{Interest, Poller};
use super::wire::{self, Parsed, Request, KEEP_ALIVE};
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

/// The longest a client may take to send its whole request.
pub const READ_LIMIT: Duration = Duration::from_secs(10);
/// The longest a client may take to read its whole answer.
pub const WRITE_LIMIT: Duration = Duration::from_secs(10);
/// Most connections open at once.
pub const MAX_CONNECTIONS: usize = 512;
/// Most requests answered on one kept-alive connection; the last answer closes it.
pub const MAX_PER_CONNECTION: usize = 100;
/// Most connections accepted between two looks at the open ones, so that a flood of new
/// connections does not delay reading the requests that have arrived.
const ACCEPTS_PER_TURN: usize = 64;
/// The longest one wait: the stop flag is looked at this often.
const TICK: Duration = Duration::from_millis(100);
/// After an answer to a request that was not read whole, what the client still sends is read
/// and dropped this long (at most [`DRAIN_MAX`] bytes), so that closing does not reset the
/// connection before the client has read the answer.
const DRAIN: Duration = Duration::from_secs(1);
const DRAIN_MAX: usize = 1 << 20;
/// Most bytes of a connection held unread: one request's head and body.
const BUF_LIMIT: usize = wire::MAX_HEAD + 4 + wire::MAX_BODY;

/// A request read whole, for a handler thread: `probe` is the connection, to look at whether
/// the client is still there while its trace waits; `last` when the answer closes it.
pub struct Job {
    pub id: u64,
    pub request: Box<Request>,
    pub probe: TcpStream,
    pub last: bool,
}

/// A handler's answer to job `id`: the bytes and whether the connection stays open; `None`
/// when the client has gone.
pub struct Done {
    pub id: u64,
    pub reply: Option<(Vec<u8>, bool)>,
}

enum State {
    /// Reading a request, which must be whole by `deadline`.
    Reading { deadline: Instant },
    /// Kept alive between requests, nothing read yet.
    Idle { until: Instant },
    /// A handler thread has the request.
    Handling,
    /// Writing an answer, then keeping the connection or closing it (after a drain when the
    /// request was not read whole).
    Writing { bytes: Vec<u8>, at: usize, deadline: Instant, keep: bool, unread: bool },
    /// Answered and half-closed: reading what still comes, to drop it.
    Draining { until: Instant, drained: usize },
}

struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    state: State,
    served: usize,
    /// When it entered its state: the order in which connections give their place up.
    since: Instant,
}

/// What a read found at the end: the client's side open, closed (end of file), or broken.
enum Arrived {
    Open,
    Ended,
    Broken,
}

struct Reactor<'a> {
    listener: &'a TcpListener,
    conns: BTreeMap<u64, Conn>,
    next_id: u64,
    jobs: Sender<Job>,
    /// Accepting paused after an error (file descriptors ran out) until then.
    paused: Option<Instant>,
}

/// Runs until `stop()`, then until the connections being handled or answered are done.
pub fn run(listener: &TcpListener, jobs: Sender<Job>, done: &Receiver<Done>, poller: &Poller, stop: &dyn Fn() -> bool) {
    let mut r = Reactor { listener, conns: BTreeMap::new(), next_id: 0, jobs, paused: None };
    let mut stopping: Option<Instant> = None;
    loop {
        if stopping.is_none() && stop() {
            stopping = Some(Instant::now());
            r.wind_down();
        }
        if stopping.is_some_and(|since| r.conns.is_empty() || since.elapsed() > READ_LIMIT) {
            return;
        }
        let accepting = stopping.is_none() && r.paused.is_none_or(|until| Instant::now() >= until);
        let (ids, interests) = r.interests(accepting);
        let ready = poller.wait(&interests, r.timeout());
        while let Ok(d) = done.try_recv() {
            r.answered(d);
        }
        for (id, _) in ids.iter().zip(&ready).filter(|(_, ready)| **ready) {
            match id {
                Some(id) => r.io(*id),
                None => r.accept(),
            }
        }
        r.deadlines();
    }
}

impl Reactor<'_> {
    /// The sockets to wait on (the listener as `None`): reading or writing, per state.
    fn interests(&self, accepting: bool) -> (Vec<Option<u64>>, Vec<Interest>) {
        let mut ids = Vec::with_capacity(self.conns.len() + 1);
        let mut interests = Vec::with_capacity(self.conns.len() + 1);
        for (id, c) in &self.conns {
            let interest = match c.state {
                State::Handling => continue,
                State::Writing { .. } => Interest::stream(&c.stream, false, true),
                _ => Interest::stream(&c.stream, true, false),
            };
            ids.push(Some(*id));
            interests.push(interest);
        }
        if accepting {
            ids.push(None);
            interests.push(Interest::listener(self.listener));
        }
        (ids, interests)
    }

    /// Until the nearest deadline, at most [`TICK`].
    fn timeout(&self) -> Duration {
        let now = Instant::now();
        let due = self.conns.values().filter_map(|c| match c.state {
            State::Reading { deadline } | State::Writing { deadline, .. } => Some(deadline),
            State::Idle { until } | State::Draining { until, .. } => Some(until),
            State::Handling => None,
        });
        due.map(|d| d.saturating_duration_since(now)).fold(TICK, Duration::min)
    }

    fn accept(&mut self) {
        for _ in 0..ACCEPTS_PER_TURN {
            match self.listener.accept() {
                Ok((stream, _)) => self.admit(stream),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // Out of file descriptors (or another passing failure): make room, or wait.
                Err(_) => {
                    if !self.evict() {
                        self.paused = Some(Instant::now() + TICK);
                    }
                    return;
                }
            }
        }
    }

    /// A new connection, in place of the longest waiting one when [`MAX_CONNECTIONS`] are open.
    fn admit(&mut self, stream: TcpStream) {
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        let _ = stream.set_nodelay(true);
        if self.conns.len() >= MAX_CONNECTIONS && !self.evict() {
            let line = format!("busy: {MAX_CONNECTIONS} connections are being answered; try again in a moment");
            let _ = (&stream).write(&wire::answer(503, "application/json", &wire::error_body(&line, 1), false, None));
            return;
        }
        let now = Instant::now();
        let conn = Conn {
            stream,
            buf: Vec::new(),
            state: State::Reading { deadline: now + READ_LIMIT },
            served: 0,
            since: now,
        };
        self.conns.insert(self.next_id, conn);
        self.next_id += 1;
    }

    /// Closes the connection that has waited longest in the state that needs it least (idle or
    /// draining, then still sending its request, then not reading its answer); never one whose
    /// request is being handled. `false` when there is none.
    fn evict(&mut self) -> bool {
        let rank = |s: &State| match s {
            State::Idle { .. } | State::Draining { .. } => Some(0),
            State::Reading { .. } => Some(1),
            State::Writing { .. } => Some(2),
            State::Handling => None,
        };
        let victim = self.conns.iter().filter_map(|(id, c)| Some(((rank(&c.state)?, c.since), *id))).min();
        victim.is_some_and(|(_, id)| self.conns.remove(&id).is_some())
    }

    /// The stop flag is set: connections not being handled or answered are closed, and an
    /// answer being written has a second more.
    fn wind_down(&mut self) {
        let soon = Instant::now() + Duration::from_secs(1);
        self.conns.retain(|_, c| match &mut c.state {
            State::Handling => true,
            State::Writing { deadline, .. } => {
                *deadline = (*deadline).min(soon);
                true
            }
            _ => false,
        });
    }

    /// The socket of connection `id` is ready: its answer written on, or what it sent read.
    fn io(&mut self, id: u64) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        if matches!(c.state, State::Writing { .. }) {
            return self.write(id);
        }
        let arrived = c.read();
        let ended = matches!(arrived, Arrived::Ended);
        let (close, draining) = match (&c.state, arrived) {
            (_, Arrived::Broken) => (true, false),
            (State::Draining { drained, .. }, _) => (ended || *drained > DRAIN_MAX, true),
            (State::Idle { .. }, Arrived::Ended) => (c.buf.is_empty(), false),
            _ => (false, false),
        };
        if close {
            self.conns.remove(&id);
        } else if !draining {
            self.advance(id, ended);
        }
    }

    /// What connection `id` has read so far: a request to hand over, a refusal to write, or
    /// nothing yet. `ended`: the client will send nothing more.
    fn advance(&mut self, id: u64, ended: bool) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        if let State::Idle { .. } = c.state {
            if c.buf.is_empty() {
                return;
            }
            c.enter(State::Reading { deadline: Instant::now() + READ_LIMIT });
        }
        match wire::parse(&c.buf, wire::MAX_BODY) {
            Parsed::Request(request, used) => {
                c.buf.drain(..used);
                c.served += 1;
                let last = c.served >= MAX_PER_CONNECTION;
                let handed = c.stream.try_clone().ok().and_then(|probe| {
                    let job = Job { id, request, probe, last };
                    self.jobs.send(job).ok()
                });
                match handed {
                    Some(()) => c.enter(State::Handling),
                    None => drop(self.conns.remove(&id)),
                }
            }
            Parsed::Refused(status, line) => self.refuse(id, status, &line),
            Parsed::Incomplete if ended && c.buf.iter().all(u8::is_ascii_whitespace) => drop(self.conns.remove(&id)),
            Parsed::Incomplete if ended => self.refuse(id, 400, "the connection ended before the request did"),
            Parsed::Incomplete if c.buf.len() >= BUF_LIMIT => {
                self.refuse(id, 431, &format!("the request is larger than {} KiB", BUF_LIMIT >> 10))
            }
            Parsed::Incomplete => {}
        }
    }

    /// Answers connection `id` with a one-line error and closes it: its request was not read
    /// whole, so where the next one would start is not known.
    fn refuse(&mut self, id: u64, status: u16, line: &str) {
        let bytes = wire::answer(status, "application/json", &wire::error_body(line, 2), false, None);
        self.start_writing(id, bytes, false, true);
    }

    /// A handler's answer: written, or the connection closed when its client has gone.
    fn answered(&mut self, done: Done) {
        match done.reply {
            Some((bytes, keep)) => self.start_writing(done.id, bytes, keep, false),
            None => drop(self.conns.remove(&done.id)),
        }
    }

    fn start_writing(&mut self, id: u64, bytes: Vec<u8>, keep: bool, unread: bool) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        c.enter(State::Writing { bytes, at: 0, deadline: Instant::now() + WRITE_LIMIT, keep, unread });
        self.write(id);
    }

    /// Writes what the socket takes of connection `id`'s answer; once it is all written, the
    /// connection waits for its next request, drains, or closes.
    fn write(&mut self, id: u64) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        let State::Writing { bytes, at, keep, unread, .. } = &mut c.state else { return };
        while *at < bytes.len() {
            match c.stream.write(&bytes[*at..]) {
                Ok(0) => return drop(self.conns.remove(&id)),
                Ok(n) => *at += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return drop(self.conns.remove(&id)),
            }
        }
        let now = Instant::now();
        match (*keep, *unread) {
            (true, _) => {
                c.enter(State::Idle { until: now + KEEP_ALIVE });
                // A request sent before this answer was read (pipelined) is read now.
                self.advance(id, false);
            }
            (false, true) => {
                let _ = c.stream.shutdown(Shutdown::Write);
                c.enter(State::Draining { until: now + DRAIN, drained: 0 });
            }
            (false, false) => drop(self.conns.remove(&id)),
        }
    }

    /// Requests that did not arrive in time get 408; idle, unread and drained connections past
    /// their time are closed.
    fn deadlines(&mut self) {
        let now = Instant::now();
        let due: Vec<(u64, bool)> = self
            .conns
            .iter()
            .filter_map(|(id, c)| match c.state {
                State::Reading { deadline } if now >= deadline => Some((*id, true)),
                State::Idle { until } | State::Draining { until, .. } if now >= until => Some((*id, false)),
                State::Writing { deadline, .. } if now >= deadline => Some((*id, false)),
                _ => None,
            })
            .collect();
        for (id, late_request) in due {
            if late_request {
                let line = format!("the request took longer than {} s to arrive", READ_LIMIT.as_secs());
                self.refuse(id, 408, &line);
            } else {
                self.conns.remove(&id);
            }
        }
    }
}

impl Conn {
    fn enter(&mut self, state: State) {
        self.state = state;
        self.since = Instant::now();
    }

    /// Reads what has arrived: into the buffer (up to [`BUF_LIMIT`]), or counted and dropped
    /// when draining.
    fn read(&mut self) -> Arrived {
        let mut chunk = [0u8; 16 << 10];
        loop {
            let draining = matches!(self.state, State::Draining { .. });
            let room = if draining { chunk.len() } else { BUF_LIMIT.saturating_sub(self.buf.len()).min(chunk.len()) };
            if room == 0 {
                return Arrived::Open;
            }
            match self.stream.read(&mut chunk[..room]) {
                Ok(0) => return Arrived::Ended,
                Ok(n) => match &mut self.state {
                    // A client that keeps sending is not read for ever: past the most, closed.
                    State::Draining { drained, .. } => {
                        *drained += n;
                        if *drained > DRAIN_MAX {
                            return Arrived::Open;
                        }
                    }
                    _ => self.buf.extend_from_slice(&chunk[..n]),
                },
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Arrived::Open,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Arrived::Broken,
            }
        }
    }
}
