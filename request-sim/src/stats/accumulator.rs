//! [`Accumulator`]: streaming accumulation of records into a [`Summary`].

use std::collections::BTreeMap;

use super::agents::AgentAcc;
use super::config::ReportConfig;
use super::ideal::{IdealCount, ServedIdeal};
use super::latency::{LatencyAcc, Metric};
use super::models::ModelAcc;
use super::per_record::{end_ms, error_kind, in_one_piece, output_tokens_of, record_tpot, ttfa_of};
use super::reasoning::ReasoningAcc;
use super::run_info::{RunInfo, RunServer};
use super::samples::Samples;
use super::sessions::SessionAcc;
use super::slo::Slo;
use super::summary::{
    CacheStats, DriftStats, OutputExactness, OutputTokenSources, StatusCounts, Summary,
    TokenExactness,
};
use super::window::{inside, MeasureWindow, WindowAuto, WindowReport};
use crate::record::{Finished, Record, Status, TokenSource};

/// Output tokens per time bucket, with a bucket width that doubles whenever the run gets too
/// long for [`MAX_BINS`] buckets (1 ms buckets up to ~70 minutes; memory stays <= 16 MiB).
#[derive(Debug, Clone)]
struct TokenTimeline {
    res_ms: f64,
    bins: Vec<u32>,
}

const MAX_BINS: usize = 1 << 22;

impl TokenTimeline {
    fn new() -> Self {
        TokenTimeline {
            res_ms: 1.0,
            bins: Vec::new(),
        }
    }
    fn push(&mut self, t_ms: f64) {
        if !t_ms.is_finite() {
            return;
        }
        let t = t_ms.max(0.0);
        let mut idx = (t / self.res_ms) as usize;
        while idx >= MAX_BINS {
            self.coarsen();
            idx = (t / self.res_ms) as usize;
        }
        if idx >= self.bins.len() {
            self.bins.resize(idx + 1, 0);
        }
        self.bins[idx] = self.bins[idx].saturating_add(1);
    }
    fn coarsen(&mut self) {
        let merged: Vec<u32> = self
            .bins
            .chunks(2)
            .map(|c| c.iter().fold(0u32, |a, b| a.saturating_add(*b)))
            .collect();
        self.bins = merged;
        self.res_ms *= 2.0;
    }
    /// Max tokens in 1-second windows `[base + k s, base + (k+1) s)`.
    fn max_per_second(&self, base_ms: f64) -> f64 {
        self.per_second(base_ms).into_iter().max().unwrap_or(0) as f64
    }

    /// Tokens in each 1-second window `[base + k s, base + (k+1) s)`.
    fn per_second(&self, base_ms: f64) -> Vec<u64> {
        let mut windows: Vec<u64> = Vec::new();
        for (i, c) in self.bins.iter().enumerate() {
            if *c == 0 {
                continue;
            }
            let t = i as f64 * self.res_ms;
            let rel = t - base_ms;
            if rel < 0.0 {
                continue;
            }
            let k = (rel / 1000.0) as usize;
            if k >= windows.len() {
                windows.resize(k + 1, 0);
            }
            windows[k] += *c as u64;
        }
        windows
    }
}

