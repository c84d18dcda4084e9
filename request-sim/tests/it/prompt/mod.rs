mod builtin;
mod qwen3;
mod save;
mod server;
