//! The requests group of the settings ([`RequestPolicy`]): what each request asks for, how long
//! it may take ([`TimeoutRule`]), when failures stop the run ([`EarlyStop`]), and the sessions'
//! rules (an agent corpus's included).

use std::time::Duration;

use super::check::positive;
use super::trace::TraceSource;
use crate::cli::{OutputArgs, ReplayArgs, RequestArgs, SessionArgs};
use crate::trace::LoadOptions;
use crate::{Error, Result};

/// When a run stops early because of failed requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EarlyStop {
    /// After this many failed requests.
    Count(u64),
    /// When the failed fraction of finished requests exceeds this (after at least 20 finished).
    Rate(f64),
}

/// The threshold as a user reads it (`5 failed requests`, `more than 5% of the finished
/// requests failed (after 20 finished)`), never the type's debug form.
impl std::fmt::Display for EarlyStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            EarlyStop::Count(1) => write!(f, "1 failed request"),
            EarlyStop::Count(n) => write!(f, "{n} failed requests"),
            EarlyStop::Rate(r) => write!(
                f,
                "more than {}% of the finished requests failed (after 20 finished)",
                (r * 1e4).round() / 1e2
            ),
        }
    }
}

impl EarlyStop {
    pub fn parse(s: &str) -> Result<EarlyStop, String> {
        let t = s.trim();
        let bad = || {
            format!("--early-stop-error-threshold {s:?}: use a count (50), a percentage (5%) or a fraction (0.05)")
        };
        if let Some(p) = t.strip_suffix('%') {
            let v: f64 = p.trim().parse().map_err(|_| bad())?;
            if !(0.0..=100.0).contains(&v) {
                return Err(bad());
            }
            return Ok(EarlyStop::Rate(v / 100.0));
        }
        if let Ok(n) = t.parse::<u64>() {
            if n == 0 {
                return Err(bad());
            }
            return Ok(EarlyStop::Count(n));
        }
        let v: f64 = t.parse().map_err(|_| bad())?;
        if v > 0.0 && v < 1.0 {
            Ok(EarlyStop::Rate(v))
        } else {
            Err(bad())
        }
    }

    /// Should the run stop with `failed` failures out of `finished` requests?
    pub fn triggered(&self, failed: u64, finished: u64) -> bool {
        match *self {
            EarlyStop::Count(n) => failed >= n,
            EarlyStop::Rate(r) => finished >= 20 && (failed as f64) > r * finished as f64,
        }
    }
}

/// Per-request timeout rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TimeoutRule {
    Fixed(Duration),
    /// max(15 s, ttft + tpot × output_length), as the anchor does.
    FromSlo {
        ttft_s: f64,
        tpot_s: f64,
    },
}

impl TimeoutRule {
    pub fn for_output(&self, output_length: u32) -> Duration {
        match *self {
            TimeoutRule::Fixed(d) => d,
            TimeoutRule::FromSlo { ttft_s, tpot_s } => {
                Duration::from_secs_f64((ttft_s + tpot_s * output_length as f64).max(15.0))
            }
        }
    }
}

/// What each request asks for and how long it may take.
#[derive(Debug, Clone)]
pub struct RequestPolicy {
    pub stream: bool,
    pub exact_output: bool,
    /// `--thinking-budget`: send a row's thinking budget (`backend/thinking.rs`).
    pub thinking_budget: crate::backend::ThinkingBudget,
    /// `--extra-body`: fields merged into every request body.
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// `--max-output-tokens`: cap on every request's output_length.
    pub max_output_tokens: Option<u32>,
    pub timeout: TimeoutRule,
    pub grace: Duration,
    pub early_stop: Option<EarlyStop>,
    pub allow_missing_usage: bool,
    /// `--timing`, `--think-time`, `--skip-after-failed-parent`, `--session-user`.
    pub sessions: crate::schedule::SessionOptions,
    /// `--dry-run`: build and schedule everything, send nothing.
    pub dry_run: bool,
}

