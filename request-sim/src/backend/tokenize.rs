//! The server's own tokenizer as the source of truth for prompts (`docs/prompts.md`, "Exact with only an endpoint"): vLLM's (and
//! SGLang's) `POST /tokenize` `{"model","prompt"}` → `{"tokens","count"}` and `POST /detokenize`
//! `{"model","tokens"}` → `{"prompt"}`, or llama.cpp's server's `{"content"}` → `{"tokens"}` and
//! `{"tokens"}` → `{"content"}`. With it, prompts are exact with nothing but `--endpoint`:
//! the prompt words are picked from the server's vocabulary ([`ServerTokenizer::candidates`],
//! then [`Vocab::from_candidates`](crate::prompt::Vocab::from_candidates)), the start-up sample
//! is re-tokenized by the server, and the chat overhead is counted by it.
//!
//! The vocabulary is listed up to its size when the server tells it (llama.cpp's
//! `GET /v1/models` → `data[0].meta.n_vocab`); otherwise until the server refuses ids. vLLM
//! refuses an id beyond its vocabulary with a 4xx; llama.cpp's server with a 500 (an
//! out-of-range exception), so a 500 counts as a refusal too (a 502/503/504 does not: the
//! server or a proxy is unwell).

use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use serde_json::{json, Value};

use super::api::{ApiKind, Calibration};
use super::client::HttpClient;
use super::endpoint::Endpoint;
use crate::prompt::{is_word, Encoder, PromptError};

/// Requests in flight at once against the server during start-up.
const CONCURRENCY: usize = 8;
/// Token ids decoded per `/detokenize` request while listing the vocabulary.
const DECODE_BATCH: u32 = 8192;
/// Vocabulary ids listed at most (no tokenizer has more; stops a server that never refuses).
const MAX_IDS: u32 = 1 << 22;
/// Separates the decoded tokens of one `/detokenize` request: a control character no prompt
/// word contains (the tokens around it are split apart again at it).
const SEP: char = '\u{1}';
const TIMEOUT: Duration = Duration::from_secs(30);

/// The request and answer shapes of the server's `/tokenize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// vLLM / SGLang: `{"model","prompt","add_special_tokens"}` → `{"tokens","count"}`.
    Vllm,
    /// llama.cpp's server: `{"content","add_special"}` → `{"tokens"}`.
    LlamaCpp,
}

/// A server that tokenizes for us (see the module docs).
pub struct ServerTokenizer {
    client: HttpClient,
    ep: Endpoint,
    model: Option<String>,
    shape: Shape,
    handle: tokio::runtime::Handle,
    /// Tokens the server adds to every prompt even when asked not to (e.g. a BOS), stripped.
    added: Vec<u32>,
    /// The vocabulary's size when the server tells it (llama.cpp's `/v1/models`).
    vocab_size: Option<u32>,
}

impl std::fmt::Debug for ServerTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTokenizer")
            .field("url", &self.tokenize_url())
            .field("shape", &self.shape)
            .finish()
    }
}

impl ServerTokenizer {
    /// Ask the endpoint's server whether it tokenizes (`POST {base}/tokenize`, vLLM shape, then
    /// llama.cpp's). `Ok(None)` when it does not (any error status, or an answer without
    /// `tokens`); `Err` only for an answer that cannot be used at all.
    pub fn probe(
        handle: tokio::runtime::Handle,
        client: &HttpClient,
        ep: &Endpoint,
        model: Option<String>,
    ) -> Option<ServerTokenizer> {
        for shape in [Shape::Vllm, Shape::LlamaCpp] {
            let mut st = ServerTokenizer {
                client: client.clone(),
                ep: ep.clone(),
                model: model.clone(),
                shape,
                handle: handle.clone(),
                added: Vec::new(),
                vocab_size: None,
            };
            let probe = handle.block_on(async {
                let empty = st.tokenize_raw("", false).await.ok()?;
                let hello = st.tokenize_raw(" hello world", false).await.ok()?;
                Some((empty, hello))
            });
            if let Some((empty, hello)) = probe {
                if hello.len() > empty.len() && hello.starts_with(&empty) {
                    st.added = empty;
                    if shape == Shape::LlamaCpp {
                        st.vocab_size = handle.block_on(st.fetch_vocab_size());
                    }
                    return Some(st);
                }
            }
        }
        None
    }

