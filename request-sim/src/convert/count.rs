//! The prompt's tokens as the target model's server will count them: the chat template of
//! `tokenizer_config.json` rendered over the request's messages and tools with the generation
//! prompt (the project's [`ChatTemplate`], rendered as vLLM does), tokenized without special
//! tokens by `tokenizer.json`; or the server's own `POST /tokenize` with `messages`.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tokenizers::Tokenizer;

use crate::backend::tokenize::ServerTokenizer;
use crate::prompt::{self, ChatTemplate};
use crate::{Error, Result};

/// What counts tokens.
pub enum Counter {
    /// Boxed, like the server's: both are large.
    Local {
        template: Box<ChatTemplate>,
        tok: Box<Tokenizer>,
    },
    Server {
        st: Box<ServerTokenizer>,
        /// Keeps the runtime the server tokenizer's requests run on.
        _rt: Box<tokio::runtime::Runtime>,
    },
}

impl Counter {
    /// `--tokenizer` (a model directory, or `tokenizer.json` with `--tokenizer-config`).
    pub fn local(tokenizer: &Path, config: Option<&Path>) -> Result<Counter> {
        let tok = prompt::load_tokenizer(tokenizer)?;
        let (_, dir_config) = prompt::tokenizer_files(tokenizer)?;
        let config: PathBuf = match (config, dir_config) {
            (Some(c), _) => c.to_path_buf(),
            (None, Some(c)) => c,
            (None, None) => {
                return Err(Error::config(format!(
                    "--tokenizer {}: no tokenizer_config.json beside it to take the chat template \
                     from; give the model directory or --tokenizer-config",
                    tokenizer.display()
                )))
            }
        };
        let template = ChatTemplate::from_config_file(&config)?;
        Ok(Counter::Local {
            template: Box::new(template),
            tok: Box::new(tok),
        })
    }

    /// The server at `endpoint` (its `/tokenize`, vLLM shape).
    pub fn server(endpoint: &str, model: Option<String>) -> Result<Counter> {
        use crate::backend::{build_client, ApiFlavor, ClientOptions, Endpoint};
        let ep = Endpoint::resolve(endpoint, ApiFlavor::default(), false, None, None)
            .map_err(Error::config)?;
        let client = build_client(&ClientOptions::default())?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| Error::internal(format!("cannot start the HTTP runtime: {e}")))?;
        let st =
            ServerTokenizer::probe(rt.handle().clone(), &client, &ep, model).ok_or_else(|| {
                Error::server(format!(
                    "{}: the server does not answer POST /tokenize; give --tokenizer instead",
                    ep.display_url()
                ))
            })?;
        // Every request is counted with its messages: a /tokenize that takes none would fail
        // on every row, so it is refused once, before the log is read.
        if !st.takes_chat_messages() {
            return Err(Error::config(format!(
                "{} takes no chat messages (llama.cpp's server), and convert counts each request's messages through the chat template: give --tokenizer instead",
                st.tokenize_url()
            )));
        }
        Ok(Counter::Server {
            st: Box::new(st),
            _rt: Box::new(rt),
        })
    }

    /// What counts, for the report.
    pub fn describe(&self) -> String {
        match self {
            Counter::Local { .. } => "the local tokenizer and its chat template".into(),
            Counter::Server { st, .. } => st.describe(),
        }
    }

    /// Whether requests may be counted from several threads at once (the server's tokenizer
    /// is asked one request at a time, from the converting thread).
    pub fn parallel(&self) -> bool {
        matches!(self, Counter::Local { .. })
    }

    /// The prompt's token ids; `Err` says why it cannot be counted.
    pub fn prompt_ids(
        &self,
        messages: &Value,
        chat: &[llm_common::template::ChatMessage],
        tools: Option<&Value>,
    ) -> Result<Vec<u32>, String> {
        match self {
            Counter::Local { template, tok } => {
                let text = template
                    .render_chat(chat, tools)
                    .map_err(|e| format!("the chat template fails on this request: {e}"))?;
                tok.encode_fast(text.as_str(), false)
                    .map(|e| e.get_ids().to_vec())
                    .map_err(|e| format!("the tokenizer fails on this request: {e}"))
            }
            Counter::Server { st, .. } => st
                .chat_ids(messages, tools)
                .map_err(|e| format!("the server's /tokenize fails on this request: {e}")),
        }
    }

    /// Tokens of a response text (the output length when the log has no usage).
    pub fn text_tokens(&self, text: &str) -> Result<u32, String> {
        match self {
            Counter::Local { tok, .. } => tok
                .encode_fast(text, false)
                .map(|e| e.len() as u32)
                .map_err(|e| format!("the tokenizer fails on the response text: {e}")),
            Counter::Server { st, .. } => st.text_ids(text).map(|v| v.len() as u32),
        }
    }
}
