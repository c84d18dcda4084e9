//! The reasoning and tool-call section of a summary: thinking and answer apart, tool calls (the
//! time to the first answer token is a latency metric, `Metric::Ttfa`); only when some completed answer carried thinking or a tool
//! call (`docs/metrics.md`, "Reasoning and tool calls").
//!
//! Token counts here are token events of the stream (a chunk vLLM merged from several tokens
//! is one), since servers do not report the split reliably (vLLM 0.32 reports
//! `reasoning_tokens: 0` for an answer that was all thinking).

use serde::{Deserialize, Serialize};

use super::samples::{MetricStats, Samples};
use crate::record::{Record, Status};

/// The section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReasoningSummary {
    /// Completed requests whose answer carried thinking / a tool call.
    pub requests_with_reasoning: usize,
    pub requests_with_tool_calls: usize,
    /// Thinking token events per request that thought.
    pub reasoning_tokens_mean: Option<f64>,
    /// Requests whose server reported a reasoning count above 0, and how many of those equal
    /// the stream's.
    pub reasoning_usage_reported: usize,
    pub reasoning_usage_equal: usize,
    /// Completed requests whose trace row recorded a thinking length (`reasoning_length`), and
    /// how many of those streamed exactly that many thinking tokens.
    pub reasoning_length_rows: usize,
    pub reasoning_exact_rows: usize,
    /// Time per thinking token: (TTFA − TTFT) / thinking tokens (the last thinking token ends
    /// where the answer begins); without an answer (E2EL − TTFT) / (thinking tokens − 1).
    pub reasoning_tpot_ms: MetricStats,
    /// Time per answer token after the first: (E2EL − TTFA) / (answer tokens − 1).
    pub answer_tpot_ms: MetricStats,
    /// Tool calls made, and their streamed argument bytes.
    pub tool_calls: u64,
    pub tool_arg_bytes: u64,
    /// Time to the first tool-call token (ms).
    pub ttf_tool_ms: MetricStats,
}

/// Builds the section as records arrive.
#[derive(Debug, Clone, Default)]
pub struct ReasoningAcc {
    with_reasoning: usize,
    with_tools: usize,
    reasoning_tokens: u64,
    usage_reported: usize,
    usage_equal: usize,
    length_rows: usize,
    exact_rows: usize,
    reasoning_tpot: Samples,
    answer_tpot: Samples,
    tool_calls: u64,
    tool_arg_bytes: u64,
    ttf_tool: Samples,
}

impl ReasoningAcc {
    pub fn add(&mut self, r: &Record) {
        if r.status != Status::Ok {
            return;
        }
        let thinking = r.reasoning_tokens.unwrap_or(0);
        let tools = r.tool_calls.unwrap_or(0);
        if let Some(expected) = r.reasoning_length {
            self.length_rows += 1;
            self.exact_rows += usize::from(expected == thinking);
        }
        if thinking == 0 && tools == 0 && r.reasoning_tokens_usage.is_none() {
            return;
        }
        // An answer in one piece (not streamed) has no time between its tokens.
        let streamed = r.chunks > 1;
        if thinking > 0 {
            self.with_reasoning += 1;
            self.reasoning_tokens += u64::from(thinking);
            let per = match (r.ttft_ms, r.ttfa_ms, r.e2e_ms) {
                _ if !streamed => None,
                (Some(a), Some(b), _) => Some((b - a) / f64::from(thinking)),
                (Some(a), None, Some(e)) if thinking > 1 => Some((e - a) / f64::from(thinking - 1)),
                _ => None,
            };
            if let Some(p) = per {
                self.reasoning_tpot.push(p);
            }
        }
        if let Some(n) = r.reasoning_tokens_usage {
            self.usage_reported += 1;
            self.usage_equal += usize::from(n == thinking);
        }
        if let (Some(a), Some(e), Some(n)) = (r.ttfa_ms, r.e2e_ms, r.answer_tokens) {
            if n > 1 && streamed {
                self.answer_tpot.push((e - a) / f64::from(n - 1));
            }
        }
        if tools > 0 {
            self.with_tools += 1;
            self.tool_calls += u64::from(tools);
            self.tool_arg_bytes += r.tool_arg_bytes.unwrap_or(0);
            if let Some(t) = r.ttf_tool_ms {
                self.ttf_tool.push(t);
            }
        }
    }

