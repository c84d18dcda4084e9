//! Chat prompts without rendering the chat template on every request: the template's text
//! around the messages' contents, kept per message shape.
//!
//! A chat template (minijinja) copies a long content several times per render (into a
//! template value, once per `+` of the template's string concatenations, into the output): for
//! the Mooncake trace's 115 kB prompts that was 0.3 ms per request with the Qwen3 template, a
//! third of the counting, which the built-in tokenizer does not pay. What the template writes
//! around the contents depends on the messages' roles, their other fields and what it tests of
//! the contents, not on the words themselves. So the text of a request whose contents are
//! plain words is the template's text for that shape with the contents put in place (one
//! copy), and its ids are that text's ids: the same text, counted the same way.
//!
//! Exactness: a shape is only used for contents of ASCII letters, digits, spaces and newlines
//! (no markup a template might look for, such as `<tool_response>` or `</think>`), keyed by the
//! roles, each content's leading and trailing whitespace (templates `trim` or `strip`) and the
//! generation prompt, and only for messages with nothing but a role and a content, and no
//! `tools`. A shape is learnt by rendering the template twice with placeholder contents, a
//! short and a long one (a template that branches on a content's length or words gives two
//! different frames, and the shape is refused); the first [`CHECKS`] requests of each shape are
//! rendered in full as well, and a text that differs refuses the shape for good (with a
//! start-up-style line on stderr). No crate offers this: it is a property of replayed traffic.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::RwLock;

use llm_common::template::ChatMessage;
use rustc_hash::FxHashMap as HashMap;

/// Requests of a new shape rendered in full as well, their texts compared.
pub const CHECKS: u32 = 3;
/// Shapes kept at most (requests of further shapes are rendered in full).
const MAX_SHAPES: usize = 4096;
/// Longest leading or trailing whitespace of a content kept in a shape's key.
const MAX_EDGE: usize = 16;
/// Marks a placeholder's place in a rendered text (a private-use character no content of a
/// shape can hold: shape contents are ASCII).
const MARK: char = '\u{E000}';

/// What decides the template's text around the contents.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ShapeKey {
    generation_prompt: bool,
    /// Per message: role, leading and trailing whitespace of its content.
    messages: Vec<(String, String, String)>,
}

/// The template's text of a shape: `frame[0]`, content 0, `frame[1]`, …, `frame[n]`.
struct Frame {
    texts: Vec<String>,
    checks_left: AtomicU32,
}

enum Known {
    Frame(Frame),
    Refused,
}

/// The frames learnt so far.
#[derive(Default)]
pub struct ShapeCache {
    shapes: RwLock<HashMap<ShapeKey, Known>>,
    /// Requests whose text was put together from a frame (not rendered).
    spliced: AtomicU64,
}

/// What [`ShapeCache::text`] found for a request.
pub enum Lookup {
    /// The text was put together from the shape's frame; `check` asks the caller to render
    /// the template as well and report the comparison with [`ShapeCache::checked`].
    Text { check: bool },
    /// A shape not learnt yet: learn it with [`ShapeCache::learn`].
    New(ShapeKey),
    /// Render the template.
    Render,
}

/// A content a frame can hold: ASCII letters, digits, spaces and newlines, with at least one
/// letter or digit. Written as a branch-free fold so the compiler checks many bytes at a time.
fn plain(content: &str) -> bool {
    let ok = content.as_bytes().chunks(64).all(|chunk| {
        chunk.iter().fold(true, |all, &b| {
            let letter = (b | 0x20).wrapping_sub(b'a') < 26;
            let digit = b.wrapping_sub(b'0') < 10;
            all & (letter | digit | (b == b' ') | (b == b'\n'))
        })
    });
    ok && content.bytes().any(|b| b.is_ascii_alphanumeric())
}

/// The shape of a request, if its text can come from a frame.
fn key(messages: &[ChatMessage], generation_prompt: bool) -> Option<ShapeKey> {
    let mut shape = Vec::with_capacity(messages.len());
    for m in messages {
        if m.tool_calls.is_some() || m.tool_call_id.is_some() || m.name.is_some() {
            return None;
        }
        if !plain(&m.content) {
            return None;
        }
        let c = m.content.as_str();
        let body = c.trim_matches(|ch: char| ch == ' ' || ch == '\n');
        let start = body.as_ptr() as usize - c.as_ptr() as usize;
        let (lead, trail) = (&c[..start], &c[start + body.len()..]);
        if lead.len() > MAX_EDGE || trail.len() > MAX_EDGE {
            return None;
        }
        shape.push((m.role.clone(), lead.to_string(), trail.to_string()));
    }
    Some(ShapeKey {
        generation_prompt,
        messages: shape,
    })
}

/// Placeholder `i` of a shape with the given edges: short, or long (many words).
fn placeholder(i: usize, lead: &str, trail: &str, long: bool) -> String {
    let mut p = format!("{lead}{MARK}{i}{MARK}");
    if long {
        for _ in 0..300 {
            p.push_str(" lorem ipsum");
        }
        p.push(MARK);
    }
    p.push_str(trail);
    p
}