    /// `POST /tokenize` URL.
    pub fn tokenize_url(&self) -> String {
        format!("{}/tokenize", self.ep.base_url())
    }

    /// e.g. `server /tokenize (vLLM shape) at http://host:8000/tokenize`.
    pub fn describe(&self) -> String {
        let shape = match self.shape {
            Shape::Vllm => "vLLM shape",
            Shape::LlamaCpp => "llama.cpp shape",
        };
        format!("server /tokenize ({shape}) at {}", self.tokenize_url())
    }

    /// The vocabulary's size as the server tells it, if it does.
    pub fn vocab_size(&self) -> Option<u32> {
        self.vocab_size
    }

    /// `GET {base}/v1/models` → `data[0].meta.n_vocab` (llama.cpp's server); `None` when the
    /// answer has no such field or the request fails.
    async fn fetch_vocab_size(&self) -> Option<u32> {
        let url = format!("{}/v1/models", self.ep.base_url());
        let resp = self
            .ep
            .authorize(self.client.get(&url))
            .timeout(TIMEOUT)
            .send()
            .await
            .ok()?;
        if !resp.status().is_success() {
            return None;
        }
        let v: Value = serde_json::from_slice(&resp.bytes().await.ok()?).ok()?;
        let n = v
            .get("data")?
            .get(0)?
            .get("meta")?
            .get("n_vocab")?
            .as_u64()?;
        u32::try_from(n).ok().filter(|&n| n > 0)
    }

