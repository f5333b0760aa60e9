//! The loader's check of `recheck:`: the interval in its strict form and within its
//! limits, and `notify` a non-empty argument vector within its limits, each problem at the
//! place it is about.

use super::Checker;
use crate::limits::{MAX_NOTIFY_ARG_BYTES, MAX_NOTIFY_ARGS, quoted};
use crate::model::RecheckSpec;
use crate::recheck::{Recheck, parse_interval};

impl Checker {
    /// The resolved `recheck:` key; `None` (with the errors pushed) when it is absent or
    /// invalid.
    pub(super) fn recheck(&mut self, spec: Option<&RecheckSpec>) -> Option<Recheck> {
        let spec = spec?;
        let every = match parse_interval(&spec.every) {
            Ok(d) => Some(d),
            Err(e) => {
                self.error("recheck.every", e.to_string());
                None
            }
        };
        let notify = spec.notify.clone().unwrap_or_default();
        let notify_ok = spec.notify.is_none() || self.check_notify(&notify);
        Some(Recheck {
            every: every?,
            notify,
        })
        .filter(|_| notify_ok)
    }

    /// `recheck.notify`: at least the program, at most [`MAX_NOTIFY_ARGS`] words of at most
    /// [`MAX_NOTIFY_ARG_BYTES`] each, no NUL (no word could reach `exec`), a program that is
    /// not empty. Whether it is valid.
    fn check_notify(&mut self, argv: &[String]) -> bool {
        let before = self.diagnostics.len();
        if argv.is_empty() {
            self.error(
                "recheck.notify",
                "`notify` must name a program: a list of at least one word, e.g. [notify-send, optgate]",
            );
        }
        if argv.len() > MAX_NOTIFY_ARGS {
            self.error(
                "recheck.notify",
                format!(
                    "{} words; at most {MAX_NOTIFY_ARGS} (run a script for more)",
                    argv.len()
                ),
            );
        }
        for (i, a) in argv.iter().enumerate().take(MAX_NOTIFY_ARGS) {
            let path = format!("recheck.notify[{i}]");
            if a.contains('\0') {
                self.error(&path, "a word of `notify` cannot hold a NUL byte");
            } else if a.len() > MAX_NOTIFY_ARG_BYTES {
                self.error(
                    &path,
                    format!(
                        "{} is {} bytes; at most {MAX_NOTIFY_ARG_BYTES}",
                        quoted(a),
                        a.len()
                    ),
                );
            } else if i == 0 && a.trim().is_empty() {
                self.error(&path, "the program of `notify` cannot be empty");
            }
        }
        self.diagnostics.len() == before
    }
}
