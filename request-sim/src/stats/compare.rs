//! The statistics of `compare A B`: for each headline metric the change from A to B, its 95%
//! interval and whether it is significant, with a method fit for the data (Welch's t over
//! repeat-level values when both sides are repeat sets, else a seeded bootstrap over the
//! per-request records); whether the two runs replayed the same trace, and which settings
//! differ. Methods: `docs/metrics.md`, "Repeats, intervals and comparisons".

use std::collections::BTreeMap;

use serde::Serialize;

use super::headline::{clusters, headlines, hit_pairs, Better, Headline, Source};
use super::inference::{bootstrap, bootstrap_ratio, welch, Diff, Statistic, BOOTSTRAP_RESAMPLES};
use super::latency::Metric;
use super::repeats::RepeatSet;
use super::summary::Summary;
use crate::record::Record;

/// The bootstrap's seed (fixed, so a comparison prints the same verdicts every time).
pub const BOOTSTRAP_SEED: u64 = 20_261_126;

/// One side of a comparison.
#[derive(Debug, Clone)]
pub struct Side {
    /// What was given (a path), for messages.
    pub name: String,
    /// The run's summary (a repeat set: its first repeat's, for settings and trace facts).
    pub summary: Summary,
    /// A repeat set: its repeat-level values.
    pub repeats: Option<RepeatSet>,
    /// Per-request records (a repeat set: every repeat's), when available; `None`: a summary
    /// whose records were not found.
    pub records: Option<Vec<Record>>,
}

impl Side {
    fn is_repeat_set(&self) -> bool {
        self.repeats.as_ref().is_some_and(|r| r.repeats.len() >= 2)
    }
}

/// How a metric's difference was tested.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Welch's t over the repeats' values.
    Welch,
    /// Seeded percentile bootstrap over per-request records.
    Bootstrap,
    /// Not tested (the reason is in [`Verdict::note`]).
    None,
}

impl Method {
    pub fn word(self) -> &'static str {
        match self {
            Method::Welch => "Welch t over repeats",
            Method::Bootstrap => "bootstrap over requests",
            Method::None => "not tested",
        }
    }
}

/// One headline metric compared.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub key: String,
    pub label: String,
    pub better: Better,
    /// A's and B's values (repeat means with Welch; unknown: `None`).
    pub a: Option<f64>,
    pub b: Option<f64>,
    pub method: Method,
    /// `B - A` with its 95% interval (tested metrics only).
    pub diff: Option<Diff>,
    /// Why the metric was not tested.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Whether A and B have the metric at all (a percentile configured, goodput with an SLO):
    /// a metric a side has but could not measure has a value of `None` and is `n/a`, one it
    /// does not have is `-`.
    #[serde(skip)]
    pub present: (bool, bool),
}

impl Verdict {
    /// `(B - A) / |A|` in percent.
    pub fn change_pct(&self) -> Option<f64> {
        match (self.a, self.b) {
            (Some(a), Some(b)) if a != 0.0 => Some((b - a) / a.abs() * 100.0),
            _ => None,
        }
    }

    /// The 95% interval of the change `(B - A) / |A|`, in percent: the bootstrap's interval of
    /// each resample's own change; Welch's interval of the difference of means over A's mean,
    /// its lower bound held at -100% (every headline metric is non-negative, so B cannot be
    /// less than 0).
    pub fn ci_pct(&self) -> Option<(f64, f64)> {
        let d = self.diff?;
        if let Some(r) = d.rel_ci_pct {
            return Some(r);
        }
        let a = self.a.filter(|a| *a != 0.0)?;
        Some((
            (d.ci_low / a.abs() * 100.0).max(-100.0),
            d.ci_high / a.abs() * 100.0,
        ))
    }

    /// Significant at 95% (`None`: not tested).
    pub fn significant(&self) -> Option<bool> {
        self.diff.map(|d| d.significant())
    }

