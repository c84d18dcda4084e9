//! Backends: which API a request goes to, its body, and how its response is read.
//!
//! In the order a request goes through them:
//!
//! - [`api`]: the API family (`--api`), the endpoint kind, the API's name in the summary;
//! - [`endpoint`]: `--endpoint` resolved to a URL and kind, with the API key's headers;
//! - [`client`]: the pooled HTTP clients and their keep-alive timing;
//! - [`warm`]: keep-alive connections opened before they are needed;
//! - [`tokenize`]: the server's `/tokenize` as a prompt encoder;
//! - [`convert`]: a `messages` row in the shapes of the Responses and Messages APIs;
//! - [`models`]: `--model-map`, which served model each request names;
//! - [`body`]: typed request bodies per API; [`thinking`]: the thinking budget they carry;
//! - [`send`]: [`execute`], which sends one request and classifies how it ended ([`status`]:
//!   the [`Status`] it ended with, the instance that served it);
//! - [`sse`]: the incremental SSE parser shared by all streaming APIs;
//! - [`stream`]: a streamed answer read as its bytes arrive, with the end-of-stream checks;
//! - [`state`]: what is observed while reading one response ([`ResponseState`]);
//! - [`response`]: per-API interpretation of OpenAI and TGI messages into timings and token
//!   counts; [`events`]: the same for the typed event streams (and bodies) of the Responses and
//!   Messages APIs; `fast`: the chat token chunk of vLLM's exact shape, read without a JSON
//!   parser;
//! - [`vllm_grpc`]: vLLM's gRPC engine API, whole (its body, transport, answer and messages).
//!
//! This file only declares the modules and re-exports what the rest of the crate uses.

pub mod api;
pub mod body;
pub mod client;
pub mod convert;
pub mod endpoint;
pub mod events;
mod extra;
mod fast;
pub mod image_body;
pub mod models;
pub mod response;
pub mod send;
pub mod sse;
pub mod state;
pub mod status;
pub mod stream;
pub mod thinking;
pub mod tokenize;
pub mod vllm_grpc;
pub mod warm;

pub use api::{Api, ApiFlavor, ApiKind, Transport};
pub use body::{
    append_session_user, encode_body, encode_chat_row_body, encode_chat_row_body_marked,
    encode_row_body, BodyParams, LiveBody, LiveSlot, PromptPayload,
};
pub use client::{
    build_client, keep_alive_timeout, pool_idle_for, ClientOptions, HttpClient,
    DEFAULT_POOL_IDLE_TIMEOUT_S,
};
pub use endpoint::{sanitize_url, Endpoint, ANTHROPIC_VERSION};
pub use extra::parse_extra_body;
pub use models::{ModelMap, SentModels};
pub use send::{connect_failure, execute, served_by, Outcome, RequestOpts};
pub use state::{Carried, ProtocolError, ResponseState, Usage};
pub use status::{ServedBy, Status};
pub use stream::{read_stream, StreamReader};
pub use thinking::{thinking_field, ThinkingBudget};
