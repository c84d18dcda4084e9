mod agent_formats;
mod agents;
mod copilot;
mod loopback;
mod models;
mod sessions;
mod stream;
mod tool_calls;
