//! The socket server: accepts connections until `shutdown` is cancelled, and on each one
//! checks the peer's uid, does the handshake, reads one request and answers it. At most
//! [`MAX_CONNECTIONS`] are served at once (more are refused at once), every write has
//! [`WRITE_TIMEOUT`], and at shutdown connections get [`SHUTDOWN_GRACE`] to finish: a
//! client that never reads can neither grow the daemon nor hold up its stop.

use std::os::fd::AsFd;
use std::sync::Arc;

use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use tokio::io::BufReader;
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::context::Daemon;
use crate::handlers;
use crate::protocol::{
    ErrorKind, ErrorReply, FrameError, Hello, HelloReply, MAX_REQUEST_BYTES, PROTOCOL_VERSION,
    REQUEST_TIMEOUT, Request, Response, Welcome, read_frame, write_frame,
};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PeerError {
    #[error("cannot read the peer's credentials: {0}")]
    Unknown(nix::errno::Errno),
    #[error("connection from uid {peer} refused: this daemon serves uid {allowed} only")]
    OtherUser { peer: u32, allowed: u32 },
}

/// Checks with `SO_PEERCRED` that the process at the other end of `socket` runs as
/// `allowed_uid`. The socket directory's 0700 mode already keeps others out; this is the
/// second wall, for a directory made accessible by mistake.
pub fn check_peer(socket: &impl AsFd, allowed_uid: u32) -> Result<(), PeerError> {
    let cred = getsockopt(socket, PeerCredentials).map_err(PeerError::Unknown)?;
    let peer = cred.uid();
    if peer == allowed_uid {
        Ok(())
    } else {
        Err(PeerError::OtherUser {
            peer,
            allowed: allowed_uid,
        })
    }
}

/// Connections served at once: 32. Each holds at most one request line
/// ([`MAX_REQUEST_BYTES`]) and its reply, so this bounds the memory clients can pin; a
/// person's `optgate status` needs one for milliseconds. A connection past the limit gets
/// a one-line refusal (if the socket takes it at once) and is closed.
pub const MAX_CONNECTIONS: usize = 16;
/// How long one reply may take to be written: a client that stops reading is dropped.
pub const WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// How long open connections get to finish once the daemon stops; the rest are dropped.
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Serves `listener` until `shutdown` is cancelled, then gives open connections
/// [`SHUTDOWN_GRACE`] to finish.
pub async fn serve(listener: UnixListener, ctx: Arc<Daemon>, shutdown: CancellationToken) {
    let connections = TaskTracker::new();
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let uid = nix::unistd::getuid().as_raw();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let Ok(slot) = slots.clone().try_acquire_owned() else {
                        refuse_busy(&stream);
                        continue;
                    };
                    let ctx = ctx.clone();
                    connections.spawn(async move {
                        handle_connection(stream, &ctx, uid).await;
                        drop(slot);
                    });
                }
                Err(e) => {
                    // EMFILE and the like: log, breathe, go on.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            },
        }
    }
    connections.close();
    if tokio::time::timeout(SHUTDOWN_GRACE, connections.wait())
        .await
        .is_err()
    {
        tracing::info!(
            "stopping with {} connection(s) still open; they are dropped",
            connections.len()
        );
    }
}

/// Tells a client past [`MAX_CONNECTIONS`] why it is turned away, without waiting for it.
fn refuse_busy(stream: &UnixStream) {
    let reply = HelloReply::Error(ErrorReply::new(
        ErrorKind::Busy,
        format!(
            "the daemon is serving {MAX_CONNECTIONS} connections, its limit; try again in a moment"
        ),
    ));
    if let Ok(mut line) = serde_json::to_vec(&reply) {
        line.push(b'\n');
        let _ = stream.try_write(&line);
    }
    tracing::warn!("refused a connection: {MAX_CONNECTIONS} are open");
}

/// [`write_frame`] within [`WRITE_TIMEOUT`].
async fn write_timed<T: serde::Serialize>(
    w: &mut tokio::net::unix::OwnedWriteHalf,
    msg: &T,
) -> Result<(), String> {
    match tokio::time::timeout(WRITE_TIMEOUT, write_frame(w, msg)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!(
            "the client read nothing for {} s; dropped",
            WRITE_TIMEOUT.as_secs()
        )),
    }
}

/// One connection: peer check, handshake, one request, one response.
pub async fn handle_connection(stream: UnixStream, ctx: &Daemon, allowed_uid: u32) {
    if let Err(e) = check_peer(&stream, allowed_uid) {
        tracing::warn!("{e}");
        let (_, mut w) = stream.into_split();
        let reply = HelloReply::Error(ErrorReply::new(ErrorKind::Refused, e.to_string()));
        let _ = write_timed(&mut w, &reply).await;
        return;
    }
    let (r, mut w) = stream.into_split();
    let mut r = BufReader::new(r);
    let hello: Hello = match read_timed(&mut r).await {
        Ok(h) => h,
        Err(e) => {
            let reply = HelloReply::Error(ErrorReply::new(ErrorKind::BadRequest, e));
            let _ = write_timed(&mut w, &reply).await;
            return;
        }
    };
    if hello.protocol != PROTOCOL_VERSION {
        let reply = HelloReply::Error(ErrorReply::new(
            ErrorKind::BadRequest,
            format!(
                "this daemon (optgate {}) speaks protocol {PROTOCOL_VERSION}, the client (optgate {}) speaks {}; restart the daemon with the same optgate as the client",
                env!("CARGO_PKG_VERSION"),
                hello.version,
                hello.protocol
            ),
        ));
        let _ = write_timed(&mut w, &reply).await;
        return;
    }
    let welcome = HelloReply::Welcome(Welcome {
        protocol: PROTOCOL_VERSION,
        version: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
        state_dir: ctx.paths.dir.clone(),
    });
    if write_timed(&mut w, &welcome).await.is_err() {
        return;
    }
    let request = read_timed::<Request, _>(&mut r).await;
    // The request line's buffer (up to 1 MiB) is not kept while the reply is written.
    drop(r);
    let response = match request {
        Ok(request) => handlers::dispatch(ctx, request).await,
        // A client that only checks whether the daemon is up closes after the welcome.
        Err(e) if e == CLOSED => return,
        Err(e) => Response::Error(ErrorReply::new(ErrorKind::BadRequest, e)),
    };
    if let Err(e) = write_timed(&mut w, &response).await {
        tracing::debug!("cannot answer a client: {e}");
    }
}

const CLOSED: &str = "the client closed the connection";

/// Reads one frame within [`REQUEST_TIMEOUT`]; the error is the message for the client.
async fn read_timed<T, R>(r: &mut R) -> Result<T, String>
where
    T: serde::de::DeserializeOwned,
    R: tokio::io::AsyncBufRead + Unpin,
{
    match tokio::time::timeout(REQUEST_TIMEOUT, read_frame::<T, _>(r, MAX_REQUEST_BYTES)).await {
        Err(_) => Err(format!(
            "no complete request within {} s",
            REQUEST_TIMEOUT.as_secs()
        )),
        Ok(Err(FrameError::Closed)) => Err(CLOSED.to_string()),
        Ok(Err(e)) => Err(format!("bad request: {e}")),
        Ok(Ok(v)) => Ok(v),
    }
}
