//! optgate-client: what `optgate` needs to talk to its daemon, or to read the daemon's
//! database while none runs, without the engine: the state directory, the socket protocol,
//! the blocking client, and the read-only answers the daemon gives from its database.
//!
//! Code map: [`paths`] (the state directory: layout and checks), [`protocol`] (the
//! socket's messages and the line codec), [`client`] (connect, handshake, one call;
//! `call_or_read`; starting the daemon in the background), [`answers`] (`status` and
//! `report` from the database: the daemon's handlers and a stopped daemon's reader share
//! them), [`history`] (an experiment's history read back with its change points),
//! [`space`] (what a lack of space is), [`error`].
//!
//! Invariants: nothing here writes the database or depends on `optgate-daemon`; the
//! state directory is checked before anything in it is opened.

pub mod answers;
pub mod client;
pub mod error;
pub mod history;
pub mod paths;
pub mod protocol;
pub mod space;

pub use error::{ClientError, PathsError, ReadError};
pub use paths::StatePaths;