    /// Significantly worse (`None`: not tested).
    pub fn worse(&self) -> Option<bool> {
        let d = self.diff?;
        Some(
            d.significant()
                && match self.better {
                    Better::Higher => d.diff < 0.0,
                    Better::Lower => d.diff > 0.0,
                },
        )
    }

    /// The verdict column: [`Verdict::word`], `not tested: <why>`, or [`SCHEDULE_SET`].
    pub fn verdict_text(&self) -> String {
        match (&self.note, self.method) {
            (Some(n), Method::None) if n == SCHEDULE_SET => n.clone(),
            (Some(n), Method::None) => format!("not tested: {n}"),
            _ => self.word().to_string(),
        }
    }

    /// `significantly worse`, `significantly better`, `no significant difference` or
    /// `not tested`.
    pub fn word(&self) -> &'static str {
        match (self.significant(), self.worse()) {
            (None, _) => "not tested",
            (Some(false), _) => "no significant difference",
            (Some(true), Some(true)) => "significantly worse",
            (Some(true), _) => "significantly better",
        }
    }
}

/// A comparison: the verdicts and what differs between the runs.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The method of the latency metrics (Welch when both sides are repeat sets).
    pub method: Method,
    pub verdicts: Vec<Verdict>,
    /// Settings that differ: `(setting, A, B)`.
    pub differences: Vec<(String, String, String)>,
    /// Facts about the inputs (records not found, repeat set against a single run, ...).
    pub notes: Vec<String>,
    pub bootstrap_seed: u64,
    pub bootstrap_resamples: usize,
}

/// A metric to compare: key, label, which direction is better, where its values come from.
type MetricKey = (String, String, Better, Source);

/// The note of a throughput both runs' open-loop schedules set.
pub const SCHEDULE_SET: &str = "set by the schedule (open loop): not ranked";

/// Every bootstrap verdict by key (see [`bootstrap_all`]).
type Boot = BTreeMap<String, Option<Diff>>;

/// Compare `a` and `b`. Runs of different traces are refused (the message says how they
/// differ).
pub fn compare(a: &Side, b: &Side) -> Result<Comparison, String> {
    if let Some(why) = different_traces(a, b) {
        return Err(format!(
            "{} and {} replayed different traces ({why}): their numbers are not comparable",
            a.name, b.name
        ));
    }
    let welch_ok = a.is_repeat_set() && b.is_repeat_set();
    let notes = input_notes(a, b, welch_ok);
    let ha = side_headlines(a);
    let hb = side_headlines(b);
    let keys = metric_keys(&ha, &hb);
    let schedule_set = |k: &str| {
        let set = |hs: &[Headline]| hs.iter().any(|h| h.key == k && h.schedule_set);
        set(&ha) && set(&hb)
    };
    let boot = if welch_ok {
        BTreeMap::new()
    } else {
        bootstrap_all(a, b, &keys)
    };
    let mut notes = notes;
    if keys.iter().any(|k| schedule_set(&k.0)) {
        notes.push("both runs are open loop: each request was sent at its trace time whatever the server did, so request and output throughput are set by the schedule and not ranked (compare the latencies, or replay closed loop)".to_string());
    }
    let verdicts: Vec<Verdict> = keys
        .iter()
        .map(|k| {
            let (xa, xb) = (
                ha.iter().find(|h| h.key == k.0),
                hb.iter().find(|h| h.key == k.0),
            );
            let (va, vb) = (xa.and_then(|h| h.value), xb.and_then(|h| h.value));
            let mut v = verdict(k, (va, vb), (a, b), welch_ok, &boot);
            v.present = (xa.is_some(), xb.is_some());
            if va.is_none() || vb.is_none() {
                v.note = Some(unknown_note(&k.0, (xa, xb), (a, b)));
            }
            if schedule_set(&k.0) {
                v.method = Method::None;
                v.diff = None;
                v.note = Some(SCHEDULE_SET.to_string());
            }
            v
        })
        .collect();
    Ok(Comparison {
        method: if welch_ok {
            Method::Welch
        } else if a.records.is_some() && b.records.is_some() {
            Method::Bootstrap
        } else {
            Method::None
        },
        verdicts,
        differences: differences(&a.summary, &b.summary),
        notes,
        bootstrap_seed: BOOTSTRAP_SEED,
        bootstrap_resamples: BOOTSTRAP_RESAMPLES,
    })
}

