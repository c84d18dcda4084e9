//! The summary's per-model rows (model fleets, `--model-map`): one row per served model the
//! requests named, and one per model the trace named, each with the same counts as the
//! summary's totals, so that each list's rows add up to them (`docs/metrics.md`, "Models").

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::per_record::output_tokens_of;
use super::samples::stats_of;
use crate::record::{Record, Status};

/// The row of records that name no trace model.
pub const NO_TRACE_MODEL: &str = "(none)";

/// One model's requests.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelRow {
    pub model: String,
    /// A trace model's row: the served model(s) its requests named (`a, b` when several).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent_as: Option<String>,
    /// Records, and of them: ok, and errors (`http_error`, `timeout`, `connect_error`,
    /// `protocol_error`, as the summary's error share).
    pub requests: usize,
    pub ok: usize,
    pub errors: usize,
    /// Σ intended input and Σ output tokens of the ok requests (as `total_input_tokens` and
    /// `total_output_tokens`).
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// TTFT and end-to-end latency of the ok requests, ms.
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub e2el_p50_ms: Option<f64>,
    pub e2el_p99_ms: Option<f64>,
    /// Prompt and cached tokens the server reported (as `cache`), and their ratio.
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub hit_ratio: Option<f64>,
}

/// The per-model rows of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelSummary {
    /// By the served model each request named (`model`; without `--model-map`, the run's
    /// one model), sorted by name.
    pub served: Vec<ModelRow>,
    /// By the model the trace named (`trace_model`; [`NO_TRACE_MODEL`] for none), sorted by
    /// name.
    pub trace: Vec<ModelRow>,
}

#[derive(Debug, Clone, Default)]
struct Acc {
    row: ModelRow,
    sent: BTreeSet<String>,
    ttft: Vec<f64>,
    e2el: Vec<f64>,
}

impl Acc {
    fn add(&mut self, rec: &Record) {
        let r = &mut self.row;
        r.requests += 1;
        match rec.status {
            Status::Ok => {
                r.ok += 1;
                r.input_tokens += u64::from(rec.input_length);
                r.output_tokens += u64::from(output_tokens_of(rec));
                self.ttft.extend(rec.ttft_ms.filter(|t| t.is_finite()));
                self.e2el.extend(rec.e2e_ms.filter(|t| t.is_finite()));
            }
            Status::HttpError | Status::Timeout | Status::ConnectError | Status::ProtocolError => {
                r.errors += 1
            }
            Status::Cancelled | Status::DryRun => {}
        }
        if let (Some(p), Some(c)) = (rec.prompt_tokens, rec.cached_tokens) {
            r.prompt_tokens += u64::from(p);
            r.cached_tokens += u64::from(c);
        }
    }

    fn finish(mut self, model: String, trace: bool) -> ModelRow {
        let ttft = stats_of(&self.ttft, &[50.0, 99.0]);
        let e2el = stats_of(&self.e2el, &[50.0, 99.0]);
        let known = |n: u64, p: Option<f64>| (n > 0).then_some(p).flatten();
        self.row.ttft_p50_ms = known(ttft.count, ttft.percentile(50.0));
        self.row.ttft_p99_ms = known(ttft.count, ttft.percentile(99.0));
        self.row.e2el_p50_ms = known(e2el.count, e2el.percentile(50.0));
        self.row.e2el_p99_ms = known(e2el.count, e2el.percentile(99.0));
        self.row.hit_ratio = (self.row.prompt_tokens > 0)
            .then(|| self.row.cached_tokens as f64 / self.row.prompt_tokens as f64);
        if trace {
            let names: Vec<&str> = self.sent.iter().map(String::as_str).collect();
            self.row.sent_as = (!names.is_empty()).then(|| names.join(", "));
        }
        self.row.model = model;
        self.row
    }
}

