//! Start-up requests of the prompts phase: the model name (`GET /v1/models`) and the tokens
//! the server adds around the content (flag, chat template, `/tokenize`, or a calibration
//! request).

use std::time::Duration;

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use super::note::note;
use super::server::Server;
use crate::backend::tokenize::ServerTokenizer;
use crate::backend::{self, BodyParams, Calibration, Endpoint, PromptPayload};
use crate::config::ReplayConfig;
use crate::prompt::{self, PromptBuilder};
use crate::record::Status;
use crate::trace::TraceRequest;
use crate::{Error, Result};

/// Tokens the server adds around the prompt content.
pub(super) struct Overhead {
    pub(super) tokens: u32,
    /// How the count was found (for the start-up line).
    pub(super) how: String,
    /// Put before every content (a chat template that trims the content; counted in
    /// `tokens`).
    pub(super) lead: &'static str,
}

impl Overhead {
    fn new(tokens: u32, how: impl Into<String>, lead: &'static str) -> Option<Overhead> {
        Some(Overhead {
            tokens,
            how: how.into(),
            lead,
        })
    }
}

/// GET /v1/models and take the first model id.
pub(super) async fn fetch_model(client: &reqwest::Client, ep: &Endpoint) -> Result<String> {
    let url = format!("{}/v1/models", ep.base_url());
    fetch_models(client, ep)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| Error::server(format!("GET {url} lists no model (pass --model-name)")))
}

/// GET /v1/models: every model id, in the server's order.
pub(super) async fn fetch_models(client: &reqwest::Client, ep: &Endpoint) -> Result<Vec<String>> {
    #[derive(serde::Deserialize)]
    struct Models {
        data: Vec<Model>,
    }
    #[derive(serde::Deserialize)]
    struct Model {
        id: String,
    }
    let url = format!("{}/v1/models", ep.base_url());
    let hint = "pass --model-name";
    let resp = ep
        .authorize(client.get(&url))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .map_err(|e| match crate::backend::connect_failure(&e) {
            Some(cause) => Error::Unreachable(format!(
                "cannot connect to {url} (the start-up request that finds the model; {hint} to skip it): {cause}; is the server running and listening there?"
            )),
            None => Error::server(format!(
                "cannot reach {url} to find the model ({hint}): {}",
                e.without_url()
            )),
        })?;
    if !resp.status().is_success() {
        // A refused key is not fixed by naming the model.
        let hint = match resp.status().as_u16() {
            401 | 403 => "the API key was refused: pass the right one with --api-key KEY, --api-key-file F or $OPENAI_API_KEY",
            _ => hint,
        };
        let msg = format!("GET {url} answered {} ({hint})", resp.status());
        // A refused key is the server refusing every request: exit 5, as when the requests
        // find it.
        return Err(if matches!(resp.status().as_u16(), 401 | 403) {
            Error::Unreachable(msg)
        } else {
            Error::server(msg)
        });
    }
    let body = resp
        .bytes()
        .await
        .map_err(|e| Error::server(format!("GET {url}: {} ({hint})", e.without_url())))?;
    let m: Models = serde_json::from_slice(&body)
        .map_err(|e| Error::server(format!("GET {url}: unexpected answer ({hint}): {e}")))?;
    Ok(m.data.into_iter().map(|m| m.id).collect())
}

