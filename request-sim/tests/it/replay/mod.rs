mod loopback;
mod sessions;