impl RequestPolicy {
    /// The group from its flags, with the timeout ([`timeout_rule`]), the early stop
    /// ([`early_stop`]) and the sessions ([`session_options`], [`agent_sessions`]) checked.
    pub(super) fn new(
        r: RequestArgs,
        stream: bool,
        timeout: TimeoutRule,
        early_stop: Option<EarlyStop>,
        sessions: crate::schedule::SessionOptions,
    ) -> RequestPolicy {
        RequestPolicy {
            stream,
            exact_output: !r.no_exact_output,
            thinking_budget: r.thinking_budget,
            extra_body: r.extra_body,
            max_output_tokens: r.max_output_tokens,
            timeout,
            grace: Duration::from_secs_f64(r.grace_secs),
            early_stop,
            allow_missing_usage: r.allow_missing_usage,
            sessions,
            dry_run: r.dry_run,
        }
    }
}

/// `--ttft-slo`, `--tpot-slo` (each positive) and `--request-timeout`: the per-request timeout.
pub(super) fn timeout_rule(r: &RequestArgs, o: &OutputArgs) -> Result<TimeoutRule> {
    let (ttft_slo, tpot_slo) = (o.ttft_slo, o.tpot_slo);
    for (name, v) in [("--ttft-slo", ttft_slo), ("--tpot-slo", tpot_slo)] {
        if let Some(v) = v {
            positive(name, v)?;
        }
    }
    Ok(match (r.request_timeout, ttft_slo, tpot_slo) {
        (Some(t), _, _) => {
            TimeoutRule::Fixed(Duration::from_secs_f64(positive("--request-timeout", t)?))
        }
        (None, None, None) => TimeoutRule::Fixed(Duration::from_secs(600)),
        (None, t, p) => TimeoutRule::FromSlo {
            ttft_s: t.unwrap_or(0.0),
            tpot_s: p.unwrap_or(0.0),
        },
    })
}

/// `--grace-secs` (checked) and `--early-stop-error-threshold`.
pub(super) fn early_stop(r: &RequestArgs) -> Result<Option<EarlyStop>> {
    if !r.grace_secs.is_finite() || r.grace_secs < 0.0 {
        return Err(Error::config(format!(
            "--grace-secs must be >= 0, got {}",
            r.grace_secs
        )));
    }
    r.early_stop_error_threshold
        .as_deref()
        .map(EarlyStop::parse)
        .transpose()
        .map_err(Error::config)
}

/// Routers by name, and the header each reads a session's routing key from (`--session-header
/// ROUTER`):
/// - `smg` (Shepherd Model Gateway): `X-SMG-Routing-Key`, read by its `manual` and
///   `consistent_hashing` policies (and by any policy with `--routing-key-override`);
/// - `production-stack` (vLLM's router, `--routing-logic session`): its `--session-key`, by
///   its docs' convention `x-user-id`;
/// - `llm-sim` (its built-in router's `session` policy): `x-session-id`.
pub const SESSION_HEADER_PRESETS: &[(&str, &str)] = &[
    ("smg", "x-smg-routing-key"),
    ("production-stack", "x-user-id"),
    ("llm-sim", "x-session-id"),
];

/// `--session-header NAME|ROUTER`, checked as an HTTP header name; a router's name stands for
/// the header it reads ([`SESSION_HEADER_PRESETS`]).
pub(super) fn session_header(a: &SessionArgs) -> Result<Option<reqwest::header::HeaderName>> {
    let preset = |n: &str| {
        SESSION_HEADER_PRESETS
            .iter()
            .find(|(r, _)| r.eq_ignore_ascii_case(n.trim()))
            .map(|(_, h)| *h)
    };
    match &a.session_header {
        Some(name) => {
            reqwest::header::HeaderName::from_bytes(preset(name).unwrap_or(name.trim()).as_bytes())
                .map(Some)
                .map_err(|_| {
                    Error::config(format!(
                        "--session-header {name:?}: not a valid HTTP header name"
                    ))
                })
        }
        None => Ok(None),
    }
}

