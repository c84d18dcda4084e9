mod agents;
mod loopback;
mod sessions;
mod stream;
