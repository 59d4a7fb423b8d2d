//! The stages, one module per kind. Each reads its inputs from the run store, processes the
//! items still missing and appends rows as they finish; this module holds what they share.

mod containers;
mod context;
mod crawl;
pub(crate) mod export;
mod filter;
mod ingest;
pub(crate) mod launch;
mod reuse;
mod split;
mod validate;

pub(crate) use crawl::crawl;
pub(crate) use export::export;
pub(crate) use filter::filter;
pub(crate) use ingest::ingest;
pub(crate) use launch::launch;
pub(crate) use split::split;
pub(crate) use validate::validate;

pub use context::StageOutcome;
pub(crate) use context::{StageContext, WALL_SECONDS};
