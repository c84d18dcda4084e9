//! Start-up steps before the clock starts: warm-up connections, the model name, the chat
//! template's overhead, and how the producers were placed.

use super::*;

/// Before the clock starts, producers build the bodies scheduled in this first stretch…
pub(super) const WARMUP_SCHEDULE_MS: f64 = 20.0;
/// …but at most this many…
pub(super) const WARMUP_MAX_BODIES: usize = 256;
/// …for at most this long.
pub(super) const WARMUP_MAX: Duration = Duration::from_secs(2);
/// At most this many connections are opened before the start, within this time.
pub(super) const WARMUP_CONNECTIONS: usize = 64;
pub(super) const WARMUP_CONNECT_MAX: Duration = Duration::from_secs(2);
/// Prompts re-tokenized at start-up, and the tokens checked of each (their head).
pub(super) const STARTUP_CHECK_PROMPTS: usize = 8;
pub(super) const STARTUP_CHECK_TOKENS: u32 = 1024;

/// GET /v1/models and take the first model id.
/// Open up to `n` keep-alive connections to the endpoint's server with `n` concurrent cheap
/// requests (`GET /v1/models` for OpenAI-style servers, `GET /health` for TGI; any answer, even
/// an error status, leaves the connection open). Returns how many answered; a
/// failure only means the first requests open their own connections.
pub(super) fn warmup_url(ep: &Endpoint) -> String {
    if ep.kind.is_openai() {
        format!("{}/v1/models", ep.base_url())
    } else {
        format!("{}/health", ep.base_url())
    }
}

/// Open `n` keep-alive connections with warm-up `GET`s; returns how many were answered and
/// the idle timeout the server announced (`Keep-Alive: timeout=`), if it did.
pub(super) async fn open_connections(
    client: &reqwest::Client,
    ep: &Endpoint,
    n: usize,
) -> (usize, Option<Duration>) {
    let url = warmup_url(ep);
    // One task each, so they spread over the I/O threads and each thread has run the request
    // path once before the first real send.
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..n {
        let req = ep.authorize(client.get(&url));
        set.spawn(async move {
            let resp = req.send().await.ok()?;
            let keep_alive = backend::keep_alive_timeout(resp.headers());
            resp.bytes().await.ok()?;
            Some(keep_alive)
        });
    }
    let mut ok = 0;
    let mut announced = None;
    let answered = async {
        while let Some(r) = set.join_next().await {
            if let Ok(Some(k)) = r {
                ok += 1;
                announced = announced.or(k);
            }
        }
    };
    // On timeout the set is dropped, which aborts what is left.
    let _ = tokio::time::timeout(WARMUP_CONNECT_MAX, answered).await;
    (ok, announced)
}

pub(super) async fn fetch_model(client: &reqwest::Client, ep: &Endpoint) -> Result<String, String> {
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
        .map_err(|e| {
            format!(
                "cannot reach {url} to find the model ({hint}): {}",
                e.without_url()
            )
        })?;
    if !resp.status().is_success() {
        return Err(format!("GET {url} answered {} ({hint})", resp.status()));
    }
    let body = resp
        .bytes()
        .await
        .map_err(|e| format!("GET {url}: {} ({hint})", e.without_url()))?;
    let m: Models = serde_json::from_slice(&body)
        .map_err(|e| format!("GET {url}: unexpected answer ({hint}): {e}"))?;
    m.data
        .into_iter()
        .next()
        .map(|m| m.id)
        .ok_or_else(|| format!("GET {url} lists no model ({hint})"))
}

