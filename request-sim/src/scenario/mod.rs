//! A **scenario**: a named benchmark profile whose rules a run must keep to be a submission,
//! here SemiAnalysis InferenceX **AgentX** as `agentx-harness` 1.0.12 (AIPerf's newest code)
//! defines it (`aiperf/common/scenario/inferencex_agentx_mvp.py`, `validator.py`,
//! `config/phases.py`, `timing/strategies/agentic_replay.py`; read, no code taken). Two
//! profiles, with the same locks and different defaults:
//!
//! | rule | `agentx` | `inferencex-agentx-mvp` |
//! |---|---|---|
//! | lanes | `--users N` (closed-loop users) | same |
//! | duration (`--time-in-secs`) | default 3,600 s, at least 900 s | default 1,800 s, at least 900 s |
//! | trajectory start (`--trajectory-start`) | 0.25..0.75 of the recorded span | 0.0..1.0 |
//! | warm-up requests per lane | 10 (1 token each, no gap) | none (primers only) |
//! | per-trace idle-gap cap (`--max-idle-gap`) | 300 s (default, a value given is kept) | none |
//! | streaming, ignore-EOS, the server's token counts | required | required |
//! | trace delays, inputs | kept: no rate, retiming or scale factor; no input cut or scaling | same |
//! | first-turn cache bust | on | on |
//! | seed (`--seed`) | 42 when not given | fresh when not given |
//! | grace after the duration (`--grace-secs`) | 30 s | 30 s |
//! | failed requests | at most 10% | — |
//! | metric coverage | ≥ 95% of the duration | ≥ 95% |
//!
//! A flag that breaks a lock is refused, naming the rule; with `--scenario-override` (AgentX's
//! `--unsafe-override`) the run goes on and is stamped `submission_valid: false` with every
//! violation listed. Two rules are judged after the run ([`Stamp::judge`]): the failed share
//! and the coverage (the last first token and the last streamed answer's end, from the first
//! measured send, each at least 95% of the duration). Flag → rule mapping: `config/scenario.rs`
//! (the flags applied before they are validated); this file holds the rules and the stamp, for
//! the configuration, the statistics and the reports.

use serde::{Deserialize, Serialize};

/// One scenario's rules and defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spec {
    pub name: &'static str,
    /// Seconds of the measured run: the default and the floor.
    pub default_duration_s: f64,
    pub min_duration_s: f64,
    /// The default `--trajectory-start` range.
    pub start_ratios: (f64, f64),
    /// The default warm-up requests per lane after the primers.
    pub warmup_requests_per_lane: usize,
    /// The default per-trace idle-gap cap (s), if any.
    pub trace_idle_gap_cap_s: Option<f64>,
    /// AgentX's cap on globally idle replay time (s): not applied by request-sim (noted).
    pub system_idle_gap_cap_s: f64,
    /// The seed when none is given (`None`: a fresh one).
    pub seed: Option<u64>,
    /// Seconds in-flight requests get after the duration.
    pub grace_s: f64,
    /// The largest share of failed measured requests.
    pub max_failed_share: Option<f64>,
    /// The share of the duration the latency signals must reach.
    pub min_coverage: f64,
}

/// `agentx`: the published AgentX profile (`AGENTX` with its `cli_defaults`).
pub const AGENTX: Spec = Spec {
    name: "agentx",
    default_duration_s: 3600.0,
    min_duration_s: 900.0,
    start_ratios: (0.25, 0.75),
    warmup_requests_per_lane: 10,
    trace_idle_gap_cap_s: Some(300.0),
    system_idle_gap_cap_s: 10.0,
    seed: Some(42),
    grace_s: 30.0,
    max_failed_share: Some(0.10),
    min_coverage: 0.95,
};

/// `inferencex-agentx-mvp`: the locks of AgentX without its command-line defaults.
pub const MVP: Spec = Spec {
    name: "inferencex-agentx-mvp",
    default_duration_s: 1800.0,
    start_ratios: (0.0, 1.0),
    warmup_requests_per_lane: 0,
    trace_idle_gap_cap_s: None,
    seed: None,
    max_failed_share: None,
    ..AGENTX
};

/// Every scenario, by name.
pub const ALL: [&Spec; 2] = [&AGENTX, &MVP];

impl Spec {
    /// The scenario named `name` (case-insensitive).
    pub fn named(name: &str) -> Result<&'static Spec, String> {
        ALL.iter()
            .find(|s| s.name.eq_ignore_ascii_case(name.trim()))
            .copied()
            .ok_or_else(|| {
                let known: Vec<&str> = ALL.iter().map(|s| s.name).collect();
                format!("--scenario {name:?}: unknown (known: {})", known.join(", "))
            })
    }
}