/// The texts between the placeholders of `rendered`, if each placeholder is there whole,
/// once, in order, and no mark is anywhere else.
fn cut_frame(rendered: &str, placeholders: &[String]) -> Option<Vec<String>> {
    let marks: usize = placeholders.iter().map(|p| p.matches(MARK).count()).sum();
    if rendered.matches(MARK).count() != marks {
        return None;
    }
    let mut texts = Vec::with_capacity(placeholders.len() + 1);
    let mut rest = rendered;
    for p in placeholders {
        let at = rest.find(p.as_str())?;
        texts.push(rest[..at].to_string());
        rest = &rest[at + p.len()..];
    }
    texts.push(rest.to_string());
    Some(texts)
}

impl ShapeCache {
    /// The text of `messages` from a frame, written to `text` (emptied first; a buffer kept
    /// between requests, so a long text does not touch fresh memory every time), or what to
    /// do instead.
    pub fn text(
        &self,
        messages: &[ChatMessage],
        generation_prompt: bool,
        text: &mut String,
    ) -> Lookup {
        let Some(key) = key(messages, generation_prompt) else {
            return Lookup::Render;
        };
        let Ok(shapes) = self.shapes.read() else {
            return Lookup::Render;
        };
        match shapes.get(&key) {
            Some(Known::Frame(f)) => {
                let len = f.texts.iter().map(String::len).sum::<usize>()
                    + messages.iter().map(|m| m.content.len()).sum::<usize>();
                text.clear();
                text.reserve(len);
                for (frame, m) in f.texts.iter().zip(messages) {
                    text.push_str(frame);
                    text.push_str(&m.content);
                }
                text.push_str(&f.texts[messages.len()]);
                let check = f.checks_left.load(Ordering::Relaxed) > 0;
                if !check {
                    self.spliced.fetch_add(1, Ordering::Relaxed);
                }
                Lookup::Text { check }
            }
            Some(Known::Refused) => Lookup::Render,
            None if shapes.len() >= MAX_SHAPES => Lookup::Render,
            None => Lookup::New(key),
        }
    }

    /// Learns the frame of `key` from `render` (the template rendered with the given contents,
    /// one per message): refused when the short and the long placeholders give different
    /// frames or a placeholder is not found whole.
    pub fn learn(&self, key: ShapeKey, render: impl Fn(&[String]) -> Option<String>) {
        let frame = |long: bool| -> Option<Vec<String>> {
            let placeholders: Vec<String> = key
                .messages
                .iter()
                .enumerate()
                .map(|(i, (_, lead, trail))| placeholder(i, lead, trail, long))
                .collect();
            cut_frame(&render(&placeholders)?, &placeholders)
        };
        let known = match (frame(false), frame(true)) {
            (Some(short), Some(long)) if short == long => Known::Frame(Frame {
                texts: short,
                checks_left: AtomicU32::new(CHECKS),
            }),
            _ => Known::Refused,
        };
        if let Ok(mut shapes) = self.shapes.write() {
            if shapes.len() < MAX_SHAPES {
                shapes.entry(key).or_insert(known);
            }
        }
    }

    /// Reports a check of a text put together from a frame against the template's render:
    /// `same` counts down the shape's checks, a difference refuses the shape.
    pub fn checked(&self, messages: &[ChatMessage], generation_prompt: bool, same: bool) {
        let Some(key) = key(messages, generation_prompt) else {
            return;
        };
        if same {
            if let Ok(shapes) = self.shapes.read() {
                if let Some(Known::Frame(f)) = shapes.get(&key) {
                    let _ = f
                        .checks_left
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
                }
            }
            return;
        }
        eprintln!(
            "llm-sim: the chat template's text of messages shaped {:?} depends on their words; \
             such requests are rendered in full",
            key.messages
                .iter()
                .map(|(role, _, _)| role.as_str())
                .collect::<Vec<_>>()
        );
        if let Ok(mut shapes) = self.shapes.write() {
            shapes.insert(key, Known::Refused);
        }
    }

    /// Requests whose text was put together from a frame without a check.
    pub fn spliced(&self) -> u64 {
        self.spliced.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_contents_have_a_shape() {
        assert!(plain(" abc Def 12\nxyz "));
        assert!(!plain("   \n"));
        assert!(!plain("a <tool_response> b"));
        assert!(!plain("café"));
        assert!(!plain("a, b"));
        assert!(!plain(&format!("{} {MARK}", "a".repeat(100))));
        let k = key(&[ChatMessage::text("user", "  hello world\n")], true).unwrap();
        assert_eq!(k.messages, vec![("user".into(), "  ".into(), "\n".into())]);
        let mut with_name = ChatMessage::text("user", "hello");
        with_name.name = Some("x".into());
        assert!(key(&[with_name], true).is_none());
    }

    #[test]
    fn frames_are_cut_at_whole_placeholders_only() {
        let ps = vec![
            placeholder(0, " ", "", false),
            placeholder(1, "", "\n", false),
        ];
        let rendered = format!("<a>{}</a><b>{}</b>", ps[0], ps[1]);
        assert_eq!(
            cut_frame(&rendered, &ps).unwrap(),
            vec!["<a>", "</a><b>", "</b>"]
        );
        // A trimmed placeholder is not whole: no frame.
        let trimmed = format!("<a>{}</a><b>{}</b>", ps[0].trim(), ps[1]);
        assert!(cut_frame(&trimmed, &ps).is_none());
        // A placeholder written twice: no frame.
        let twice = format!("{}{}{}", ps[0], ps[0], ps[1]);
        assert!(cut_frame(&twice, &ps).is_none());
    }
}
