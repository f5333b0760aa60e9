//! The socket server: accepts connections until `shutdown` is cancelled, and on each one
//! checks the peer's uid, does the handshake, reads one request and answers it. At most
//! [`MAX_CONNECTIONS`] are open at once (more are refused at once); a connection that has
//! not sent its hello within [`HANDSHAKE_TIMEOUT`] or its request within [`REQUEST_TIMEOUT`]
//! is dropped; only a request line longer than [`SMALL_REQUEST_BYTES`] (a submit) needs one
//! of [`MAX_LARGE_REQUESTS`] slots to be read on. So silent or trickling clients hold
//! cheap connections, never what `optgate status` needs. Every write has
//! [`WRITE_TIMEOUT`], and at shutdown connections get [`SHUTDOWN_GRACE`] to finish: a
//! client that never reads can neither grow the daemon nor hold up its stop.

use std::os::fd::AsFd;
use std::sync::Arc;

use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use tokio::io::BufReader;
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use optgate_client::protocol::{
    ErrorKind, ErrorReply, FrameError, HANDSHAKE_TIMEOUT, Hello, HelloReply, LineRead,
    MAX_HELLO_BYTES, MAX_REQUEST_BYTES, PROTOCOL_VERSION, REQUEST_TIMEOUT, Request, Response,
    Welcome, parse_frame, read_line_upto, write_frame,
};

use crate::context::Daemon;
use crate::handlers;

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

/// Connections open at once: 256. Until its hello and request are read, a connection
/// holds a socket and at most [`SMALL_REQUEST_BYTES`] of request (plus one of
/// [`MAX_LARGE_REQUESTS`] for a longer one), and it is dropped after
/// [`HANDSHAKE_TIMEOUT`] + [`REQUEST_TIMEOUT`] at most: 100 silent and 100 trickling
/// clients leave room for `optgate status`. Well under the usual limit of 1024 open files.
/// A connection past the limit gets a one-line refusal (if the socket takes it at once)
/// and is closed.
pub const MAX_CONNECTIONS: usize = 256;
/// A request line up to this size is read without a large-request slot: every request but
/// `submit` is a few hundred bytes, and most experiment files fit too.
pub const SMALL_REQUEST_BYTES: usize = 64 * 1024;
pub use crate::large_requests::MAX_LARGE_REQUESTS;
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
            "the daemon has {MAX_CONNECTIONS} connections open, its limit; try again in a moment"
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
    let hello: Hello = match read_hello(&mut r).await {
        Ok(h) => h,
        Err(e) if e == CLOSED => return,
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
    let request = read_request(&mut r).await;
    // The request line's buffer (up to 1 MiB) is not kept while the reply is written.
    drop(r);
    let response = match request {
        // A large request keeps its slot while it is handled: its text lives until then.
        Ok((request, _slot)) => handlers::dispatch(ctx, request).await,
        // A client that only checks whether the daemon is up closes after the welcome.
        Err(e) if e == CLOSED => return,
        Err(e) => Response::Error(ErrorReply::new(ErrorKind::BadRequest, e)),
    };
    if let Err(e) = write_timed(&mut w, &response).await {
        tracing::debug!("cannot answer a client: {e}");
    }
}

const CLOSED: &str = "the client closed the connection";

/// Reads the hello line: at most [`MAX_HELLO_BYTES`], whole within [`HANDSHAKE_TIMEOUT`]
/// of the accept (a client sending a byte now and then is dropped as a silent one is).
async fn read_hello<R>(r: &mut R) -> Result<Hello, String>
where
    R: tokio::io::AsyncBufRead + Unpin,
{
    let mut buf = Vec::new();
    let read = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        read_line_upto(r, &mut buf, MAX_HELLO_BYTES),
    )
    .await;
    match read {
        Err(_) => Err(format!(
            "no complete hello within {} s",
            HANDSHAKE_TIMEOUT.as_secs()
        )),
        Ok(Err(e)) => Err(format!("bad hello: {e}")),
        Ok(Ok(LineRead::Closed)) => Err(CLOSED.to_string()),
        Ok(Ok(LineRead::Longer)) => Err(format!(
            "bad hello: {}",
            FrameError::TooLarge {
                limit: MAX_HELLO_BYTES
            }
        )),
        Ok(Ok(LineRead::Whole)) => parse_frame(&buf).map_err(|e| format!("bad hello: {e}")),
    }
}

/// Reads the request line within [`REQUEST_TIMEOUT`]: its first [`SMALL_REQUEST_BYTES`]
/// freely, the rest (up to [`MAX_REQUEST_BYTES`]) holding a large-request slot, returned
/// with the request for the caller to keep while it handles it. The error is the message
/// for the client.
async fn read_request<R>(
    r: &mut R,
) -> Result<(Request, Option<tokio::sync::SemaphorePermit<'static>>), String>
where
    R: tokio::io::AsyncBufRead + Unpin,
{
    let read = async {
        let mut buf = Vec::new();
        let mut read = read_line_upto(r, &mut buf, SMALL_REQUEST_BYTES).await?;
        let slot = if read == LineRead::Longer {
            let slot = crate::large_requests::take().await;
            read = read_line_upto(r, &mut buf, MAX_REQUEST_BYTES).await?;
            slot
        } else {
            None
        };
        match read {
            LineRead::Whole => parse_frame::<Request>(&buf).map(|request| (request, slot)),
            LineRead::Longer => Err(FrameError::TooLarge {
                limit: MAX_REQUEST_BYTES,
            }),
            LineRead::Closed => Err(FrameError::Closed),
        }
    };
    match tokio::time::timeout(REQUEST_TIMEOUT, read).await {
        Err(_) => Err(format!(
            "no complete request within {} s",
            REQUEST_TIMEOUT.as_secs()
        )),
        Ok(Err(FrameError::Closed)) => Err(CLOSED.to_string()),
        Ok(Err(e)) => Err(format!("bad request: {e}")),
        Ok(Ok(v)) => Ok(v),
    }
}
