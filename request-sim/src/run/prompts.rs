//! Phase 3: how prompts are built and checked: the tokenizer (or the server's `/tokenize`),
//! the prompt words, a start-up check of sample prompts, the model name, the tokens the chat
//! template adds, and `--save-prompts`.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use super::calibrate::{determine_overhead, fetch_model, Overhead};
use super::load::Loaded;
use super::note::{ms_since, note};
use super::save;
use super::server::Server;
use crate::backend::tokenize::ServerTokenizer;
use crate::backend::BodyParams;
use crate::config::{ReplayConfig, Target};
use crate::prompt::{self, ChatCounter, CorpusReport, PromptBuilder, VerifyReport, Vocab};
use crate::stats::StartupTimes;
use crate::trace::TraceRequest;
use crate::{Error, Result};

/// Prompts re-tokenized at start-up, and the tokens checked of each (their head).
const STARTUP_CHECK_PROMPTS: usize = 8;
const STARTUP_CHECK_TOKENS: u32 = 1024;

/// `--tokenizer` loading on its own thread while the trace is read.
pub(super) struct TokenizerJob(Option<JoinHandle<(Result<tokenizers::Tokenizer>, f64)>>);

impl TokenizerJob {
    pub(super) fn start(cfg: &ReplayConfig) -> TokenizerJob {
        TokenizerJob(cfg.prompts.tokenizer.clone().map(|p| {
            std::thread::spawn(move || {
                let t = Instant::now();
                let r = prompt::load_tokenizer(&p).map_err(Error::from);
                (r, ms_since(t))
            })
        }))
    }

    /// The tokenizer (none without `--tokenizer`) and how long it took to load.
    fn join(self) -> Result<(Option<tokenizers::Tokenizer>, f64)> {
        match self.0 {
            Some(job) => {
                let (r, ms) = job
                    .join()
                    .map_err(|_| Error::internal("tokenizer loading panicked"))?;
                Ok((Some(r?), ms))
            }
            None => Ok((None, 0.0)),
        }
    }
}

/// What prompt token counts are checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Truth {
    /// `--tokenizer`.
    Local,
    /// The server's `POST /tokenize`.
    Server,
    /// Nothing: the built-in word list.
    None,
}

/// How this run's prompts are built.
pub(super) struct Prompts {
    pub(super) builder: Arc<PromptBuilder>,
    pub(super) model: String,
    /// `--model-map`: which served model each request names.
    pub(super) models: Option<Arc<crate::backend::SentModels>>,
    /// Request body settings (model, streaming, exact output).
    pub(super) params: BodyParams,
    /// Tokens the server adds around the content, and why that count.
    pub(super) overhead: Option<Overhead>,
    /// What prompt token counts were made exact against, for the summary.
    pub(super) source: String,
    pub(super) verification: Option<VerifyReport>,
    /// `--prompt-corpus`: the share of prompt tokens that are corpus text.
    pub(super) corpus: Option<CorpusReport>,
    /// `messages` rows with `--tokenizer` and `--tokenizer-config`: counts their prompt tokens.
    pub(super) chat_counter: Option<Arc<ChatCounter>>,
}

impl Prompts {
    /// Tokens the content is shortened by, and the lead put before every content.
    pub(super) fn shortening(&self) -> (u32, &'static str) {
        self.overhead
            .as_ref()
            .map_or((0, ""), |o| (o.tokens, o.lead))
    }
}

