//! `kiln deploy`: the jobs that run a split run on the cluster engines users already have. kiln
//! schedules nothing itself: the engine places the shards and retries them, and each shard is
//! `kiln run --shard auto` under the shared dataset root.
//!
//! Resources asked for a task come from the config: the larger of launch's and validate's
//! concurrency times `[docker] cpus` and `[docker] memory`, plus one CPU and 1 GiB for kiln
//! itself. The containers run under the node's engine, not inside the task's allocation, so
//! these figures are what the scheduler should reserve, not a limit it enforces.

use std::fmt::Write as _;
use std::path::Path;

use kiln_core::config::{NodeSettings, Pipeline, SHARD_COUNT_ENV, shard_set_dir};

/// Exit codes a retry cannot mend (usage, config, input): a Kubernetes pod that ends with one
/// fails its index at once instead of being retried.
pub const NOT_RETRIED: [u8; 3] = [2, 3, 6];

/// CPUs and memory (bytes) one shard's task should reserve.
#[must_use]
pub fn task_resources(pipeline: &Pipeline) -> (u32, i64) {
    let concurrency = pipeline
        .nodes
        .iter()
        .filter_map(|n| match &n.settings {
            NodeSettings::Launch(s) => Some(s.concurrency),
            NodeSettings::Validate(s) => Some(s.concurrency),
            _ => None,
        })
        .max()
        .unwrap_or(1)
        .max(1);
    let cpus = (concurrency as f64 * pipeline.docker.cpus).ceil() as u32 + 1;
    let memory = concurrency.saturating_mul(pipeline.docker.memory_bytes) + (1 << 30);
    (cpus, memory)
}

fn mebibytes(bytes: i64) -> i64 {
    (bytes + (1 << 20) - 1) >> 20
}

/// Quotes `text` for a POSIX shell.
fn shell_quote(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-:=@%+,".contains(c))
    {
        return text.to_string();
    }
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// What a Slurm submission needs besides the pipeline.
#[derive(Debug, Clone)]
pub struct SlurmJob<'a> {
    /// Shards.
    pub shards: u32,
    /// The kiln binary on the nodes.
    pub kiln: &'a Path,
    /// The config as the nodes see it.
    pub config: &'a Path,
    /// Partition, when not the default.
    pub partition: Option<&'a str>,
    /// Time limit of a task.
    pub time: &'a str,
    /// Tasks at once (`%K`).
    pub at_once: Option<u32>,
    /// DOCKER_HOST for the tasks.
    pub docker_host: Option<&'a str>,
    /// CPUs and memory (bytes) a task reserves, where not the config's estimate.
    pub cpus: Option<u32>,
    /// Memory in bytes.
    pub memory: Option<i64>,
}

/// A bash script that submits the array of shards and the merge that waits for it
/// (`--dependency=afterany`, so a failed shard still lets the merge report what is missing).
#[must_use]
pub fn slurm_script(pipeline: &Pipeline, job: &SlurmJob<'_>) -> String {
    let (cpus, memory) = task_resources(pipeline);
    let (cpus, memory) = (job.cpus.unwrap_or(cpus), job.memory.unwrap_or(memory));
    let name = &pipeline.dataset.name;
    let logs = shard_set_dir(pipeline.home_root(), name, job.shards);
    let kiln = shell_quote(&job.kiln.display().to_string());
    let config = shell_quote(&job.config.display().to_string());
    let mut common = format!(
        "--parsable --cpus-per-task={cpus} --mem={}M --time={}",
        mebibytes(memory),
        shell_quote(job.time)
    );
    if let Some(partition) = job.partition {
        let _ = write!(common, " --partition={}", shell_quote(partition));
    }
    let export = match job.docker_host {
        Some(host) => format!("--export=ALL,DOCKER_HOST={}", shell_quote(host)),
        None => "--export=ALL".to_string(),
    };
    let throttle = job.at_once.map(|k| format!("%{k}")).unwrap_or_default();
    let last = job.shards.saturating_sub(1);
    let logs_q = shell_quote(&logs.display().to_string());
    format!(
        "#!/usr/bin/env bash\n\
         # Written by `kiln deploy slurm`: dataset {name}, {shards} shards, config {config_path}.\n\
         # Each array task runs one shard (`kiln run --shard auto` reads SLURM_ARRAY_TASK_ID); the\n\
         # merge job waits for all of them (afterany) and exports the merged run. A task that\n\
         # failed resumes its own work when resubmitted: sbatch --array=INDEX ... as below.\n\
         # Every node needs the kiln binary, a container engine (DOCKER_HOST), and the shared\n\
         # dataset root {root} at the same path. Submit with: bash THIS_FILE\n\
         set -euo pipefail\n\
         mkdir -p {logs_q}\n\
         array=$(sbatch {common} --job-name={job_name} --array=0-{last}{throttle} {export} \\\n\
         \x20 --output={logs_q}/slurm-%A_%a.log \\\n\
         \x20 --wrap=\"exec {kiln} --quiet run --config {config} --shard auto\")\n\
         array=${{array%%;*}}\n\
         merge=$(sbatch {common} --job-name={job_name}-merge --dependency=afterany:$array {export} \\\n\
         \x20 --output={logs_q}/slurm-%j-merge.log \\\n\
         \x20 --wrap=\"exec {kiln} --quiet merge --config {config} --shards {shards} --export\")\n\
         merge=${{merge%%;*}}\n\
         echo \"submitted shards as array job $array and the merge as job $merge\"\n\
         echo \"watch them with: {kiln} status --config {config} --shards\"\n",
        shards = job.shards,
        config_path = job.config.display(),
        root = pipeline.home_root().display(),
        job_name = shell_quote(&format!("kiln-{name}")),
    )
}

