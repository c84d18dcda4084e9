mod builtin;
mod corpus;
mod messages;
mod qwen3;
mod save;
mod server;
mod ucm;
