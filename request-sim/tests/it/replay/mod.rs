mod agent_formats;
mod agents;
mod loopback;
mod sessions;
mod stream;