/// Tokens the server adds around the prompt content: flag, chat template, or a calibration
/// request whose `usage.prompt_tokens` is read. `None` when it cannot be known (TGI).
pub(super) fn determine_overhead(
    cfg: &ReplayConfig,
    rt: &tokio::runtime::Runtime,
    client: &backend::HttpClient,
    ep: &Endpoint,
    params: &BodyParams,
    builder: &PromptBuilder,
    (tokenizer, server): (Option<&tokenizers::Tokenizer>, Option<&ServerTokenizer>),
) -> Result<Option<(u32, String, &'static str)>, String> {
    if let Some(n) = cfg.chat_overhead {
        return Ok(Some((n, "--chat-overhead".into(), "")));
    }
    if cfg.token_ids {
        return Ok(Some((0, "token-id prompts are used as given".into(), "")));
    }
    let strip = builder.vocab().strips_first_space();
    if let (true, Some(tok), Some(tc)) = (ep.kind.is_chat(), tokenizer, &cfg.tokenizer_config) {
        match prompt::ChatTemplate::from_config_file(tc)
            .and_then(|t| t.overhead_with_lead(tok, strip))
        {
            Ok((n, "")) => return Ok(Some((n, format!("chat template of {}", tc.display()), ""))),
            Ok((n, lead)) => {
                return Ok(Some((
                    n,
                    format!(
                        "chat template of {}, which trims the content: every content starts with {lead:?}, counted in the overhead",
                        tc.display()
                    ),
                    lead,
                )))
            }
            // E.g. a template that trims the content (Llama 3): the server still knows.
            Err(e) => note(format!(
                "WARNING: cannot measure the chat overhead from {} ({e}); asking the server instead",
                tc.display()
            )),
        }
    }
    if !ep.kind.is_openai() {
        return Ok(None);
    }
    if let Some(s) = server {
        match s.overhead(ep.kind, strip) {
            Ok(Some((n, ""))) => return Ok(Some((n, s.describe(), ""))),
            Ok(Some((n, lead))) => {
                return Ok(Some((
                    n,
                    format!(
                        "{}; its chat template trims the content: every content starts with {lead:?}, counted in the overhead",
                        s.describe()
                    ),
                    lead,
                )))
            }
            Ok(None) => {}
            Err(e) => note(format!(
                "WARNING: {e}; measuring the overhead with a calibration request"
            )),
        }
    }
    if cfg.dry_run {
        return Ok(Some((0, "dry run: not calibrated".into(), "")));
    }
    // Calibration: a prompt of K content tokens, one output token, non-streaming.
    const K: usize = 64;
    let probe = TraceRequest {
        index: usize::MAX,
        line: 0,
        timestamp_ms: 0.0,
        input_length: K as u32,
        output_length: 1,
        hash_ids: Vec::new(),
        session: None,
    };
    let mut text = String::new();
    builder.write_text(&probe, K, &mut text);
    let mut body = Vec::new();
    let p = BodyParams {
        stream: false,
        ..params.clone()
    };
    backend::encode_body(ep.kind, &p, PromptPayload::Text(&text), 1, &mut body);
    let mut probe_ep = ep.clone();
    probe_ep.stream = false;
    let out = rt.block_on(backend::execute(
        client,
        &probe_ep,
        Bytes::from(body),
        Some(Duration::from_secs(60)),
        &CancellationToken::new(),
        true,
        None,
    ));
    if out.status != Status::Ok {
        return Err(format!(
            "calibration request to {} failed ({}): {} — check --endpoint/--model-name, or pass --chat-overhead N",
            ep.display_url(),
            out.status.as_str(),
            out.error.unwrap_or_default()
        ));
    }
    match out.state.usage.and_then(|u| u.prompt_tokens) {
        Some(pt) => {
            let n = (pt as i64 - K as i64).max(0) as u32;
            Ok(Some((
                n,
                format!("calibration request: {pt} prompt tokens for {K} content tokens"),
                "",
            )))
        }
        None => {
            eprintln!("request-sim: WARNING: the server reported no usage.prompt_tokens; prompt overhead assumed 0");
            Ok(Some((0, "unknown: server reports no usage".into(), "")))
        }
    }
}

/// The start-up line saying where the producers run relative to the sending threads.
pub(super) fn producer_placement(threads: usize, ncores: usize, st: &ProducerStats) -> String {
    let level = match st.nice {
        Some(n) => format!("at nice {n}, below the dispatcher and I/O threads"),
        None => "at the default nice level (it could not be lowered)".to_string(),
    };
    let place = if st.pinned_cores == 0 {
        format!("unpinned over {ncores} core(s)")
    } else if threads > st.pinned_cores {
        format!(
            "{threads} threads sharing {} core(s) ({:.1} per core)",
            st.pinned_cores,
            threads as f64 / st.pinned_cores as f64
        )
    } else {
        format!("pinned one per core on {} core(s)", st.pinned_cores)
    };
    format!("producers: {threads} thread(s) {level}; {place}")
}
