//! What operates on runs and releases beside the DAG, one module per `kiln` command: `gc`
//! (environment images no release or kept run names), `deploy` (Slurm and Kubernetes
//! submission files), `publish` (`kiln push`: images to their registry, the release to the Hub),
//! `rebuild` (`kiln check-images --rebuild`: each row's Dockerfile built and evaluated), `report`
//! (a run on one HTML page), `merge` (shard runs joined into one), `images` (`kiln
//! check-images`: every image a release names, with its digest), `evaluate` (predicted patches
//! graded on a release).

pub mod deploy;
pub mod evaluate;
pub mod gc;
pub mod images;
pub mod merge;
pub mod publish;
pub mod rebuild;
pub mod report;