    /// The section; `None` when no completed answer thought or called a tool.
    pub fn finish(&self, percentiles: &[f64]) -> Option<ReasoningSummary> {
        if self.with_reasoning == 0
            && self.with_tools == 0
            && self.usage_reported == 0
            && self.length_rows == 0
        {
            return None;
        }
        Some(ReasoningSummary {
            requests_with_reasoning: self.with_reasoning,
            requests_with_tool_calls: self.with_tools,
            reasoning_tokens_mean: (self.with_reasoning > 0)
                .then(|| self.reasoning_tokens as f64 / self.with_reasoning as f64),
            reasoning_usage_reported: self.usage_reported,
            reasoning_usage_equal: self.usage_equal,
            reasoning_length_rows: self.length_rows,
            reasoning_exact_rows: self.exact_rows,
            reasoning_tpot_ms: self.reasoning_tpot.stats(percentiles),
            answer_tpot_ms: self.answer_tpot.stats(percentiles),
            tool_calls: self.tool_calls,
            tool_arg_bytes: self.tool_arg_bytes,
            ttf_tool_ms: self.ttf_tool.stats(percentiles),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(ttft: f64, ttfa: Option<f64>, e2e: f64, thinking: u32, answer: u32) -> Record {
        Record {
            chunks: thinking + answer,
            ttft_ms: Some(ttft),
            ttfa_ms: ttfa,
            e2e_ms: Some(e2e),
            reasoning_tokens: Some(thinking),
            answer_tokens: Some(answer),
            ..Record::new(0, 0, Status::Ok)
        }
    }

    #[test]
    fn thinking_and_answer_apart() {
        let mut acc = ReasoningAcc::default();
        // 80 ms to the first thought, 10 thoughts to 4080 ms, then 5 answer tokens to 4480.
        acc.add(&rec(80.0, Some(4080.0), 4480.0, 10, 5));
        // All thinking: 6 tokens 80..580 ms.
        acc.add(&rec(80.0, None, 580.0, 6, 0));
        // A plain answer: not in the section.
        acc.add(&Record {
            ttft_ms: Some(10.0),
            ..Record::new(1, 0, Status::Ok)
        });
        let s = acc.finish(&[50.0, 99.0]).unwrap();
        assert_eq!(s.requests_with_reasoning, 2);
        assert_eq!(s.reasoning_tokens_mean, Some(8.0));
        assert_eq!(s.reasoning_tpot_ms.count, 2);
        assert!((s.reasoning_tpot_ms.min - 100.0).abs() < 1e-9);
        assert!((s.reasoning_tpot_ms.max - 400.0).abs() < 1e-9);
        assert_eq!(s.answer_tpot_ms.mean, 100.0);
        assert_eq!(s.tool_calls, 0);
    }

    #[test]
    fn streamed_thinking_is_compared_with_the_rows_recorded_length() {
        let mut acc = ReasoningAcc::default();
        for (expected, streamed) in [(10, 10), (6, 5), (0, 0)] {
            acc.add(&Record {
                reasoning_length: Some(expected),
                ..rec(80.0, None, 580.0, streamed, 0)
            });
        }
        // A row without a recorded length is not compared.
        acc.add(&rec(80.0, None, 580.0, 4, 0));
        let s = acc.finish(&[50.0]).unwrap();
        assert_eq!((s.reasoning_length_rows, s.reasoning_exact_rows), (3, 2));
        assert_eq!(s.requests_with_reasoning, 3);
    }

    #[test]
    fn plain_answers_have_no_section() {
        let mut acc = ReasoningAcc::default();
        acc.add(&Record {
            ttft_ms: Some(10.0),
            ..Record::new(0, 0, Status::Ok)
        });
        assert_eq!(acc.finish(&[50.0]), None);
    }
}
