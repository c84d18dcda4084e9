//! Service-level objectives for goodput (`--goodput ttft:200 tpot:50 e2el:5000`, vLLM syntax).

use serde::{Deserialize, Serialize};

use super::latency::Metric;

/// Per-request latency limits in ms; a request is "good" when it meets every given one
/// (inclusive: `value <= limit`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2el_ms: Option<f64>,
    /// Time to the first answer token (reasoning models: after the thinking), `ttfa:MS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfa_ms: Option<f64>,
}

impl Slo {
    /// Parse `KEY:MS` items (`ttft`, `tpot`, `e2el`, `ttfa`; values in milliseconds, > 0).
    /// Each item may also hold several space- or comma-separated pairs.
    pub fn parse(specs: &[String]) -> Result<Slo, String> {
        let mut slo = Slo::default();
        for spec in specs {
            for item in spec
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|s| !s.is_empty())
            {
                let (key, value) = item.split_once(':').ok_or_else(|| {
                    format!(
                        "invalid goodput SLO `{item}`: expected KEY:VALUE with KEY one of \
                         ttft, tpot, e2el, ttfa and VALUE in milliseconds (e.g. ttft:200)"
                    )
                })?;
                let key_l = key.trim().to_ascii_lowercase();
                let v: f64 = value.trim().parse().map_err(|_| {
                    format!(
                        "invalid goodput SLO `{item}`: `{value}` is not a number of milliseconds"
                    )
                })?;
                if !v.is_finite() || v <= 0.0 {
                    return Err(format!(
                        "invalid goodput SLO `{item}`: the limit must be a positive number of milliseconds"
                    ));
                }
                let slot = match Metric::from_key(&key_l) {
                    Some(Metric::Ttfa) => &mut slo.ttfa_ms,
                    Some(Metric::Ttft) => &mut slo.ttft_ms,
                    Some(Metric::Tpot) => &mut slo.tpot_ms,
                    Some(Metric::E2el) => &mut slo.e2el_ms,
                    _ => {
                        return Err(format!(
                            "invalid goodput SLO `{item}`: unknown metric `{key}` \
                             (valid: ttft, tpot, e2el, ttfa)"
                        ))
                    }
                };
                if slot.is_some() {
                    return Err(format!("goodput SLO for `{key_l}` given twice"));
                }
                *slot = Some(v);
            }
        }
        Ok(slo)
    }

    /// True when no limit is set (then no goodput is reported).
    pub fn is_empty(&self) -> bool {
        self.ttft_ms.is_none()
            && self.tpot_ms.is_none()
            && self.e2el_ms.is_none()
            && self.ttfa_ms.is_none()
    }

    /// Whether a completed request meets every given limit. `tpot_ms` is 0 for requests with
    /// at most one output token (as vLLM counts them); a missing measured value fails its limit.
    /// `ttfa_ms`: [`super::per_record::ttfa_of`] the record.
    pub fn is_met(
        &self,
        ttft_ms: Option<f64>,
        tpot_ms: f64,
        e2el_ms: Option<f64>,
        ttfa_ms: Option<f64>,
    ) -> bool {
        let ok = |limit: Option<f64>, v: Option<f64>| match limit {
            None => true,
            Some(l) => v.is_some_and(|v| v <= l),
        };
        ok(self.ttft_ms, ttft_ms)
            && ok(self.tpot_ms, Some(tpot_ms))
            && ok(self.e2el_ms, e2el_ms)
            && ok(self.ttfa_ms, ttfa_ms)
    }

    /// Whether a request the run cut (`cancelled`, `cut_ms` after its send; `None` when it
    /// was never sent) had already broken a limit: its first token came too late, or none had
    /// come and the cut came after the TTFT limit, or the cut came after the E2EL limit. A cut
    /// request that broke none cannot be judged: it is left out of the good share (neither
    /// good nor bad), as a run's end says nothing about how it would have done.
    pub fn broken_before_cut(&self, ttft_ms: Option<f64>, cut_ms: Option<f64>) -> bool {
        self.broken_before_cut_answer(ttft_ms, None, cut_ms)
    }

    /// [`Slo::broken_before_cut`], with the `ttfa` limit judged as the TTFT one on the time to
    /// the first answer token (`ttfa_ms`, `None` when none had come).
    pub fn broken_before_cut_answer(
        &self,
        ttft_ms: Option<f64>,
        ttfa_ms: Option<f64>,
        cut_ms: Option<f64>,
    ) -> bool {
        let Some(cut) = cut_ms else {
            return false;
        };
        let late = |limit: Option<f64>, v: Option<f64>| {
            limit.is_some_and(|l| v.map_or(cut > l, |t| t > l))
        };
        let e2el_late = self.e2el_ms.is_some_and(|l| cut > l);
        late(self.ttft_ms, ttft_ms) || late(self.ttfa_ms, ttfa_ms) || e2el_late
    }

    /// `ttft:200 tpot:50` form, for display.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        let limits = [
            (Metric::Ttft.key(), self.ttft_ms),
            (Metric::Tpot.key(), self.tpot_ms),
            (Metric::E2el.key(), self.e2el_ms),
            (Metric::Ttfa.key(), self.ttfa_ms),
        ];
        for (key, limit) in limits {
            if let Some(v) = limit {
                parts.push(format!("{key}:{v}"));
            }
        }
        parts.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn parses_vllm_syntax() {
        let slo = Slo::parse(&s(&["ttft:200", "tpot:50", "e2el:5000"])).unwrap();
        assert_eq!(slo.ttft_ms, Some(200.0));
        assert_eq!(slo.tpot_ms, Some(50.0));
        assert_eq!(slo.e2el_ms, Some(5000.0));
        let slo = Slo::parse(&s(&["TTFT:1.5,e2el:10"])).unwrap();
        assert_eq!(slo.ttft_ms, Some(1.5));
        assert!(Slo::parse(&[]).unwrap().is_empty());
    }

    #[test]
    fn a_cut_request_is_bad_only_when_it_already_broke_a_limit() {
        let slo = Slo::parse(&s(&["ttft:200", "e2el:1000"])).unwrap();
        // Never sent, or cut early with nothing late yet: cannot be judged.
        assert!(!slo.broken_before_cut(None, None));
        assert!(!slo.broken_before_cut(None, Some(150.0)));
        assert!(!slo.broken_before_cut(Some(50.0), Some(900.0)));
        // No first token by the TTFT limit, a late first token, or past the E2EL limit.
        assert!(slo.broken_before_cut(None, Some(250.0)));
        assert!(slo.broken_before_cut(Some(300.0), Some(400.0)));
        assert!(slo.broken_before_cut(Some(50.0), Some(1200.0)));
        // A TPOT limit alone cannot be judged from a cut.
        let tpot = Slo::parse(&s(&["tpot:5"])).unwrap();
        assert!(!tpot.broken_before_cut(Some(50.0), Some(99_000.0)));
    }

    #[test]
    fn rejects_bad_specs() {
        assert!(Slo::parse(&s(&["ttft"])).unwrap_err().contains("KEY:VALUE"));
        assert!(Slo::parse(&s(&["itl:5"]))
            .unwrap_err()
            .contains("unknown metric"));
        assert!(Slo::parse(&s(&["ttft:abc"]))
            .unwrap_err()
            .contains("not a number"));
        assert!(Slo::parse(&s(&["ttft:-1"]))
            .unwrap_err()
            .contains("positive"));
        assert!(Slo::parse(&s(&["ttft:1", "ttft:2"]))
            .unwrap_err()
            .contains("twice"));
    }

    #[test]
    fn inclusive_limits() {
        let slo = Slo::parse(&s(&["ttft:200", "tpot:50"])).unwrap();
        assert!(slo.is_met(Some(200.0), 50.0, None, None));
        assert!(!slo.is_met(Some(200.1), 50.0, None, None));
        assert!(!slo.is_met(None, 1.0, None, None));
    }
}

