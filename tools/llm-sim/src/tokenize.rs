//! Turning prompts into token ids: the built-in word tokenizer (one token per
//! whitespace-separated word) or a Hugging Face `tokenizer.json`, and chat prompts through a
//! chat template (built-in ChatML accounting, or `chat_template` from `tokenizer_config.json`
//! rendered with minijinja).

use std::collections::HashMap;
use std::path::Path;

use minijinja::value::Value;
use minijinja::{Environment, Error, ErrorKind, State};

use crate::chat_shape::{Lookup, ShapeCache};
use crate::error::Error as SimError;
use crate::vocab::{builtin_words, BUILTIN_VOCAB_SIZE};
use crate::word_cache::WordCache;

/// The chat template helpers live in `llm_common` (request-sim renders prompts with them).
pub use llm_common::template::{python_tojson, template_messages, template_tools, ChatMessage};

/// Built-in special token ids (just past the word list).
const IM_START: u32 = BUILTIN_VOCAB_SIZE as u32;
const IM_END: u32 = IM_START + 1;
const NEWLINE: u32 = IM_START + 2;
const ROLE_BASE: u32 = IM_START + 16;
/// Ids of words outside the built-in list live above this (hashed, for prefix caching).
const UNKNOWN_BASE: u32 = 1 << 31;

/// Tokens a chat message adds around its content in the built-in template:
/// `<|im_start|>`, role, `\n`, ..., `<|im_end|>`, `\n`.
pub const BUILTIN_TOKENS_PER_MESSAGE: u32 = 5;
/// Tokens of the generation prompt in the built-in template: `<|im_start|>`, `assistant`, `\n`.
pub const BUILTIN_GENERATION_PROMPT_TOKENS: u32 = 3;

/// The tokenizer of a server.
pub enum Tokenizer {
    /// One token per whitespace-separated word; words of the built-in list get their index.
    Builtin(BuiltinTokenizer),
    /// A Hugging Face tokenizer plus a chat template.
    Hf(Box<HfTokenizer>),
}

pub struct BuiltinTokenizer {
    ids: HashMap<&'static str, u32>,
}

pub struct HfTokenizer {
    tok: tokenizers::Tokenizer,
    env: Environment<'static>,
    vocab_size: u32,
    bos_token: String,
    eos_token: String,
    /// The ids of the words seen so far (`None`: the tokenizer does not count word by word).
    words: Option<WordCache>,
    /// The template's text around plain contents, per message shape (`chat_shape.rs`).
    shapes: ShapeCache,
}

const CHATML_TEMPLATE: &str = "{% for message in messages %}<|im_start|>{{ message.role }}\n\
{{ message.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl BuiltinTokenizer {
    pub fn new() -> Self {
        let ids = builtin_words()
            .iter()
            .enumerate()
            .map(|(i, w)| (w.as_str(), i as u32))
            .collect();
        BuiltinTokenizer { ids }
    }

    fn word_id(&self, w: &str) -> u32 {
        match self.ids.get(w) {
            Some(&id) => id,
            None => UNKNOWN_BASE | (fnv1a(w) as u32 & (UNKNOWN_BASE - 1)),
        }
    }

    fn encode_into(&self, text: &str, out: &mut Vec<u32>) {
        out.extend(text.split_whitespace().map(|w| self.word_id(w)));
    }

    fn role_name(&self, k: u32) -> &'static str {
        ["system", "user", "assistant", "tool", "developer"]
            .get(k as usize)
            .copied()
            .unwrap_or("<unk>")
    }

    fn role_id(&self, role: &str) -> u32 {
        match role {
            "system" => ROLE_BASE,
            "user" => ROLE_BASE + 1,
            "assistant" => ROLE_BASE + 2,
            "tool" => ROLE_BASE + 3,
            "developer" => ROLE_BASE + 4,
            other => ROLE_BASE + 5 + (fnv1a(other) % 1024) as u32,
        }
    }
}

impl Default for BuiltinTokenizer {
    fn default() -> Self {
        Self::new()
    }
}

