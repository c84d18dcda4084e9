mod builtin;
mod qwen3;