/// Tokens the server adds around the prompt content: flag, then the steps of the API's
/// [`Calibration`] (its module says which): the chat template (`--tokenizer-config`), the
/// server's `/tokenize`, or a calibration request whose `usage.prompt_tokens` is read; for an
/// API calibrated by request always a calibration request to that API ([`api_overhead`]).
/// `None` when it cannot be known (TGI).
pub(super) fn determine_overhead(
    cfg: &ReplayConfig,
    srv: &Server,
    params: &BodyParams,
    builder: &PromptBuilder,
    (tokenizer, server): (Option<&tokenizers::Tokenizer>, Option<&ServerTokenizer>),
) -> Result<Option<Overhead>> {
    let ep = &srv.ep;
    if let Some(n) = cfg.prompts.chat_overhead {
        return Ok(Overhead::new(n, "--chat-overhead", ""));
    }
    if cfg.prompts.token_ids {
        return Ok(Overhead::new(0, "token-id prompts are used as given", ""));
    }
    let how = ep.kind.calibration();
    if how == Calibration::ApiRequest {
        return api_overhead(cfg, srv, params, builder, (tokenizer, server));
    }
    let strip = builder.vocab().strips_first_space();
    // Tools in --extra-body go into every request, and the chat template renders them into
    // the prompt: the template measure and the server's /tokenize of a bare message leave them
    // out, a calibration request (its body has them) counts them.
    let tools = params
        .extra
        .as_ref()
        .is_some_and(|e| e.contains_key("tools") || e.contains_key("functions"));
    if tools && !cfg.requests.dry_run && ep.kind.openai_style_server() {
        note("--extra-body has tools: the chat overhead is measured with a calibration request (its body carries them)");
        return calibrate(srv, params, builder, "");
    }
    if let (Calibration::ChatTemplate, Some(tok), Some(tc)) =
        (how, tokenizer, &cfg.prompts.tokenizer_config)
    {
        match prompt::ChatTemplate::from_config_file(tc)
            .and_then(|t| t.overhead_with_lead(tok, strip))
        {
            Ok((n, "")) => {
                return Ok(Overhead::new(
                    n,
                    format!("chat template of {}", tc.display()),
                    "",
                ))
            }
            Ok((n, lead)) => {
                return Ok(Overhead::new(
                    n,
                    format!(
                        "chat template of {}, which trims the content: every content starts with {lead:?}, counted in the overhead",
                        tc.display()
                    ),
                    lead,
                ))
            }
            // E.g. a template that trims the content (Llama 3): the server still knows.
            Err(e) => note(format!(
                "WARNING: cannot measure the chat overhead from {} ({e}); asking the server instead",
                tc.display()
            )),
        }
    }
    if how == Calibration::Unknown {
        return Ok(None);
    }
    if let Some(s) = server {
        match s.overhead(ep.kind, strip) {
            Ok(Some((n, ""))) => return Ok(Overhead::new(n, s.describe(), "")),
            Ok(Some((n, lead))) => {
                return Ok(Overhead::new(
                    n,
                    format!(
                        "{}; its chat template trims the content: every content starts with {lead:?}, counted in the overhead",
                        s.describe()
                    ),
                    lead,
                ))
            }
            Ok(None) => {}
            Err(e) => note(format!(
                "WARNING: {e}; measuring the overhead with a calibration request"
            )),
        }
    }
    if cfg.requests.dry_run {
        return Ok(Overhead::new(0, "dry run: not calibrated", ""));
    }
    calibrate(srv, params, builder, "")
}

/// The chat template's overhead and lead, from `--tokenizer` with `--tokenizer-config` or from
/// the server's `/tokenize` with `messages`, when either can say.
fn chat_measure(
    cfg: &ReplayConfig,
    strip: bool,
    (tokenizer, server): (Option<&tokenizers::Tokenizer>, Option<&ServerTokenizer>),
) -> Option<(u32, &'static str)> {
    if let (Some(tok), Some(tc)) = (tokenizer, &cfg.prompts.tokenizer_config) {
        if let Ok(m) = prompt::ChatTemplate::from_config_file(tc)
            .and_then(|t| t.overhead_with_lead(tok, strip))
        {
            return Some(m);
        }
    }
    server.and_then(|s| s.chat_overhead(strip).ok().flatten())
}

