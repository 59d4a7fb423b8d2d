//! A hostile or broken Hub: every request answered with a listing that loops or never ends,
//! a huge body, or a drip, to check that kiln's client gives up within its bounds.

use serde_json::{Value, json};

use crate::http::Reply;

/// How a hostile or broken Hub answers every request
/// ([`FakeHub::turn_hostile`](super::FakeHub::turn_hostile)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hostile {
    /// An empty listing page whose `next` link is the page itself.
    LoopingPages,
    /// A 200 answer of this many bytes.
    Huge(usize),
    /// A 400 answer of this many bytes.
    HugeError(usize),
    /// Headers at once, then one body byte every this many milliseconds.
    Drip(u64),
    /// Listing pages that do not end: every answer is a page of `entries` files, each path
    /// `path_bytes` long, whose `next` link names a cursor no page named before, up to page
    /// `pages`, which names none (so that a client without a budget ends too, and its test
    /// fails instead of running out of memory).
    EndlessPages {
        /// Entries per page.
        entries: usize,
        /// Bytes per path.
        path_bytes: usize,
        /// The page that ends the listing.
        pages: usize,
    },
    /// A 200 JSON object of this many bytes (one long string) holding none of the fields kiln
    /// reads (`sha`, `files`, `objects`, `commitOid`); its body is made as it is read.
    HugeJson(usize),
}

/// The hostile answer to a request for `target` (path and query) on `base`, the `number`th
/// request the fake answers (from 0).
pub(super) fn hostile_reply(mode: Hostile, base: &str, target: &str, number: usize) -> Reply {
    match mode {
        Hostile::LoopingPages => Reply::json(200, &json!([]))
            .with_header("link", format!("<{base}{target}>; rel=\"next\"")),
        Hostile::EndlessPages {
            entries,
            path_bytes,
            pages,
        } => {
            let page: Vec<Value> = (0..entries)
                .map(|i| {
                    let name = format!("page-{number}/file-{i}-");
                    let pad = "x".repeat(path_bytes.saturating_sub(name.len()));
                    json!({"type": "file", "oid": "0", "size": 1, "path": format!("{name}{pad}")})
                })
                .collect();
            let reply = Reply::json(200, &Value::Array(page));
            if number + 1 >= pages {
                return reply;
            }
            let path = target.split_once('?').map_or(target, |(path, _)| path);
            reply.with_header(
                "link",
                format!("<{base}{path}?recursive=true&cursor=c{number}>; rel=\"next\""),
            )
        }
        Hostile::HugeJson(n) => {
            let (head, tail) = ("{\"padding\":\"", "\"}");
            Reply::Stream {
                status: 200,
                headers: vec![("content-type".into(), "application/json".into())],
                head: head.into(),
                fill: b'x',
                fill_len: n.saturating_sub(head.len() + tail.len()),
                tail: tail.into(),
                announced: true,
            }
        }
        Hostile::Huge(n) => {
            Reply::bytes(200, vec![b'x'; n]).with_header("content-type", "application/json")
        }
        Hostile::HugeError(n) => {
            Reply::bytes(400, vec![b'x'; n]).with_header("content-type", "application/json")
        }
        Hostile::Drip(every) => Reply::Drip {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: vec![b' '; 1000].into(),
            every: std::time::Duration::from_millis(every),
        },
    }
}
