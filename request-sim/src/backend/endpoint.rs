//! The resolved `--endpoint`: its URL and API kind ([`Endpoint::resolve`]), the headers that
//! carry the API key, and the URL forms without credentials for logs and output files.

use super::api::{Api, ApiFlavor, ApiKind, Transport};
use super::apis::vllm_grpc;

/// `url` without user info (`user:pass@`), query string and fragment, so credentials never
/// reach an output file or an error message. Text that is not a URL keeps only what follows
/// its last `@`.
pub fn sanitize_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            let s = u.as_str();
            // `http://h:1` parses with the path `/`; show it as given.
            match s.strip_suffix('/') {
                Some(short) if u.path() == "/" && !url.ends_with('/') => short.to_string(),
                _ => s.to_string(),
            }
        }
        Err(_) => match url.rsplit_once('@') {
            Some((_, rest)) => format!("***@{rest}"),
            None => url.to_string(),
        },
    }
}

/// A resolved endpoint. `Debug` never shows the API key.
#[derive(Clone)]
pub struct Endpoint {
    pub url: reqwest::Url,
    pub kind: ApiKind,
    pub flavor: ApiFlavor,
    pub stream: bool,
    /// `routing-strategy` header for AIBrix.
    pub route: Option<String>,
    /// `--session-header`: the header that carries each request's session id (for routers
    /// that pin a session to an instance).
    pub session_header: Option<reqwest::header::HeaderName>,
    /// `--header`: sent with every request, after the API key's (shared: the endpoint is
    /// cloned per task, and kept small).
    pub headers:
        Option<std::sync::Arc<Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>>>,
    api_key: Option<String>,
    /// The gRPC engine and the run's channel to it (`--api vllm-grpc`).
    pub(super) grpc: Option<vllm_grpc::Grpc>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.display_url())
            .field("kind", &self.kind)
            .field("stream", &self.stream)
            .field("route", &self.route)
            .field("session_header", &self.session_header)
            .field("headers", &self.headers.as_ref().map_or(0, |h| h.len()))
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl Endpoint {
    /// The API requests to this endpoint speak.
    pub fn api(&self) -> Api {
        self.flavor.api(self.kind)
    }

    /// Resolve `--endpoint` (full URL or base URL) for `--api`.
    ///
    /// A base URL (no path, or `/`) means chat completions for OpenAI/AIBrix, `/v1/responses`
    /// for Responses, `/v1/messages` for Messages and `/generate` or `/generate_stream` (by
    /// `stream`) for TGI. A `/v1` base gets the API's path below it. With OpenAI/AIBrix, a
    /// path ending in `/responses` or `/messages` is that API (detected from the path).
    pub fn resolve(
        endpoint: &str,
        flavor: ApiFlavor,
        stream: bool,
        route: Option<String>,
        api_key: Option<String>,
    ) -> Result<Endpoint, String> {
        let mut url = reqwest::Url::parse(endpoint).map_err(|e| {
            // Without any user:password@ part: the error is printed.
            let shown = sanitize_url(endpoint);
            format!("--endpoint {shown:?} is not a valid URL: {e}")
        })?;
        if flavor.transport() == Transport::Grpc {
            let grpc = vllm_grpc::Grpc::new(&url)?;
            let kind = flavor.kind_of_path(&mut url, "", stream)?;
            return Ok(Endpoint {
                url,
                kind,
                flavor,
                stream,
                route,
                session_header: None,
                headers: None,
                api_key,
                grpc: Some(grpc),
            });
        }
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "--endpoint must be http:// or https://, got {:?}",
                url.scheme()
            ));
        }
        let path = url.path().trim_end_matches('/').to_string();
        let kind = flavor.kind_of_path(&mut url, &path, stream)?;
        if flavor.needs_route() && route.is_none() {
            return Err(format!(
                "--api {} needs --aibrix-route (e.g. prefix-cache, throughput)",
                flavor.name()
            ));
        }
        let stream = kind.fixed_stream().unwrap_or(stream);
        Ok(Endpoint {
            url,
            kind,
            flavor,
            stream,
            route,
            session_header: None,
            headers: None,
            api_key,
            grpc: None,
        })
    }

    /// The URL without any userinfo, for logs, records and summaries.
    pub fn display_url(&self) -> String {
        let mut u = self.url.clone();
        let _ = u.set_username("");
        let _ = u.set_password(None);
        u.to_string()
    }

    /// Base URL (scheme, host, port) without path or credentials.
    pub fn base_url(&self) -> String {
        let mut u = self.url.clone();
        let _ = u.set_username("");
        let _ = u.set_password(None);
        u.set_path("");
        u.set_query(None);
        u.to_string().trim_end_matches('/').to_string()
    }

    /// Add the API key (if any) to a request: `Authorization: Bearer` (OpenAI-style
    /// servers); for the Messages API also Anthropic's `x-api-key` and `anthropic-version`
    /// (the self-hosted servers read the first, Anthropic's API the others).
    pub fn authorize(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        req.headers(self.auth_headers())
    }

    /// The headers every request to this endpoint carries: the API's version header, the key
    /// (`Authorization: Bearer`, and `x-api-key` for Messages; marked sensitive), `--header`s.
    pub fn auth_headers(&self) -> reqwest::header::HeaderMap {
        use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
        let mut h = HeaderMap::new();
        let secret = |v: String| {
            HeaderValue::from_str(&v).ok().map(|mut v| {
                v.set_sensitive(true);
                v
            })
        };
        if self.kind.is_messages() {
            h.insert(
                "anthropic-version",
                HeaderValue::from_static(super::apis::messages::ANTHROPIC_VERSION),
            );
            if let Some(v) = self.api_key.as_ref().and_then(|k| secret(k.clone())) {
                h.insert("x-api-key", v);
            }
        }
        if let Some(v) = self
            .api_key
            .as_ref()
            .and_then(|k| secret(format!("Bearer {k}")))
        {
            h.insert(AUTHORIZATION, v);
        }
        for (name, value) in self.headers.iter().flat_map(|h| h.iter()) {
            h.append(name.clone(), value.clone());
        }
        h
    }

    /// The endpoint's host, when it is this machine: a loopback address or one assigned to
    /// one of its interfaces (checked by binding a UDP socket to it, which only a local
    /// address allows). Resolves the name (blocking: for start-up).
    pub fn on_this_host(&self) -> Option<std::net::IpAddr> {
        use std::net::ToSocketAddrs;
        let host = self.url.host_str()?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port = self.url.port_or_known_default().unwrap_or(80);
        (host, port)
            .to_socket_addrs()
            .ok()?
            .map(|a| a.ip())
            .find(|ip| ip.is_loopback() || std::net::UdpSocket::bind((*ip, 0)).is_ok())
    }

    /// The gRPC engine of a gRPC API's endpoint (`--api vllm-grpc`).
    pub fn grpc(&self) -> Option<&vllm_grpc::Grpc> {
        self.grpc.as_ref()
    }

    pub fn has_api_key(&self) -> bool {
        self.api_key.is_some()
    }

    /// `text` with every occurrence of the API key replaced by `<redacted>`.
    pub fn redact(&self, text: String) -> String {
        match &self.api_key {
            Some(k) if !k.is_empty() && text.contains(k.as_str()) => {
                text.replace(k.as_str(), "<redacted>")
            }
            _ => text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_on_this_host_is_told_from_one_elsewhere() {
        let at = |u: &str| {
            Endpoint::resolve(u, ApiFlavor::default(), true, None, None)
                .unwrap()
                .on_this_host()
        };
        assert!(at("http://127.0.0.1:8000").is_some_and(|ip| ip.is_loopback()));
        assert!(at("http://[::1]:8000").is_some_and(|ip| ip.is_loopback()));
        // TEST-NET-3 (RFC 5737) is assigned to no machine: not this one.
        assert_eq!(at("http://203.0.113.7:8000"), None);
        // An address of one of this machine's interfaces, when it has one besides loopback.
        let sock = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        if sock.connect("203.0.113.7:9").is_ok() {
            let mine = sock.local_addr().unwrap().ip();
            if !mine.is_unspecified() {
                assert_eq!(at(&format!("http://{mine}:8000")), Some(mine));
            }
        }
    }

    #[test]
    fn sanitize_strips_credentials() {
        assert_eq!(
            sanitize_url("http://user:secret@host:8000/v1/chat/completions?key=abc#x"),
            "http://host:8000/v1/chat/completions"
        );
        assert_eq!(sanitize_url("http://h:1"), "http://h:1");
        assert_eq!(sanitize_url("http://h:1/"), "http://h:1/");
        assert_eq!(sanitize_url("http://u:pw@h:99999/v1"), "***@h:99999/v1");
        assert_eq!(sanitize_url("not a url"), "not a url");
    }

    #[test]
    fn debug_and_display_hide_secrets() {
        let e = Endpoint::resolve(
            "http://user:pw@h:8000",
            ApiFlavor::default(),
            true,
            None,
            Some("sk-secret".into()),
        )
        .unwrap();
        let dbg = format!("{e:?}");
        assert!(!dbg.contains("sk-secret") && !dbg.contains("pw"), "{dbg}");
        assert!(!e.display_url().contains("pw"));
        assert_eq!(e.base_url(), "http://h:8000");
        let err = Endpoint::resolve(
            "http://u:sk-secret@h:99999",
            ApiFlavor::default(),
            true,
            None,
            None,
        )
        .unwrap_err();
        assert!(
            err.contains("is not a valid URL") && !err.contains("sk-secret"),
            "{err}"
        );
    }
}