thread_local! {
    /// The text of the chat prompt being counted, when put together from a frame (kept
    /// between requests up to [`MAX_KEPT_TEXT_BYTES`]).
    static CHAT_TEXT: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Longest chat text buffer a thread keeps between requests.
const MAX_KEPT_TEXT_BYTES: usize = 4 << 20;

/// Words whose tokens the BPE model keeps (about 100 bytes each when full).
const WORD_CACHE_CAPACITY: usize = 1 << 18;

impl Tokenizer {
    /// The built-in tokenizer.
    pub fn builtin() -> Self {
        Tokenizer::Builtin(BuiltinTokenizer::new())
    }

    /// Loads `tokenizer.json` and, if given, the chat template of `tokenizer_config.json`.
    pub fn load(tokenizer: &Path, config: Option<&Path>) -> crate::Result<Self> {
        let mut tok = tokenizers::Tokenizer::from_file(tokenizer)
            .map_err(|e| SimError::tokenizer(tokenizer, e))?;
        // The BPE model caches the tokens of each pre-tokenized word, but only its first 10,000
        // distinct words: the cache stops filling, it does not evict. Synthetic prompts use
        // every one-token word of the vocabulary (about 25,000 for Qwen3), so most words went
        // through the merges again on every request, and a 12k-token prompt took 100+ ms to
        // count, all of it inside the client's TTFT. A cache as big as any vocabulary keeps
        // every word counted once.
        let mut model = tok.get_model().clone();
        model.resize_cache(WORD_CACHE_CAPACITY);
        tok.with_model(model);
        let words = match WordCache::for_tokenizer(&tok) {
            Ok(w) => {
                w.warm(&tok);
                Some(w)
            }
            Err(why) => {
                eprintln!(
                    "llm-sim: {}: long prompts are counted whole on every request ({why})",
                    tokenizer.display()
                );
                None
            }
        };
        let vocab_size = tok.get_vocab_size(true) as u32;
        let mut template = CHATML_TEMPLATE.to_string();
        let mut bos_token = String::new();
        let mut eos_token = String::new();
        if let Some(cfg_path) = config {
            let text = std::fs::read_to_string(cfg_path)
                .map_err(|e| SimError::io(format!("reading {}", cfg_path.display()), e))?;
            let cfg: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| SimError::tokenizer(cfg_path, e))?;
            match cfg.get("chat_template") {
                Some(serde_json::Value::String(s)) => template = s.clone(),
                Some(serde_json::Value::Array(list)) => {
                    let pick = list
                        .iter()
                        .find(|t| t.get("name").and_then(|n| n.as_str()) == Some("default"))
                        .or_else(|| list.first());
                    if let Some(s) = pick
                        .and_then(|t| t.get("template"))
                        .and_then(|t| t.as_str())
                    {
                        template = s.to_string();
                    }
                }
                _ => {}
            }
            bos_token = special_token_text(cfg.get("bos_token"));
            eos_token = special_token_text(cfg.get("eos_token"));
        }
        let mut env = Environment::new();
        env.set_unknown_method_callback(python_methods);
        env.add_function("raise_exception", |msg: String| -> Result<Value, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, msg))
        });
        env.add_function("strftime_now", |_fmt: String| -> String {
            "01 Jan 2026".to_string()
        });
        env.add_filter("tojson", python_tojson);
        env.add_template_owned("chat", template).map_err(|e| {
            SimError::tokenizer(
                config.unwrap_or(tokenizer),
                format!("parsing the chat template: {e}"),
            )
        })?;
        Ok(Tokenizer::Hf(Box::new(HfTokenizer {
            tok,
            env,
            vocab_size,
            bos_token,
            eos_token,
            words,
            shapes: ShapeCache::default(),
        })))
    }

    /// The built-in tokenizer (cheap enough to count a short prompt on the server's runtime thread).
    pub fn is_builtin(&self) -> bool {
        matches!(self, Tokenizer::Builtin(_))
    }

    /// Largest valid token id + 1 (`None`: any id is accepted).
    pub fn vocab_size(&self) -> Option<u32> {
        match self {
            Tokenizer::Builtin(_) => None,
            Tokenizer::Hf(h) => Some(h.vocab_size),
        }
    }

    /// Token ids of a completion prompt (HF: with the tokenizer's special tokens, as vLLM does).
    pub fn encode_text(&self, text: &str) -> Result<Vec<u32>, String> {
        self.encode_text_with(text, true)
    }

    /// Token ids of a text, with or without the tokenizer's special tokens (HF only; the
    /// built-in tokenizer has none).
    pub fn encode_text_with(
        &self,
        text: &str,
        add_special_tokens: bool,
    ) -> Result<Vec<u32>, String> {
        match self {
            Tokenizer::Builtin(b) => {
                let mut out = Vec::with_capacity(text.len() / 5 + 1);
                b.encode_into(text, &mut out);
                Ok(out)
            }
            Tokenizer::Hf(h) => h.encode(text, add_special_tokens),
        }
    }

    /// Token ids of a chat prompt including the generation prompt.
    pub fn encode_chat(&self, messages: &[ChatMessage]) -> Result<Vec<u32>, String> {
        self.encode_chat_with(messages, true)
    }

    /// Token ids of a chat prompt, with or without the generation prompt.
    pub fn encode_chat_with(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<Vec<u32>, String> {
        self.encode_chat_tools(messages, None, add_generation_prompt)
    }

    /// Token ids of a chat prompt with the request's `tools` (rendered by the chat template as
    /// vLLM passes them, see [`template_tools`]; the built-in template ignores tools).
    pub fn encode_chat_tools(
        &self,
        messages: &[ChatMessage],
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
    ) -> Result<Vec<u32>, String> {
        match self {
            Tokenizer::Builtin(b) => {
                let words: usize = messages.iter().map(|m| m.content.len() / 5 + 1).sum();
                let mut out = Vec::with_capacity(words + 5 * messages.len() + 3);
                for m in messages {
                    out.push(IM_START);
                    out.push(b.role_id(&m.role));
                    out.push(NEWLINE);
                    b.encode_into(&m.content, &mut out);
                    out.push(IM_END);
                    out.push(NEWLINE);
                }
                if add_generation_prompt {
                    out.push(IM_START);
                    out.push(b.role_id("assistant"));
                    out.push(NEWLINE);
                }
                Ok(out)
            }
            Tokenizer::Hf(h) => h.encode_chat(messages, tools, add_generation_prompt),
        }
    }

    /// The chat template's text of a chat prompt, always rendered in full (HF only; the
    /// built-in tokenizer has no template text): what chat prompts are counted from.
    pub fn render_chat_template(
        &self,
        messages: &[ChatMessage],
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
    ) -> Option<Result<String, String>> {
        match self {
            Tokenizer::Builtin(_) => None,
            Tokenizer::Hf(h) => Some(h.render_chat(messages, tools, add_generation_prompt)),
        }
    }

    /// Chat prompts whose text was put together from a shape's frame without rendering the
    /// template (`chat_shape.rs`; 0 for the built-in tokenizer).
    pub fn chats_from_frames(&self) -> u64 {
        match self {
            Tokenizer::Builtin(_) => 0,
            Tokenizer::Hf(h) => h.shapes.spliced(),
        }
    }
}

