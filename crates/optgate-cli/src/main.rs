//! `optgate`: parse the command line, run the command, map errors to documented exit codes.
//! Each command lives in `cmd/`; they are thin glue over the library crates.

#[macro_use]
mod print;
mod args;
mod choices;
mod cli;
mod cmd;
mod exit;

use clap::Parser;

fn main() {
    init_tracing();
    let cli = cli::Cli::parse();
    if !matches!(cli.command, cli::Command::Daemon(_)) {
        restore_default_sigpipe();
    }
    let code = match cmd::dispatch(cli) {
        Ok(code) => code,
        Err(err) => {
            if is_broken_pipe(&err) {
                // `optgate report | head` is not an error.
                exit::OK
            } else {
                match exit::diagnostics_of(&err) {
                    // Each diagnostic already says `FILE:LINE:COL: error:`.
                    Some(diagnostics) => errln!("{diagnostics}"),
                    None => errln!("optgate: error: {err:#}"),
                }
                exit::code_of(&err)
            }
        }
    };
    std::process::exit(code);
}

/// Rust ignores SIGPIPE, so `println!` into a closed pipe (`optgate report | head`)
/// panics. A command-line tool should instead end quietly, as `cat` does: restore the
/// default action. The daemon keeps ignoring it — a client hanging up must not kill it.
fn restore_default_sigpipe() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    // SAFETY: called once at start-up, before any thread exists; SIG_DFL installs no Rust
    // handler.
    unsafe {
        let _ = signal(Signal::SIGPIPE, SigHandler::SigDfl);
    }
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = std::env::var("OPTGATE_LOG")
        .ok()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .unwrap_or_else(|| "warn".to_string());
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        // A log line that cannot be written (stderr on a full disk, a closed pipe) is lost,
        // never fatal: by default the subscriber reports its own write errors with
        // `eprintln!`, which panics on that same stderr and took the daemon's engine down.
        .log_internal_errors(false)
        // No colour codes in a log file (the background daemon's stderr is its log).
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
