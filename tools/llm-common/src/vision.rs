//! How many prompt tokens an image costs, per model family ([`ImageRule`]), and an image's
//! size read from its PNG or JPEG header alone ([`image_size`]). request-sim sizes the images
//! it sends by this rule; llm-sim counts the images it receives by the same one.
//!
//! Qwen2-VL and Qwen2.5-VL (checked on real vLLM, `../shared/DESIGN.md` §22): the processor
//! resizes an image with `smart_resize` (each side rounded to a multiple of 28 pixels, half to
//! even; scaled down, floor, above `max_pixels`; up, ceil, below `min_pixels`), and the image
//! is one token per 28×28 pixels, plus `<|vision_start|>` and `<|vision_end|>` around it.

/// One model family's image token rule: a small table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageRule {
    /// The family's name, as `--image-rule` spells it.
    pub name: &'static str,
    /// Pixels per token side (patch size × spatial merge).
    pub factor: u32,
    pub min_pixels: u64,
    pub max_pixels: u64,
    /// Tokens around every image (vision start and end).
    pub extra_tokens: u32,
}

/// Qwen2-VL's processor values (Qwen2.5-VL uses the same).
pub const QWEN2_VL: ImageRule = ImageRule {
    name: "qwen2-vl",
    factor: 28,
    min_pixels: 3136,
    max_pixels: 12_845_056,
    extra_tokens: 2,
};

/// The families whose rule is known, with the names that select them.
pub const RULES: [(&str, ImageRule); 2] = [("qwen2-vl", QWEN2_VL), ("qwen2.5-vl", QWEN2_VL)];

impl ImageRule {
    /// The rule of a family name (case-insensitive), `None` when it is not known.
    pub fn by_name(name: &str) -> Option<ImageRule> {
        RULES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.trim()))
            .map(|(_, r)| *r)
    }

    /// [`Self::by_name`] with a message naming the known families (`--image-rule`).
    pub fn parse(name: &str) -> Result<ImageRule, String> {
        ImageRule::by_name(name).ok_or_else(|| {
            format!(
                "no image token rule is known for {name:?} (known: {}); request-sim sizes images only by a rule it implements",
                ImageRule::known_names()
            )
        })
    }

    /// The names [`Self::by_name`] knows, comma-separated (for messages).
    pub fn known_names() -> String {
        RULES.map(|(n, _)| n).join(", ")
    }

    /// `smart_resize`: the (height, width) the processor resizes an image of `h`×`w` to.
    pub fn resize(&self, h: u32, w: u32) -> (u32, u32) {
        let f = f64::from(self.factor);
        let (hf, wf) = (f64::from(h.max(1)), f64::from(w.max(1)));
        let mut hb = (hf / f).round_ties_even().max(0.0) * f;
        let mut wb = (wf / f).round_ties_even().max(0.0) * f;
        if hb * wb > self.max_pixels as f64 {
            let beta = (hf * wf / self.max_pixels as f64).sqrt();
            hb = f.max((hf / beta / f).floor() * f);
            wb = f.max((wf / beta / f).floor() * f);
        } else if hb * wb < self.min_pixels as f64 {
            let beta = (self.min_pixels as f64 / (hf * wf)).sqrt();
            hb = (hf * beta / f).ceil() * f;
            wb = (wf * beta / f).ceil() * f;
        }
        (hb as u32, wb as u32)
    }

    /// The image tokens of an image `w` wide and `h` high (without [`Self::extra_tokens`]).
    pub fn tokens(&self, w: u32, h: u32) -> u32 {
        let (hb, wb) = self.resize(h, w);
        (hb / self.factor) * (wb / self.factor)
    }

    /// All the prompt tokens an image `w`×`h` adds: its tokens plus the markers around it.
    pub fn cost(&self, w: u32, h: u32) -> u32 {
        self.tokens(w, h) + self.extra_tokens
    }

    /// The fewest image tokens an image can cost (the processor scales up to `min_pixels`).
    pub fn min_tokens(&self) -> u32 {
        let unit = u64::from(self.factor) * u64::from(self.factor);
        self.min_pixels.div_ceil(unit).max(1) as u32
    }

    /// The most image tokens an image can cost (the processor scales down to `max_pixels`).
    pub fn max_tokens(&self) -> u32 {
        let unit = u64::from(self.factor) * u64::from(self.factor);
        (self.max_pixels / unit) as u32
    }

    /// A size (width, height) that costs at most `tokens` image tokens and as many as a
    /// near-square grid allows (at least [`Self::min_tokens`]): sides are multiples of the
    /// factor, so the processor keeps them. The grid is `a` rows of `b` units with
    /// `a = floor(sqrt(tokens))`, `b = tokens / a`: fewer than `a` tokens short.
    pub fn size_for(&self, tokens: u32) -> (u32, u32) {
        let t = tokens.clamp(self.min_tokens(), self.max_tokens());
        let mut a = (f64::from(t).sqrt().floor() as u32).max(1);
        while a > 1 && a * a > t {
            a -= 1;
        }
        // Both sides at least 2 units: a 1-unit side is under what some processors accept.
        let a = a.max(2);
        let b = (t / a).max(2);
        (b * self.factor, a * self.factor)
    }
}