/// What a Kubernetes deployment needs besides the pipeline.
#[derive(Debug, Clone)]
pub struct K8sJob<'a> {
    /// Shards.
    pub shards: u32,
    /// The kiln image.
    pub image: &'a str,
    /// The config as the pods see it.
    pub config: &'a Path,
    /// The claim holding the shared root.
    pub volume_claim: &'a str,
    /// Where it is mounted.
    pub mount: &'a Path,
    /// The Job's name.
    pub name: &'a str,
    /// `backoffLimitPerIndex`.
    pub retries: u32,
}

/// The Indexed Job of the shards and the merge Job, as one multi-document YAML file (JSON
/// flow style, which YAML reads).
///
/// Each shard pod runs kiln beside a Docker-in-Docker engine in a native sidecar (an init
/// container that keeps running, Kubernetes 1.29 and later), reached on the pod's loopback.
/// The merge Job cannot depend on the Indexed Job (Kubernetes has no such dependency): it runs
/// `kiln merge --wait`, which waits for every shard to finish and fails on problems that no
/// waiting mends.
#[must_use]
pub fn k8s_manifests(pipeline: &Pipeline, job: &K8sJob<'_>) -> String {
    let (cpus, memory) = task_resources(pipeline);
    let memory = format!("{}Mi", mebibytes(memory));
    let config = job.config.display().to_string();
    let labels = serde_json::json!({
        "app.kubernetes.io/name": "kiln",
        "app.kubernetes.io/instance": job.name,
    });
    let engine = serde_json::json!({
        "name": "engine",
        "image": "docker:dind",
        "restartPolicy": "Always",
        "securityContext": { "privileged": true },
        "env": [{ "name": "DOCKER_TLS_CERTDIR", "value": "" }],
        "args": ["--host=tcp://127.0.0.1:2375"],
        "startupProbe": {
            "exec": { "command": ["docker", "-H", "tcp://127.0.0.1:2375", "info"] },
            "periodSeconds": 2,
            "failureThreshold": 60,
        },
        "volumeMounts": [{ "name": "engine", "mountPath": "/var/lib/docker" }],
    });
    // The pod both Jobs run: kiln with `args` beside the engine sidecar, the shared volume
    // mounted, never restarted in place (a podFailurePolicy needs restartPolicy Never).
    let pod = |args: Vec<String>,
               extra_env: Vec<serde_json::Value>,
               resources: serde_json::Value| {
        let mut env =
            vec![serde_json::json!({ "name": "DOCKER_HOST", "value": "tcp://127.0.0.1:2375" })];
        env.extend(extra_env);
        serde_json::json!({
            "metadata": { "labels": labels },
            "spec": {
                "restartPolicy": "Never",
                "initContainers": [engine],
                "containers": [{
                    "name": "kiln",
                    "image": job.image,
                    "args": args,
                    "env": env,
                    "resources": resources,
                    "volumeMounts": [{ "name": "data", "mountPath": job.mount.display().to_string() }],
                }],
                "volumes": [
                    { "name": "data", "persistentVolumeClaim": { "claimName": job.volume_claim } },
                    { "name": "engine", "emptyDir": {} },
                ],
            },
        })
    };
    let words = |list: &[&str]| list.iter().map(ToString::to_string).collect::<Vec<_>>();
    let shards = serde_json::json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": { "name": job.name, "labels": labels },
        "spec": {
            "completionMode": "Indexed",
            "completions": job.shards,
            "parallelism": job.shards,
            "backoffLimitPerIndex": job.retries,
            "podFailurePolicy": {
                "rules": [
                    {
                        "action": "FailIndex",
                        "onExitCodes": {
                            "containerName": "kiln",
                            "operator": "In",
                            "values": NOT_RETRIED,
                        },
                    },
                    {
                        "action": "Ignore",
                        "onPodConditions": [{ "type": "DisruptionTarget", "status": "True" }],
                    },
                ],
            },
            "template": pod(
                words(&["--quiet", "run", "--config", &config, "--shard", "auto"]),
                vec![serde_json::json!({ "name": SHARD_COUNT_ENV, "value": job.shards.to_string() })],
                serde_json::json!({ "requests": { "cpu": cpus.to_string(), "memory": memory } }),
            ),
        },
    });
    let merge = serde_json::json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": { "name": format!("{}-merge", job.name), "labels": labels },
        "spec": {
            "backoffLimit": 2,
            "podFailurePolicy": {
                "rules": [{
                    "action": "FailJob",
                    "onExitCodes": { "containerName": "kiln", "operator": "In", "values": NOT_RETRIED },
                }],
            },
            "template": pod(
                words(&["--quiet", "merge", "--config", &config, "--shards", &job.shards.to_string(), "--wait", "--export"]),
                Vec::new(),
                serde_json::json!({ "requests": { "cpu": "1", "memory": "2Gi" } }),
            ),
        },
    });
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
    format!(
        "# Written by `kiln deploy k8s`: dataset {}, {} shards. Apply with: kubectl apply -f THIS_FILE\n\
         # The claim {} must be ReadWriteMany and hold the config at {config}.\n---\n{}\n---\n{}\n",
        pipeline.dataset.name,
        job.shards,
        job.volume_claim,
        pretty(&shards),
        pretty(&merge)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_the_shell_would_split_are_quoted() {
        assert_eq!(shell_quote("/opt/kiln/bin/kiln"), "/opt/kiln/bin/kiln");
        assert_eq!(
            shell_quote("/data/my run/pipeline.toml"),
            "'/data/my run/pipeline.toml'"
        );
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
