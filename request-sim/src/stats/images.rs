//! The image section of a summary (`docs/metrics.md`, "Images"): how many requests carried
//! images, and the exactness check split into text and images, where the server reports its
//! image tokens (`usage.prompt_tokens_details.multimodal_tokens`, vLLM).

use serde::{Deserialize, Serialize};

use crate::record::{Record, Status};

/// The section; only when some request carried images.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ImageSummary {
    /// Completed requests with images, and their images.
    pub requests: usize,
    pub images: u64,
    /// Image tokens the server reported over those requests, and what the images were made
    /// to cost (Σ N, the vision markers not included).
    pub image_tokens: u64,
    pub image_tokens_intended: u64,
    /// Requests whose server reported image tokens and whose intended count is known, and how
    /// many of those were exact.
    pub with_image_usage: usize,
    pub image_tokens_exact: usize,
    /// Of those, how many had the text part exact too (prompt − image tokens against intended
    /// − intended image tokens).
    pub text_tokens_exact: usize,
    /// Image requests whose whole prompt was exactly the intended length.
    pub prompt_exact: usize,
}

/// Builds the section as records arrive.
#[derive(Debug, Clone, Default)]
pub struct ImageAcc {
    s: ImageSummary,
}

impl ImageAcc {
    pub fn add(&mut self, r: &Record) {
        let Some(n) = r.images.filter(|n| *n > 0) else {
            return;
        };
        if r.status != Status::Ok {
            return;
        }
        let s = &mut self.s;
        s.requests += 1;
        s.images += u64::from(n);
        s.image_tokens += u64::from(r.image_tokens.unwrap_or(0));
        s.image_tokens_intended += u64::from(r.image_tokens_intended.unwrap_or(0));
        s.prompt_exact += usize::from(r.prompt_tokens == Some(r.input_length));
        if let (Some(got), Some(want), Some(prompt)) =
            (r.image_tokens, r.image_tokens_intended, r.prompt_tokens)
        {
            s.with_image_usage += 1;
            s.image_tokens_exact += usize::from(got == want);
            let text = i64::from(prompt) - i64::from(got);
            let text_want = i64::from(r.input_length) - i64::from(want);
            s.text_tokens_exact += usize::from(text == text_want);
        }
    }

    pub fn finish(self) -> Option<ImageSummary> {
        (self.s.requests > 0).then_some(self.s)
    }
}
