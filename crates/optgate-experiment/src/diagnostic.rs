//! A problem found in an experiment file, with the place it is at: printed as
//! `file:line:column: error: sentence`, the form editors and terminals link to.

use std::fmt;
use std::path::PathBuf;

use crate::yaml::Location;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    pub file: PathBuf,
    pub line: Option<usize>,
    pub column: Option<usize>,
    /// The YAML path of the offending node, e.g. `variants[2].env`.
    pub path: String,
    pub message: String,
}

impl Diagnostic {
    pub fn new(
        severity: Severity,
        file: PathBuf,
        location: Option<Location>,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic {
            severity,
            file,
            line: location.map(|l| l.line),
            column: location.map(|l| l.column),
            path: path.into(),
            message: crate::limits::cut_message(&message.into()),
        }
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let (Some(l), Some(c)) = (self.line, self.column) {
            write!(f, ":{l}:{c}")?;
        }
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, ": {sev}: {}", self.message)?;
        if !self.path.is_empty() {
            let shown = crate::limits::cut_at(&self.path, crate::limits::MAX_PATH_SHOWN);
            write!(f, " (at `{shown}`)")?;
        }
        Ok(())
    }
}
