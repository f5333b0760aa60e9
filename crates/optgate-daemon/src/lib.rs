//! optgate-daemon: the long-running daemon that takes submitted experiments through their
//! builds, scheduler jobs, looks and decisions, serving `optgate` over a Unix socket. The
//! socket's protocol, the client, the state directory and the read-only answers are
//! `optgate-client`'s, which this crate uses (never the other way round).
//!
//! Code map: [`server`] (accept, peer check, handshake), [`handlers`] (one per request),
//! [`engine`] (the state machine and polling), [`reconcile`] (what crash repair does,
//! decided purely), [`recheck`] (recurring re-checks: due times, flips, the notify summary,
//! decided purely), [`notify`] (the notify command, run bounded), [`look`] (a look: data
//! in, decision out), [`jobplan`] (jobs for pending runs, outcomes of ended jobs), the
//! decision policy is `optgate-policy`, [`work`] (an experiment as the engine sees it),
//! [`foreground`] (the engine in `optgate run`'s own process), [`history`] (each ended
//! execution recorded), [`lifecycle`] (lock, socket, signals).
//!
//! Invariants: backends never touch the database; the database is written only through
//! `optgate-store`, one transaction per state change, committed before the change is acted
//! on; run outcomes come from run manifests, never from the scheduler's memory.

pub mod context;
pub mod engine;
pub mod error;
pub mod failpoint;
pub mod foreground;
pub mod foreground_setup;
pub mod handlers;
pub mod history;
pub mod ids;
pub mod jobplan;
pub mod large_requests;
pub mod lifecycle;
pub mod look;
pub mod no_space;
pub mod notify;
pub mod orphans;
pub mod recheck;
pub mod reconcile;
pub mod server;
pub mod space;
pub mod supervise;
pub mod work;

pub use error::DaemonError;