/// Streaming accumulation of records into a [`Summary`].
///
/// Per-request values (TTFT, TPOT, E2EL, drift: one per request) are kept exactly; ITL values
/// are quantised to 1 µs in a counting map, so memory is bounded by the number of distinct
/// microsecond values rather than the number of chunks.
#[derive(Debug, Clone)]
pub struct Accumulator {
    percentiles: Vec<f64>,
    slo: Slo,
    /// The latency metrics' values (`stats/latency.rs`, one row per metric).
    latency: LatencyAcc,
    /// Send drift per request, ms.
    drift: Lateness,
    /// Receive lateness per request (its latest token read), ms; [`Record::rx_late_ms`].
    rx_late: Lateness,
    status: StatusCounts,
    completed: usize,
    failed: usize,
    good: usize,
    /// Requests the run cut before they met or broke an SLO (`Slo::broken_before_cut`).
    slo_undecided: usize,
    total_input: u64,
    total_output: u64,
    first_send: Option<f64>,
    last_end: Option<f64>,
    /// For a scenario's coverage: the last first token, the last streamed answer's end (ms).
    last_first_token: Option<f64>,
    last_stream_end: Option<f64>,
    /// (start, end) of completed requests, ms (for vLLM's per-second concurrency).
    ok_spans: Vec<(f64, f64)>,
    /// (start, end) of every sent request with a known end (instantaneous in-flight).
    all_spans: Vec<(f64, f64)>,
    tokens: TokenTimeline,
    errors: BTreeMap<String, usize>,
    /// Per error kind, the error of the lowest request index seen (the same whatever the
    /// order records arrive in) and that index.
    error_examples: BTreeMap<String, (usize, String)>,
    cache: CacheStats,
    exact: TokenExactness,
    output_exact: OutputExactness,
    sources: OutputTokenSources,
    retried: usize,
    /// Warm-up records (`Record::phase`): recorded, not measured.
    warmup: usize,
    sessions: SessionAcc,
    agents: AgentAcc,
    models: ModelAcc,
    reasoning: ReasoningAcc,
    images: super::images::ImageAcc,
    /// Completed requests of more than one output token that came in one piece.
    one_piece: usize,
    /// Completed requests streamed in several chunks whose ITL values were not given.
    itl_missing: usize,
    /// `--measure-window`: only requests sent inside it are counted.
    window: Option<Window>,
    /// A run's trace-ideal hit ratio over the requests the server processed (every sent
    /// record, inside the window or not: the cache saw them all).
    served_ideal: Option<ServedIdeal>,
}

/// The measurement window of an [`Accumulator`]: its span (ms of the run), what was asked,
/// and the records it left out.
#[derive(Debug, Clone)]
struct Window {
    start_ms: f64,
    end_ms: f64,
    auto: Option<WindowAuto>,
    outside: usize,
    /// First and last send of every record, inside or not (for the "outside the run" message).
    sends: Option<(f64, f64)>,
}

impl Accumulator {
    pub fn new(cfg: &ReportConfig) -> Self {
        Accumulator {
            percentiles: cfg.percentiles.to_vec(),
            slo: cfg.slo,
            latency: LatencyAcc::default(),
            drift: Lateness::default(),
            rx_late: Lateness::default(),
            status: StatusCounts::default(),
            completed: 0,
            failed: 0,
            good: 0,
            slo_undecided: 0,
            total_input: 0,
            total_output: 0,
            first_send: None,
            last_end: None,
            last_first_token: None,
            last_stream_end: None,
            ok_spans: Vec::new(),
            all_spans: Vec::new(),
            tokens: TokenTimeline::new(),
            errors: BTreeMap::new(),
            error_examples: BTreeMap::new(),
            cache: CacheStats::default(),
            exact: TokenExactness::default(),
            output_exact: OutputExactness::default(),
            sources: OutputTokenSources::default(),
            retried: 0,
            warmup: 0,
            sessions: SessionAcc::default(),
            agents: AgentAcc::default(),
            models: ModelAcc::default(),
            reasoning: ReasoningAcc::default(),
            images: Default::default(),
            served_ideal: None,
            one_piece: 0,
            itl_missing: 0,
            window: match cfg.window {
                Some(MeasureWindow::Fixed { start_s, end_s }) => Some(Window {
                    start_ms: start_s * 1e3,
                    end_ms: end_s * 1e3,
                    auto: None,
                    outside: 0,
                    sends: None,
                }),
                _ => None,
            },
        }
    }

