//! `permit`: parse the command line, set up logging, run. All work lives in the library.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // SAFETY: first thing in `main`: no other thread exists yet.
    unsafe { permit::model::local::tune_candle_threads() };
    let cli = permit::cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PERMIT_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match permit::cli::run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("permit: {error:#}");
            ExitCode::FAILURE
        }
    }
}