impl Tokenizer {
    /// Text of token ids (vLLM's `/detokenize`; special tokens are skipped as vLLM does by
    /// default). Built-in: the words joined by single spaces, chat markers and role names as
    /// their ChatML text, ids outside the word list (hashed unknown words) as `<unk>`.
    pub fn decode(&self, ids: &[u32]) -> Result<String, String> {
        match self {
            Tokenizer::Builtin(b) => {
                let words = builtin_words();
                let mut out = String::with_capacity(ids.len() * 5);
                for &id in ids {
                    let piece = match id {
                        i if (i as usize) < words.len() => words[i as usize].as_str(),
                        IM_START => "<|im_start|>",
                        IM_END => "<|im_end|>",
                        NEWLINE => "\n",
                        i if (ROLE_BASE..ROLE_BASE + 5).contains(&i) => b.role_name(i - ROLE_BASE),
                        _ => "<unk>",
                    };
                    if !out.is_empty() && !out.ends_with('\n') && piece != "\n" {
                        out.push(' ');
                    }
                    out.push_str(piece);
                }
                Ok(out)
            }
            Tokenizer::Hf(h) => {
                if let Some(&bad) = ids.iter().find(|&&t| t >= h.vocab_size) {
                    return Err(format!("Token id {bad} is out of vocabulary"));
                }
                h.tok
                    .decode(ids, true)
                    .map_err(|e| format!("detokenization failed: {e}"))
            }
        }
    }

