//! optgate-daemon's integration tests, one module per area.

mod connections;
mod engine_loop;
mod protocol_replay;
mod server;