/// Facts about the inputs: a repeat set against a single run, a side without records.
fn input_notes(a: &Side, b: &Side, welch_ok: bool) -> Vec<String> {
    let mut notes = Vec::new();
    if !welch_ok && (a.is_repeat_set() || b.is_repeat_set()) {
        notes.push(
            "only one side is a repeat set: the bootstrap pools that side's repeats' records"
                .to_string(),
        );
    }
    for s in [a, b] {
        if s.records.is_none() && !welch_ok {
            notes.push(format!(
                "{}: no per-request records found, so nothing is tested (give the records JSONL, or the summary beside its records)",
                s.name
            ));
        }
    }
    notes
}

/// The headline metrics of either side, each once, in the order first seen (A's, then B's).
fn metric_keys(ha: &[Headline], hb: &[Headline]) -> Vec<MetricKey> {
    let mut keys: Vec<MetricKey> = Vec::new();
    for h in ha.iter().chain(hb) {
        if !keys.iter().any(|k| k.0 == h.key) {
            keys.push((h.key.clone(), h.label.clone(), h.better, h.source));
        }
    }
    keys
}

/// The verdict of one metric with values `va` (A) and `vb` (B): Welch over the repeats when
/// both sides are repeat sets, else the bootstrap's, else why it was not tested.
fn verdict(
    (key, label, better, source): &MetricKey,
    (va, vb): (Option<f64>, Option<f64>),
    (a, b): (&Side, &Side),
    welch_ok: bool,
    boot: &Boot,
) -> Verdict {
    let mut v = Verdict {
        key: key.clone(),
        label: label.clone(),
        better: *better,
        a: va,
        b: vb,
        method: Method::None,
        diff: None,
        note: None,
        present: (true, true),
    };
    if va.is_none() || vb.is_none() {
        v.note = Some("not measured in one run".to_string());
    } else if welch_ok {
        welch_verdict(&mut v, a, b);
    } else if *source == Source::PerRun {
        v.note = Some("one value per run: repeat the runs (--repeat) to test it".to_string());
    } else if let Some(d) = boot.get(key).copied().flatten() {
        v.method = Method::Bootstrap;
        v.a = Some(d.a);
        v.b = Some(d.b);
        v.diff = Some(d);
    } else if a.records.is_some() && b.records.is_some() {
        v.note = Some(if key.contains("_itl_") {
            "the records keep no ITL values (--record-itl)".to_string()
        } else {
            "no values in the records".to_string()
        });
    } else {
        v.note = Some("no per-request records".to_string());
    }
    v
}

/// Why a metric has no value on a side: a side without the metric (`only in A`), or one that
/// could not measure it, with the reason when it is known (ITL: records without `itl_ms`,
/// written without `--record-itl`).
fn unknown_note(
    key: &str,
    (xa, xb): (Option<&Headline>, Option<&Headline>),
    (a, b): (&Side, &Side),
) -> String {
    match (xa, xb) {
        (None, _) => return "only in B".to_string(),
        (_, None) => return "only in A".to_string(),
        _ => {}
    }
    let unknown: Vec<(&str, &Side)> = [("A", xa, a), ("B", xb, b)]
        .into_iter()
        .filter(|(_, h, _)| h.is_some_and(|h| h.value.is_none()))
        .map(|(n, _, s)| (n, s))
        .collect();
    let which = match unknown.as_slice() {
        [(n, _)] => (*n).to_string(),
        _ => "A and B".to_string(),
    };
    let no_itl = |s: &Side| {
        s.records
            .as_ref()
            .is_some_and(|r| clusters(r, Metric::Itl).is_empty())
    };
    if key.contains("_itl_") && unknown.iter().all(|(_, s)| no_itl(s)) {
        format!("no ITL values in {which}: the records keep none (replay with --record-itl)")
    } else {
        format!("not measured in {which}")
    }
}