/// The session flags.
pub(super) fn session_options(a: &SessionArgs) -> Result<crate::schedule::SessionOptions> {
    if a.live_history && a.timing != crate::schedule::Timing::Closed {
        return Err(Error::config(
            "--live-history needs --timing closed: a turn can carry the server's earlier answers only when it is sent after them",
        ));
    }
    if a.timing != crate::schedule::Timing::Closed {
        let inert = [
            (a.think_time.is_some(), "--think-time"),
            (a.skip_after_failed_parent, "--skip-after-failed-parent"),
        ];
        if let Some((_, flag)) = inert.iter().find(|(on, _)| *on) {
            return Err(Error::config(format!(
                "{flag} acts only with --timing closed (a turn waits for its parent's answer); with --timing open every request is sent at its trace time"
            )));
        }
    }
    Ok(crate::schedule::SessionOptions {
        timing: a.timing,
        think: a.think_time.unwrap_or_default(),
        skip_after_failed_parent: a.skip_after_failed_parent,
        session_user: a.session_user,
        session_header: session_header(a)?,
        live_history: a.live_history,
    })
}

/// An agent corpus (`trace/formats/`, `trace::model::Corpus`) replays closed-loop with the trace's client gaps: each
/// request waits for what it follows. The agent flags need one.
pub(super) fn agent_sessions(
    a: &ReplayArgs,
    source: &TraceSource,
    load: &LoadOptions,
    sessions: crate::schedule::SessionOptions,
) -> Result<crate::schedule::SessionOptions> {
    let agentic = match source {
        TraceSource::File(p) => crate::trace::formats::agents::is_agent_corpus(p, load.format),
        TraceSource::BuiltinDemo => false,
    };
    let t = &a.trace;
    if !agentic {
        let flag = [
            (!t.users.is_empty(), "--users"),
            (t.session_rate.is_some(), "--session-rate"),
            (t.share_system_prefix, "--share-system-prefix"),
        ]
        .into_iter()
        .find(|(on, _)| *on);
        if let Some((_, flag)) = flag {
            return Err(Error::config(format!(
                "{flag} needs an agent corpus (a weka trace file or directory): this trace has no conversations of agents"
            )));
        }
        return Ok(sessions);
    }
    let think = a.requests.sessions.think_time;
    let fixed = matches!(think, Some(crate::schedule::ThinkTime::FixedMs(_)));
    if fixed || (a.requests.sessions.timing == crate::schedule::Timing::Open && think.is_some()) {
        return Err(Error::config(
            "--think-time with an agent corpus: its requests wait for the trace's own client gaps, whatever --think-time says (cap them with --max-idle-gap)",
        ));
    }
    Ok(crate::schedule::SessionOptions {
        timing: crate::schedule::Timing::Closed,
        think: crate::schedule::ThinkTime::Trace,
        ..sessions
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn early_stop_parsing() {
        assert_eq!(EarlyStop::parse("50"), Ok(EarlyStop::Count(50)));
        assert_eq!(EarlyStop::Count(5).to_string(), "5 failed requests");
        assert_eq!(
            EarlyStop::parse("5%").unwrap().to_string(),
            "more than 5% of the finished requests failed (after 20 finished)"
        );
        assert_eq!(EarlyStop::parse("5%"), Ok(EarlyStop::Rate(0.05)));
        assert_eq!(EarlyStop::parse("0.1"), Ok(EarlyStop::Rate(0.1)));
        assert!(EarlyStop::parse("0").is_err());
        assert!(EarlyStop::parse("abc").is_err());
        assert!(EarlyStop::parse("150%").is_err());
        assert!(EarlyStop::Count(3).triggered(3, 3));
        assert!(!EarlyStop::Rate(0.5).triggered(10, 19));
        assert!(EarlyStop::Rate(0.5).triggered(11, 20));
    }

    #[test]
    fn anchor_timeout_rule() {
        let r = TimeoutRule::FromSlo {
            ttft_s: 5.0,
            tpot_s: 0.06,
        };
        assert_eq!(r.for_output(100), Duration::from_secs(15));
        assert_eq!(r.for_output(1000), Duration::from_secs_f64(65.0));
    }
}
