//! The OpenAI Responses and Anthropic Messages APIs: against scripted servers on 127.0.0.1
//! (timings, usage, error shapes, request bodies), and replays against llm-sim.

mod fake;
mod garbage;
mod one_unit;
mod sim;
mod vllm_grpc;
mod vllm_streams;
