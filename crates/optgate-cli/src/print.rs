//! The CLI's print edge: everything optgate prints passes through one filter
//! ([`optgate_report::terminal::for_terminal`]), so text from input (descriptions, reasons
//! quoting an app's lines, names, a notify command's stderr) shows its control characters
//! escaped instead of driving the terminal. `out!`/`outln!` and `errln!` take
//! `print!`'s arguments.

/// `text` on stdout, filtered.
pub fn out(text: &str) {
    print!("{}", optgate_report::terminal::for_terminal(text));
}

/// `text` on stderr, filtered.
pub fn err(text: &str) {
    eprint!("{}", optgate_report::terminal::for_terminal(text));
}

macro_rules! out {
    ($($arg:tt)*) => { $crate::print::out(&format!($($arg)*)) };
}

macro_rules! outln {
    () => { $crate::print::out("\n") };
    ($($arg:tt)*) => { $crate::print::out(&format!("{}\n", format_args!($($arg)*))) };
}

macro_rules! errln {
    () => { $crate::print::err("\n") };
    ($($arg:tt)*) => { $crate::print::err(&format!("{}\n", format_args!($($arg)*))) };
}
