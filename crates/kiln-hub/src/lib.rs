//! Uploads to a Hugging Face Hub dataset repository over the Hub's HTTP API, as the official
//! `huggingface_hub` client does it without Xet:
//!
//! 1. `POST /api/repos/create` (409: the repository exists, which is fine);
//! 2. `POST /api/datasets/{repo}/preupload/{rev}`: which files go through LFS, and the id of
//!    the file the Hub holds at that path (a file whose id equals the local one is unchanged and
//!    left out of the commit);
//! 3. `POST /datasets/{repo}.git/info/lfs/objects/batch`: upload actions for the LFS objects the
//!    Hub does not hold yet (an object it holds comes back without actions, so an interrupted
//!    push resumes where it stopped), then one `PUT` per object, or one per part and a
//!    completion `POST` when the Hub asks for multipart, and the `verify` call it names;
//! 4. `POST /api/datasets/{repo}/commit/{rev}` with every file in one NDJSON body: one commit.
//!
//! Requests that fail with a dropped connection, a 429 or a 5xx are retried, honouring
//! `Retry-After`. The token is sent as `Authorization: Bearer` to the Hub's own API only, never
//! to the storage URLs the Hub hands out, and never appears in an error.
//!
//! Every answer is read up to a cap, a listing's pages together up to a budget of entries and
//! bytes ([`ListingBudget`]), and what the Hub sent appears in an error only as a short quote
//! of its head and tail (`kiln_core::net::quote`).
//!
//! The modules: `client` ([`Hub`]: settings, retries, capped answers) under the calls of
//! `repo` (card check, creation, revisions, listings) and `upload` (preupload, LFS, commit);
//! below them `content` (a file's bytes, hashes and ranges), `listing` (entries and budgets),
//! `http` (caps, deadlines, messages, links, origins), `names` (repository ids, revisions,
//! paths), `env` and `error`.

mod client;
mod content;
mod env;
mod error;
mod http;
mod listing;
mod names;
mod repo;
mod upload;

pub use client::Hub;
pub use content::{Content, Upload};
pub use env::{DEFAULT_ENDPOINT, endpoint_from_env, token_from_env};
pub use error::HubError;
pub use listing::{ListingBudget, TreeEntry};
pub use names::valid_path;
pub use upload::{CommitPlan, Outcome};
