//! The trace's shared types, the leaf every reader and stage of `trace/` imports; nothing here
//! reads a file or runs a rule, and nothing here imports the rest of `trace/`.
//!
//! - `format.rs`: [`TraceFormat`], a handle on what a format says of itself ([`FormatInfo`]);
//! - `request.rs`: one request ([`TraceRequest`], [`SessionInfo`]), [`TraceStats`], [`Trace`];
//! - `chat.rs`: a `messages` row's [`ChatPayload`];
//! - `session.rs`: the session facts of each request ([`Sessions`], [`SessionTurn`],
//!   [`AgentTurn`]);
//! - `corpus.rs`: agent corpora as session trees ([`Corpus`], [`Conversation`], [`Agent`]);
//! - `blocks.rs`: an agent request's hash ids, a list or a shared prefix plus fresh ids
//!   ([`BlockIds`]).

mod blocks;
mod chat;
mod corpus;
mod format;
mod request;
mod session;

pub use blocks::{BlockIds, Rename};
pub use chat::{image_url_size, image_urls, ChatPayload};
pub use corpus::{
    Agent, AgentRequest, ClientGap, Conversation, Corpus, GapRule, HashScope, Origin, ParentLink,
    Production,
};
pub use format::{FormatInfo, SessionSource, Timestamps, TraceFormat, Yields};
#[cfg(test)]
pub(crate) use request::test_request;
pub use request::{Image, Images, Reasoning, SessionInfo, Trace, TraceRequest, TraceStats};
pub use session::{AgentTurn, SessionStats, SessionTurn, Sessions};
