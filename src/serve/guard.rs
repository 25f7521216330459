//! What keeps other websites out: a page elsewhere can make the user's browser send requests
//! to this server (a form's POST, `fetch` without reading the answer, an `<img>`), and a name
//! the attacker controls can be made to resolve to 127.0.0.1 (DNS rebinding). So:
//!
//! - `Host` must name this server: `localhost`, the loopback address it listens on
//!   (`127.0.0.1`, `[::1]`, in any spelling of the same address), or the `--host` address, with
//!   its port. A rebinding site sends its own name; a name is compared as typed (a trailing dot
//!   or `localhost.attacker.com` is another name). `--host 0.0.0.0` (every address) also takes
//!   any IP address, which no DNS answer can rebind.
//! - A POST must say `Content-Type: application/json`, which a browser sends across sites only
//!   after asking (a CORS preflight this server never grants); its `Origin`, when sent, must be
//!   this very server (`http://` and the Host); and `Sec-Fetch-Site`, when sent, must say the
//!   request came from this server's own page (`same-origin`) or from the user (`none`).

use super::wire::{shown, Request};
use std::net::IpAddr;

/// The names and port a request must address.
pub struct Addressed {
    port: u16,
    /// `--host` as given, when it is not a loopback address (those are always taken).
    bound: Option<String>,
}

/// A refusal: the status and the one-line message.
pub type Refusal = (u16, String);

impl Addressed {
    pub fn new(host: &str, port: u16) -> Addressed {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let bound = (!is_loopback(host)).then(|| host.to_ascii_lowercase());
        Addressed { port, bound }
    }

    /// `Err` when the request's Host is not this server, or a POST may come from another site.
    pub fn check(&self, request: &Request) -> Result<(), Refusal> {
        let Some(host) = request.header("Host") else {
            return Err((400, "the request has no Host header (HTTP/1.1 requires one)".into()));
        };
        let (name, port) = split_host(host).ok_or_else(|| (400, format!("Host {}: not HOST:PORT", shown(host))))?;
        if port != self.port || !self.names(&name) {
            let line =
                format!("Host {}: this server answers only requests addressed to it (DNS rebinding)", shown(host));
            return Err((403, line));
        }
        if request.method == "POST" {
            cross_site(request, host)?;
        }
        Ok(())
    }

    /// Whether `name` (lower case, IPv6 without brackets) names this server.
    fn names(&self, name: &str) -> bool {
        if is_loopback(name) {
            return true;
        }
        let ip = name.parse::<IpAddr>();
        match &self.bound {
            Some(bound) if bound == name => true,
            Some(bound) => match (bound.parse::<IpAddr>(), ip) {
                (Ok(b), Ok(ip)) => b == ip || b.is_unspecified(),
                _ => false,
            },
            None => false,
        }
    }
}

/// `localhost`, or the loopback address 127.0.0.1 or ::1 (as an address, in any spelling).
fn is_loopback(name: &str) -> bool {
    let ip = name.parse::<IpAddr>().ok();
    name.eq_ignore_ascii_case("localhost") || ip == Some([127, 0, 0, 1].into()) || ip == Some(IpAddr::V6(1.into()))
}

/// `name[:port]` or `[v6][:port]` → (name in lower case, port; 80 when absent). `None` for
/// anything else: user info (`a@host`), a path, a percent sign, an empty name.
fn split_host(host: &str) -> Option<(String, u16)> {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        v6.parse::<std::net::Ipv6Addr>().ok()?;
        (v6, if after.is_empty() { "80" } else { after.strip_prefix(':')? })
    } else {
        let (name, port) = host.split_once(':').unwrap_or((host, "80"));
        let name_ok = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
        (name_ok.then_some(name)?, port)
    };
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((name.to_ascii_lowercase(), port.parse().ok()?))
}

