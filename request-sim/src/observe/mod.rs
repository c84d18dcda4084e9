//! Server-side observation (`docs/server-metrics.md`): the Prometheus `/metrics` pages of the servers under
//! test, parsed ([`prom`]) and read through the metric names of vLLM (V1 and older aliases),
//! SGLang, llama.cpp and TGI ([`names`]). It sits beside `backend`: it reads the same servers but
//! never shares the sending path.
//!
//! [`scrape`] polls the pages during a replay on its own thread, [`collect`] takes what it
//! scraped (`server_metrics.jsonl`) and [`series`] keeps the gauges' time series for the
//! per-request join; [`summary`] turns what it saw into the summary's server section
//! (`docs/server-metrics.md`); [`samples`] reads the file back as time series for the charts.
//! [`export`] serves the client's own metrics the other way round (`--metrics-port`).

pub mod collect;
pub mod discover;
pub mod export;
pub mod kv;
pub mod names;
pub mod placement;
pub mod prom;
pub mod samples;
pub mod scrape;
pub mod series;
pub mod summary;

pub use collect::ScrapeResult;
pub use names::{Engine, HistTotals, PageKind, ServerView, Window};
pub use prom::{parse, Family, Kind, Page, ParseError, Sample};
pub use scrape::{ScrapeConfig, Scraper};
pub use summary::{ClientSide, ServerSummary};