/// The (width, height) an encoded image declares in its header: PNG (`IHDR`) or JPEG (the
/// first start-of-frame marker). `None` for anything else or a cut header.
pub fn image_size(bytes: &[u8]) -> Option<(u32, u32)> {
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n";
    if bytes.starts_with(PNG) {
        let ihdr = bytes.get(12..24)?;
        if &ihdr[..4] != b"IHDR" {
            return None;
        }
        let w = u32::from_be_bytes(ihdr[4..8].try_into().ok()?);
        let h = u32::from_be_bytes(ihdr[8..12].try_into().ok()?);
        return Some((w, h));
    }
    if bytes.starts_with(&[0xff, 0xd8]) {
        return jpeg_size(bytes);
    }
    None
}

/// Walks a JPEG's marker segments to its first SOFn (baseline, progressive, ...).
fn jpeg_size(bytes: &[u8]) -> Option<(u32, u32)> {
    let mut i = 2;
    loop {
        // Fill bytes before a marker are allowed.
        while *bytes.get(i)? == 0xff && *bytes.get(i + 1)? == 0xff {
            i += 1;
        }
        if *bytes.get(i)? != 0xff {
            return None;
        }
        let marker = *bytes.get(i + 1)?;
        i += 2;
        if marker == 0xd8 || marker == 0x01 || (0xd0..=0xd7).contains(&marker) {
            continue; // markers without a length
        }
        let len = usize::from(u16::from_be_bytes([*bytes.get(i)?, *bytes.get(i + 1)?]));
        let sof = matches!(marker, 0xc0..=0xcf) && !matches!(marker, 0xc4 | 0xc8 | 0xcc);
        if sof {
            let s = bytes.get(i + 3..i + 7)?;
            let h = u32::from(u16::from_be_bytes([s[0], s[1]]));
            let w = u32::from(u16::from_be_bytes([s[2], s[3]]));
            return Some((w, h));
        }
        if len < 2 {
            return None;
        }
        i += len;
    }
}

/// The bytes of a `data:` URL (`data:image/png;base64,...`): the media type and the base64
/// payload, `None` when `url` is not a base64 data URL.
pub fn data_url_parts(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let media = meta.strip_suffix(";base64")?;
    Some((media, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qwen_examples_of_the_design_notes() {
        let r = QWEN2_VL;
        for ((w, h), n) in [
            ((224, 224), 64),
            ((448, 448), 256),
            ((280, 560), 200),
            ((560, 280), 200),
            ((1024, 768), 999),
            ((300, 200), 77),
            ((20, 20), 4),
        ] {
            assert_eq!(r.tokens(w, h), n, "{w}x{h}");
            assert_eq!(r.cost(w, h), n + 2, "{w}x{h}");
        }
        // Above max_pixels: scaled down to at most 16384 tokens.
        let big = r.tokens(8000, 8000);
        assert!(big <= r.max_tokens() && big > 15_000, "{big}");
        assert_eq!((r.min_tokens(), r.max_tokens()), (4, 16_384));
    }

    #[test]
    fn size_for_costs_at_most_the_tokens_and_close() {
        let r = QWEN2_VL;
        for t in [4, 5, 6, 7, 9, 63, 64, 65, 199, 256, 1000, 4099, 16_384] {
            let (w, h) = r.size_for(t);
            let got = r.tokens(w, h);
            let a = f64::from(t).sqrt();
            assert!(
                got <= t && f64::from(t - got) < a + 1.0,
                "{t}: {w}x{h} = {got}"
            );
        }
        assert_eq!(r.size_for(256), (448, 448));
        assert_eq!(r.tokens_of_min(), 4);
    }

    impl ImageRule {
        fn tokens_of_min(&self) -> u32 {
            let (w, h) = self.size_for(0);
            self.tokens(w, h)
        }
    }

    #[test]
    fn header_sizes() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend_from_slice(&300u32.to_be_bytes());
        png.extend_from_slice(&200u32.to_be_bytes());
        assert_eq!(image_size(&png), Some((300, 200)));
        assert_eq!(image_size(&png[..20]), None);
        // SOI, an APP0 segment of 16 bytes, SOF0 with height 480, width 640.
        let mut jpg = vec![0xff, 0xd8, 0xff, 0xe0, 0, 16];
        jpg.extend_from_slice(&[0; 14]);
        jpg.extend_from_slice(&[0xff, 0xc0, 0, 17, 8, 0x01, 0xe0, 0x02, 0x80, 3]);
        assert_eq!(image_size(&jpg), Some((640, 480)));
        assert_eq!(image_size(&jpg[..10]), None);
        assert_eq!(image_size(b"GIF89a"), None);
        assert_eq!(
            data_url_parts("data:image/png;base64,AAAA"),
            Some(("image/png", "AAAA"))
        );
        assert_eq!(data_url_parts("https://x/y.png"), None);
        assert_eq!(ImageRule::by_name("Qwen2.5-VL"), Some(QWEN2_VL));
        assert_eq!(ImageRule::by_name("llava"), None);
    }
}