/// A POST that a page on another site could have made the browser send.
fn cross_site(request: &Request, host: &str) -> Result<(), Refusal> {
    if let Some(origin) = request.header("Origin") {
        let own = origin.strip_prefix("http://").is_some_and(|o| o.eq_ignore_ascii_case(host));
        if !own {
            let line = format!("Origin {}: this server answers only its own page (http://{host})", shown(origin));
            return Err((403, line));
        }
    }
    if let Some(site) = request.header("Sec-Fetch-Site") {
        if !matches!(site, "same-origin" | "none") {
            return Err((403, format!("Sec-Fetch-Site {}: this server answers only its own page", shown(site))));
        }
    }
    let json = request.header("Content-Type").is_some_and(|t| {
        let kind = t.split(';').next().unwrap_or("").trim();
        kind.eq_ignore_ascii_case("application/json")
    });
    if !json {
        let given = request.header("Content-Type").map(shown).unwrap_or_else(|| "none".into());
        return Err((415, format!("Content-Type {given}: a POST's body must be sent as application/json")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::wire::{parse, Parsed};

    fn check(addressed: &Addressed, headers: &str) -> u16 {
        let head = format!("POST /api/trace HTTP/1.1\r\n{headers}\r\n");
        let Parsed::Request(request, _) = parse(head.as_bytes(), 1024) else { panic!("{headers:?}") };
        addressed.check(&request).map(|()| 200).unwrap_or_else(|(status, _)| status)
    }

    #[test]
    fn only_this_servers_names_and_port_are_answered() {
        let local = Addressed::new("127.0.0.1", 8080);
        let json = "Content-Type: application/json\r\n";
        for (host, want) in [
            ("127.0.0.1:8080", 200),
            ("localhost:8080", 200),
            ("LOCALHOST:8080", 200),
            ("[::1]:8080", 200),
            ("[0:0:0:0:0:0:0:1]:8080", 200),
            ("localhost.:8080", 403),
            ("localhost.attacker.com:8080", 403),
            ("evil.example:8080", 403),
            ("127.0.0.1:8081", 403),
            ("127.0.0.1", 403),
            ("0.0.0.0:8080", 403),
            ("10.0.0.1:8080", 403),
            ("[::ffff:127.0.0.1]:8080", 403),
            ("evil@127.0.0.1:8080", 400),
            ("127.0.0.1:8080/x", 400),
            ("::1:8080", 400),
            ("127.0.0.1:", 400),
            ("", 400),
        ] {
            assert_eq!(check(&local, &format!("Host: {host}\r\n{json}")), want, "Host {host:?}");
        }
        assert_eq!(check(&local, json), 400, "no Host");
        let everywhere = Addressed::new("0.0.0.0", 80);
        assert_eq!(check(&everywhere, &format!("Host: 192.168.1.5\r\n{json}")), 200, "any address, port 80");
        assert_eq!(check(&everywhere, &format!("Host: box.lan\r\n{json}")), 403, "a name");
        let named = Addressed::new("box.lan", 80);
        assert_eq!(check(&named, &format!("Host: box.lan:80\r\n{json}")), 200);
    }

    #[test]
    fn a_post_from_another_site_is_refused() {
        let local = Addressed::new("127.0.0.1", 8080);
        let host = "Host: localhost:8080\r\n";
        let json = "Content-Type: application/json; charset=utf-8\r\n";
        for (headers, want) in [
            (format!("{host}{json}Origin: http://localhost:8080\r\nSec-Fetch-Site: same-origin\r\n"), 200),
            (format!("{host}{json}Origin: http://127.0.0.1:8080\r\n"), 403),
            (format!("{host}{json}Origin: http://localhost:3000\r\n"), 403),
            (format!("{host}{json}Origin: null\r\n"), 403),
            (format!("{host}{json}Sec-Fetch-Site: cross-site\r\n"), 403),
            (format!("{host}{json}Sec-Fetch-Site: same-site\r\n"), 403),
            (format!("{host}Content-Type: text/plain\r\n"), 415),
            (format!("{host}Content-Type: application/x-www-form-urlencoded\r\n"), 415),
            (host.to_string(), 415),
        ] {
            assert_eq!(check(&local, &headers), want, "{headers:?}");
        }
    }
}
