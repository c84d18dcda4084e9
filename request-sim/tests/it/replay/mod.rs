mod agent_formats;
mod agents;
mod copilot;
mod loopback;
mod sessions;
mod stream;