/// Collects [`ModelSummary`] one record at a time.
#[derive(Debug, Clone, Default)]
pub struct ModelAcc {
    /// Records that named a model (the trace's or a served one): the section is shown.
    any: bool,
    /// Keyed by `model`; `None`: the run's one model.
    served: BTreeMap<Option<String>, Acc>,
    trace: BTreeMap<String, Acc>,
}

impl ModelAcc {
    pub fn add(&mut self, rec: &Record) {
        self.any |= rec.model.is_some() || rec.trace_model.is_some();
        self.served.entry(rec.model.clone()).or_default().add(rec);
        let key = rec.trace_model.as_deref().unwrap_or(NO_TRACE_MODEL);
        let t = match self.trace.get_mut(key) {
            Some(t) => t,
            None => self.trace.entry(key.to_owned()).or_default(),
        };
        t.add(rec);
        if let Some(m) = &rec.model {
            if !t.sent.contains(m) {
                t.sent.insert(m.clone());
            }
        }
    }

    /// The rows (`None` when no record named a model); `run_model` names the row of records
    /// without `model` (the run's `--model-name` or the server's first model).
    pub fn finish(self, run_model: Option<&str>) -> Option<ModelSummary> {
        if !self.any {
            return None;
        }
        let run_model = run_model.unwrap_or("(run model)");
        let mut served: Vec<ModelRow> = self
            .served
            .into_iter()
            .map(|(k, a)| a.finish(k.unwrap_or_else(|| run_model.to_owned()), false))
            .collect();
        served.sort_by(|a, b| a.model.cmp(&b.model));
        let trace = self
            .trace
            .into_iter()
            .map(|(k, a)| a.finish(k, true))
            .collect();
        Some(ModelSummary { served, trace })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(i: usize, trace: Option<&str>, sent: &str, status: Status, ttft: f64) -> Record {
        Record {
            input_length: 100,
            output_tokens: Some(10),
            ttft_ms: Some(ttft),
            e2e_ms: Some(ttft * 2.0),
            prompt_tokens: Some(100),
            cached_tokens: Some(40),
            trace_model: trace.map(str::to_owned),
            model: Some(sent.to_owned()),
            ..Record::new(i, i + 1, status)
        }
    }

    #[test]
    fn rows_by_served_and_trace_model() {
        let mut acc = ModelAcc::default();
        acc.add(&rec(0, Some("A"), "x", Status::Ok, 10.0));
        acc.add(&rec(1, Some("B"), "x", Status::Ok, 30.0));
        acc.add(&rec(2, Some("C"), "y", Status::HttpError, 1.0));
        acc.add(&rec(3, None, "y", Status::Ok, 20.0));
        let s = acc.finish(Some("run")).unwrap();
        let names: Vec<&str> = s.served.iter().map(|r| r.model.as_str()).collect();
        assert_eq!(names, ["x", "y"]);
        let x = &s.served[0];
        assert_eq!((x.requests, x.ok, x.errors), (2, 2, 0));
        assert_eq!((x.input_tokens, x.output_tokens), (200, 20));
        assert_eq!(x.ttft_p50_ms, Some(20.0));
        assert_eq!(x.hit_ratio, Some(0.4));
        let y = &s.served[1];
        assert_eq!((y.requests, y.ok, y.errors), (2, 1, 1));
        let names: Vec<(&str, Option<&str>)> = s
            .trace
            .iter()
            .map(|r| (r.model.as_str(), r.sent_as.as_deref()))
            .collect();
        assert_eq!(
            names,
            [
                ("(none)", Some("y")),
                ("A", Some("x")),
                ("B", Some("x")),
                ("C", Some("y"))
            ]
        );
        assert_eq!(s.trace[3].ttft_p50_ms, None);
    }

    #[test]
    fn no_section_without_models() {
        let mut acc = ModelAcc::default();
        acc.add(&Record::new(0, 1, Status::Ok));
        assert_eq!(acc.finish(Some("m")), None);
    }
}
