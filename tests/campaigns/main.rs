//! Campaigns through the real binary: in the foreground and through the daemon.

mod common;
#[path = "../support/mod.rs"]
mod support;
use common as campaign_common;

mod daemon;
mod foreground;