/// Phase 3: the sources of token counts ([`Sources::find`]), the builder (with the corpus),
/// the start-up check ([`check_prompts`]), the chat overhead ([`body_and_overhead`]), then the
/// prompts saved with `--save-prompts`.
pub(super) fn run(
    cfg: &ReplayConfig,
    trace: &Loaded,
    server: &Server,
    tokenizer: TokenizerJob,
    startup: &mut StartupTimes,
) -> Result<Prompts> {
    let (sources, vocab) = Sources::find(cfg, server, tokenizer, startup)?;
    // `--model-map`: a trace model it misses stops the run before any request is sent.
    let models = super::models::resolve(cfg, trace, server, &sources.model)?;
    // `--prompt-corpus`: real text, tokenized and checked by the same source of truth.
    let corpus = prompt::load_corpus(cfg.prompts.corpus.as_ref(), sources.encoder(), &vocab)?;
    let builder = Arc::new(PromptBuilder::with_corpus(
        Arc::new(vocab),
        corpus,
        cfg.prompts.seed,
        trace.block_size,
    ));
    let t = Instant::now();
    let (source, verification) = check_prompts(cfg, trace, &builder, &sources, startup.vocab_ms);
    startup.prompt_check_ms = ms_since(t);
    if let Some(reason) = sources
        .fallback
        .as_deref()
        .filter(|_| !trace.format.sends_rows_as_written())
    {
        judge_fallback(cfg, server, reason, sources.truth, verification.as_ref())?;
    }

    let t = Instant::now();
    let (params, overhead) = body_and_overhead(cfg, server, &builder, &sources)?;
    let shortened_by = overhead.as_ref().map_or(0, |o| o.tokens);
    let corpus = corpus_report(trace, &builder, shortened_by);
    if let Some(r) = &corpus {
        note(r.line());
    }
    let Sources {
        tokenizer,
        model,
        model_ms,
        server_tok,
        ..
    } = sources;
    let prompts = Prompts {
        builder,
        model,
        models,
        params,
        overhead,
        source,
        verification,
        corpus,
        chat_counter: chat_counter(cfg, trace, tokenizer)?,
    };
    if let Some(path) = &cfg.output.save_prompts {
        save_prompts(cfg, trace, server, &prompts, path)?;
    }
    startup.calibration_ms = ms_since(t) + model_ms;
    // The server tokenizer's connection is not needed once sending starts; the tokenizer went
    // with `chat_counter` unless messages rows need it, so its memory goes back to the system
    // before the producers fill theirs.
    drop(server_tok);
    crate::util::release_freed_memory();
    Ok(prompts)
}

/// Where this run's token counts come from: `--tokenizer`, the server's `/tokenize`, or the
/// built-in word list; and the model name.
struct Sources {
    /// `--tokenizer`, loaded.
    tokenizer: Option<tokenizers::Tokenizer>,
    /// Time the tokenizer took to load.
    load_ms: f64,
    model: String,
    /// Time the model name took to find.
    model_ms: f64,
    /// The server's `/tokenize` (without `--tokenizer`, when the server has one).
    server_tok: Option<ServerTokenizer>,
    truth: Truth,
    /// Why the built-in word list is used, when it is used against a server that may not
    /// count its words one token each.
    fallback: Option<String>,
}

impl Sources {
    /// The tokenizer joined, the model name, the server's `/tokenize` and the prompt words.
    fn find(
        cfg: &ReplayConfig,
        server: &Server,
        tokenizer: TokenizerJob,
        startup: &mut StartupTimes,
    ) -> Result<(Sources, Vocab)> {
        let (tokenizer, load_ms) = tokenizer.join()?;
        startup.tokenizer_load_ms = load_ms;
        let t = Instant::now();
        let model = model_name(cfg, server)?;
        let model_ms = ms_since(t);
        let t = Instant::now();
        let server_tok = server_tokenizer(cfg, server, tokenizer.is_none(), &model);
        let (vocab, truth, fallback) =
            vocabulary(cfg, server, tokenizer.as_ref(), server_tok.as_ref())?;
        startup.vocab_ms = ms_since(t);
        let sources = Sources {
            tokenizer,
            load_ms,
            model,
            model_ms,
            server_tok,
            truth,
            fallback,
        };
        Ok((sources, vocab))
    }

    /// The source of truth of token counts (`None`: the built-in word list).
    fn encoder(&self) -> Option<&dyn prompt::Encoder> {
        match (&self.tokenizer, &self.server_tok) {
            (Some(t), _) => Some(t),
            (None, Some(s)) => Some(s),
            (None, None) => None,
        }
    }
}

