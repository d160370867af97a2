//! `permit`: parse the command line, set up logging, run. All work lives in the library.

use std::process::ExitCode;

use clap::Parser;

/// mimalloc, not glibc's malloc: the gate's many small short-lived strings cost a third of
/// its time in glibc's allocator (see `benches/gate.rs`, which uses the same allocator).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
