mod agent_formats;
mod agents;
mod loopback;
mod models;
mod sessions;
mod stream;
