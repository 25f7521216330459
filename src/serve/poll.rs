//! Waiting for sockets: `poll(2)` on Unix, over every connection the reactor reads or writes
//! and one end of a socket pair that the handler threads write a byte to when an answer is
//! ready ([`Waker`]). Elsewhere (the Python wheel is built for Windows too, where the server
//! is not the point) a short sleep stands in, and every socket is tried.

use std::net::{TcpListener, TcpStream};
use std::time::Duration;

#[cfg(unix)]
type Fd = std::os::fd::RawFd;
#[cfg(not(unix))]
type Fd = ();

/// A socket and what the reactor waits for on it (unread where every socket is tried).
#[cfg_attr(not(unix), allow(dead_code))]
pub struct Interest {
    fd: Fd,
    read: bool,
    write: bool,
}

impl Interest {
    pub fn stream(s: &TcpStream, read: bool, write: bool) -> Interest {
        #[cfg(unix)]
        let fd = std::os::fd::AsRawFd::as_raw_fd(s);
        #[cfg(not(unix))]
        let fd: Fd = {
            let _ = s;
        };
        Interest { fd, read, write }
    }

    pub fn listener(l: &TcpListener) -> Interest {
        #[cfg(unix)]
        let fd = std::os::fd::AsRawFd::as_raw_fd(l);
        #[cfg(not(unix))]
        let fd: Fd = {
            let _ = l;
        };
        Interest { fd, read: true, write: false }
    }
}

/// The reactor's side: waits for its sockets or a handler's answer.
pub struct Poller {
    #[cfg(unix)]
    wake: std::os::unix::net::UnixStream,
}

/// A handler thread's side: wakes the reactor when an answer is ready.
pub struct Waker {
    #[cfg(unix)]
    wake: std::os::unix::net::UnixStream,
}

pub fn pair() -> std::io::Result<(Poller, Waker)> {
    #[cfg(unix)]
    {
        let (rx, tx) = std::os::unix::net::UnixStream::pair()?;
        rx.set_nonblocking(true)?;
        tx.set_nonblocking(true)?;
        Ok((Poller { wake: rx }, Waker { wake: tx }))
    }
    #[cfg(not(unix))]
    Ok((Poller {}, Waker {}))
}

impl Waker {
    pub fn wake(&self) {
        #[cfg(unix)]
        {
            use std::io::Write;
            // A full pipe means the reactor has a wake-up waiting already.
            let _ = (&self.wake).write(&[1]);
        }
    }
}

impl Poller {
    /// Waits at most `timeout` for one of `interests` to be ready (or an answer to be woken
    /// for): which of them are.
    #[cfg(unix)]
    pub fn wait(&self, interests: &[Interest], timeout: Duration) -> Vec<bool> {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        let event = |i: &Interest| (if i.read { libc::POLLIN } else { 0 }) | (if i.write { libc::POLLOUT } else { 0 });
        let mut fds: Vec<libc::pollfd> =
            interests.iter().map(|i| libc::pollfd { fd: i.fd, events: event(i), revents: 0 }).collect();
        fds.push(libc::pollfd { fd: self.wake.as_raw_fd(), events: libc::POLLIN, revents: 0 });
        let ms = timeout.as_millis().clamp(1, 1000) as libc::c_int;
        // SAFETY: `fds` is a live, exclusively borrowed array of `fds.len()` pollfd structs,
        // which poll only reads and writes within; every fd in it is open (owned by the
        // reactor for the call's duration). An error (EINTR from a signal) leaves revents 0.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if fds.last().is_some_and(|w| w.revents != 0) {
            let mut sink = [0u8; 256];
            while matches!((&self.wake).read(&mut sink), Ok(n) if n > 0) {}
        }
        fds[..interests.len()].iter().map(|f| f.revents != 0).collect()
    }

    #[cfg(not(unix))]
    pub fn wait(&self, interests: &[Interest], timeout: Duration) -> Vec<bool> {
        std::thread::sleep(timeout.min(Duration::from_millis(5)));
        vec![true; interests.len()]
    }
}

/// Whether the client of `stream` has gone: its side closed (end of file) or reset. A client
/// that only shut down its writing half looks gone too (no browser does that).
#[cfg(unix)]
pub fn gone(stream: &TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut byte = 0u8;
    // SAFETY: a one-byte peek into a local buffer on a socket this stream owns; it neither
    // blocks (MSG_DONTWAIT) nor consumes anything (MSG_PEEK).
    let n = unsafe {
        libc::recv(stream.as_raw_fd(), (&mut byte as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT)
    };
    if n == 0 {
        return true;
    }
    n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::WouldBlock
}

/// Elsewhere no probe: a queued trace runs.
#[cfg(not(unix))]
pub fn gone(_: &TcpStream) -> bool {
    false
}
