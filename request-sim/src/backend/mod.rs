//! Backends: which API a request goes to, its body, and how its response is read.
//!
//! Each API is one module of [`apis`] (its bodies, its answer reading, its usage and errors,
//! its path and calibration facts); [`api`] is the one dispatch the rest of the crate asks.
//! The rest is API-neutral, in the order a request goes through it:
//!
//! - [`api`]: the API family (`--api`), the endpoint kind, the API's name in the summary, and
//!   the dispatch into [`apis`] (one `match` per question);
//! - [`endpoint`]: `--endpoint` resolved to a URL and kind, with the API key's headers;
//! - [`client`]: the pooled HTTP clients and their keep-alive timing;
//! - [`warm`]: keep-alive connections opened before they are needed;
//! - [`tokenize`]: the server's `/tokenize` as a prompt encoder;
//! - [`convert`]: what the conversions of a `messages` row to the Responses and Messages shapes
//!   share (each conversion is its API's, in [`apis`]);
//! - [`models`]: `--model-map`, which served model each request names;
//! - [`body`]: the body entry points and the row-body writer the API modules share;
//!   [`thinking`]: `--thinking-budget` and the budget a row sends;
//! - [`send`]: [`execute`], which sends one request and classifies how it ended ([`status`]:
//!   the [`Status`] it ended with, the instance that served it);
//! - [`sse`]: the incremental SSE parser shared by all streaming APIs;
//! - [`stream`]: a streamed answer read as its bytes arrive, with the end-of-stream checks;
//! - [`state`]: what is observed while reading one response ([`ResponseState`]).
//!
//! This file only declares the modules and re-exports what the rest of the crate uses.

pub mod api;
pub mod apis;
pub mod body;
pub mod client;
pub mod convert;
pub mod dispatch;
pub mod endpoint;
mod extra;
pub mod models;
pub mod send;
pub mod socket;
pub mod sse;
pub mod state;
pub mod status;
pub mod stream;
pub mod thinking;
pub mod tokenize;
pub mod warm;

pub use api::{Api, ApiFlavor, ApiKind, Calibration, Transport};
pub use apis::messages::ANTHROPIC_VERSION;
pub use apis::messages::{
    messages_thinking_budget, MESSAGES_DEFAULT_MAX_TOKENS, MESSAGES_MIN_THINKING_BUDGET,
};
pub use apis::openai::chat::{
    encode_chat_row_body, encode_chat_row_body_marked, LiveBody, LiveSlot,
};
/// The chat body with images (`backend::image_body::encode_image_chat_body`).
pub use apis::openai::chat_images as image_body;
pub use apis::vllm_grpc;
pub use body::{BodyParams, PromptPayload};
pub use client::{
    build_client, keep_alive_timeout, pool_idle_for, ClientOptions, HttpClient,
    DEFAULT_POOL_IDLE_TIMEOUT_S,
};
pub use dispatch::{append_session_user, encode_body, encode_row_body};
pub use endpoint::{sanitize_url, Endpoint};
pub use extra::parse_extra_body;
pub use models::{ModelMap, SentModels};
pub use send::{connect_failure, execute, served_by, Outcome, RequestOpts};
pub use state::{Carried, ProtocolError, ResponseState, Usage};
pub use status::{ServedBy, Status};
pub use stream::{read_stream, StreamReader};
pub use thinking::{thinking_field, ThinkingBudget};
