//! Which format a trace is in ([`TraceFormat`]): its `--dataset` name, whether it is an agent
//! corpus, and the block size its hash ids stand for. One variant per file of
//! `trace/formats/`.

/// Which trace format a file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    /// Mooncake FAST'25: timestamp (ms), input_length, output_length, hash_ids; block 512.
    Mooncake,
    /// Alibaba Bailian: chat_id, parent_chat_id, timestamp (s), ..., hash_ids; block 16.
    Bailian,
    /// Azure LLM inference trace (CSV): TIMESTAMP, ContextTokens, GeneratedTokens; no hash ids.
    Azure,
    /// Generic JSONL: timestamp (ms), input_length, output_length, optional hash_ids.
    Generic,
    /// AIPerf-style JSONL: a whole OpenAI chat request per row (`messages`, `tools`, ...).
    Messages,
    /// BurstGPT (CSV): Timestamp (s), Model, Request tokens, Response tokens, ...; no hash ids.
    #[serde(rename = "burstgpt")]
    BurstGpt,
    /// TraceLab round JSONL: coding-agent sessions of rounds; hash ids minted from
    /// `prefix_tokens` (an agentic corpus, `agent/tracelab.rs`).
    Tracelab,
    /// Dynamo request trace (`dynamo.request.trace.v1`): `request_end` events, subagents through
    /// `parent_trajectory_id` (an agentic corpus, `agent/dynamo.rs`).
    Dynamo,
    /// AIPerf `dag_jsonl`: conversations with `forks`/`spawns`/`join_at` and real messages (an
    /// agentic corpus, `agent/dag.rs`).
    #[serde(rename = "dag_jsonl")]
    Dag,
    /// Weka / kv-cache-tester agentic JSON: one conversation (with subagents) per file, a
    /// directory of files is a corpus; read whole by `trace/formats/weka.rs`, never row by row.
    Weka,
    /// ServeGen (`alibaba/ServeGen`): a directory of per-client arrival patterns and length
    /// PMFs, a workload synthesized row by row (`trace/formats/servegen.rs`).
    #[serde(rename = "servegen")]
    ServeGen,
    /// GitHub Copilot coding-agent trace (June 2026): one session per line (`turns` of
    /// `llm_calls` and `tool_batches`), a `date=` directory of shards; prefixes built from the
    /// prompt segments (an agentic corpus, `trace/formats/copilot.rs`).
    Copilot,
}

impl TraceFormat {
    /// Every format, in `--dataset` order.
    pub const ALL: [TraceFormat; 12] = [
        TraceFormat::Mooncake,
        TraceFormat::Bailian,
        TraceFormat::Azure,
        TraceFormat::Generic,
        TraceFormat::Messages,
        TraceFormat::BurstGpt,
        TraceFormat::Tracelab,
        TraceFormat::Dynamo,
        TraceFormat::Dag,
        TraceFormat::Weka,
        TraceFormat::ServeGen,
        TraceFormat::Copilot,
    ];

    /// The `--dataset` name (`mooncake`, `bailian`, `azure`, `generic`, `messages`, `burstgpt`,
    /// `tracelab`, `dynamo`, `dag_jsonl`, `weka`, `servegen`, `copilot`).
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Mooncake => "mooncake",
            TraceFormat::Bailian => "bailian",
            TraceFormat::Azure => "azure",
            TraceFormat::Generic => "generic",
            TraceFormat::Messages => "messages",
            TraceFormat::BurstGpt => "burstgpt",
            TraceFormat::Tracelab => "tracelab",
            TraceFormat::Dynamo => "dynamo",
            TraceFormat::Dag => "dag_jsonl",
            TraceFormat::Weka => "weka",
            TraceFormat::ServeGen => "servegen",
            TraceFormat::Copilot => "copilot",
        }
    }

    /// Parses a `--dataset` name (case-insensitive).
    pub fn from_name(name: &str) -> Option<TraceFormat> {
        let name = name.trim();
        if name.eq_ignore_ascii_case("dag") {
            return Some(TraceFormat::Dag);
        }
        TraceFormat::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(name))
    }

    /// A corpus of agent conversations, read whole by `trace::model::Corpus` (never row by row).
    pub fn is_agentic(self) -> bool {
        matches!(
            self,
            TraceFormat::Tracelab
                | TraceFormat::Dynamo
                | TraceFormat::Dag
                | TraceFormat::Weka
                | TraceFormat::Copilot
        )
    }

    /// Every row is sent as written (its messages): no prompt is built from the word list,
    /// so nothing needs its token counts to be exact.
    pub fn sends_rows_as_written(self) -> bool {
        // Every dag_jsonl turn carries its messages (`dag/line.rs` refuses one without).
        matches!(self, TraceFormat::Messages | TraceFormat::Dag)
    }

    /// Default hash block size (tokens per hash id) of the format.
    pub fn default_block_size(self) -> usize {
        match self {
            // Mooncake FAST'25 hashes blocks of 512 tokens.
            TraceFormat::Mooncake => 512,
            // Bailian hashes blocks of 16 tokens.
            TraceFormat::Bailian => 16,
            TraceFormat::Azure
            | TraceFormat::Generic
            | TraceFormat::Messages
            | TraceFormat::BurstGpt
            | TraceFormat::ServeGen => 512,
            // TraceLab's `prefix_tokens` are minted into blocks of 64 tokens (`--block-size` overrides).
            TraceFormat::Tracelab => 64,
            // The file says (`trace_block_size`); 64 is what Dynamo writes by default.
            TraceFormat::Dynamo => 64,
            TraceFormat::Dag => 64,
            // The block size of each conversation is in its file; 64 when it is not.
            TraceFormat::Weka => 64,
            // Prefixes are built (`--block-size` overrides), as TraceLab's.
            TraceFormat::Copilot => 64,
        }
    }
}
