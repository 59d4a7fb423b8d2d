//! A container engine for these tests: it answers pings, records removals, and fails every
//! other request as an engine that went wrong mid-stage would.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use kiln_core::{
    ContainerId, ContainerRuntime, ContainerSpec, EngineInfo, ExecOutcome, ExecSpec, ImageBuild,
    OutputSink, RuntimeError,
};

/// See the module documentation.
#[derive(Default)]
pub struct BrokenEngine {
    /// `(label, value)` of every `remove_labelled` call.
    pub removed_labels: Mutex<Vec<(String, String)>>,
    /// Requests that reached the engine, by method.
    pub requests: Mutex<BTreeMap<&'static str, usize>>,
}

impl BrokenEngine {
    fn fail(&self, method: &'static str) -> RuntimeError {
        *self.requests.lock().unwrap().entry(method).or_default() += 1;
        RuntimeError::engine(method, "no space left on device (HTTP 500)")
    }

    /// How many requests other than pings and removals reached the engine.
    pub fn failed_requests(&self) -> usize {
        self.requests.lock().unwrap().values().sum()
    }
}

#[async_trait]
impl ContainerRuntime for BrokenEngine {
    async fn ping(&self) -> Result<EngineInfo, RuntimeError> {
        Ok(EngineInfo {
            version: "test".into(),
            api_version: "1.41".into(),
        })
    }
    async fn image_exists(&self, _: &str) -> Result<bool, RuntimeError> {
        Err(self.fail("image_exists"))
    }
    async fn build_image(&self, _: &ImageBuild, _: OutputSink<'_>) -> Result<(), RuntimeError> {
        Err(self.fail("build_image"))
    }
    async fn create(&self, _: &ContainerSpec) -> Result<ContainerId, RuntimeError> {
        Err(self.fail("create"))
    }
    async fn exec(
        &self,
        _: &ContainerId,
        _: &ExecSpec,
        _: OutputSink<'_>,
    ) -> Result<ExecOutcome, RuntimeError> {
        Err(self.fail("exec"))
    }
    async fn copy_in(&self, _: &ContainerId, _: &str, _: Vec<u8>) -> Result<(), RuntimeError> {
        Err(self.fail("copy_in"))
    }
    async fn copy_out(&self, _: &ContainerId, _: &str) -> Result<Vec<u8>, RuntimeError> {
        Err(self.fail("copy_out"))
    }
    async fn commit(
        &self,
        _: &ContainerId,
        _: &str,
        _: &BTreeMap<String, String>,
        _: &[(String, String)],
    ) -> Result<String, RuntimeError> {
        Err(self.fail("commit"))
    }
    async fn remove(&self, _: &ContainerId) -> Result<(), RuntimeError> {
        Ok(())
    }
    async fn remove_image(&self, _: &str) -> Result<(), RuntimeError> {
        Ok(())
    }
    async fn remove_labelled(&self, label: &str, value: &str) -> Result<usize, RuntimeError> {
        self.removed_labels
            .lock()
            .unwrap()
            .push((label.to_string(), value.to_string()));
        Ok(0)
    }
    async fn list_labelled(&self, _: &str, _: &str) -> Result<Vec<ContainerId>, RuntimeError> {
        Ok(Vec::new())
    }
    async fn remove_leftover_images(&self, _: &str, _: &str) -> Result<usize, RuntimeError> {
        Ok(0)
    }
    async fn pull_image(&self, _: &str, _: OutputSink<'_>) -> Result<bool, RuntimeError> {
        Err(self.fail("pull_image"))
    }
    async fn tag_image(&self, _: &str, _: &str) -> Result<(), RuntimeError> {
        Err(self.fail("tag_image"))
    }
    async fn push_image(&self, _: &str, _: OutputSink<'_>) -> Result<Option<String>, RuntimeError> {
        Err(self.fail("push_image"))
    }
    async fn import_image(
        &self,
        _: &str,
        _: &std::path::Path,
        _: &[String],
    ) -> Result<(), RuntimeError> {
        Err(self.fail("import_image"))
    }
}