    async fn post(&self, path: &str, body: &Value) -> Result<Value, (Option<u16>, String)> {
        let url = format!("{}/{path}", self.ep.base_url());
        let resp = self
            .ep
            .authorize(self.client.post(&url))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .timeout(TIMEOUT)
            .send()
            .await
            .map_err(|e| (None, format!("POST {url}: {}", e.without_url())))?;
        let status = resp.status();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| (None, format!("POST {url}: {}", e.without_url())))?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
            return Err((
                Some(status.as_u16()),
                format!("POST {url} answered {status}: {text}"),
            ));
        }
        serde_json::from_slice(&bytes)
            .map_err(|e| (None, format!("POST {url}: answer is not JSON: {e}")))
    }

    fn with_model(&self, mut body: Value) -> Value {
        if let (Some(m), Shape::Vllm) = (&self.model, self.shape) {
            body["model"] = json!(m);
        }
        body
    }

    /// Token ids of `text` as the server returns them (nothing stripped).
    async fn tokenize_raw(&self, text: &str, special: bool) -> Result<Vec<u32>, String> {
        let body = match self.shape {
            Shape::Vllm => json!({"prompt": text, "add_special_tokens": special}),
            Shape::LlamaCpp => json!({"content": text, "add_special": special}),
        };
        let v = self
            .post("tokenize", &self.with_model(body))
            .await
            .map_err(|e| e.1)?;
        token_list(&v).ok_or_else(|| format!("{}: answer has no token list", self.tokenize_url()))
    }

    /// Token ids of `text` without special tokens (any the server adds anyway are stripped).
    async fn tokenize(&self, text: &str) -> Result<Vec<u32>, String> {
        let mut ids = self.tokenize_raw(text, false).await?;
        if !self.added.is_empty() && ids.starts_with(&self.added) {
            ids.drain(..self.added.len());
        }
        Ok(ids)
    }

    /// Whether the server's `/tokenize` takes chat messages ([`chat_ids`](Self::chat_ids)):
    /// vLLM's does, llama.cpp's does not.
    pub fn takes_chat_messages(&self) -> bool {
        self.shape == Shape::Vllm
    }

    /// Token ids of a whole chat request as the server's chat template renders it with the
    /// generation prompt (`POST /tokenize` with `messages` and `tools`, vLLM shape; llama.cpp's
    /// `/tokenize` takes no messages). `request-sim convert` counts prompts with it.
    pub fn chat_ids(&self, messages: &Value, tools: Option<&Value>) -> Result<Vec<u32>, String> {
        if self.shape != Shape::Vllm {
            return Err(format!(
                "{} takes no chat messages (llama.cpp's server): give --tokenizer instead",
                self.tokenize_url()
            ));
        }
        let mut body = json!({"messages": messages, "add_generation_prompt": true});
        if let Some(t) = tools {
            body["tools"] = t.clone();
        }
        let body = self.with_model(body);
        self.handle.block_on(async {
            let v = self.post("tokenize", &body).await.map_err(|e| e.1)?;
            token_list(&v)
                .ok_or_else(|| format!("{}: answer has no token list", self.tokenize_url()))
        })
    }

    /// Token ids of a text without special tokens (a response's text, counted as output).
    pub fn text_ids(&self, text: &str) -> Result<Vec<u32>, String> {
        self.handle.block_on(self.tokenize(text))
    }

    /// Text of `ids`; `Ok(None)` when the server refuses them (an id beyond its vocabulary): a
    /// 4xx other than 401/403 (vLLM, SGLang, llm-sim) or a 500 (llama.cpp's server throws an
    /// out-of-range exception and answers 500).
    async fn detokenize(&self, ids: &[u32]) -> Result<Option<String>, String> {
        let body = self.with_model(json!({ "tokens": ids }));
        match self.post("detokenize", &body).await {
            Ok(v) => v
                .get("prompt")
                .or_else(|| v.get("content"))
                .and_then(Value::as_str)
                .map(|s| Some(s.to_string()))
                .ok_or_else(|| "/detokenize answer has no prompt or content".to_string()),
            Err((Some(s), _)) if refusal(s) => Ok(None),
            Err((_, e)) => Err(e),
        }
    }

    /// Every vocabulary entry whose text is a prompt word (`" "` + lowercase ASCII letters),
    /// with its id, in id order: the vocabulary is listed with `/detokenize` in batches of
    /// [`DECODE_BATCH`] ids (a control-character separator between ids, so the batch's text
    /// splits back into tokens; a batch that does not split cleanly, or that the server
    /// refuses, is halved) until ids run out: up to the vocabulary's size when the server
    /// tells it, else until the server refuses ids.
    pub fn candidates(&self) -> Result<Vec<(u32, String)>, PromptError> {
        let err = |e: String| PromptError::Tokenizer(e);
        self.handle.block_on(async {
            let sep = self.tokenize(&SEP.to_string()).await.map_err(err)?;
            if sep.is_empty() {
                return Err(err("the server tokenizes the separator to nothing".into()));
            }
            // What the separator's tokens leave between two separator characters (e.g. the
            // space of a `▁` piece): stripped from the end of every decoded token.
            let three: Vec<u32> = sep.iter().chain(&sep).chain(&sep).copied().collect();
            let text = self
                .detokenize(&three)
                .await
                .map_err(err)?
                .ok_or_else(|| err("/detokenize refused the separator".into()))?;
            let parts: Vec<&str> = text.split(SEP).collect();
            if parts.len() != 4 {
                return Err(err(format!(
                    "/detokenize of three separators gave {text:?}; cannot list the vocabulary"
                )));
            }
            let mid = parts[1].to_string();
            let mut out = Vec::new();
            let mut start = 0u32;
            let limit = self.vocab_size.unwrap_or(MAX_IDS).min(MAX_IDS);
            while start < limit {
                let ranges: Vec<(u32, u32)> = (0..CONCURRENCY as u32)
                    .map(|k| start + k * DECODE_BATCH)
                    .filter(|&a| a < limit)
                    .map(|a| (a, (a + DECODE_BATCH).min(limit)))
                    .collect();
                start += CONCURRENCY as u32 * DECODE_BATCH;
                let waves: Vec<Decoded> = futures_util::stream::iter(ranges)
                    .map(|(a, b)| self.decode_range(a, b, &sep, &mid))
                    .buffered(CONCURRENCY)
                    .try_collect()
                    .await
                    .map_err(err)?;
                let mut end = false;
                let mut any_text = false;
                for d in waves {
                    any_text |= d.any_text;
                    end |= d.refused;
                    out.extend(d.words);
                }
                // The end of the vocabulary: ids refused, or (a server that decodes unknown ids
                // to nothing) a whole wave without any text.
                if end || !any_text {
                    break;
                }
            }
            Ok(out)
        })
    }

    /// Decode ids `a..b`: the prompt words among them, whether any id had text, and whether
    /// the server refused some id (the end of its vocabulary).
    async fn decode_range(
        &self,
        a: u32,
        b: u32,
        sep: &[u32],
        mid: &str,
    ) -> Result<Decoded, String> {
        let mut words = Vec::new();
        let mut refused = false;
        let mut any_text = false;
        let mut todo = vec![(a, b)];
        while let Some((a, b)) = todo.pop() {
            let mut ids = sep.to_vec();
            for id in a..b {
                ids.push(id);
                ids.extend_from_slice(sep);
            }
            let text = self.detokenize(&ids).await?;
            if text.is_none() && b - a > 1 {
                // Refused: if its first id is refused too, the whole range lies beyond the
                // vocabulary (ids are contiguous); else the end is inside: halve.
                let mut first = sep.to_vec();
                first.push(a);
                first.extend_from_slice(sep);
                if self.detokenize(&first).await?.is_none() {
                    refused = true;
                    continue;
                }
            }
            let split = text.as_deref().map(|t| t.split(SEP).collect::<Vec<_>>());
            match split {
                Some(parts) if parts.len() == (b - a) as usize + 2 => {
                    for (id, part) in (a..b).zip(&parts[1..]) {
                        let w = part.strip_suffix(mid).unwrap_or(part);
                        any_text |= !w.is_empty();
                        if is_word(w) {
                            words.push((id, w.to_string()));
                        }
                    }
                }
                // One id the server refuses: beyond its vocabulary. One id that does not split
                // cleanly: not a word (it contains the separator).
                _ if b - a == 1 => refused |= text.is_none(),
                _ => {
                    let m = a + (b - a) / 2;
                    todo.push((m, b));
                    todo.push((a, m));
                }
            }
        }
        words.sort_unstable_by_key(|w| w.0);
        Ok(Decoded {
            words,
            any_text,
            refused,
        })
    }

    /// [`Self::overhead`] of chat completions, whatever API the run speaks.
    pub fn chat_overhead(
        &self,
        strip_first_space: bool,
    ) -> Result<Option<(u32, &'static str)>, String> {
        self.measure(Calibration::ChatTemplate, strip_first_space)
    }

    /// Tokens the server adds around a prompt's content for `kind`: the chat template's
    /// (`/tokenize` with `messages`, vLLM shape) or the completions prompt's special tokens.
    /// Measured with two contents that must agree, shaped like the prompts
    /// (`strip_first_space`: see `Vocab::strips_first_space`). `Ok(None)` when the server cannot say
    /// (e.g. llama.cpp's `/tokenize` takes no `messages`).
    ///
    /// For chat, the content's own tokens must appear unchanged in the templated prompt; when
    /// they do not (a template that trims the content, like Llama 3's), every content is
    /// measured again behind [`LEAD`](crate::prompt::LEAD), returned as the lead to put before
    /// every content (`""` when none is needed).
    pub fn overhead(
        &self,
        kind: ApiKind,
        strip_first_space: bool,
    ) -> Result<Option<(u32, &'static str)>, String> {
        self.measure(kind.calibration(), strip_first_space)
    }

    /// [`Self::overhead`] of an API whose overhead is found `how`: the chat template's, or
    /// the raw prompt's special tokens; `Ok(None)` for any other way.
    fn measure(
        &self,
        how: Calibration,
        strip_first_space: bool,
    ) -> Result<Option<(u32, &'static str)>, String> {
        let probes = [
            " hello world",
            " the quick brown fox jumps over the lazy dog and then some more words",
        ];
        self.handle.block_on(async {
            'lead: for lead in ["", crate::prompt::LEAD] {
                let mut result = None;
                for words in probes {
                    // Shaped like the prompts (SentencePiece: the first word without its space).
                    let words = &words[usize::from(strip_first_space)..];
                    let own = self.tokenize(words).await?;
                    let total = match how {
                        Calibration::ChatTemplate if self.shape == Shape::Vllm => {
                            let body = self.with_model(json!({
                                "messages": [{"role": "user", "content": format!("{lead}{words}")}],
                                "add_generation_prompt": true,
                            }));
                            match self.post("tokenize", &body).await.ok().and_then(|v| token_list(&v)) {
                                Some(t) => t,
                                None => return Ok(None),
                            }
                        }
                        Calibration::SpecialTokens if lead.is_empty() => {
                            self.tokenize_raw(words, true).await?
                        }
                        _ => return Ok(None),
                    };
                    if !own.is_empty() && !total.windows(own.len()).any(|w| w == own.as_slice()) {
                        // The template changed the content's tokens: try with the lead.
                        continue 'lead;
                    }
                    let o = total.len().saturating_sub(own.len()) as u32;
                    match result {
                        None => result = Some(o),
                        Some(p) if p == o => {}
                        Some(p) => {
                            return Err(format!(
                                "the server's prompt overhead depends on the content ({p} vs {o} tokens)"
                            ))
                        }
                    }
                }
                return Ok(result.map(|o| (o, lead)));
            }
            Err("the server's chat template changes the content's tokens (even behind a lead word)".into())
        })
    }
}