/// The start-up check of the first prompts against the source of truth (none without one, or
/// when the first requests are rows sent as written): what counts were made exact against,
/// and the check's report.
fn check_prompts(
    cfg: &ReplayConfig,
    trace: &Loaded,
    builder: &PromptBuilder,
    sources: &Sources,
    vocab_ms: f64,
) -> (String, Option<VerifyReport>) {
    let source = match (&cfg.prompts.tokenizer, &sources.server_tok) {
        (Some(p), _) => format!("local tokenizer {}", p.display()),
        (None, Some(s)) => s.describe(),
        (None, None) => "none (built-in word list)".to_string(),
    };
    let loaded = match sources.truth {
        Truth::Local => format!("loaded in {:.0} ms, ", sources.load_ms),
        _ => String::new(),
    };
    // Only prompts request-sim builds can be checked: rows sent as written (messages,
    // text_input, prompt_token_ids) have none, so a messages trace has no check (n/a).
    let head: Vec<&TraceRequest> = trace
        .head
        .iter()
        .filter(|p| p.chat.is_none())
        .map(|p| &p.req)
        .collect();
    let verification = sources
        .encoder()
        .filter(|_| !head.is_empty())
        .map(|enc| startup_check(builder, enc, &head, &source, &loaded, vocab_ms));
    if head.is_empty() && !trace.head.is_empty() {
        note("prompt check: n/a (the first requests are rows sent as written: messages, text_input or prompt_token_ids; no prompt is built for them)");
    }
    (source, verification)
}

/// The request body settings and the tokens the server adds around the content (measured,
/// or what a dry run can know), refusing `--save-prompts` when that count is unknown.
fn body_and_overhead(
    cfg: &ReplayConfig,
    server: &Server,
    builder: &PromptBuilder,
    sources: &Sources,
) -> Result<(BodyParams, Option<Overhead>)> {
    let params = BodyParams {
        model: sources.model.clone(),
        stream: server.ep.stream,
        exact_output: cfg.requests.exact_output,
        extra: cfg.requests.extra_body.clone(),
        thinking: cfg.requests.thinking_budget,
    };
    let tokenizer = sources.tokenizer.as_ref();
    let overhead = match dry_run_overhead(cfg, server, tokenizer)? {
        Some(o) => Some(o),
        None => determine_overhead(
            cfg,
            server,
            &params,
            builder,
            (tokenizer, sources.server_tok.as_ref()),
        )?,
    };
    refuse_uncalibrated_save(cfg, server, overhead.as_ref())?;
    if let Some(o) = &overhead {
        note(format!(
            "prompt overhead: {} tokens ({}); content is shortened by it",
            o.tokens, o.how
        ));
    }
    Ok((params, overhead))
}

/// The overhead `determine_overhead` gives a dry run it could not measure (nothing is sent).
const UNCALIBRATED: &str = "dry run: not calibrated";

/// A dry run measures nothing on a server, but some overheads are known without asking: the
/// built-in simulator's chat template (5 tokens around a message, 3 of generation prompt; none
/// on completions), and for a completions endpoint with `--tokenizer`, the special tokens its
/// post-processor adds (what vLLM adds to a completions prompt). `None`: not known here.
fn dry_run_overhead(
    cfg: &ReplayConfig,
    server: &Server,
    tokenizer: Option<&tokenizers::Tokenizer>,
) -> Result<Option<Overhead>> {
    if !cfg.requests.dry_run || cfg.prompts.chat_overhead.is_some() || cfg.prompts.token_ids {
        return Ok(None);
    }
    let overhead = |tokens: u32, how: &str| {
        Some(Overhead {
            tokens,
            how: how.to_string(),
            lead: "",
        })
    };
    Ok(match (&cfg.target.server, tokenizer) {
        #[cfg(feature = "builtin-sim")]
        (Target::BuiltinSimulator, None) if server.ep.kind.is_chat() => overhead(
            llm_sim::BUILTIN_TOKENS_PER_MESSAGE + llm_sim::BUILTIN_GENERATION_PROMPT_TOKENS,
            "the built-in simulator's chat template",
        ),
        (Target::Remote(_), Some(tok))
            if server.ep.kind.raw_prompt() =>
        {
            overhead(
                prompt::completion_overhead(tok)?,
                "the special tokens --tokenizer adds to a completions prompt (dry run: the server is not asked)",
            )
        }
        _ => None,
    })
}