/// Welch's t over the repeats' values of `v`'s metric, into `v` (or why it could not be).
fn welch_verdict(v: &mut Verdict, a: &Side, b: &Side) {
    let vals = |s: &Side| {
        s.repeats
            .as_ref()
            .and_then(|r| r.metric(&v.key))
            .and_then(|m| m.known_values())
    };
    match (vals(a), vals(b)) {
        (Some(x), Some(y)) => match welch(&x, &y) {
            Some(d) => {
                v.method = Method::Welch;
                v.a = Some(d.a);
                v.b = Some(d.b);
                v.diff = Some(d);
            }
            None => v.note = Some("fewer than 2 repeats".to_string()),
        },
        _ => v.note = Some("not measured in every repeat".to_string()),
    }
}

/// A side's headline values: the repeat means of a repeat set, else the run's.
fn side_headlines(s: &Side) -> Vec<Headline> {
    let mut h = headlines(&s.summary);
    if let Some(r) = s.repeats.as_ref().filter(|_| s.is_repeat_set()) {
        for x in &mut h {
            x.value = r.metric(&x.key).and_then(|m| m.ci.as_ref()).map(|c| c.mean);
        }
    }
    h
}

/// Every bootstrap verdict by key: one resampling per latency metric (all its statistics on
/// the same resamples), one for the hit ratio.
fn bootstrap_all(a: &Side, b: &Side, keys: &[MetricKey]) -> Boot {
    let mut out = BTreeMap::new();
    let (Some(ra), Some(rb)) = (&a.records, &b.records) else {
        return out;
    };
    for (i, metric) in Metric::vllm().enumerate() {
        let mine: Vec<(&String, Statistic)> = keys
            .iter()
            .filter_map(|(k, _, _, s)| match s {
                Source::Latency(m, st) if *m == metric => Some((k, *st)),
                _ => None,
            })
            .collect();
        if mine.is_empty() {
            continue;
        }
        let stats: Vec<Statistic> = mine.iter().map(|m| m.1).collect();
        let diffs = bootstrap(
            &clusters(ra, metric),
            &clusters(rb, metric),
            &stats,
            BOOTSTRAP_RESAMPLES,
            BOOTSTRAP_SEED.wrapping_add(i as u64),
        );
        for ((k, _), d) in mine.into_iter().zip(diffs) {
            out.insert(k.clone(), d);
        }
    }
    if keys.iter().any(|k| k.3 == Source::HitRatio) {
        let d = bootstrap_ratio(
            &hit_pairs(ra),
            &hit_pairs(rb),
            BOOTSTRAP_RESAMPLES,
            BOOTSTRAP_SEED.wrapping_add(99),
        );
        out.insert("cache_hit_ratio".to_string(), d);
    }
    out
}

/// Why `a` and `b` are runs of different traces, if they are: with records on both sides, a
/// request index whose trace line or input length differs; else the summaries' trace facts.
pub fn different_traces(a: &Side, b: &Side) -> Option<String> {
    if let (Some(ra), Some(rb)) = (&a.records, &b.records) {
        let key = |rs: &[Record]| -> BTreeMap<usize, (usize, u32)> {
            rs.iter()
                .map(|r| (r.index, (r.line, r.input_length)))
                .collect()
        };
        let (ka, kb) = (key(ra), key(rb));
        for (i, x) in &ka {
            if let Some(y) = kb.get(i) {
                if x != y {
                    return Some(format!(
                        "request {i} is trace line {} of {} input tokens in A, line {} of {} in B",
                        x.0, x.1, y.0, y.1
                    ));
                }
            }
        }
        if !ka.is_empty() && !kb.is_empty() && !ka.keys().any(|i| kb.contains_key(i)) {
            return Some("no request index in common".to_string());
        }
        return None;
    }
    let (ta, tb) = (&a.summary.run, &b.summary.run);
    match (&ta.trace_stats, &tb.trace_stats) {
        (Some(x), Some(y)) if x.rows != y.rows => {
            Some(format!("{} trace rows in A, {} in B", x.rows, y.rows))
        }
        _ => None,
    }
}

