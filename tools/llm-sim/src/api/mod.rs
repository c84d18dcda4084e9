//! The HTTP API: request parsing and validation, and responses in the shapes vLLM (OpenAI
//! chat/completions) and TGI (`/generate`, `/generate_stream`) emit, streaming or not. The
//! OpenAI Responses and Anthropic Messages APIs have their request conversion and their shapes
//! in `responses_api.rs` and `messages_api.rs`; their requests run through the same job, engine
//! and streaming loop as chat.
//!
//! In the order a request goes through them:
//!
//! - `http`: the body type, [`Api`], plain and JSON responses;
//! - `error`: [`ApiError`] and every API's error body;
//! - `image`: image parts (data URLs) counted by the Qwen2-VL rule, keyed by their bytes;
//! - `job`: [`Job`], a request parsed and validated (lengths, model), whatever its API;
//! - `meta`: what a served request's response is made of, its output words;
//! - `turn`: the turn's thinking, text or tool call (`tool_choice`, `--tool-call-share`);
//! - `responses_api`, `messages_api`: the Responses and Messages conversions and shapes;
//! - `parse`: the chat, completions and TGI requests, and [`parse_job`] for every API;
//! - `tokens`: `/tokenize`, `/detokenize`, `/v1/messages/count_tokens`;
//! - `whole`, `stream`: the answer in one body, or as Server-Sent Events;
//! - `serve`: admission, the hand-over to the engine, the answer ([`generate`]).

mod error;
mod http;
mod image;
mod job;
mod messages_api;
mod meta;
mod parse;
mod responses_api;
mod serve;
mod stream;
mod tokens;
mod turn;
mod whole;

pub use error::{error_response, ApiError};
pub use http::{full, json_response, Api, Body};
pub use job::Job;
pub use parse::parse_job;
pub use serve::{eos_length, generate, generate_job, parse_job_off_runtime};
pub use tokens::{count_message_tokens, detokenize, tokenize};