/// `--save-prompts` in a dry run whose overhead nobody knows: the saved prompts would be off by
/// the tokens the server adds (8 for Qwen3's chat template) in every row, so it is refused with
/// the ways to know it.
fn refuse_uncalibrated_save(
    cfg: &ReplayConfig,
    server: &Server,
    overhead: Option<&Overhead>,
) -> Result<()> {
    let uncalibrated = overhead.is_some_and(|o| o.how == UNCALIBRATED);
    if !uncalibrated || cfg.output.save_prompts.is_none() {
        return Ok(());
    }
    let (what, how) = if server.ep.kind.is_chat() {
        (
            "the tokens the server's chat template adds around each prompt",
            "--chat-overhead N (8 for Qwen3's template), --tokenizer with the model's chat template (its directory, or --tokenizer-config)",
        )
    } else {
        (
            "the tokens the server adds to a completions prompt (a BOS token for some models)",
            "--chat-overhead N (0 when it adds none), --tokenizer with the model's tokenizer",
        )
    };
    Err(Error::config(format!(
        "--save-prompts with --dry-run against {}: {what} cannot be known without asking the server, so every saved prompt would miss the trace's input_length by them; pass {how}, or run without --dry-run (one calibration request)",
        server.ep.display_url()
    )))
}

/// The model to name in requests: `--model-name`, else the server's first model (an OpenAI
/// server), else `default`.
fn model_name(cfg: &ReplayConfig, server: &Server) -> Result<String> {
    Ok(
        match (
            &cfg.target.model_name,
            cfg.requests.dry_run,
            server.ep.kind.openai_style_server(),
        ) {
            (Some(m), _, _) => m.clone(),
            (None, true, _) | (None, _, false) => "default".to_string(),
            (None, false, true) => server
                .rt
                .block_on(fetch_model(&server.client, &server.ep))?,
        },
    )
}

/// Without a local tokenizer, the server's own `/tokenize` (vLLM, SGLang, llama.cpp) is the
/// source of truth when it has one.
fn server_tokenizer(
    cfg: &ReplayConfig,
    server: &Server,
    no_local: bool,
    model: &str,
) -> Option<ServerTokenizer> {
    (no_local
        && matches!(cfg.target.server, Target::Remote(_))
        && !cfg.requests.dry_run
        && !cfg.prompts.no_server_tokenize
        && server.ep.kind.openai_style_server())
    .then(|| {
        ServerTokenizer::probe(
            server.rt.handle().clone(),
            &server.client,
            &server.ep,
            Some(model.to_string()),
        )
    })
    .flatten()
}

/// `--prompt-corpus`: the share of prompt tokens that are corpus text, over the run's requests
/// when the trace is in memory, else over the first ones read.
fn corpus_report(
    trace: &Loaded,
    builder: &PromptBuilder,
    shortened_by: u32,
) -> Option<CorpusReport> {
    match &trace.whole {
        Some(w) if builder.corpus().is_some() => {
            CorpusReport::new(builder, &w.requests, shortened_by)
        }
        _ => {
            let head: Vec<TraceRequest> = trace.head.iter().map(|p| p.req.clone()).collect();
            CorpusReport::new(builder, &head, shortened_by)
        }
    }
}

/// `messages` rows: their prompt tokens (the chat template rendered with the row's messages
/// and tools, tokenized) when `--tokenizer` and `--tokenizer-config` are given; otherwise the
/// server's count is recorded unchecked. The tokenizer is kept only then.
fn chat_counter(
    cfg: &ReplayConfig,
    trace: &Loaded,
    tokenizer: Option<tokenizers::Tokenizer>,
) -> Result<Option<Arc<ChatCounter>>> {
    // A streamed trace is known by its format and its first rows.
    let messages = match &trace.whole {
        Some(w) => w.chats.iter().flatten().any(|c| !c.is_literal()),
        None => {
            trace.format.sends_rows_as_written()
                || trace
                    .head
                    .iter()
                    .any(|p| p.chat.as_ref().is_some_and(|c| !c.is_literal()))
        }
    };
    if !messages {
        return Ok(None);
    }
    let (Some(tok), Some(tc)) = (tokenizer, &cfg.prompts.tokenizer_config) else {
        note(
            "messages rows: their prompt tokens are the server's count, not checked (give --tokenizer and --tokenizer-config to check them)",
        );
        return Ok(None);
    };
    let template = prompt::ChatTemplate::from_config_file(tc)?;
    note(format!(
        "messages rows: intended prompt tokens from the chat template of {} rendered with each row's messages and tools{}",
        tc.display(),
        if cfg.requests.sessions.live_history {
            " (not for turns whose history --live-history rewrites)"
        } else {
            ""
        }
    ));
    Ok(Some(Arc::new(ChatCounter::new(template, tok))))
}

