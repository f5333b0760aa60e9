//! The width plain-text reports are fitted to: `COLUMNS` when set, else the terminal's
//! width when stdout is one, else [`DEFAULT_WIDTH`] (a pipe, a file, a CI log).

use std::io::IsTerminal;

/// Width when stdout is not a terminal and `COLUMNS` is not set.
pub const DEFAULT_WIDTH: usize = 100;
/// Narrowest width honoured; below it the tables could not show a column of text.
pub const MIN_WIDTH: usize = 40;

pub fn table_width() -> usize {
    let from_env = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0);
    let width = from_env
        .or_else(|| {
            std::io::stdout()
                .is_terminal()
                .then(terminal_columns)
                .flatten()
        })
        .unwrap_or(DEFAULT_WIDTH);
    width.max(MIN_WIDTH)
}

/// The columns of the terminal on stdout, from `TIOCGWINSZ`.
fn terminal_columns() -> Option<usize> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the struct we pass, which outlives the call.
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    (rc == 0 && size.ws_col > 0).then_some(usize::from(size.ws_col))
}
