//! The one chat chunk shape that carries nearly every streamed token, read without a JSON
//! parser ([`chat_token`]).
//!
//! vLLM (and llm-sim, which copies it) sends every token of a chat answer as
//! `{"id":"…","object":"chat.completion.chunk","created":N,"model":"…","choices":[{"index":0,
//! "delta":{"content":"…"},"logprobs":null,"finish_reason":null[,"token_ids":null]}]}`
//! (`reasoning` in place of `content` for thinking). Matching that text byte for byte costs a
//! fraction of the full parse; anything else (an escape or a control character in a string,
//! empty text, another field, another order, a finish reason, usage) is not matched and goes
//! through the full parse of [`super`], whose reading of a matched chunk is the same
//! (the unit tests compare both on every shape).

use crate::backend::state::Carried;

/// A token chunk of the known shape: what it carried and its text (no escapes, so the JSON
/// string's bytes are the text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FastToken<'a> {
    pub carried: Carried,
    pub text: &'a str,
}

/// The chunk `data` when it has the known shape (module docs), else `None`.
pub(super) fn chat_token(data: &[u8]) -> Option<FastToken<'_>> {
    let s = std::str::from_utf8(data).ok()?;
    let rest = s.strip_prefix(r#"{"id":""#)?;
    let (_, rest) = plain_string(rest)?;
    let rest = rest.strip_prefix(r#","object":"chat.completion.chunk","created":"#)?;
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || (digits > 1 && rest.starts_with('0')) {
        return None;
    }
    let rest = rest[digits..].strip_prefix(r#","model":""#)?;
    let (_, rest) = plain_string(rest)?;
    let rest = rest.strip_prefix(r#","choices":[{"index":0,"delta":{""#)?;
    let (carried, rest) = if let Some(r) = rest.strip_prefix(r#"content":""#) {
        (Carried::ANSWER, r)
    } else if let Some(r) = rest.strip_prefix(r#"reasoning":""#) {
        (Carried::REASONING, r)
    } else {
        return None;
    };
    let (text, rest) = plain_string(rest)?;
    if text.is_empty() {
        return None;
    }
    let rest = rest.strip_prefix(r#"},"logprobs":null,"finish_reason":null"#)?;
    let rest = rest.strip_prefix(r#","token_ids":null"#).unwrap_or(rest);
    (rest == "}]}").then_some(FastToken { carried, text })
}

/// The body of a JSON string that starts `s` (its opening quote already read) and the text
/// after its closing quote, when it has no escape and no control character.
fn plain_string(s: &str) -> Option<(&str, &str)> {
    let end = memchr::memchr2(b'"', b'\\', s.as_bytes())?;
    let body = &s[..end];
    if s.as_bytes()[end] != b'"' || body.bytes().any(|b| b < 0x20) {
        return None;
    }
    Some((body, &s[end + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LLM_SIM: &str = r#"{"id":"chatcmpl-3eff","object":"chat.completion.chunk","created":1795841500,"model":"llm-sim","choices":[{"index":0,"delta":{"content":" vami"},"logprobs":null,"finish_reason":null,"token_ids":null}]}"#;

    #[test]
    fn the_known_shapes_are_read() {
        let t = chat_token(LLM_SIM.as_bytes()).unwrap();
        assert_eq!((t.carried, t.text), (Carried::ANSWER, " vami"));
        let vllm = r#"{"id":"chatcmpl-9878","object":"chat.completion.chunk","created":1795793214,"model":"tiny","choices":[{"index":0,"delta":{"reasoning":"ели"},"logprobs":null,"finish_reason":null}]}"#;
        let t = chat_token(vllm.as_bytes()).unwrap();
        assert_eq!((t.carried, t.text), (Carried::REASONING, "ели"));
    }

    #[test]
    fn anything_else_is_left_to_the_full_parse() {
        let others = [
            LLM_SIM.replace(" vami", ""),
            LLM_SIM.replace(" vami", r#"a\"b"#),
            LLM_SIM.replace(" vami", "a\tb"),
            LLM_SIM.replace("llm-sim", r#"m\"x"#),
            LLM_SIM.replace("1795841500", ""),
            LLM_SIM.replace("1795841500", "0123"),
            LLM_SIM.replace(r#""finish_reason":null"#, r#""finish_reason":"length""#),
            LLM_SIM.replace(r#""content""#, r#""role":"assistant","content""#),
            LLM_SIM.replace(r#""content""#, r#""reasoning_content""#),
            LLM_SIM.replace("}]}", "}],\"usage\":null}"),
            LLM_SIM.replace("}]}", "}]} "),
            LLM_SIM.replace(r#""index":0"#, r#""index":1"#),
        ];
        for o in &others {
            assert_eq!(chat_token(o.as_bytes()), None, "{o}");
        }
        let mut bad = LLM_SIM.as_bytes().to_vec();
        let at = bad.len() - 40;
        bad[at] = 0xff;
        assert_eq!(chat_token(&bad), None);
    }
}