/// The prompt words: from the tokenizer, the server's `/tokenize`, or the built-in list (then
/// why, unless the target is the built-in simulator).
fn vocabulary(
    cfg: &ReplayConfig,
    server: &Server,
    tokenizer: Option<&tokenizers::Tokenizer>,
    server_tok: Option<&ServerTokenizer>,
) -> Result<(Vocab, Truth, Option<String>)> {
    Ok(match (tokenizer, server_tok) {
        (Some(t), _) => (Vocab::from_tokenizer(t)?, Truth::Local, None),
        (None, Some(s)) => match s.candidates().and_then(|c| Vocab::from_candidates(s, c)) {
            Ok(v) => (v, Truth::Server, None),
            Err(e) => {
                let why = format!("no prompt words from {}: {e}", s.describe());
                (Vocab::builtin(), Truth::Server, Some(why))
            }
        },
        (None, None) => (
            Vocab::builtin(),
            Truth::None,
            no_tokenizer_reason(cfg, server)?,
        ),
    })
}

/// Why neither a local tokenizer nor the server's `/tokenize` counts the prompts (`None` for the
/// built-in simulator, which needs neither): the true reason of each case, since the server
/// was asked only when none of the others holds. A server no connection can be opened to is
/// an [`Error::Unreachable`] (exit 5), not a reason.
fn no_tokenizer_reason(cfg: &ReplayConfig, server: &Server) -> Result<Option<String>> {
    let url = server.ep.display_url();
    Ok(Some(match cfg.target.server {
        Target::BuiltinSimulator => return Ok(None),
        _ if cfg.prompts.no_server_tokenize => "no --tokenizer, --no-server-tokenize".into(),
        _ if cfg.requests.dry_run => {
            "no --tokenizer; a dry run does not ask the server's /tokenize".into()
        }
        _ if !server.ep.kind.is_openai() => format!(
            "no --tokenizer; {url} is not an OpenAI-style endpoint, so no /tokenize is asked"
        ),
        _ => match reach_error(server)? {
            Some(e) => format!("no --tokenizer, and {url} cannot be asked for its /tokenize ({e})"),
            None => "no --tokenizer and the server has no POST /tokenize".into(),
        },
    }))
}

/// Why the server cannot be asked at all (`None` when it answers anything else over HTTP); a
/// refused API key or no connection opened is [`Error::Unreachable`] (exit 5).
fn reach_error(server: &Server) -> Result<Option<String>> {
    let req = server
        .ep
        .authorize(server.client.get(server.ep.base_url()))
        .timeout(std::time::Duration::from_secs(5));
    // `send` starts the timeout's timer: inside the runtime.
    Ok(match server.rt.block_on(async { req.send().await }) {
        // A refused key is the server refusing every request: exit 5, as when the requests
        // find it.
        Ok(r) if matches!(r.status().as_u16(), 401 | 403) => {
            return Err(Error::Unreachable(format!(
                "no --tokenizer, and {} cannot be asked for its /tokenize (it answered {}: the API key was refused; pass the right one with --api-key KEY, --api-key-file F or $OPENAI_API_KEY)",
                server.ep.display_url(),
                r.status()
            )))
        }
        Ok(_) => None,
        Err(e) => match crate::backend::connect_failure(&e) {
            Some(cause) => {
                return Err(Error::Unreachable(format!(
                    "cannot connect to {}/tokenize (the start-up probe for the server's tokenizer, asked without --tokenizer): {cause}; is the server running and listening there?",
                    server.ep.base_url()
                )))
            }
            None => Some(e.without_url().to_string()),
        },
    })
}