/// The settings that differ between two runs, `(setting, A, B)` (the seed is left out: every
/// repeat has its own).
pub fn differences(a: &Summary, b: &Summary) -> Vec<(String, String, String)> {
    let show = |v: serde_json::Value| match v {
        serde_json::Value::Null => "(unknown)".to_string(),
        serde_json::Value::String(s) => s,
        // An object as `key value, ...` (the session settings), not raw JSON.
        serde_json::Value::Object(o) => o
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => format!("{k} {s}"),
                v => format!("{k} {v}"),
            })
            .collect::<Vec<_>>()
            .join(", "),
        v => v.to_string(),
    };
    let j = |s: &Summary| -> Vec<(&'static str, serde_json::Value)> {
        let r = &s.run;
        let v = |x: serde_json::Result<serde_json::Value>| x.unwrap_or_default();
        vec![
            ("trace", v(serde_json::to_value(&r.trace_path))),
            ("format", v(serde_json::to_value(r.format))),
            ("block_size", v(serde_json::to_value(r.block_size))),
            ("scale_factor", v(serde_json::to_value(r.scale_factor))),
            ("endpoint", v(serde_json::to_value(&r.server.endpoint))),
            ("api", v(serde_json::to_value(r.server.api))),
            ("model", v(serde_json::to_value(&r.server.model))),
            ("stream", v(serde_json::to_value(r.server.stream))),
            (
                "max_output_tokens",
                v(serde_json::to_value(r.max_output_tokens)),
            ),
            (
                "chat_overhead",
                v(serde_json::to_value(r.prompts.chat_overhead)),
            ),
            (
                "prompt_token_source",
                v(serde_json::to_value(&r.prompts.prompt_token_source)),
            ),
            ("scheduled", v(serde_json::to_value(s.scheduled))),
            ("num_producer", v(serde_json::to_value(r.num_producer))),
            ("sessions", v(serde_json::to_value(&r.sessions))),
            ("goodput_slo", v(serde_json::to_value(s.goodput_slo))),
            ("measure_window", v(serde_json::to_value(&s.measure_window))),
        ]
    };
    let (ja, jb) = (j(a), j(b));
    let mut out: Vec<(String, String, String)> = ja
        .into_iter()
        .zip(jb)
        .filter(|(x, y)| {
            if x.0 == "measure_window" {
                // The asked span, not the counts of records inside it.
                return window_span(&x.1) != window_span(&y.1);
            }
            // Unknown on one side is not a difference (re-summarised records have no settings).
            x.1 != y.1 && !x.1.is_null() && !y.1.is_null()
        })
        .map(|(x, y)| {
            let (ta, tb) = match x.0 {
                "measure_window" => (
                    window_words(a.measure_window.as_ref()),
                    window_words(b.measure_window.as_ref()),
                ),
                "goodput_slo" => (slo_words(&a.goodput_slo), slo_words(&b.goodput_slo)),
                _ => (show(x.1), show(y.1)),
            };
            (x.0.to_string(), ta, tb)
        })
        .collect();
    let named: Vec<String> = out.iter().map(|d| d.0.clone()).collect();
    out.extend(flag_differences(a, b, &named));
    out
}

