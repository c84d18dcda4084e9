//! Real text for prompts (`--prompt-corpus`): a local text corpus cut into **units** — the
//! corpus's words, each with its leading space — whose tokens are known and stable, so that
//! any window of consecutive units re-tokenizes to exactly the units' tokens.
//!
//! At start-up ([`Corpus::load`]):
//! 1. the text is read ([`read_documents`]: ShareGPT JSON, JSONL with a text field, or plain
//!    UTF-8 text files), up to a byte budget, and split on whitespace into units `" " + word`;
//! 2. every distinct unit is tokenized once (with the local tokenizer or the server's
//!    `/tokenize`, both an [`Encoder`]); units of more than [`MAX_UNIT_TOKENS`] tokens are
//!    dropped (long URLs, base64 …);
//! 3. the units are checked **in corpus order**: groups of consecutive units are concatenated,
//!    encoded once and compared with the concatenation of their tokens; a failing group is
//!    halved until the unstable boundary is found and the unit after it is dropped; the new
//!    neighbours are checked again, until nothing fails. So every boundary a prompt can contain
//!    inside a window has been encoded and seen to split there.
//!
//! Why units are stable: byte-level BPE pre-tokenizers (GPT-2, Llama 3, Qwen, DeepSeek) start a
//! new piece at a space followed by a non-space, SentencePiece vocabularies have no piece that
//! spans `▁word▁`, and word-level pre-tokenizers split at spaces; step 3 checks what the theory
//! says, and drops what does not hold (for the Qwen3 tokenizer nothing is dropped in our test
//! corpus).
//!
//! The builder ([`super::PromptBuilder`]) takes windows of units; see `docs/prompts.md`.
//!
//! The files, by job: `spec` (what a run asks for: the flags, the formats, the limits, the
//! counts), `read` (step 1), `check` (steps 2 and 3), `units` ([`Corpus`]: the kept units and
//! the windows cut from them), `report` (the run's corpus and its share of the prompt tokens).

mod check;
mod read;
pub(crate) mod spec;
mod units;

pub use read::{read_documents, ReadText};
pub use spec::{
    corpus_spec, CorpusFormat, CorpusSpec, CorpusStats, PromptSource, DEFAULT_MAX_BYTES,
    MAX_UNIT_BYTES, MAX_UNIT_TOKENS,
};
pub use units::Corpus;
