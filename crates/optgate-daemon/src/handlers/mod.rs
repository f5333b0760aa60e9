//! One handler per request; [`dispatch`] is the single match from request to handler.

pub mod campaign;
pub mod cancel;
pub mod cancelling;
pub mod precheck;
pub mod report;
mod shutdown;
pub mod status;
pub mod submit;

use optgate_client::protocol::{ErrorKind, ErrorReply, Request, Response};

use crate::context::Daemon;
use crate::error::DaemonError;

pub async fn dispatch(ctx: &Daemon, request: Request) -> Response {
    let result = match request {
        Request::Submit(r) => submit::submit(ctx, r).await,
        Request::Status(r) => status::status(ctx, r).await,
        Request::Report(r) => report::report(ctx, r).await,
        Request::Cancel(r) => cancel::cancel(ctx, r).await,
        Request::Shutdown(r) => shutdown::shutdown(ctx, r).await,
    };
    result.unwrap_or_else(|e| {
        tracing::error!("request failed: {e}");
        Response::Error(ErrorReply::new(ErrorKind::Internal, e.to_string()))
    })
}

pub(crate) type HandlerResult = Result<Response, DaemonError>;
