//! Data-driven parser tests over real captured logs in `tests/data/<format>/`.

mod api;
mod cargo;
mod check;
mod cxx;
mod go;
mod js;
mod junit;
mod node;
mod pytest;
mod tap;
mod unittest;
