mod builtin;
mod corpus;
mod llamacpp;
mod messages;
mod qwen3;
mod save;
mod server;
mod ucm;