/// The flags that differ, when both summaries record every flag (`rerun.settings`): those not
/// named already (`named`: the run facts that differ), less the seed and where each run wrote (its own
/// paths), `(--flag, A, B)`.
fn flag_differences(a: &Summary, b: &Summary, named: &[String]) -> Vec<(String, String, String)> {
    let (Some(ra), Some(rb)) = (&a.rerun, &b.rerun) else {
        return Vec::new();
    };
    let show = |v: Option<&serde_json::Value>| match v {
        None | Some(serde_json::Value::Null) => "(not given)".to_string(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    };
    let mut out = Vec::new();
    for (table, ta) in &ra.settings.0 {
        for (long, va) in ta {
            let vb = rb.settings.0.get(table).and_then(|t| t.get(long));
            let own_path = ra.own_paths.contains(long) || rb.own_paths.contains(long);
            let skip = long == "seed" || own_path || named.contains(&long.replace('-', "_"));
            if !skip && Some(va) != vb {
                out.push((format!("--{long}"), show(Some(va)), show(vb)));
            }
        }
    }
    out
}

/// A run's measure window in words: `none (every request)`, `10..20 s`, `auto: 1.0..59.0 s`.
fn window_words(w: Option<&super::window::WindowReport>) -> String {
    let Some(w) = w else {
        return "none (every request)".to_string();
    };
    let end = w.end_s.map_or("end".to_string(), |e| format!("{e}"));
    let span = format!("{}..{end} s", w.start_s);
    if w.mode == "auto" {
        format!("auto: {span}")
    } else {
        span
    }
}

/// A run's SLOs in words (`none` without any).
fn slo_words(slo: &super::slo::Slo) -> String {
    if slo.is_empty() {
        "none".to_string()
    } else {
        slo.describe()
    }
}

/// A measure window's asked span (mode, start, end), without its counts.
fn window_span(v: &serde_json::Value) -> Option<(String, String, String)> {
    let o = v.as_object()?;
    let f = |k: &str| o.get(k).map(|x| x.to_string()).unwrap_or_default();
    Some((f("mode"), f("start_s"), f("end_s")))
}

/// `--fail-if-worse METRIC:PCT`: the metric's summary key and the allowed worsening, percent.
#[derive(Debug, Clone, PartialEq)]
pub struct FailIfWorse {
    pub key: String,
    pub pct: f64,
}

impl FailIfWorse {
    /// Parse `p99_ttft_ms:5` (the key is checked against the comparison's metrics later).
    pub fn parse(s: &str) -> Result<FailIfWorse, String> {
        let (k, p) = s.rsplit_once(':').ok_or_else(|| {
            format!("--fail-if-worse {s:?}: expected METRIC:PCT, e.g. p99_ttft_ms:5")
        })?;
        let pct: f64 = p
            .trim()
            .trim_end_matches('%')
            .parse()
            .map_err(|_| format!("--fail-if-worse {s:?}: {p:?} is not a percentage"))?;
        if !(pct.is_finite() && pct >= 0.0) {
            return Err(format!(
                "--fail-if-worse {s:?}: the percentage must be >= 0"
            ));
        }
        Ok(FailIfWorse {
            key: k.trim().to_string(),
            pct,
        })
    }

    /// Whether the comparison trips this gate: `Ok(Some(reason))` when the metric is
    /// significantly worse by more than the percentage, `Ok(None)` when not, `Err` when the
    /// metric is unknown or was not tested (a gate must not pass by default).
    pub fn check(&self, c: &Comparison) -> Result<Option<String>, String> {
        let v = c
            .verdicts
            .iter()
            .find(|v| v.key == self.key)
            .ok_or_else(|| {
                let keys: Vec<&str> = c.verdicts.iter().map(|v| v.key.as_str()).collect();
                format!(
                    "--fail-if-worse: no metric {:?} in this comparison; the metrics are {}",
                    self.key,
                    keys.join(", ")
                )
            })?;
        if v.significant().is_none() {
            return Err(format!(
                "--fail-if-worse {}: cannot decide, the metric was not tested ({})",
                self.key,
                v.note.as_deref().unwrap_or("no test")
            ));
        }
        let worse_by = v.change_pct().map(|c| match v.better {
            Better::Higher => -c,
            Better::Lower => c,
        });
        Ok(match (v.worse(), worse_by) {
            (Some(true), Some(w)) if w > self.pct => Some(format!(
                "{} is significantly worse by {w:.1}% (more than {}%)",
                v.label, self.pct
            )),
            _ => None,
        })
    }
}
