fn main() {
    eprintln!("llm-sim: not yet implemented");
    std::process::exit(2);
}
