mod builtin;
mod qwen3;
mod server;
