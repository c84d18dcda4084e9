//! The JSONL agentic readers (`trace::formats::agents::read`: TraceLab rounds, Dynamo request
//! traces, AIPerf `dag_jsonl`, Copilot sessions) on arbitrary bytes (plain or gzip), detected or forced. Any
//! input must give a corpus or an error, never a panic; a corpus must pass the session tree's
//! own check and keep the readers' invariants (a request's ids, kept as shared prefix storage,
//! expand to their count), and lay out whole (`plan`), every request once.
//!
//! The Weka / kv-cache-tester reader (`trace::formats::weka::parse`, one JSON object per file)
//! takes the inputs whose selector byte has bit 4 set: a conversation or an error naming the
//! file, never a panic; a conversation must pass the check, its requests point into `requests`.
//!
//! `FUZZ_FORMAT` (`tracelab`, `dynamo`, `dag_jsonl`, `copilot`, `weka`) forces one reader for the whole
//! run.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use request_sim::trace::formats::agents::read;
use request_sim::trace::formats::weka;
use request_sim::trace::pipeline::plan::{plan, PlanOptions};
use request_sim::trace::{LoadOptions, TraceFormat};

/// The formats tried, by name (`None`: detected).
const FORMATS: [Option<&str>; 5] = [
    None,
    Some("tracelab"),
    Some("dynamo"),
    Some("dag_jsonl"),
    Some("copilot"),
];

fn format(k: usize) -> Option<TraceFormat> {
    FORMATS[k % FORMATS.len()].and_then(TraceFormat::from_name)
}

fn forced() -> Option<TraceFormat> {
    static F: OnceLock<Option<TraceFormat>> = OnceLock::new();
    *F.get_or_init(|| {
        std::env::var("FUZZ_FORMAT")
            .ok()
            .and_then(|n| TraceFormat::from_name(&n))
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, input)) = data.split_first() else {
        return;
    };
    if forced() == Some(TraceFormat::from_name("weka").unwrap()) || (forced().is_none() && sel & 0x10 != 0) {
        match weka::parse("fuzz.json", input) {
            Ok(conv) => {
                assert_eq!(conv.check(), Ok(()));
                for a in &conv.agents {
                    for r in &a.requests {
                        assert!(r.origin.line >= 1);
                        let p = r.origin.pointer.as_deref().unwrap_or_default();
                        assert!(p.starts_with("requests["), "{p}");
                    }
                }
            }
            Err(e) => assert!(e.to_string().starts_with("fuzz.json:")),
        }
        return;
    }
    let format = forced().or(format(usize::from(sel % 5)));
    let opts = LoadOptions {
        format,
        // TraceLab mints one id per block of up to 10M tokens per round: at block 1 a few
        // garbage rows would allocate gigabytes legitimately (libFuzzer's RSS limit)
        block_size: match (sel >> 2) & 3 {
            0 => None,
            1 => Some(16),
            2 => Some(64),
            _ => Some(512),
        },
        max_line_bytes: Some(4096),
        ..LoadOptions::default()
    };
    if let Ok(corpus) = read("fuzz", input, &opts) {
        assert!(!corpus.conversations.is_empty());
        for c in &corpus.conversations {
            assert_eq!(c.check(), Ok(()));
            for a in &c.agents {
                for r in &a.requests {
                    assert!(r.origin.line >= 1);
                    if r.messages.is_none() {
                        assert!(r.hash_ids.len() <= (r.input_length as usize).div_ceil(c.block_size));
                    }
                    // shared prefix storage expands to exactly its length
                    assert_eq!(r.hash_ids.to_vec().len(), r.hash_ids.len());
                }
            }
        }
        // laid out whole (recorded starts for Copilot): every request once, or a clear error
        if let Ok((trace, facts)) = plan(&corpus, format.unwrap_or(TraceFormat::from_name("copilot").unwrap()), &PlanOptions::default()) {
            assert_eq!(trace.requests.len(), corpus.requests());
            assert_eq!(facts.requests, corpus.requests());
            assert!(trace.requests.iter().all(|r| r.timestamp_ms.is_finite() && r.timestamp_ms >= 0.0));
        }
    }
});
