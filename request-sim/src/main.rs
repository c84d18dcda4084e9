use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use mimalloc::MiMalloc;
use request_sim::cli::{Cli, Command};

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

fn main() -> ExitCode {
    // `--config FILE`: the file's settings go before the command line's own words.
    let argv =
        match request_sim::runfile::expand_cli(&Cli::command(), std::env::args_os().collect()) {
            Ok(argv) => argv,
            Err(e) => {
                eprintln!("request-sim: error: {e}");
                return ExitCode::from(e.exit_code());
            }
        };
    let cli = Cli::parse_from(argv);
    let result = match cli.command {
        Command::Replay(args) => request_sim::commands::replay(*args),
        Command::Analyze(args) => request_sim::commands::analyze(args),
        Command::Report(args) => request_sim::commands::report(args),
        Command::Compare(args) => request_sim::commands::compare(args),
        Command::VerifyPrompts(args) => request_sim::commands::verify_prompts(args),
        Command::Sweep(args) => request_sim::sweep::sweep(*args),
        Command::Convert(args) => request_sim::commands::convert(*args),
        Command::Transform(args) => request_sim::commands::transform(*args),
        Command::Config(args) => request_sim::commands::config(args),
        Command::Experiment(args) => request_sim::commands::experiment(&args.file, args.dir),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("request-sim: error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