impl Encoder for ServerTokenizer {
    fn encode_many(&self, texts: &[String]) -> Result<Vec<Vec<u32>>, PromptError> {
        self.handle
            .block_on(
                futures_util::stream::iter(texts)
                    .map(|t| self.tokenize(t))
                    .buffered(CONCURRENCY)
                    .try_collect(),
            )
            .map_err(PromptError::Tokenizer)
    }
}

/// Whether the endpoint's server is llm-sim (`GET {base}/version` answers
/// `{"version": "llm-sim …"}`): its built-in tokenizer counts the built-in prompt words one
/// token each. `false` when the request fails or the answer says otherwise.
pub fn is_llm_sim(handle: &tokio::runtime::Handle, client: &HttpClient, ep: &Endpoint) -> bool {
    let url = format!("{}/version", ep.base_url());
    handle.block_on(async {
        let Ok(resp) = ep.authorize(client.get(&url)).timeout(TIMEOUT).send().await else {
            return false;
        };
        if !resp.status().is_success() {
            return false;
        }
        let Ok(bytes) = resp.bytes().await else {
            return false;
        };
        serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|v| v.get("version")?.as_str().map(|s| s.starts_with("llm-sim")))
            .unwrap_or(false)
    })
}

/// What [`ServerTokenizer::decode_range`] found.
struct Decoded {
    words: Vec<(u32, String)>,
    any_text: bool,
    refused: bool,
}

/// An answer status that means "an id beyond the vocabulary": a 4xx other than 401/403, or
/// llama.cpp's 500. Not 502/503/504 (a proxy or an unwell server: an error).
fn refusal(status: u16) -> bool {
    ((400..500).contains(&status) && status != 401 && status != 403) || status == 500
}

/// The `tokens` array of a `/tokenize` answer (ids; llama.cpp's `with_pieces` objects too).
fn token_list(v: &Value) -> Option<Vec<u32>> {
    v.get("tokens")?
        .as_array()?
        .iter()
        .map(|t| {
            t.as_u64()
                .or_else(|| t.get("id").and_then(Value::as_u64))
                .and_then(|x| u32::try_from(x).ok())
        })
        .collect()
}
