//! A fake Hugging Face Hub: the HTTP API that the official `huggingface_hub` client uses to
//! create a dataset repository and commit files without Xet (preupload, LFS batch with basic and
//! multipart transfers, verify, NDJSON commit), and the read side that `huggingface_hub` and
//! `datasets` use to load it back (repository info, tree listing, paths info, `resolve` with
//! ranges). It checks what a client sends as the Hub would: the token on API calls and never on
//! storage URLs, LFS content types, every uploaded object's size and SHA-256, multipart ETags,
//! and that a commit names only objects it holds. Requests are logged in order, and every
//! violation is recorded in [`FakeHub::problems`] besides being refused.
//!
//! Shapes follow `huggingface_hub` 2.x (`_commit_api.py`, `lfs.py`, `hf_api.py`), which the
//! fake is checked with (`scripts/hub-check.py`).
//!
//! The modules: `fake` (the server and what tests set and read) over `routes` (which handler
//! answers a request), the handlers `upload` (create, card check, preupload, commit), `lfs`
//! (the LFS API and the storage side) and `read` (information, trees, paths info, resolve),
//! and below them `model` (what the fake holds), `hostile` (the hostile modes) and `wire`
//! (ids, hashes, error answers, ranges, escapes).

mod fake;
mod hostile;
mod lfs;
mod model;
mod read;
mod routes;
mod upload;
mod wire;

pub use fake::FakeHub;
pub use hostile::Hostile;
pub use model::{HubCommit, HubRequest};