    /// Text of each token (vLLM's `token_strs`).
    pub fn token_strs(&self, ids: &[u32]) -> Result<Vec<String>, String> {
        match self {
            Tokenizer::Builtin(_) => ids.iter().map(|&t| self.decode(&[t])).collect(),
            Tokenizer::Hf(h) => Ok(ids
                .iter()
                .map(|&t| h.tok.id_to_token(t).unwrap_or_default())
                .collect()),
        }
    }
}

impl HfTokenizer {
    /// The ids of `text`, word by word from the cache when the tokenizer allows it.
    fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, String> {
        match &self.words {
            Some(words) => words.encode(&self.tok, text, add_special_tokens),
            None => self
                .tok
                .encode(text, add_special_tokens)
                .map(|e| e.get_ids().to_vec())
                .map_err(|e| format!("tokenization failed: {e}")),
        }
    }

    /// The ids of a chat prompt: its text from its shape's frame when it has one (the
    /// template's text around plain contents, `chat_shape.rs`), else rendered.
    fn encode_chat(
        &self,
        messages: &[ChatMessage],
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
    ) -> Result<Vec<u32>, String> {
        if tools.is_none() {
            let framed = CHAT_TEXT.with_borrow_mut(|text| {
                let ids = match self.shapes.text(messages, add_generation_prompt, text) {
                    Lookup::Text { check: false } => Some(self.encode(text, false)),
                    Lookup::Text { check: true } => Some(
                        self.render_chat(messages, None, add_generation_prompt)
                            .and_then(|full| {
                                self.shapes
                                    .checked(messages, add_generation_prompt, full == *text);
                                self.encode(&full, false)
                            }),
                    ),
                    Lookup::New(key) => {
                        self.shapes.learn(key, |contents| {
                            let placeholders: Vec<ChatMessage> = messages
                                .iter()
                                .zip(contents)
                                .map(|(m, c)| ChatMessage {
                                    role: m.role.clone(),
                                    content: c.clone(),
                                    ..Default::default()
                                })
                                .collect();
                            self.render_chat(&placeholders, None, add_generation_prompt)
                                .ok()
                        });
                        None
                    }
                    Lookup::Render => None,
                };
                if text.capacity() > MAX_KEPT_TEXT_BYTES {
                    *text = String::new();
                }
                ids
            });
            if let Some(ids) = framed {
                return ids;
            }
        }
        let text = self.render_chat(messages, tools, add_generation_prompt)?;
        self.encode(&text, false)
    }

    fn render_chat(
        &self,
        messages: &[ChatMessage],
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
    ) -> Result<String, String> {
        let tmpl = self
            .env
            .get_template("chat")
            .map_err(|e| format!("chat template: {e}"))?;
        tmpl.render(minijinja::context! {
            messages => template_messages(messages),
            tools => tools.map(template_tools),
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos_token.as_str(),
            eos_token => self.eos_token.as_str(),
        })
        .map_err(|e| format!("rendering the chat template failed: {e}"))
    }
}

fn special_token_text(v: Option<&serde_json::Value>) -> String {
    match v {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Object(o)) => o
            .get("content")
            .and_then(|c| c.as_str())
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    }
}

fn str_arg(args: &[Value], i: usize) -> Option<String> {
    args.get(i)
        .filter(|v| !v.is_undefined() && !v.is_none())
        .map(|v| {
            v.as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string())
        })
}

fn prefix_match(s: &str, arg: Option<&Value>, f: impl Fn(&str, &str) -> bool) -> Value {
    match arg {
        Some(v) if v.as_str().is_some() => Value::from(f(s, v.as_str().unwrap_or_default())),
        Some(v) => match v.try_iter() {
            Ok(it) => Value::from(it.into_iter().any(|p| p.as_str().is_some_and(|p| f(s, p)))),
            Err(_) => Value::from(false),
        },
        None => Value::from(false),
    }
}