/// A rule a run breaks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Violation {
    /// The rule's short name (`duration`, `streaming`, `coverage`, ...).
    pub rule: String,
    /// The flag (or measurement) at fault.
    pub flag: String,
    pub got: String,
    pub required: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} is {}, the scenario requires {}",
            self.rule, self.flag, self.got, self.required
        )
    }
}

/// A run's scenario and how it kept to it: what the summary and console carry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stamp {
    pub scenario: String,
    /// The rules applied, in order (`timing`, `streaming`, `ignore_eos`, ...).
    pub applied: Vec<String>,
    /// The settings the rules gave the run.
    pub duration_s: f64,
    pub start_ratios: (f64, f64),
    pub warmup_requests_per_lane: usize,
    pub max_idle_gap_s: Option<f64>,
    pub users: usize,
    /// `--scenario-override` was given.
    pub overridden: bool,
    /// True when no rule is broken (after the run: with the post-run rules judged).
    pub submission_valid: bool,
    pub violations: Vec<Violation>,
    /// What request-sim does not apply of the scenario, said once.
    pub notes: Vec<String>,
}

/// What the post-run rules look at, measured over the profiled (not warm-up) requests.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Measured {
    pub requests: usize,
    pub failed: usize,
    /// From the first measured send (s): the last first token, the last streamed answer's
    /// end (with inter-token latencies).
    pub last_first_token_s: Option<f64>,
    pub last_stream_end_s: Option<f64>,
}

impl Stamp {
    /// The stamp after the run: the post-run rules of `spec` judged on `m`.
    pub fn judge(mut self, spec: &Spec, m: &Measured) -> Stamp {
        if let Some(max) = spec.max_failed_share {
            let share = if m.requests == 0 {
                0.0
            } else {
                m.failed as f64 / m.requests as f64
            };
            if share > max {
                self.violations.push(Violation {
                    rule: "failed_requests".into(),
                    flag: "failed share".into(),
                    got: format!("{:.1}% ({} of {})", share * 100.0, m.failed, m.requests),
                    required: format!("at most {:.0}%", max * 100.0),
                });
            }
        }
        for (what, at) in [
            ("TTFT coverage", m.last_first_token_s),
            ("ITL coverage", m.last_stream_end_s),
        ] {
            let ratio = at.map_or(0.0, |t| (t / self.duration_s).clamp(0.0, 1.0));
            if ratio < spec.min_coverage {
                self.violations.push(Violation {
                    rule: "coverage".into(),
                    flag: what.into(),
                    got: format!("{:.1}% of {} s", ratio * 100.0, self.duration_s),
                    required: format!("at least {:.0}%", spec.min_coverage * 100.0),
                });
            }
        }
        self.submission_valid = self.violations.is_empty();
        self
    }

    /// The violations' rule names, comma-separated (`none` without).
    pub fn violated_rules(&self) -> String {
        if self.violations.is_empty() {
            return "none".into();
        }
        let mut rules: Vec<&str> = self.violations.iter().map(|v| v.rule.as_str()).collect();
        rules.dedup();
        rules.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp() -> Stamp {
        Stamp {
            scenario: "agentx".into(),
            applied: Vec::new(),
            duration_s: 900.0,
            start_ratios: (0.25, 0.75),
            warmup_requests_per_lane: 10,
            max_idle_gap_s: Some(300.0),
            users: 8,
            overridden: false,
            submission_valid: true,
            violations: Vec::new(),
            notes: Vec::new(),
        }
    }

    #[test]
    fn the_two_profiles_and_their_numbers() {
        assert_eq!(Spec::named("AgentX").unwrap().default_duration_s, 3600.0);
        let mvp = Spec::named("inferencex-agentx-mvp").unwrap();
        assert_eq!(mvp.default_duration_s, 1800.0);
        assert_eq!((mvp.min_duration_s, mvp.start_ratios), (900.0, (0.0, 1.0)));
        assert_eq!(mvp.system_idle_gap_cap_s, 10.0);
        assert_eq!(mvp.min_coverage, 0.95);
        assert!(Spec::named("agentx2")
            .unwrap_err()
            .contains("known: agentx"));
    }

    #[test]
    fn post_run_rules() {
        let full = Measured {
            requests: 100,
            failed: 10,
            last_first_token_s: Some(880.0),
            last_stream_end_s: Some(899.0),
        };
        let s = stamp().judge(&AGENTX, &full);
        assert!(s.submission_valid, "{:?}", s.violations);
        let s = stamp().judge(
            &AGENTX,
            &Measured {
                failed: 11,
                last_first_token_s: Some(800.0),
                ..full
            },
        );
        assert!(!s.submission_valid);
        assert_eq!(s.violated_rules(), "failed_requests, coverage");
        assert_eq!(s.violations[1].got, "88.9% of 900 s");
        // The MVP has no failure rule.
        let s = stamp().judge(&MVP, &Measured { failed: 50, ..full });
        assert!(s.submission_valid);
    }
}
