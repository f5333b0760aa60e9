//! `status`: the reply from the database (`optgate_client::answers::status`), with the
//! pause a full state directory puts on every active experiment, which only the running
//! engine knows.

use optgate_client::answers::status::answer;
use optgate_client::protocol::{Response, StatusRequest};

use super::HandlerResult;
use crate::context::Daemon;

pub async fn status(ctx: &Daemon, req: StatusRequest) -> HandlerResult {
    let info = ctx.info();
    let mut reply = ctx.db.call(move |s| answer(s, req, info)).await?;
    // A full state directory pauses every active experiment; the database may not hold
    // the reason (it cannot be written), the engine's watch does. (A full workdir's
    // reason is on its experiment in the database.)
    if let (Some((_, lack)), Response::Status(r)) = (ctx.space.now(), &mut reply)
        && lack.place == optgate_client::space::Place::StateDir
    {
        for e in r.experiments.iter_mut().filter(|e| !e.state.is_terminal()) {
            e.reason = Some(lack.paused());
        }
    }
    Ok(reply)
}
