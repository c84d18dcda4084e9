//! Trace parsers: `parse_reader` with detection and with each forced format, on arbitrary bytes
//! (plain, gzip, zstd or bzip2), and with the reshaping of `transform` (picked by the input's
//! length, so the seeds keep their layout). Any input must give a trace or an error, never a
//! panic; a trace must keep the loader's invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;
use request_sim::analyze::ideal_prefix_hits;
use request_sim::trace::{parse_reader, Arrivals, LoadOptions, Reshape, TraceFormat};

/// The formats tried, by name (`None`: detected).
const FORMATS: [Option<&str>; 6] = [
    None,
    Some("mooncake"),
    Some("bailian"),
    Some("azure"),
    Some("generic"),
    Some("burstgpt"),
];

fn format(k: usize) -> Option<TraceFormat> {
    FORMATS[k % FORMATS.len()].and_then(TraceFormat::from_name)
}

/// One of the `transform` reshapings (0: none).
fn reshape(k: usize) -> Reshape {
    let r = Reshape {
        seed: k as u64,
        ..Reshape::default()
    };
    match k {
        1 => Reshape {
            amplify: Some(2.5),
            ..r
        },
        2 => Reshape {
            sample_sessions: Some(0.5),
            ..r
        },
        3 => Reshape {
            retime: Some(Arrivals::Poisson { rate: 5.0 }),
            ..r
        },
        4 => Reshape {
            max_idle_gap_ms: Some(1000.0),
            ..r
        },
        5 => Reshape {
            prefix_scale: Some(1.5),
            prompt_scale: Some(0.5),
            max_input_length: Some(700),
            ..r
        },
        6 => Reshape {
            retime: Some(Arrivals::Gamma { rate: 2.0, cv: 3.0 }),
            ..r
        },
        _ => r,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, input)) = data.split_first() else {
        return;
    };
    let opts = LoadOptions {
        format: format(usize::from(sel % 6)),
        block_size: match (sel >> 3) & 3 {
            0 => None,
            1 => Some(1),
            2 => Some(16),
            _ => Some(512),
        },
        skip_invalid: sel & 0x20 != 0,
        max_requests: (sel & 0x40 != 0).then_some(3),
        start_ms: (sel & 0x80 != 0).then_some(1.0),
        drop_failed: sel & 0x04 != 0,
        max_line_bytes: Some(4096),
        reshape: reshape(input.len() % 7),
        ..LoadOptions::default()
    };
    if let Ok(trace) = parse_reader("fuzz", input, &opts) {
        assert!(!trace.requests.is_empty());
        for (i, r) in trace.requests.iter().enumerate() {
            assert_eq!(r.index, i);
            assert!(r.timestamp_ms.is_finite() && r.timestamp_ms >= 0.0);
            assert!(r.line >= 1);
        }
        assert!(trace
            .requests
            .windows(2)
            .all(|w| w[0].timestamp_ms <= w[1].timestamp_ms));
        let hits = ideal_prefix_hits(&trace);
        assert_eq!(hits.len(), trace.requests.len());
    }
});
