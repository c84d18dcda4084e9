//! llm-sim: a simulated vLLM-like inference server (OpenAI and TGI compatible).
pub mod vocab;
