mod loopback;
mod sessions;
mod stream;
