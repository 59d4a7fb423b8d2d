//! `kiln deploy`: write the job that runs a split run on Slurm or Kubernetes.

use std::path::{Path, PathBuf};

use kiln_pipeline::ops::deploy::{K8sJob, SlurmJob, k8s_manifests, slurm_script};

use super::Context;
use crate::cli::{DeployArgs, DeployCommon, DeployEngine};
use crate::common::load;
use crate::exit;
use crate::failure::Failure;

/// Writes the job to --output or standard output.
pub fn run(args: DeployArgs, cx: &Context) -> Result<u8, Failure> {
    let pipeline = load(&cx.config)?;
    let (common, text) = match &args.engine {
        DeployEngine::Slurm(slurm) => {
            let config = job_config(&slurm.common, &cx.config)?;
            let kiln = match &slurm.kiln {
                Some(path) => path.clone(),
                None => std::env::current_exe().map_err(|e| {
                    Failure::new(exit::INPUT, format!("failed to find this kiln binary: {e}"))
                })?,
            };
            let text = slurm_script(
                &pipeline,
                &SlurmJob {
                    shards: shards(&slurm.common)?,
                    kiln: &kiln,
                    config: &config,
                    partition: slurm.partition.as_deref(),
                    time: &slurm.time,
                    at_once: slurm.at_once,
                    docker_host: slurm.docker_host.as_deref(),
                    cpus: slurm.cpus,
                    memory: slurm.mem,
                },
            );
            (&slurm.common, text)
        }
        DeployEngine::K8s(k8s) => {
            let config = job_config(&k8s.common, &cx.config)?;
            if !pipeline.home_root().starts_with(&k8s.mount) {
                eprintln!(
                    "warning: the config's dataset root {} is not under the volume's mount {}: \
                     the shards would not share it",
                    pipeline.home_root().display(),
                    k8s.mount.display()
                );
            }
            if pipeline.docker.registry.is_none() {
                eprintln!(
                    "warning: [docker] registry is not set: each pod's images live in its own \
                     engine and go with it, so the merge cannot export them; set a registry the \
                     pods can push to"
                );
            }
            let text = k8s_manifests(
                &pipeline,
                &K8sJob {
                    shards: shards(&k8s.common)?,
                    image: &k8s.image,
                    config: &config,
                    volume_claim: &k8s.volume_claim,
                    mount: &k8s.mount,
                    name: &k8s.name,
                    retries: k8s.retries,
                },
            );
            (&k8s.common, text)
        }
    };
    match &common.output {
        Some(path) => {
            std::fs::write(path, text).map_err(|e| {
                Failure::new(
                    exit::STORE,
                    format!("failed to write {}: {e}", path.display()),
                )
            })?;
            eprintln!("wrote {}", path.display());
        }
        None => print!("{text}"),
    }
    Ok(exit::OK)
}

fn shards(common: &DeployCommon) -> Result<u32, Failure> {
    kiln_core::config::ShardId::new(0, common.shards)
        .map(|id| id.count)
        .map_err(|e| Failure::new(exit::USAGE, format!("failed to read --shards: {e}")))
}

/// The config path the jobs run: --job-config, else --config made absolute.
fn job_config(common: &DeployCommon, config: &Path) -> Result<PathBuf, Failure> {
    match &common.job_config {
        Some(path) => Ok(path.clone()),
        None => std::path::absolute(config).map_err(|e| {
            Failure::new(
                exit::INPUT,
                format!("failed to resolve {}: {e}", config.display()),
            )
        }),
    }
}
