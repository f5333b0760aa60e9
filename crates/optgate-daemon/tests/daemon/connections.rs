//! The server's per-connection limits, in process: a hello line past its limit is refused
//! with the limit named, and only [`MAX_LARGE_REQUESTS`] long request lines are read at
//! once while a small request is still answered beside them.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio_util::sync::CancellationToken;

use optgate_client::StatePaths;
use optgate_client::protocol::{
    ErrorKind, HelloReply, MAX_HELLO_BYTES, PROTOCOL_VERSION, Response,
};
use optgate_daemon::context::{Backends, Daemon, Db};
use optgate_daemon::server::{MAX_LARGE_REQUESTS, SMALL_REQUEST_BYTES, handle_connection};
use optgate_store::Store;

fn daemon(dir: &std::path::Path) -> Arc<Daemon> {
    let paths = StatePaths::new(dir);
    paths.prepare().unwrap();
    Arc::new(Daemon {
        db: Db::new(Store::open(&paths.db()).unwrap()),
        paths,
        wake: tokio::sync::Notify::new(),
        backends: Backends::new(CancellationToken::new()),
        optgate_bin: "/nonexistent/optgate".into(),
        started_at: "2026-01-01T00:00:00Z".into(),
        shutdown: CancellationToken::new(),
        unreachable_give_up: optgate_daemon::context::UNREACHABLE_GIVE_UP,
        failpoints: Default::default(),
        space: Default::default(),
    })
}

/// A connection served by `ctx`: the client's end, read line by line.
fn connect(ctx: &Arc<Daemon>) -> tokio::io::BufReader<UnixStream> {
    let (server_side, client_side) = UnixStream::pair().unwrap();
    let ctx = ctx.clone();
    let uid = nix::unistd::getuid().as_raw();
    tokio::spawn(async move { handle_connection(server_side, &ctx, uid).await });
    tokio::io::BufReader::new(client_side)
}

async fn read_line(stream: &mut tokio::io::BufReader<UnixStream>) -> String {
    let mut line = String::new();
    stream.read_line(&mut line).await.unwrap();
    line
}

fn hello() -> String {
    format!("{{\"protocol\":{PROTOCOL_VERSION},\"version\":\"t\"}}\n")
}

/// Planted bug caught: a hello read up to the request limit (the reply would be a JSON
/// error about the spaces, not the limit).
#[tokio::test]
async fn a_hello_past_its_limit_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = daemon(dir.path());
    let mut c = connect(&ctx);
    let line = format!("{}\n", " ".repeat(MAX_HELLO_BYTES + 1));
    c.get_mut().write_all(line.as_bytes()).await.unwrap();
    let reply: HelloReply = serde_json::from_str(&read_line(&mut c).await).unwrap();
    match reply {
        HelloReply::Error(e) => {
            assert_eq!(e.kind, ErrorKind::BadRequest);
            assert!(
                e.message.contains("longer than 4096 bytes"),
                "{}",
                e.message
            );
        }
        other => panic!("{other:?}"),
    }
}

/// The daemon's status as a fresh client sees it; a small request, answered beside the
/// long ones.
async fn status_of(ctx: &Arc<Daemon>) -> optgate_client::protocol::StatusReply {
    let mut status = connect(ctx);
    let ask = format!("{}{{\"status\":{{\"id\":null}}}}\n", hello());
    status.get_mut().write_all(ask.as_bytes()).await.unwrap();
    assert!(read_line(&mut status).await.contains("welcome"));
    match serde_json::from_str(&read_line(&mut status).await).unwrap() {
        Response::Status(reply) => reply,
        other => panic!("{other:?}"),
    }
}

/// Waits until the daemon says `n` long requests are being read (their handlers are
/// scheduled as the runtime sees fit: a welcome does not mean the request is being read).
async fn until_reading(ctx: &Arc<Daemon>, n: usize) {
    for _ in 0..3000 {
        if status_of(ctx).await.daemon.long_requests_reading == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never {n} long requests being read");
}

/// 16 clients hold long request lines half-sent: a 17th long one, sent whole, waits for a
/// slot, while a status request is answered at once and counts the 16. When one of the 16
/// finishes, the 17th is answered. Planted bugs caught: no large-request slots (the 17th
/// is answered before any slot frees), slots taken by small requests too (status waits),
/// a slot kept after its request (the count stays at 16).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_so_many_long_requests_are_read_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = daemon(dir.path());
    let head = format!(
        "{}{{\"submit\":{{\"source_path\":\"/x/exp.yaml\",\"source_text\":\"# {}",
        hello(),
        "x".repeat(SMALL_REQUEST_BYTES * 2)
    );
    let tail = "\"}}\n";
    let mut holders = Vec::new();
    for _ in 0..MAX_LARGE_REQUESTS {
        let mut c = connect(&ctx);
        c.get_mut().write_all(head.as_bytes()).await.unwrap();
        assert!(read_line(&mut c).await.contains("welcome"));
        holders.push(c);
    }
    until_reading(&ctx, MAX_LARGE_REQUESTS).await;
    let mut waiting = connect(&ctx);
    let whole = format!("{head}{tail}");
    waiting.get_mut().write_all(whole.as_bytes()).await.unwrap();
    assert!(read_line(&mut waiting).await.contains("welcome"));
    let status = status_of(&ctx).await;
    assert_eq!(status.daemon.long_requests_reading, MAX_LARGE_REQUESTS);

    // Never answered while every slot is held (a bound that can only hide a bug, never
    // fail a correct daemon).
    let early = tokio::time::timeout(Duration::from_millis(500), read_line(&mut waiting)).await;
    assert!(early.is_err(), "answered without a slot: {early:?}");
    let mut first = holders.remove(0);
    first.get_mut().write_all(tail.as_bytes()).await.unwrap();
    let reply: Response = serde_json::from_str(&read_line(&mut first).await).unwrap();
    assert!(matches!(reply, Response::Error(_)), "{reply:?}");
    let reply: Response = serde_json::from_str(&read_line(&mut waiting).await).unwrap();
    match reply {
        Response::Error(e) => assert_eq!(e.kind, ErrorKind::InvalidExperiment, "{e:?}"),
        other => panic!("{other:?}"),
    }
    drop(holders);
    until_reading(&ctx, 0).await;
}
