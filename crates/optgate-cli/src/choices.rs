//! The values the command-line arguments take: the report formats, and the subcommands of
//! `optgate daemon` and `optgate trace`.

use std::path::PathBuf;

use clap::{Subcommand, ValueEnum};

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Format {
    Table,
    Markdown,
    Json,
    Csv,
    /// One self-contained page (plots inline, nothing loaded from the network).
    Html,
    /// JUnit XML for CI: a test case per variant (accept passes, reject fails,
    /// inconclusive and not applicable are skipped).
    Junit,
}

/// The formats of `optgate history` (a history has no Markdown, CSV or JUnit form).
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum HistoryFormat {
    Table,
    Json,
    /// One self-contained page (plots inline, nothing loaded from the network).
    Html,
}

#[derive(Debug, Subcommand)]
pub enum DaemonCommand {
    /// Stop the daemon: it finishes its database writes; jobs keep running and a restarted
    /// daemon picks them up.
    Stop,
}

#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Event count and summed duration per category, per name and per epoch, over every
    /// file given (folders expand to their trace files); damaged lines are reported and
    /// skipped, never fatal.
    Summary {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Event name whose intervals delimit epochs, when events carry no `args.epoch`.
        #[arg(long)]
        epoch_marker: Option<String>,
        /// Only events of this category.
        #[arg(long)]
        category: Option<String>,
        #[arg(long)]
        json: bool,
    },
}