#[cfg(test)]
mod ttfa_tests {
    use super::*;
    use crate::record::{Record, Status};
    use crate::stats::per_record::ttfa_of;

    #[test]
    fn ttfa_limits_the_first_answer_token() {
        let slo = Slo::parse(&["ttfa:1000".to_string()]).unwrap();
        assert_eq!(slo.ttfa_ms, Some(1000.0));
        assert_eq!(slo.describe(), "ttfa:1000");
        // Thought for 4 s, answered at 4.1 s: TTFT 80 ms meets nothing here.
        let thinking = Record {
            ttft_ms: Some(80.0),
            ttfa_ms: Some(4100.0),
            reasoning_tokens: Some(40),
            ..Record::new(0, 0, Status::Ok)
        };
        assert!(!slo.is_met(thinking.ttft_ms, 0.0, None, ttfa_of(&thinking)));
        // No thinking: the first token was the answer's.
        let plain = Record {
            ttft_ms: Some(300.0),
            ..Record::new(1, 0, Status::Ok)
        };
        assert!(slo.is_met(plain.ttft_ms, 0.0, None, ttfa_of(&plain)));
        // All thinking, no answer: it fails.
        let no_answer = Record {
            ttft_ms: Some(80.0),
            reasoning_tokens: Some(6),
            ..Record::new(2, 0, Status::Ok)
        };
        assert!(!slo.is_met(no_answer.ttft_ms, 0.0, None, ttfa_of(&no_answer)));
        // A turn that answers with a tool call: its answer is the call (no text at all).
        let tool = Record {
            ttft_ms: Some(9.0),
            ttf_tool_ms: Some(9.0),
            tool_calls: Some(1),
            ..Record::new(3, 0, Status::Ok)
        };
        assert_eq!(ttfa_of(&tool), Some(9.0));
        assert!(slo.is_met(tool.ttft_ms, 0.0, None, ttfa_of(&tool)));
        // Thinking, then a tool call at 2 s, then text at 3 s: the call came first.
        let both = Record {
            ttft_ms: Some(50.0),
            ttfa_ms: Some(3000.0),
            ttf_tool_ms: Some(2000.0),
            reasoning_tokens: Some(30),
            tool_calls: Some(1),
            ..Record::new(4, 0, Status::Ok)
        };
        assert_eq!(ttfa_of(&both), Some(2000.0));
        // Cut before any answer, after the limit: broken.
        assert!(slo.broken_before_cut_answer(Some(80.0), None, Some(1500.0)));
        assert!(!slo.broken_before_cut_answer(Some(80.0), None, Some(500.0)));
    }
}
