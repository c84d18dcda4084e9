//! `--extra-body`: top-level fields merged into every request body (vLLM bench's flag of that
//! name), checked once at start-up: a JSON object that names no field request-sim writes
//! itself. `body.rs` merges it.

/// Body fields request-sim writes itself: `--extra-body` may not give them (they would be
/// written twice, and each has its own flag).
const OWN_BODY_FIELDS: [&str; 12] = [
    "model",
    "messages",
    "prompt",
    "input",
    "inputs",
    "max_tokens",
    "max_output_tokens",
    "min_tokens",
    "ignore_eos",
    "stream",
    "stream_options",
    "store",
];

/// `--extra-body JSON|@FILE`: a JSON object of fields for every request body.
pub fn parse_extra_body(s: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let (text, from) = match s.strip_prefix('@') {
        Some(path) => (
            std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?,
            format!(" in {path}"),
        ),
        None => (s.to_string(), String::new()),
    };
    let map = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(serde_json::Value::Object(m)) => m,
        Ok(other) => return Err(format!("expected a JSON object{from}, found {other}")),
        Err(e) => return Err(format!("not JSON{from}: {e}")),
    };
    if let Some(k) = map.keys().find(|k| OWN_BODY_FIELDS.contains(&k.as_str())) {
        return Err(format!(
            "`{k}`{from} is a field request-sim sets itself (see --model-name, \
             --max-output-tokens, --no-exact-output, --stream)"
        ));
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_body_is_an_object_of_fields_request_sim_does_not_set() {
        let m = parse_extra_body(r#"{"temperature": 0, "tool_choice": "required"}"#).unwrap();
        assert_eq!(m["temperature"], 0);
        assert_eq!(m.len(), 2);
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("b.json");
        std::fs::write(&f, r#"{"top_p": 0.5}"#).unwrap();
        let m = parse_extra_body(&format!("@{}", f.display())).unwrap();
        assert_eq!(m["top_p"], 0.5);
        let err = |s: &str| parse_extra_body(s).unwrap_err();
        assert!(err(r#"{"max_tokens": 5}"#)
            .starts_with("`max_tokens` is a field request-sim sets itself"));
        assert_eq!(err("[1]"), "expected a JSON object, found [1]");
        assert!(err("{nope").starts_with("not JSON: "));
        assert!(err("@/no/such/file").starts_with("cannot read /no/such/file: "));
    }
}
