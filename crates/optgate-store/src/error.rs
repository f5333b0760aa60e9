//! What can go wrong with the database, each error naming the file and the operation, with
//! the cases a person must act on (corrupt file, newer version, full disk) told apart.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot {op} (database {path}): {source}")]
    Sqlite {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error(
        "cannot {op}: the database {path} or its disk is full; the change was rolled back and the database is unchanged ({source})"
    )]
    Full {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error(
        "{path} is not an optgate database or is corrupt ({detail}); move it aside to start with an empty one (run directories are not affected)"
    )]
    Corrupt { path: PathBuf, detail: String },
    #[error(
        "{path} was written by a newer optgate (schema version {found}; this optgate knows versions up to {supported}); it was left untouched. Use the newer optgate, or set OPTGATE_HOME to another directory"
    )]
    TooNew {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error("cannot {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "database {path}: experiment {experiment} names the scheduler kind `{value}`, which is none of local, slurm, flux: the row is damaged"
    )]
    UnknownSchedulerKind {
        path: PathBuf,
        experiment: String,
        value: String,
    },
    #[error("database {path}: {what} holds `{value}`, which this optgate does not know")]
    BadValue {
        path: PathBuf,
        what: &'static str,
        value: String,
    },
}

impl StoreError {
    /// Classifies a SQLite error of operation `op` on the database at `path`.
    pub(crate) fn from_sqlite(op: &'static str, path: PathBuf, source: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode;
        match source.sqlite_error_code() {
            Some(ErrorCode::DiskFull) => StoreError::Full { op, path, source },
            Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => StoreError::Corrupt {
                path,
                detail: source.to_string(),
            },
            _ => StoreError::Sqlite { op, path, source },
        }
    }
}
