//! The daemon's protocol decoder on any bytes, as the server reads a connection:
//! `read_frame::<Hello>` then `read_frame::<Request>` from the same buffered stream, with
//! the real line limit; a `submit` request's experiment text then goes through the
//! validation the `submit` handler does first (`load_str`, `Plan::for_experiment`). The
//! client's side is decoded too (`HelloReply`, then `Response`). Nothing may panic.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use optgate_client::protocol::{
    Hello, HelloReply, MAX_REPLY_BYTES, MAX_REQUEST_BYTES, Request, Response, read_frame,
};
use optgate_experiment::{Plan, load_str};
use tokio::io::BufReader;
use tokio::runtime::Runtime;

fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    })
}

fuzz_target!(|data: &[u8]| {
    runtime().block_on(async {
        // The daemon's side.
        let mut r = BufReader::new(data);
        if read_frame::<Hello, _>(&mut r, MAX_REQUEST_BYTES)
            .await
            .is_ok()
        {
            match read_frame::<Request, _>(&mut r, MAX_REQUEST_BYTES).await {
                Ok(Request::Submit(s)) => {
                    if let Ok(loaded) = load_str(&s.source_text, &s.source_path) {
                        let _ = Plan::for_experiment(&loaded.experiment).runs();
                    }
                }
                Ok(other) => {
                    let _ = serde_json::to_string(&other).unwrap();
                }
                Err(e) => {
                    let _ = e.to_string();
                }
            }
        }
        // The client's side.
        let mut r = BufReader::new(data);
        if read_frame::<HelloReply, _>(&mut r, MAX_REQUEST_BYTES)
            .await
            .is_ok()
        {
            if let Err(e) = read_frame::<Response, _>(&mut r, MAX_REPLY_BYTES).await {
                let _ = e.to_string();
            }
        }
    });
});