    /// Count only the requests sent in `[start_ms, end_ms)`: the span `--measure-window auto`
    /// found (see [`super::window::steady_window`]).
    pub fn set_auto_window(&mut self, start_ms: f64, end_ms: f64, auto: WindowAuto) {
        self.window = Some(Window {
            start_ms,
            end_ms,
            auto: Some(auto),
            outside: 0,
            sends: None,
        });
    }

    /// With a measurement window that no sent request fell into: why, in one sentence (the
    /// window asked and the span of the run's sends).
    pub fn window_error(&self) -> Option<String> {
        let w = self.window.as_ref()?;
        if self.status.total > 0 {
            return None;
        }
        let end = if w.end_ms.is_finite() {
            format!("{:.3}", w.end_ms / 1e3)
        } else {
            String::new()
        };
        Some(match w.sends {
            Some((a, b)) => format!(
                "--measure-window {:.3}..{end} s is outside the run: its {} requests were sent from {:.3} s to {:.3} s",
                w.start_ms / 1e3,
                w.outside,
                a / 1e3,
                b / 1e3
            ),
            None => format!(
                "--measure-window {:.3}..{end} s: the run sent no request ({} records, none sent)",
                w.start_ms / 1e3,
                w.outside
            ),
        })
    }

    /// Add one record. `itl_ms` are its inter-token latencies (the engine passes them even
    /// when the record does not keep them; when empty, the record's own `itl_ms` is used);
    /// only used for successful requests, as vLLM does.
    /// Track the trace-ideal hit ratio over the requests the server processed, for blocks of
    /// `block_size` tokens ([`Accumulator::add_finished`] feeds it).
    pub fn track_served_ideal(&mut self, block_size: usize) {
        self.served_ideal = Some(ServedIdeal::new(block_size));
    }

    /// A run's finished request: its record, ITL, and (when sent) its prefix blocks.
    pub fn add_finished(&mut self, fin: &Finished) {
        if let (Some(ideal), Some(b)) = (&mut self.served_ideal, &fin.blocks) {
            ideal.add(&fin.record, b);
        }
        self.add(&fin.record, &fin.itl_ms);
    }

    /// What [`Accumulator::track_served_ideal`] counted (taken: once).
    pub fn take_served_ideal(&mut self) -> Option<IdealCount> {
        self.served_ideal.take().map(ServedIdeal::finish)
    }

    /// Server usage: prompt exactness and cache over every record that has it, output
    /// exactness over the completed ones.
    fn add_usage(&mut self, rec: &Record) {
        if let Some(pt) = rec.prompt_tokens {
            // input_length 0: no intended count (a messages row without a chat template).
            if rec.input_length == 0 {
                self.exact.unknown_intended += 1;
            } else {
                self.exact.with_usage += 1;
                let diff = pt as i64 - rec.input_length as i64;
                match diff.cmp(&0) {
                    std::cmp::Ordering::Equal => self.exact.exact += 1,
                    std::cmp::Ordering::Greater => self.exact.over += 1,
                    std::cmp::Ordering::Less => self.exact.under += 1,
                }
                self.exact.max_abs_diff = self.exact.max_abs_diff.max(diff.unsigned_abs());
            }
            if let Some(ct) = rec.cached_tokens {
                self.cache.requests_with_cached_tokens += 1;
                self.cache.prompt_tokens += pt as u64;
                // More cached than prompt tokens is impossible: counted, and capped at the
                // prompt so the hit ratio stays a ratio.
                if ct > pt {
                    self.cache.impossible_cached += 1;
                }
                self.cache.cached_tokens += ct.min(pt) as u64;
            }
        }

        if rec.status == Status::Ok && rec.output_length > 0 {
            if let Some(got) = rec.output_tokens {
                let o = &mut self.output_exact;
                o.with_usage += 1;
                let diff = i64::from(got) - i64::from(rec.output_length);
                match diff.cmp(&0) {
                    std::cmp::Ordering::Equal => o.exact += 1,
                    std::cmp::Ordering::Greater => o.over += 1,
                    std::cmp::Ordering::Less => o.under += 1,
                }
                o.max_abs_diff = o.max_abs_diff.max(diff.unsigned_abs());
            }
        }
    }