/// The Python string and dict methods that Hugging Face chat templates commonly call.
fn python_methods(
    state: &State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    if let Some(s) = value.as_str() {
        let chars = str_arg(args, 0);
        let trim_set = |c: char| match &chars {
            Some(set) => set.contains(c),
            None => c.is_whitespace(),
        };
        return Ok(match method {
            "strip" => Value::from(s.trim_matches(trim_set)),
            "lstrip" => Value::from(s.trim_start_matches(trim_set)),
            "rstrip" => Value::from(s.trim_end_matches(trim_set)),
            "startswith" => prefix_match(s, args.first(), |s, p| s.starts_with(p)),
            "endswith" => prefix_match(s, args.first(), |s, p| s.ends_with(p)),
            "upper" => Value::from(s.to_uppercase()),
            "lower" => Value::from(s.to_lowercase()),
            "title" => Value::from(
                s.split(' ')
                    .map(|w| {
                        let mut c = w.chars();
                        match c.next() {
                            Some(f) => {
                                f.to_uppercase().collect::<String>() + &c.as_str().to_lowercase()
                            }
                            None => String::new(),
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            "replace" => {
                let from = str_arg(args, 0).unwrap_or_default();
                let to = str_arg(args, 1).unwrap_or_default();
                Value::from(s.replace(&from, &to))
            }
            "split" => {
                let maxsplit = args
                    .get(1)
                    .and_then(|v| i64::try_from(v.clone()).ok())
                    .filter(|&m| m >= 0);
                let parts: Vec<Value> = match (str_arg(args, 0), maxsplit) {
                    (Some(sep), Some(m)) => s
                        .splitn(m as usize + 1, sep.as_str())
                        .map(Value::from)
                        .collect(),
                    (Some(sep), None) => s.split(sep.as_str()).map(Value::from).collect(),
                    (None, _) => s.split_whitespace().map(Value::from).collect(),
                };
                Value::from(parts)
            }
            "find" => {
                let needle = str_arg(args, 0).unwrap_or_default();
                Value::from(s.find(&needle).map(|i| i as i64).unwrap_or(-1))
            }
            _ => return Err(Error::from(ErrorKind::UnknownMethod)),
        });
    }
    if value.kind() == minijinja::value::ValueKind::Map {
        return match method {
            "items" => state.apply_filter("items", std::slice::from_ref(value)),
            "keys" => Ok(Value::from(value.try_iter()?.collect::<Vec<_>>())),
            "values" => {
                let vals: Result<Vec<Value>, Error> =
                    value.try_iter()?.map(|k| value.get_item(&k)).collect();
                Ok(Value::from(vals?))
            }
            "get" => {
                let key = args.first().cloned().unwrap_or(Value::UNDEFINED);
                let v = value.get_item(&key)?;
                if v.is_undefined() {
                    Ok(args.get(1).cloned().unwrap_or(Value::from(())))
                } else {
                    Ok(v)
                }
            }
            _ => Err(Error::from(ErrorKind::UnknownMethod)),
        };
    }
    Err(Error::from(ErrorKind::UnknownMethod))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_counts_one_token_per_word() {
        let t = Tokenizer::builtin();
        let w = builtin_words();
        let text = format!(" {} {}  {}\n{}", w[0], w[17], w[4899], "unknownword");
        let ids = t.encode_text(&text).unwrap();
        assert_eq!(ids.len(), 4);
        assert_eq!(&ids[..3], &[0, 17, 4899]);
        assert!(ids[3] >= UNKNOWN_BASE);
    }

    #[test]
    fn builtin_chat_adds_eight_tokens_for_one_user_message() {
        let t = Tokenizer::builtin();
        let msgs = [ChatMessage {
            role: "user".into(),
            content: " bake tomo dila".into(),
            ..Default::default()
        }];
        assert_eq!(t.encode_chat(&msgs).unwrap().len(), 3 + 8);
        let two = [
            ChatMessage {
                role: "system".into(),
                content: "bake".into(),
                ..Default::default()
            },
            msgs[0].clone(),
        ];
        assert_eq!(t.encode_chat(&two).unwrap().len(), 1 + 3 + 5 * 2 + 3);
    }
}
