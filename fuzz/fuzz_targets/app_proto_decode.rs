//! Fuzzes the application-protocol decoder (node side and client side): any frame body gives a message or a typed
//! error, never a panic; a decoded message re-encodes to a frame that decodes to the same message.
#![no_main]

use client::bytes::Bytes;
use client::proto::{Request, Response};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let body = Bytes::copy_from_slice(data);
    if let Ok(req) = Request::decode(&body) {
        let frame = req.encode();
        assert_eq!(
            Request::decode(&frame.slice(4..)).expect("own output decodes"),
            req
        );
    }
    if let Ok(resp) = Response::decode(&body) {
        let frame = resp.encode();
        assert_eq!(
            Response::decode(&frame.slice(4..)).expect("own output decodes"),
            resp
        );
    }
});