    pub fn add(&mut self, rec: &Record, itl_ms: &[f64]) {
        if rec.is_warmup() {
            self.warmup += 1;
            return;
        }
        if let Some(w) = &mut self.window {
            if let Some(t) = rec.sent_ms {
                w.sends = Some(w.sends.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
            }
            if !inside(rec, w.start_ms, w.end_ms) {
                w.outside += 1;
                return;
            }
        }
        self.sessions.add(rec);
        self.agents.add(rec);
        self.models.add(rec);
        self.reasoning.add(rec);
        self.images.add(rec);
        let itl_ms = if itl_ms.is_empty() {
            rec.itl_ms.as_deref().unwrap_or(&[])
        } else {
            itl_ms
        };
        self.status.add(rec.status);
        if rec.retries > 0 {
            self.retried += 1;
        }
        if rec.sent_ms.is_none() {
            self.status.not_sent += 1;
        }
        if let Some(sent) = rec.sent_ms {
            self.first_send = Some(self.first_send.map_or(sent, |f| f.min(sent)));
            if let Some(end) = end_ms(rec) {
                self.last_end = Some(self.last_end.map_or(end, |l| l.max(end)));
                self.all_spans.push((sent, end));
                if rec.status == Status::Ok && rec.chunks > 1 {
                    self.last_stream_end = Some(self.last_stream_end.map_or(end, |l| l.max(end)));
                }
            }
            if let Some(t) = rec.ttft_ms.map(|t| sent + t) {
                self.last_first_token = Some(self.last_first_token.map_or(t, |l| l.max(t)));
            }
            if let Some(d) = rec.drift_ms {
                self.drift.push(d);
            }
            if let Some(l) = rec.rx_late_ms {
                self.rx_late.push(l);
            }
        }

        self.add_usage(rec);

        match rec.status {
            Status::Ok => self.add_completed(rec, itl_ms),
            Status::DryRun => {}
            _ => {
                if rec.status == Status::Cancelled
                    && !self.slo.is_empty()
                    && !self
                        .slo
                        .broken_before_cut_answer(rec.ttft_ms, rec.ttfa_ms, rec.cut_ms)
                {
                    self.slo_undecided += 1;
                }
                if rec.sent_ms.is_some() {
                    self.failed += 1;
                }
                let kind = error_kind(rec);
                *self.errors.entry(kind.clone()).or_insert(0) += 1;
                if let Some(e) = &rec.error {
                    let slot = self
                        .error_examples
                        .entry(kind)
                        .or_insert((usize::MAX, String::new()));
                    if rec.index < slot.0 {
                        let mut s = format!("request {}: ", rec.index);
                        s.extend(e.chars().take(200));
                        if e.chars().nth(200).is_some() {
                            s.push('…');
                        }
                        *slot = (rec.index, s);
                    }
                }
            }
        }
    }

    fn add_completed(&mut self, rec: &Record, itl_ms: &[f64]) {
        self.completed += 1;
        if rec.prompt_tokens.is_none() {
            self.exact.without_usage += 1;
        }
        let out = output_tokens_of(rec);
        match (rec.output_tokens, rec.output_tokens_source) {
            (Some(_), Some(TokenSource::Usage)) | (Some(_), None) => self.sources.usage += 1,
            (Some(_), Some(TokenSource::Chunks)) => self.sources.chunks += 1,
            (None, _) => self.sources.unknown += 1,
        }
        self.total_input += rec.input_length as u64;
        self.total_output += out as u64;
        self.latency.add(rec, itl_ms);
        if out > 1 && in_one_piece(rec) {
            self.one_piece += 1;
        }
        if itl_ms.is_empty() && !in_one_piece(rec) {
            self.itl_missing += 1;
        }
        if !self.slo.is_empty()
            && self.slo.is_met(
                rec.ttft_ms,
                record_tpot(rec).unwrap_or(0.0),
                rec.e2e_ms,
                ttfa_of(rec),
            )
        {
            self.good += 1;
        }
        if let (Some(sent), Some(e2e)) = (rec.sent_ms, rec.e2e_ms) {
            self.ok_spans.push((sent, sent + e2e));
            if let Some(ttft) = rec.ttft_ms {
                // vLLM: one token at TTFT, then one per ITL gap.
                let mut t = sent + ttft;
                self.tokens.push(t);
                for v in itl_ms {
                    t += v;
                    self.tokens.push(t);
                }
            }
        }
    }

    /// Number of records added so far.
    pub fn records(&self) -> usize {
        self.status.total
    }

    /// The summary of the records added, with the run's facts from `info`.
    pub fn finish(self, info: &RunInfo) -> Summary {
        let scenario = self.scenario_stamp(info);
        let time_slices = self.time_slices(info);
        let measure_window = self.window_report();
        let duration_s = self.duration_ms() / 1000.0;
        let per_s = |x: f64| {
            if duration_s > 0.0 {
                x / duration_s
            } else {
                0.0
            }
        };
        let (max_output_tokens_per_s, max_concurrent_requests) = self.per_second_peaks();
        let max_in_flight = peak_overlap(&self.all_spans);
        let drift = self.drift.stats();
        let rx_late = self.rx_late.stats();
        // Every record, inside the measurement window or not: the window only selects which
        // records the statistics use, a record outside it is not missing.
        let outside = self.window.as_ref().map_or(0, |w| w.outside);
        let recorded = self.status.total + outside + self.warmup;
        // scheduled = 0 means unknown (e.g. re-summarising a JSONL without run info).
        let scheduled = if info.outcome.scheduled == 0 {
            recorded
        } else {
            info.outcome.scheduled
        };
        let counts_add_up = recorded == scheduled;
        let warnings = self.warnings(info, (recorded, scheduled), &drift);
        let latency = self.latency.finish(&self.percentiles);

        let mut cache = self.cache;
        cache.hit_ratio = (cache.prompt_tokens > 0)
            .then(|| cache.cached_tokens as f64 / cache.prompt_tokens as f64);
        cache.ideal_hit_ratio = info.prompts.ideal_cache_hit_ratio;
        cache.ideal_requests = info.prompts.ideal_cache_hit_requests;
        cache.ideal_sent = info.prompts.ideal_cache_hit_sent;
        let mut exact = self.exact;
        exact.exact_ratio =
            (exact.with_usage > 0).then(|| exact.exact as f64 / exact.with_usage as f64);
        let good = (!self.slo.is_empty()).then_some(self.good);
        let reasoning = self.reasoning.finish(&self.percentiles);
        let images = self.images.finish();
        Summary {
            completed: self.completed,
            failed: self.failed,
            duration_s,
            total_input_tokens: self.total_input,
            total_output_tokens: self.total_output,
            request_throughput: per_s(self.completed as f64),
            request_goodput: good.map(|g| per_s(g as f64)),
            output_throughput: per_s(self.total_output as f64),
            total_token_throughput: per_s((self.total_input + self.total_output) as f64),
            max_output_tokens_per_s,
            max_concurrent_requests,
            max_in_flight,
            latency,
            percentiles: self.percentiles,
            goodput_slo: self.slo,
            good_requests: good,
            slo_undecided: good.map(|_| self.slo_undecided),
            drift,
            rx_late,
            status: self.status,
            scheduled,
            counts_add_up,
            retried: self.retried,
            warmup_requests: self.warmup,
            sessions: self.sessions.finish(info.sessions.as_ref()),
            reasoning,
            images,
            agents: self
                .agents
                .finish(info.agents.as_ref(), info.prompts.ideal_cache_hit_ratio),
            models: self.models.finish(info.server.model.as_deref()),
            errors: self.errors,
            error_examples: self
                .error_examples
                .into_iter()
                .map(|(k, (_, e))| (k, e))
                .collect(),
            cache,
            token_exactness: exact,
            output_exactness: self.output_exact,
            output_tokens_source: self.sources,
            warnings,
            server: None,
            invalid: Vec::new(),
            run: info.clone(),
            measure_window,
            rerun: None,
            scenario,
            time_slices,
        }
    }

    /// `--measure-window`: the window and how many requests fell in and out of it.
    fn window_report(&self) -> Option<WindowReport> {
        self.window.as_ref().map(|w| WindowReport {
            mode: if w.auto.is_some() { "auto" } else { "fixed" }.to_string(),
            start_s: w.start_ms / 1e3,
            end_s: w.end_ms.is_finite().then_some(w.end_ms / 1e3),
            inside: self.status.total,
            outside: w.outside,
            band: w.auto.map(|a| a.band),
            median_in_flight: w.auto.map(|a| a.median),
        })
    }

    /// With a scenario: the run in 1 s slices from the first successful send (AgentX's
    /// `slice_duration` 1.0), when every token's time is known.
    fn time_slices(&self, info: &RunInfo) -> Vec<super::slices::TimeSlice> {
        if info.scenario.is_none() || self.itl_missing + self.one_piece > 0 {
            return Vec::new();
        }
        let base = self.ok_spans.iter().map(|s| s.0).min_by(f64::total_cmp);
        match base {
            Some(b) => super::slices::slices(&self.tokens.per_second(b), &self.ok_spans, b),
            None => Vec::new(),
        }
    }

    /// The run's scenario stamp with the post-run rules judged on the measured requests.
    fn scenario_stamp(&self, info: &RunInfo) -> Option<crate::scenario::Stamp> {
        let stamp = info.scenario.clone()?;
        let spec = crate::scenario::Spec::named(&stamp.scenario).ok()?;
        let from = |t: Option<f64>| Some((t? - self.first_send?) / 1e3);
        let m = crate::scenario::Measured {
            requests: self.status.total,
            failed: self.failed,
            last_first_token_s: from(self.last_first_token),
            last_stream_end_s: from(self.last_stream_end),
        };
        Some(stamp.judge(spec, &m))
    }

    /// From the first send to the last end, ms (0 before any request ended).
    fn duration_ms(&self) -> f64 {
        match (self.first_send, self.last_end) {
            (Some(a), Some(b)) if b > a => b - a,
            _ => 0.0,
        }
    }

    /// vLLM's peaks over per-second buckets from the first successful start: output tokens
    /// per second and concurrent completed requests.
    fn per_second_peaks(&self) -> (Option<f64>, u64) {
        let base = self
            .ok_spans
            .iter()
            .map(|s| s.0)
            .min_by(f64::total_cmp)
            .unwrap_or(0.0);
        let max_output_tokens_per_s = if self.ok_spans.is_empty() {
            Some(0.0)
        } else if self.itl_missing + self.one_piece > 0 {
            // Some tokens' times are not known.
            None
        } else {
            Some(self.tokens.max_per_second(base))
        };
        (
            max_output_tokens_per_s,
            per_second_concurrency(&self.ok_spans, base),
        )
    }

    /// What makes the numbers doubtful: missing records (`counts`: every record, inside the
    /// measurement window or not, and the requests scheduled), no success, no usage, prompt
    /// tokens off, drift without real-time scheduling, inexact prompts at start-up.
    fn warnings(&self, info: &RunInfo, counts: (usize, usize), drift: &DriftStats) -> Vec<String> {
        let (recorded, scheduled) = counts;
        let exact = &self.exact;
        let mut warnings = Vec::new();
        if recorded != scheduled {
            warnings.push(format!(
                "records ({recorded}) do not account for every scheduled request ({scheduled}): {} {}",
                recorded.abs_diff(scheduled),
                if recorded < scheduled { "missing" } else { "too many" }
            ));
        }
        if self.completed == 0 && self.status.total > 0 && self.status.dry_run == 0 {
            warnings.push("no request completed successfully".to_string());
        }
        if self.one_piece > 0 {
            warnings.push(format!(
                "TPOT and ITL are unknown for the {} completed requests whose output came in one piece (non-streaming answers, or a server that sent the whole output in one chunk): no time between their tokens was measured, and their TTFT is the whole response time",
                self.one_piece
            ));
        }
        if self.itl_missing > 0 {
            warnings.push(if !self.latency.is_empty(Metric::Itl) {
                format!(
                    "{} of the {} completed requests streamed in several chunks carry no per-chunk ITL (replay with --record-itl): ITL statistics cover the others only, peak output tokens/s is unknown (n/a)",
                    self.itl_missing, self.completed
                )
            } else {
                "records carry no per-chunk ITL (replay with --record-itl): ITL statistics and peak output tokens/s are unknown (n/a)".to_string()
            });
        }
        let no_usage = self.sources.chunks + self.sources.unknown;
        if no_usage > 0 {
            warnings.push(format!(
                "SERVER GAVE NO USAGE for {no_usage} of {} completed requests: output tokens \
                 counted from token-bearing chunks instead (TPOT and token throughput may be off \
                 if a chunk carries more than one token)",
                self.completed
            ));
        }
        if self.completed > 0 && exact.with_usage == 0 && exact.unknown_intended == 0 {
            warnings.push(
                "server reported no prompt_tokens: token exactness cannot be checked".to_string(),
            );
        } else if exact.with_usage > exact.exact {
            warnings.push(format!(
                "server prompt_tokens differ from the trace's input_length for {} of {} requests \
                 (max difference {})",
                exact.with_usage - exact.exact,
                exact.with_usage,
                exact.max_abs_diff
            ));
        }
        if self.cache.impossible_cached > 0 {
            warnings.push(format!(
                "IMPOSSIBLE USAGE: {} requests reported more cached tokens than prompt tokens; their cached tokens were counted as their prompt tokens (the server hit ratio is an upper bound)",
                self.cache.impossible_cached
            ));
        }
        let out = &self.output_exact;
        if out.over > 0 {
            warnings.push(format!(
                "IMPOSSIBLE USAGE: {} of {} requests reported more output tokens than they asked for (max_tokens; largest difference {}): output throughput and TPOT use the server's counts",
                out.over, out.with_usage, out.max_abs_diff
            ));
        }
        if exact.without_usage > 0 && exact.without_usage < self.completed {
            warnings.push(no_prompt_usage(exact, self.completed, &info.server));
        }
        if let Some(rt) = info
            .internals
            .realtime
            .as_ref()
            .filter(|rt| rt.policy != crate::schedule::SchedPolicy::Fifo)
        {
            if drift.p99_ms > 1.0 {
                warnings.push(format!(
                    "send drift p99 {:.2} ms at normal scheduling ({}): other work on the machine \
                     delayed sends; real-time scheduling (--realtime) usually keeps it under 1 ms",
                    drift.p99_ms,
                    rt.reason.as_deref().unwrap_or("not used")
                ));
            }
        }
        if let Some(pv) = info.prompts.prompt_verification {
            if pv.exact < pv.checked {
                warnings.push(format!(
                    "prompt verification: only {} of {} sampled prompts had the exact length",
                    pv.exact, pv.checked
                ));
            }
        }
        warnings
    }
}

/// The warning for completed requests whose response carried no prompt tokens while others
/// did: the exactness line covers only the others, and it must not look like all of them.
fn no_prompt_usage(exact: &TokenExactness, completed: usize, server: &RunServer) -> String {
    let mut w = format!(
        "SERVER GAVE NO PROMPT USAGE for {} of {completed} completed requests: token exactness \
         and the cached-token ratio cover the other {} only",
        exact.without_usage,
        completed - exact.without_usage
    );
    let at_start = server
        .api
        .is_some_and(crate::backend::Api::prompt_usage_only_at_start);
    if at_start && server.stream != Some(false) {
        // Seen against llama.cpp's llama-server: it sends `message_start` with the partial
        // result of the first generated token, and none when that token ends inside a UTF-8
        // character (its text is held back until the character is whole).
        w.push_str(
            " (a Messages stream reports its prompt only in `message_start`, and some servers \
             leave that event out: llama.cpp's does when its first token ends inside a UTF-8 \
             character)",
        );
    }
    w
}

/// vLLM's peak concurrency: each completed request counts in every 1-second bucket from
/// `int(start - base)` to `int(end - base)` inclusive; the maximum over buckets.
fn per_second_concurrency(spans: &[(f64, f64)], base_ms: f64) -> u64 {
    if spans.is_empty() {
        return 0;
    }
    let sec = |t: f64| (((t - base_ms) / 1000.0).max(0.0)) as usize;
    let n = spans.iter().map(|s| sec(s.1)).max().unwrap_or(0) + 2;
    let mut diff = vec![0i64; n + 1];
    for (s, e) in spans {
        let (a, b) = (sec(*s), sec(*e).max(sec(*s)));
        diff[a] += 1;
        diff[b + 1] -= 1;
    }
    let mut cur = 0i64;
    let mut best = 0i64;
    for d in diff {
        cur += d;
        best = best.max(cur);
    }
    best as u64
}

/// Largest number of overlapping `[start, end)` spans.
fn peak_overlap(spans: &[(f64, f64)]) -> u64 {
    let mut ev: Vec<(f64, i32)> = Vec::with_capacity(spans.len() * 2);
    for (s, e) in spans {
        ev.push((*s, 1));
        ev.push((*e, -1));
    }
    // Ends before starts at the same instant.
    ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut cur = 0i64;
    let mut best = 0i64;
    for (_, d) in ev {
        cur += d as i64;
        best = best.max(cur);
    }
    best as u64
}

/// One value per request of how late something was, ms (send drift, receive lateness): the
/// values, and the requests over 1 ms and over 5 ms.
#[derive(Debug, Clone, Default)]
struct Lateness {
    values: Samples,
    over_1: u64,
    over_5: u64,
}

impl Lateness {
    fn push(&mut self, ms: f64) {
        self.values.push(ms);
        self.over_1 += u64::from(ms > 1.0);
        self.over_5 += u64::from(ms > 5.0);
    }

    fn stats(&self) -> DriftStats {
        let stats = self.values.stats(&[50.0, 99.0]);
        DriftStats {
            count: stats.count,
            mean_ms: stats.mean,
            p50_ms: stats.percentile(50.0).unwrap_or(0.0),
            p99_ms: stats.percentile(99.0).unwrap_or(0.0),
            max_ms: stats.max,
            over_1ms: self.over_1,
            over_5ms: self.over_5,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrency_and_overlap() {
        let spans = [(0.0, 1500.0), (200.0, 300.0), (2500.0, 2600.0)];
        assert_eq!(per_second_concurrency(&spans, 0.0), 2);
        assert_eq!(peak_overlap(&spans), 2);
        assert_eq!(peak_overlap(&[(0.0, 1.0), (1.0, 2.0)]), 1);
    }

    #[test]
    fn timeline_coarsens() {
        let mut t = TokenTimeline::new();
        t.push(10.0);
        t.push(MAX_BINS as f64 * 1.5);
        assert_eq!(t.res_ms, 2.0);
        assert!(t.bins.len() <= MAX_BINS);
        assert_eq!(t.max_per_second(0.0), 1.0);
    }
}
