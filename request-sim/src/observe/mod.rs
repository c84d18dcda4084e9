//! Server-side observation (DESIGN.md §13): the Prometheus `/metrics` pages of the servers under
//! test, parsed ([`prom`]) and read through the metric names of vLLM (V1 and older aliases),
//! SGLang, llama.cpp and TGI ([`names`]). It sits beside `backend`: it reads the same servers but
//! never shares the sending path.
//!
//! Not wired into `run` yet: the scraper thread, `server_metrics.jsonl` and the summary section
//! follow (issue 14).

pub mod names;
pub mod prom;

pub use names::{Engine, ServerView, Window};
pub use prom::{parse, Family, Kind, Page, ParseError, Sample};