/// The prompt overhead of the Responses and Messages APIs: what the server adds around the
/// content in the API in use, measured by a calibration request to that API (the servers
/// render these requests through the chat template, but each API may add its own: a
/// default system prompt, instructions). The content's lead (a template that trims the
/// content) comes from the chat template when it can be measured. A dry run takes the chat
/// template's count, or 0.
fn api_overhead(
    cfg: &ReplayConfig,
    srv: &Server,
    params: &BodyParams,
    builder: &PromptBuilder,
    tokenizers: (Option<&tokenizers::Tokenizer>, Option<&ServerTokenizer>),
) -> Result<Option<Overhead>> {
    let strip = builder.vocab().strips_first_space();
    let chat = chat_measure(cfg, strip, tokenizers);
    if cfg.requests.dry_run {
        return Ok(match chat {
            Some((n, lead)) => Overhead::new(n, "dry run: the chat template's count", lead),
            None => Overhead::new(0, "dry run: not calibrated", ""),
        });
    }
    let lead = chat.map_or("", |c| c.1);
    let mut o = calibrate(srv, params, builder, lead)?;
    if let (Some(o), Some((n, _))) = (&mut o, chat) {
        if o.tokens != n {
            o.how
                .push_str(&format!("; the chat template alone adds {n}"));
        }
        if !lead.is_empty() {
            o.how.push_str(&format!(
                "; the chat template trims the content: every content starts with {lead:?}, counted in the overhead"
            ));
        }
    }
    Ok(o)
}

/// A calibration request to the endpoint's API: a prompt of K content tokens (after `lead`),
/// one output token, non-streaming; the overhead is the server's prompt tokens minus K.
fn calibrate(
    srv: &Server,
    params: &BodyParams,
    builder: &PromptBuilder,
    lead: &'static str,
) -> Result<Option<Overhead>> {
    let ep = &srv.ep;
    const K: usize = 64;
    let probe = TraceRequest {
        model: None,
        reasoning: Default::default(),
        images: None,
        index: usize::MAX,
        line: 0,
        timestamp_ms: 0.0,
        input_length: K as u32,
        output_length: 1,
        hash_ids: Default::default(),
        session: None,
    };
    let mut text = lead.to_string();
    builder.write_text(&probe, K, &mut text);
    let mut body = Vec::new();
    let p = BodyParams {
        stream: false,
        ..params.clone()
    };
    backend::encode_body(
        ep.kind,
        &p,
        PromptPayload::Text(&text),
        (1, None),
        &mut body,
    );
    let mut probe_ep = ep.clone();
    probe_ep.stream = false;
    let out = srv.rt.block_on(backend::execute(
        &srv.client,
        &probe_ep,
        Bytes::from(body),
        Some(Duration::from_secs(60)),
        &CancellationToken::new(),
        true,
        backend::RequestOpts::default(),
    ));
    if out.status != Status::Ok {
        let refused = matches!(out.http_status, Some(401 | 403));
        let hint = if refused {
            "the API key was refused: pass the right one with --api-key KEY, --api-key-file F or $OPENAI_API_KEY"
        } else {
            "check --endpoint/--model-name, or pass --chat-overhead N"
        };
        let msg = format!(
            "calibration request to {} failed ({}): {} — {hint}",
            ep.display_url(),
            out.status.as_str(),
            out.error.unwrap_or_default()
        );
        // A closed port or a refused key: the server cannot be used, exit 5 as when the
        // requests find it (docs/reliability.md).
        return Err(if refused || out.status == Status::ConnectError {
            Error::Unreachable(msg)
        } else {
            Error::server(msg)
        });
    }
    match out.state.usage.and_then(|u| u.prompt_tokens) {
        Some(pt) => {
            let n = (pt as i64 - K as i64).max(0) as u32;
            Ok(Overhead::new(
                n,
                format!(
                    "calibration request to {}: {pt} prompt tokens for {K} content tokens",
                    ep.url.path()
                ),
                lead,
            ))
        }
        None => {
            note("WARNING: the server reported no usage.prompt_tokens; prompt overhead assumed 0");
            Ok(Overhead::new(0, "unknown: server reports no usage", ""))
        }
    }
}
