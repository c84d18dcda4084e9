//! Image requests end to end against llm-sim (in-process, real sockets): an Azure LMM trace
//! (`NumImages`, request-sim's `ImageIds`) replayed with images sized by the Qwen2-VL rule;
//! every prompt is exactly its `ContextTokens`, the image tokens the server counts are the ones
//! the images were made to cost, a repeated image id hits the prefix cache and a new one
//! misses. A messages row with image parts is counted exactly too.

use std::io::Write;

use request_sim::record::{Record, Status};

use crate::support::*;

/// The fixture's rows: (images, context tokens, image ids given).
const ROWS: [(u32, u32, bool); 10] = [
    (1, 900, true),
    (2, 1500, true),
    (1, 900, true),
    (2, 1500, true),
    (1, 900, false),
    (4, 300, false),
    (3, 4000, true),
    (1, 900, false),
    (0, 500, false),
    (4, 120, false),
];

fn run(trace: &std::path::Path, out: &std::path::Path, extra: &[&str]) -> Vec<Record> {
    let out_s = out.display().to_string();
    let mut argv = vec![
        "--dataset-path",
        trace.to_str().unwrap(),
        "--quiet",
        "--seed",
        "5",
        "--no-pin",
        "-o",
        &out_s,
    ];
    argv.extend_from_slice(extra);
    let outcome = replay(&argv);
    assert_eq!(outcome.exit_code, 0);
    read_records_by_index(out)
}

#[test]
fn azure_lmm_rows_are_exact_and_repeated_images_hit_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let records = run(
        &trace_fixture("azure_lmm.csv"),
        &dir.path().join("r.jsonl"),
        &[],
    );
    assert_eq!(records.len(), ROWS.len());
    for (r, &(n, ctx, _)) in records.iter().zip(&ROWS) {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        assert_eq!((r.input_length, r.prompt_tokens), (ctx, Some(ctx)), "{r:?}");
        assert_eq!(r.images, (n > 0).then_some(n), "{r:?}");
        assert_eq!(
            r.image_tokens,
            r.image_tokens_intended.filter(|_| n > 0),
            "{r:?}"
        );
    }
    // Big enough rows: 448×448 images (256 tokens each, --image-tokens' default).
    assert_eq!(records[1].image_tokens, Some(512));
    // Short rows: the images shrink so that text + images still fit exactly.
    let shrunk = records[5].image_tokens.unwrap();
    assert!(shrunk < 4 * 256 && shrunk + 4 * 2 <= 300, "{shrunk}");
    // Row 3 repeats row 1's image, row 4 rows 2's two: every whole 16-token block of the
    // images (llm-sim puts them first) is cached. Rows 5 and 8 have new images: a miss.
    let block_floor = |t: u32| t / 16 * 16;
    assert!(
        records[2].cached_tokens.unwrap() >= block_floor(258),
        "{:?}",
        records[2]
    );
    assert!(
        records[3].cached_tokens.unwrap() >= block_floor(516),
        "{:?}",
        records[3]
    );
    assert_eq!(records[4].cached_tokens, Some(0), "{:?}", records[4]);
    assert_eq!(records[7].cached_tokens, Some(0), "{:?}", records[7]);
    // The summary splits the exactness check: text and images.
    let s = read_summary_file(&summary_path(&dir.path().join("r.jsonl")));
    let img = s.images.expect("an image section");
    assert_eq!((img.requests, img.images), (9, 19));
    assert_eq!((img.image_tokens_exact, img.with_image_usage), (9, 9));
    assert_eq!(img.text_tokens_exact, 9);
}

#[test]
fn no_images_sends_the_rows_as_text_of_the_same_length() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jsonl");
    let records = run(&trace_fixture("azure_lmm.csv"), &out, &["--no-images"]);
    for (r, &(_, ctx, _)) in records.iter().zip(&ROWS) {
        assert_eq!(
            (r.prompt_tokens, r.image_tokens),
            (Some(ctx), None),
            "{r:?}"
        );
    }
}

#[test]
fn a_messages_row_with_image_parts_is_counted_exactly() {
    use base64::Engine as _;
    let dir = tempfile::tempdir().unwrap();
    // A 300×200 PNG header is all llm-sim and request-sim read: 77 image tokens.
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
    png.extend_from_slice(&300u32.to_be_bytes());
    png.extend_from_slice(&200u32.to_be_bytes());
    png.extend_from_slice(&[8, 2, 0, 0, 0, 1, 2, 3, 4]);
    let url = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&png)
    );
    let trace = dir.path().join("m.jsonl");
    let mut f = std::fs::File::create(&trace).unwrap();
    let row = serde_json::json!({"timestamp": 0, "output_length": 3, "messages": [{"role": "user",
        "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "what is it"}]}]});
    writeln!(f, "{row}").unwrap();
    drop(f);
    let records = run(&trace, &dir.path().join("r.jsonl"), &[]);
    assert_eq!(records.len(), 1);
    let r = &records[0];
    assert_eq!((r.images, r.image_tokens), (Some(1), Some(77)), "{r:?}");
    assert_eq!(r.image_tokens_intended, Some(77), "{r:?}");
}

#[test]
fn a_family_without_a_known_rule_is_refused() {
    let e = try_replay_args(&["--image-rule", "llava"])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no image token rule is known for \"llava\" (known: qwen2-vl, qwen2.5-vl)"),
        "{e}"
    );
    assert!(try_replay_args(&["--image-rule", "Qwen2.5-VL"]).is_ok());
}
