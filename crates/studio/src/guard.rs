//! Who may talk to the studio, checked on every request before any route sees it. A web page
//! on another site can make the browser send requests to a local port, and a name that
//! resolves to 127.0.0.1 can make them same-origin (DNS rebinding), so: the Host header must
//! be the studio's own address; the token from the printed URL, traded once for an HttpOnly
//! SameSite=Strict cookie, must come with every request; a request that changes anything
//! must be a POST whose Origin is the studio's own; and every response forbids framing,
//! sniffing and loading anything from elsewhere.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// What the guard checks requests against.
#[derive(Debug)]
pub struct Guard {
    /// The address the studio listens on.
    address: SocketAddr,
    /// The secret of the printed URL and of the cookie.
    token: String,
}

/// Only the studio's own scripts, styles, images and requests; no frames, no plugins.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; \
    form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

impl Guard {
    pub fn new(address: SocketAddr, token: String) -> Self {
        Self { address, token }
    }

    /// The cookie's name: per port, since a browser shares a host's cookies across ports.
    fn cookie_name(&self) -> String {
        format!("cubenet-studio-{}", self.address.port())
    }

    /// Whether a Host header names this studio: its IP address (any address when it listens
    /// on all of them), or `localhost`, with its port. Other names are what a rebinding
    /// attack would send.
    fn is_own_host(&self, host: &str) -> bool {
        let Ok(authority) = host.parse::<axum::http::uri::Authority>() else {
            return false;
        };
        if authority.port_u16() != Some(self.address.port()) {
            return false;
        }
        let name = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        if name.eq_ignore_ascii_case("localhost") {
            return true;
        }
        match name.parse::<IpAddr>() {
            Ok(ip) => self.address.ip().is_unspecified() || ip == self.address.ip(),
            Err(_) => false,
        }
    }

    /// Whether `headers` carry the studio's cookie.
    fn has_cookie(&self, headers: &HeaderMap) -> bool {
        let name = self.cookie_name();
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|cookies| cookies.split(';'))
            .filter_map(|cookie| cookie.trim().split_once('='))
            .any(|(key, value)| key == name && same_secret(value, &self.token))
    }

    /// The token of a `?token=…` query, when it is the studio's.
    fn token_in_query(&self, uri: &Uri) -> Option<bool> {
        let query = uri.query()?;
        let token = query
            .split('&')
            .find_map(|pair| pair.strip_prefix("token="))?;
        Some(same_secret(token, &self.token))
    }
}

/// Compares two secrets in time that does not depend on where they differ.
fn same_secret(given: &str, secret: &str) -> bool {
    given.len() == secret.len()
        && given
            .bytes()
            .zip(secret.bytes())
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

/// The guard as axum middleware: refuses what it must, then adds the security headers to
/// whatever the route answers.
pub async fn check(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let mut response = match refusal(&guard, &request) {
        Some(refused) => refused,
        None => next.run(request).await,
    };
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// The answer to a request the studio does not serve, or `None` to serve it.
fn refusal(guard: &Guard, request: &Request) -> Option<Response> {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .unwrap_or("");
    if !guard.is_own_host(host) {
        return Some(refused(
            StatusCode::MISDIRECTED_REQUEST,
            "this is not the address cubenet studio serves",
        ));
    }
    match guard.token_in_query(request.uri()) {
        Some(true) if request.method() == Method::GET => {
            // Trade the token for the cookie, and drop it from the address bar.
            let cookie = format!(
                "{}={}; HttpOnly; SameSite=Strict; Path=/",
                guard.cookie_name(),
                guard.token
            );
            return Some(
                (
                    StatusCode::SEE_OTHER,
                    [
                        (header::SET_COOKIE, cookie),
                        (header::LOCATION, request.uri().path().to_string()),
                    ],
                )
                    .into_response(),
            );
        }
        Some(_) => return Some(refused(StatusCode::UNAUTHORIZED, "wrong token")),
        None => {}
    }
    if !guard.has_cookie(request.headers()) {
        return Some(refused(
            StatusCode::UNAUTHORIZED,
            "open the address that `cubenet studio` printed: it carries the sign-in token",
        ));
    }
    match *request.method() {
        Method::GET | Method::HEAD => None,
        Method::POST => {
            let origin = request
                .headers()
                .get(header::ORIGIN)
                .and_then(|origin| origin.to_str().ok());
            (origin != Some(&format!("http://{host}"))).then(|| {
                refused(
                    StatusCode::FORBIDDEN,
                    "changes are accepted only from the studio's own pages",
                )
            })
        }
        _ => Some(refused(
            StatusCode::METHOD_NOT_ALLOWED,
            "the studio answers GET and POST only",
        )),
    }
}

fn refused(status: StatusCode, message: &'static str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(address: &str) -> Guard {
        Guard::new(address.parse().unwrap(), "secret".into())
    }

    #[test]
    fn only_the_studios_own_address_is_its_host() {
        let loopback = guard("127.0.0.1:8123");
        for host in ["127.0.0.1:8123", "localhost:8123", "LOCALHOST:8123"] {
            assert!(loopback.is_own_host(host), "{host}");
        }
        for host in [
            "",
            "127.0.0.1",
            "127.0.0.1:8124",
            "evil.example:8123",
            "127.0.0.1.nip.io:8123",
            "10.0.0.1:8123",
            "127.0.0.1:8123/x",
        ] {
            assert!(!loopback.is_own_host(host), "{host}");
        }
        let everywhere = guard("0.0.0.0:8123");
        assert!(everywhere.is_own_host("10.0.0.1:8123"));
        assert!(!everywhere.is_own_host("attacker.example:8123"));
        assert!(guard("[::1]:8123").is_own_host("[::1]:8123"));
    }

    #[test]
    fn the_cookie_must_carry_the_token() {
        let guard = guard("127.0.0.1:8123");
        let mut headers = HeaderMap::new();
        assert!(!guard.has_cookie(&headers));
        headers.insert(
            header::COOKIE,
            "a=b; cubenet-studio-8123=secreT".parse().unwrap(),
        );
        assert!(!guard.has_cookie(&headers));
        headers.insert(
            header::COOKIE,
            "a=b; cubenet-studio-8123=secret".parse().unwrap(),
        );
        assert!(guard.has_cookie(&headers));
        assert!(!same_secret("secre", "secret"));
    }
}
