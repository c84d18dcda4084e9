//! The resolved `--endpoint`: its URL and API kind ([`Endpoint::resolve`]), the headers that
//! carry the API key, and the URL forms without credentials for logs and output files.

use super::api::{Api, ApiFlavor, ApiKind};

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
    pub(super) grpc: Option<super::vllm_grpc::Grpc>,
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
        match (self.flavor, self.kind) {
            (_, ApiKind::Responses) => Api::OpenaiResponses,
            (_, ApiKind::Messages) => Api::AnthropicMessages,
            (_, ApiKind::VllmGrpc) => Api::VllmGrpc,
            (ApiFlavor::Aibrix, _) => Api::Aibrix,
            (_, ApiKind::Chat) => Api::OpenaiChat,
            (_, ApiKind::Completions) => Api::OpenaiCompletions,
            _ => Api::Tgi,
        }
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
        if flavor == ApiFlavor::VllmGrpc {
            let grpc = super::vllm_grpc::Grpc::new(&url)?;
            return Ok(Endpoint {
                url,
                kind: ApiKind::VllmGrpc,
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
        let kind = kind_of_path(&mut url, flavor, stream)?;
        if flavor == ApiFlavor::Aibrix && route.is_none() {
            return Err("--api aibrix needs --aibrix-route (e.g. prefix-cache, throughput)".into());
        }
        if kind == ApiKind::TgiGenerate && stream {
            return Err("--stream with a TGI /generate endpoint: use /generate_stream".into());
        }
        let stream = match kind {
            ApiKind::TgiGenerateStream => true,
            ApiKind::TgiGenerate => false,
            _ => stream,
        };
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
    pub fn authorize(&self, mut req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        if self.kind.is_messages() {
            req = req.header("anthropic-version", ANTHROPIC_VERSION);
            if let Some(k) = &self.api_key {
                req = req.header("x-api-key", k);
            }
        }
        if let Some(k) = &self.api_key {
            req = req.bearer_auth(k);
        }
        for (name, value) in self.headers.iter().flat_map(|h| h.iter()) {
            req = req.header(name, value);
        }
        req
    }

    /// The gRPC engine of a gRPC API's endpoint (`--api vllm-grpc`).
    pub fn grpc(&self) -> Option<&super::vllm_grpc::Grpc> {
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

/// The API kind of `--endpoint`'s path for `--api` (see [`Endpoint::resolve`]); a base URL gets
/// the API's path set in `url`.
fn kind_of_path(
    url: &mut reqwest::Url,
    flavor: ApiFlavor,
    stream: bool,
) -> Result<ApiKind, String> {
    let path = url.path().trim_end_matches('/').to_string();
    let kind = match flavor {
        ApiFlavor::Openai | ApiFlavor::Aibrix => {
            if path.is_empty() || path == "/v1" {
                url.set_path("/v1/chat/completions");
                ApiKind::Chat
            } else if path.ends_with("/chat/completions") {
                ApiKind::Chat
            } else if path.ends_with("/completions") {
                ApiKind::Completions
            } else if path.ends_with("/responses") {
                ApiKind::Responses
            } else if path.ends_with("/messages") {
                ApiKind::Messages
            } else {
                return Err(format!(
                    "--endpoint path {path:?} is not an OpenAI path: use .../v1/chat/completions, \
                     .../v1/completions, .../v1/responses, .../v1/messages or a base URL like http://host:port"
                ));
            }
        }
        ApiFlavor::Responses | ApiFlavor::Messages => {
            let (kind, name, title) = match flavor {
                ApiFlavor::Responses => (ApiKind::Responses, "responses", "Responses"),
                _ => (ApiKind::Messages, "messages", "Messages"),
            };
            if path.is_empty() || path == "/v1" {
                url.set_path(kind.path());
            } else if !path.ends_with(&format!("/{name}")) {
                return Err(format!(
                    "--endpoint path {path:?} is not a {title} path with --api {name}: use .../v1/{name} or a base URL like http://host:port"
                ));
            }
            kind
        }
        ApiFlavor::VllmGrpc => ApiKind::VllmGrpc,
        ApiFlavor::Tgi => {
            if path.is_empty() {
                url.set_path(if stream {
                    "/generate_stream"
                } else {
                    "/generate"
                });
                if stream {
                    ApiKind::TgiGenerateStream
                } else {
                    ApiKind::TgiGenerate
                }
            } else if path.ends_with("/generate_stream") {
                ApiKind::TgiGenerateStream
            } else if path.ends_with("/generate") {
                ApiKind::TgiGenerate
            } else {
                return Err(format!(
                    "--endpoint path {path:?} is not a TGI path: use .../generate, .../generate_stream \
                     or a base URL"
                ));
            }
        }
    };
    Ok(kind)
}

/// The `anthropic-version` header sent to the Messages API.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

#[cfg(test)]
mod tests {
    use super::*;

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
    fn endpoint_resolution() {
        let e = Endpoint::resolve("http://h:8000", ApiFlavor::Openai, true, None, None).unwrap();
        assert_eq!(e.url.as_str(), "http://h:8000/v1/chat/completions");
        assert_eq!(e.kind, ApiKind::Chat);
        let e = Endpoint::resolve("http://h:8000/v1", ApiFlavor::Openai, true, None, None).unwrap();
        assert_eq!(e.url.as_str(), "http://h:8000/v1/chat/completions");
        let e = Endpoint::resolve(
            "http://h:8000/v1/completions",
            ApiFlavor::Openai,
            false,
            None,
            None,
        )
        .unwrap();
        assert_eq!(e.kind, ApiKind::Completions);
        let e = Endpoint::resolve("http://h:1/", ApiFlavor::Tgi, true, None, None).unwrap();
        assert_eq!(e.url.path(), "/generate_stream");
        assert_eq!(e.kind, ApiKind::TgiGenerateStream);
        let e =
            Endpoint::resolve("http://h:1/generate", ApiFlavor::Tgi, false, None, None).unwrap();
        assert_eq!(e.kind, ApiKind::TgiGenerate);
        assert!(!e.stream);
        assert!(
            Endpoint::resolve("http://h:1/generate", ApiFlavor::Tgi, true, None, None).is_err()
        );
        assert!(Endpoint::resolve("http://h:1/foo", ApiFlavor::Openai, true, None, None).is_err());
        // Responses and Messages: by --api (a base URL gets the API's path) or by the path.
        for (flavor, path, kind) in [
            (ApiFlavor::Responses, "/v1/responses", ApiKind::Responses),
            (ApiFlavor::Messages, "/v1/messages", ApiKind::Messages),
        ] {
            for base in ["http://h:1", "http://h:1/", "http://h:1/v1"] {
                let e = Endpoint::resolve(base, flavor, true, None, None).unwrap();
                assert_eq!((e.url.path(), e.kind, e.stream), (path, kind, true));
            }
            let e = Endpoint::resolve(
                &format!("http://h:1{path}"),
                ApiFlavor::Openai,
                false,
                None,
                None,
            )
            .unwrap();
            assert_eq!((e.kind, e.stream), (kind, false));
            let e =
                Endpoint::resolve(&format!("http://h:1{path}"), flavor, false, None, None).unwrap();
            assert_eq!(e.kind, kind);
            let err = Endpoint::resolve("http://h:1/v1/chat/completions", flavor, true, None, None)
                .unwrap_err();
            assert!(err.contains(&format!("use .../v1/{}", &path[4..])), "{err}");
        }
        assert_eq!(
            Endpoint::resolve(
                "http://h:1/v1/messages",
                ApiFlavor::Openai,
                true,
                None,
                None
            )
            .unwrap()
            .api(),
            Api::AnthropicMessages
        );
        assert!(Endpoint::resolve("h:1", ApiFlavor::Openai, true, None, None).is_err());
        assert!(Endpoint::resolve("http://h:1", ApiFlavor::Aibrix, true, None, None).is_err());
    }

    #[test]
    fn debug_and_display_hide_secrets() {
        let e = Endpoint::resolve(
            "http://user:pw@h:8000",
            ApiFlavor::Openai,
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
            ApiFlavor::Openai,
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
