mod builtin;
mod messages;
mod qwen3;
mod save;
mod server;
