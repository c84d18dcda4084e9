mod builtin;
mod corpus;
mod qwen3;
mod save;
mod server;
mod ucm;
