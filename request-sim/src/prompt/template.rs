//! Chat-template rendering (from `tokenizer_config.json`) to measure how many tokens a chat
//! endpoint adds around the user content.

use std::path::{Path, PathBuf};

use llm_common::template::ChatMessage;
use minijinja::{Environment, ErrorKind, Value};
use serde_json::Value as Json;
use tokenizers::Tokenizer;

use super::PromptError;

const TEMPLATE_NAME: &str = "chat";

/// Put before every content when the chat template trims the content (see
/// [`ChatTemplate::overhead_with_lead`]): starts with a letter, ends with a non-letter, so its
/// tokens neither lose anything to the trim nor merge with the first word's space.
pub const LEAD: &str = "Text:";

/// A model's chat template, rendered the way Hugging Face `apply_chat_template` does
/// (jinja2 with `trim_blocks` and `lstrip_blocks`, Python string methods, `raise_exception`,
/// `strftime_now`, and the config's `bos_token`/`eos_token` in the context).
#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
}

impl ChatTemplate {
    /// Read the `chat_template` of a `tokenizer_config.json`. When the config holds a list of
    /// named templates, the one named `default` (else the first) is used.
    pub fn from_config_file(path: &Path) -> Result<Self, PromptError> {
        let text = std::fs::read_to_string(path).map_err(|source| PromptError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_config_json(&text, path)
    }

    /// Like [`from_config_file`](Self::from_config_file) from the file's text; `path` is only
    /// used in error messages.
    pub fn from_config_json(text: &str, path: &Path) -> Result<Self, PromptError> {
        let cfg_err = |message: String| PromptError::Config {
            path: PathBuf::from(path),
            message,
        };
        let cfg: Json =
            serde_json::from_str(text).map_err(|e| cfg_err(format!("invalid JSON: {e}")))?;
        let template = match cfg.get("chat_template") {
            Some(Json::String(s)) => s.clone(),
            Some(Json::Array(list)) => {
                let named = |name: &str| {
                    list.iter()
                        .find(|t| t.get("name").and_then(Json::as_str) == Some(name))
                };
                named("default")
                    .or_else(|| list.first())
                    .and_then(|t| t.get("template"))
                    .and_then(Json::as_str)
                    .ok_or_else(|| cfg_err("chat_template list has no template".into()))?
                    .to_string()
            }
            _ => return Err(cfg_err("no chat_template".into())),
        };
        let special = |key: &str| match cfg.get(key) {
            Some(Json::String(s)) => s.clone(),
            Some(Json::Object(o)) => o
                .get("content")
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_string(),
            _ => String::new(),
        };
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        // Hugging Face's `tojson` is Python's json.dumps (", " and ": ", no HTML escapes).
        env.add_filter("tojson", llm_common::template::python_tojson);
        env.add_template_owned(TEMPLATE_NAME, template)
            .map_err(template_error)?;
        Ok(ChatTemplate {
            env,
            bos_token: special("bos_token"),
            eos_token: special("eos_token"),
        })
    }

    /// Render `messages` (an OpenAI-style chat array).
    pub fn render(
        &self,
        messages: &Json,
        add_generation_prompt: bool,
    ) -> Result<String, PromptError> {
        self.render_context(minijinja::context! {
            messages => Value::from_serialize(messages),
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos_token.as_str(),
            eos_token => self.eos_token.as_str(),
        })
    }

    /// Render a chat request's messages (content already text) and `tools` with the
    /// generation prompt, as vLLM does (see [`llm_common::template::template_messages`] and
    /// [`llm_common::template::template_tools`]).
    pub fn render_chat(
        &self,
        messages: &[ChatMessage],
        tools: Option<&Json>,
    ) -> Result<String, PromptError> {
        self.render_context(minijinja::context! {
            messages => llm_common::template::template_messages(messages),
            tools => tools.map(llm_common::template::template_tools),
            add_generation_prompt => true,
            bos_token => self.bos_token.as_str(),
            eos_token => self.eos_token.as_str(),
        })
    }

    /// Renders the template with `ctx`.
    fn render_context(&self, ctx: Value) -> Result<String, PromptError> {
        self.env
            .get_template(TEMPLATE_NAME)
            .and_then(|t| t.render(ctx))
            .map_err(template_error)
    }

    /// Render a single user message with the generation prompt, as a chat endpoint does.
    pub fn render_user(&self, content: &str) -> Result<String, PromptError> {
        self.render(
            &serde_json::json!([{ "role": "user", "content": content }]),
            true,
        )
    }

    /// Tokens the template adds around one user message (rendered total minus the content's
    /// own tokens), measured with two contents of different lengths that must agree.
    pub fn overhead(&self, tok: &Tokenizer) -> Result<u32, PromptError> {
        self.overhead_for(tok, false)
    }

    /// Like [`overhead`](Self::overhead), with contents shaped like the prompts: without the
    /// first word's space when `strip_first_space` (SentencePiece vocabularies, see
    /// [`Vocab::strips_first_space`](super::Vocab::strips_first_space)).
    pub fn overhead_for(
        &self,
        tok: &Tokenizer,
        strip_first_space: bool,
    ) -> Result<u32, PromptError> {
        self.measure(tok, strip_first_space, "")
    }

    /// Like [`overhead_for`](Self::overhead_for), for templates that trim the content (Llama 3:
    /// `message['content'] | trim`), which would take the first word's space and so change its
    /// token: then every content starts with [`LEAD`] (a fixed word the trim leaves alone,
    /// counted in the overhead). Returns the overhead and the lead to put before every content
    /// (`""` when none is needed).
    pub fn overhead_with_lead(
        &self,
        tok: &Tokenizer,
        strip_first_space: bool,
    ) -> Result<(u32, &'static str), PromptError> {
        match self.measure(tok, strip_first_space, "") {
            Ok(n) => Ok((n, "")),
            Err(e) => {
                let probe = &" hello world"[usize::from(strip_first_space)..];
                let rendered = self.render_user(probe)?;
                if rendered.contains(probe) || !rendered.contains(probe.trim_start()) {
                    return Err(e);
                }
                Ok((self.measure(tok, strip_first_space, LEAD)?, LEAD))
            }
        }
    }

    fn measure(
        &self,
        tok: &Tokenizer,
        strip_first_space: bool,
        lead: &str,
    ) -> Result<u32, PromptError> {
        let probes = [
            " hello world",
            " the quick brown fox jumps over the lazy dog and then some more words",
        ];
        let mut result = None;
        for words in probes {
            let words = &words[usize::from(strip_first_space)..];
            let content = format!("{lead}{words}");
            let content = content.as_str();
            let rendered = self.render_user(content)?;
            if !rendered.contains(content) {
                return Err(PromptError::Template(
                    "rendered chat template does not contain the user content verbatim".into(),
                ));
            }
            let total = count(tok, &rendered)?;
            // The lead's tokens count as overhead.
            let own = count(tok, words)?;
            let overhead = total.checked_sub(own).ok_or_else(|| {
                PromptError::Template(format!(
                    "rendered prompt has fewer tokens ({total}) than its content ({own})"
                ))
            })?;
            match result {
                None => result = Some(overhead),
                Some(o) if o == overhead => {}
                Some(o) => {
                    return Err(PromptError::Template(format!(
                        "chat template overhead depends on the content ({o} vs {overhead} tokens)"
                    )))
                }
            }
        }
        Ok(result.unwrap_or(0) as u32)
    }
}

/// The messages of a chat request as vLLM gives them to a chat template: contents flattened to
/// text (text parts joined by newlines, `null` as empty), `tool_calls`, `tool_call_id` and
/// `name` kept. `None` when a content has a part that is not text (an image: its tokens are
/// the model's processor's to count, not the template's).
pub fn chat_messages(messages: &Json) -> Option<Vec<ChatMessage>> {
    messages
        .as_array()?
        .iter()
        .map(|m| {
            let content = match m.get("content") {
                None | Some(Json::Null) => String::new(),
                Some(Json::String(t)) => t.clone(),
                Some(Json::Array(parts)) => {
                    let texts: Option<Vec<&str>> = parts
                        .iter()
                        .map(|p| match p.get("type").and_then(Json::as_str) {
                            Some("text") => {
                                Some(p.get("text").and_then(Json::as_str).unwrap_or(""))
                            }
                            _ => None,
                        })
                        .collect();
                    texts?.join("\n")
                }
                Some(_) => return None,
            };
            let text = |k: &str| m.get(k).and_then(Json::as_str).map(str::to_string);
            Some(ChatMessage {
                role: text("role")?,
                content,
                tool_calls: m.get("tool_calls").filter(|t| !t.is_null()).cloned(),
                tool_call_id: text("tool_call_id"),
                name: text("name"),
            })
        })
        .collect()
}

/// The prompt tokens of `messages` rows as a vLLM server counts them: the chat template of
/// `--tokenizer-config` rendered with the row's messages and tools, tokenized by `--tokenizer`
/// without special tokens (the chat template holds them).
pub struct ChatCounter {
    template: ChatTemplate,
    tok: Tokenizer,
}

impl ChatCounter {
    pub fn new(template: ChatTemplate, tok: Tokenizer) -> ChatCounter {
        ChatCounter { template, tok }
    }

