//! `optgate status [ID] [--limit N | --all] [--watch] [--json]`: where the newest
//! experiments (or one) stand. The JSON is the daemon's `StatusReply`, a documented,
//! stable interface. `--watch` redraws until the experiments shown have ended (JSON: one
//! object per line per refresh).

use std::io::{IsTerminal, Write};
use std::time::Duration;

use anyhow::Result;

use optgate_client::client;
use optgate_client::protocol::{Request, Response, StatusReply, StatusRequest};

use super::daemon_client::{client_error, state_paths};
use crate::exit;

const WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// How many experiments `optgate status` lists unless told (`--limit N`, `--all`): a
/// screenful, newest first, so the list costs the same with ten or ten thousand
/// experiments in the database; the rest are counted below the table.
pub const STATUS_PAGE: u32 = 50;

/// One status request (`limit`: the newest so many experiments, all with `None`).
pub fn fetch(id: Option<&str>, limit: Option<u32>) -> Result<StatusReply> {
    let paths = state_paths()?;
    let request = Request::Status(StatusRequest {
        id: id.map(str::to_string),
        limit,
    });
    let (reply, source) = client::call_or_read(&paths, &request).map_err(client_error)?;
    say_if_offline(source);
    match reply {
        Response::Status(s) => Ok(s),
        other => Err(anyhow::anyhow!(
            "the daemon answered {other:?} to a status request"
        )),
    }
}

/// One line on stderr when the answer comes from a stopped daemon's database.
pub fn say_if_offline(source: client::Source) {
    if source == client::Source::Database {
        errln!(
            "optgate: the daemon is not running; this is its database as it left it \
             (start it with `optgate daemon` to go on)"
        );
    }
}

pub fn status(id: Option<&str>, limit: Option<u32>, watch: bool, json: bool) -> Result<i32> {
    let tty = std::io::stdout().is_terminal();
    let mut last = String::new();
    loop {
        let reply = fetch(id, limit)?;
        let text = if json {
            if watch {
                serde_json::to_string(&reply)? + "\n"
            } else {
                serde_json::to_string_pretty(&reply)? + "\n"
            }
        } else {
            // Reasons and a notify command's stderr come from outside: control characters
            // shown escaped, never sent to the terminal (JSON escapes them itself).
            optgate_report::terminal::for_terminal(&super::status_text::render(
                &reply,
                id.is_some(),
            ))
            .into_owned()
        };
        let mut out = std::io::stdout().lock();
        if !watch {
            out.write_all(text.as_bytes())?;
            return Ok(exit::OK);
        }
        if text != last {
            if tty && !json {
                // Redraw in place: clear the screen, cursor home.
                out.write_all(b"\x1b[2J\x1b[H")?;
            }
            out.write_all(text.as_bytes())?;
            out.flush()?;
            last = text;
        }
        drop(out);
        // pid 0: the answer came from a stopped daemon's database; nothing will change it.
        let campaigns_ended = reply
            .campaigns
            .iter()
            .all(|c| c.state != optgate_store::CampaignState::Running);
        if reply.daemon.pid == 0
            || (campaigns_ended && reply.experiments.iter().all(|e| e.state.is_terminal()))
        {
            return Ok(exit::OK);
        }
        std::thread::sleep(WATCH_INTERVAL);
    }
}