/// Prompts of the built-in word list against a server: one line that says whether they are
/// exact (the server's `/tokenize` counts the start-up sample exactly, or the server is
/// llm-sim), else a refusal unless `--allow-inexact-prompts` (a dry run only says so).
fn judge_fallback(
    cfg: &ReplayConfig,
    server: &Server,
    reason: &str,
    truth: Truth,
    checked: Option<&VerifyReport>,
) -> Result<()> {
    if cfg.requests.dry_run {
        note(format!(
            "WARNING: prompt words: the built-in word list ({reason}); token counts are approximate for a real model (dry run: nothing is sent)"
        ));
        return Ok(());
    }
    let llm_sim = truth == Truth::None
        && !cfg.prompts.allow_inexact_prompts
        && crate::backend::tokenize::is_llm_sim(server.rt.handle(), &server.client, &server.ep);
    let line = prompt::judge_fallback(&prompt::Fallback {
        reason,
        checked,
        llm_sim,
        allow: cfg.prompts.allow_inexact_prompts,
    })?;
    note(line);
    Ok(())
}

/// Re-tokenize the head of a few prompts among the first requests (a prompt's first n tokens
/// are the prompt of length n, so this checks real blocks while keeping start-up short;
/// `verify-prompts` checks all).
fn startup_check(
    builder: &PromptBuilder,
    enc: &dyn prompt::Encoder,
    requests: &[&TraceRequest],
    source: &str,
    loaded: &str,
    vocab_ms: f64,
) -> VerifyReport {
    let n = STARTUP_CHECK_PROMPTS.min(requests.len());
    let heads: Vec<TraceRequest> = (0..n)
        .map(|k| requests[k * requests.len() / n])
        .map(|r| TraceRequest {
            input_length: r.input_length.min(STARTUP_CHECK_TOKENS),
            ..r.clone()
        })
        .collect();
    let v = prompt::verify_sample(builder, enc, &heads, STARTUP_CHECK_PROMPTS);
    note(format!(
        "prompt tokens: {source} {loaded}{} prompt words ({}) in {vocab_ms:.0} ms; start-up check: {}/{} sample prompts (first {STARTUP_CHECK_TOKENS} tokens) re-tokenize exactly",
        builder.vocab().len(),
        builder.vocab().method(),
        v.exact,
        v.checked
    ));
    if let Some(f) = &v.first_failure {
        note(format!("WARNING: prompt check failed: {f}"));
    }
    v
}

/// `--save-prompts`: every request's prompt as the producers will build it.
fn save_prompts(
    cfg: &ReplayConfig,
    trace: &Loaded,
    server: &Server,
    prompts: &Prompts,
    path: &std::path::Path,
) -> Result<()> {
    let ep = &server.ep;
    if !ep.kind.openai_style_server() {
        return Err(Error::config(format!(
            "--save-prompts writes a messages (chat, Responses, Messages) or text_input / prompt_token_ids (completions) trace: it needs an OpenAI-style endpoint, not {}",
            ep.display_url(),
        )));
    }
    let Some(whole) = &trace.whole else {
        return Err(Error::internal("--save-prompts without the whole trace"));
    };
    // This run's requests (this shard's share, outputs capped), as the producers build them.
    let mine: Vec<TraceRequest> = whole
        .requests
        .iter()
        .filter(|r| {
            cfg.trace.shard.is_none_or(|s| {
                crate::trace::pipeline::shard::owner(whole.sessions.key(r.index), r.index, s.count)
                    == s.index
            })
        })
        .map(|r| {
            let cap = cfg.requests.max_output_tokens.unwrap_or(u32::MAX);
            TraceRequest {
                output_length: r.output_length.min(cap),
                reasoning: r.reasoning.capped(cap),
                images: None,
                ..r.clone()
            }
        })
        .collect();
    let t = Instant::now();
    let n = save::save_prompts(
        path,
        &mine,
        &prompts.builder,
        prompts.shortening(),
        save::SaveAs::of(ep.kind, cfg.prompts.token_ids),
        &whole.chats,
        &whole.sessions,
    )?;
    note(format!(
        "saved the prompts of {n} requests to {} in {:.0} ms (a messages trace: replay it with --dataset-path)",
        path.display(),
        ms_since(t)
    ));
    Ok(())
}