    /// Prompt tokens of a chat request; `None` when they cannot be known here (non-text
    /// content, or a template that fails on these messages).
    pub fn prompt_tokens(&self, messages: &Json, tools: Option<&Json>) -> Option<u32> {
        let msgs = chat_messages(messages)?;
        let text = self.template.render_chat(&msgs, tools).ok()?;
        count(&self.tok, &text).ok().map(|n| n as u32)
    }
}

/// Render the chat template of `tokenizer_config` around a user message (with the generation
/// prompt and the config's bos/eos tokens), tokenize without adding special tokens, and return
/// how many tokens the template adds (8 for Qwen3: `<|im_start|>user\n` …
/// `<|im_end|>\n<|im_start|>assistant\n`).
pub fn chat_overhead_from_template(
    tok: &Tokenizer,
    tokenizer_config: &Path,
) -> Result<u32, PromptError> {
    ChatTemplate::from_config_file(tokenizer_config)?.overhead(tok)
}

/// Tokens the tokenizer's post-processor adds to a plain (completions-endpoint) prompt, e.g. a
/// BOS token for Llama 3; 0 for Qwen3. A server that tokenizes completions prompts with special
/// tokens reports `prompt_tokens` = content tokens + this.
pub fn completion_overhead(tok: &Tokenizer) -> Result<u32, PromptError> {
    let probe = " hello world";
    let with = tok
        .encode_fast(probe, true)
        .map_err(|e| PromptError::Tokenizer(e.to_string()))?
        .len();
    let without = count(tok, probe)?;
    Ok(with.saturating_sub(without) as u32)
}

fn count(tok: &Tokenizer, text: &str) -> Result<usize, PromptError> {
    tok.encode_fast(text, false)
        .map(|e| e.len())
        .map_err(|e| PromptError::Tokenizer(e.to_string()))
}

/// A template error as a [`PromptError`], with its causes.
fn template_error(e: minijinja::Error) -> PromptError {
    PromptError::Template(format!("{e:#}"))
}

fn raise_exception(message: String) -> Result<Value, minijinja::Error> {
    Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
}

/// `strftime_now(format)` as in Hugging Face's template environment (UTC; C `strftime`
/// directives as jiff implements them). An unsupported directive is a template error.
fn strftime_now(format: String) -> Result<String, minijinja::Error> {
    format_utc(jiff::Timestamp::now(), &format)
}

fn format_utc(at: jiff::Timestamp, format: &str) -> Result<String, minijinja::Error> {
    jiff::fmt::strtime::format(format, at).map_err(|e| {
        minijinja::Error::new(
            ErrorKind::InvalidOperation,
            format!("strftime_now({format:?}): {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        let at = |s| jiff::Timestamp::from_second(s).unwrap();
        assert_eq!(format_utc(at(0), "%d %b %Y").unwrap(), "01 Jan 1970");
        // 2024-07-26 13:25:09 UTC
        assert_eq!(
            format_utc(at(1_722_000_309), "%Y-%m-%d %H:%M:%S %B %%").unwrap(),
            "2024-07-26 13:25:09 July %"
        );
        assert!(format_utc(at(0), "%K").is_err());
    }

    #[test]
    fn renders_python_methods_and_specials() {
        let cfg = r#"{"bos_token": {"content": "<s>"}, "eos_token": "</s>",
          "chat_template": "{{ bos_token }}{% for m in messages[::-1] %}{% if m.content.startswith(' h') %}[{{ m.role }}]{{ m.content.strip() }}{% endif %}{% endfor %}{% if add_generation_prompt %}<gen>{% endif %}{{ eos_token }}"}"#;
        let t = ChatTemplate::from_config_json(cfg, Path::new("test.json")).unwrap();
        assert_eq!(t.render_user(" hello").unwrap(), "<s>[user]hello<gen></s>");
    }

    #[test]
    fn missing_template_is_an_error() {
        let e = ChatTemplate::from_config_json("{}", Path::new("x.json")).unwrap_err();
        assert!(e.to_string().contains("no chat_template"), "{e}");
    }
}
