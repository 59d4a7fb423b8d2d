//! The labels kiln puts on the containers and images of a dataset.

use kiln_core::config::Pipeline;

/// The label value that marks the containers and images of the pipeline's dataset (see
/// [`Runner::dataset_label`]).
#[must_use]
pub fn dataset_label(pipeline: &Pipeline) -> String {
    let dir = pipeline.dataset.root.join(&pipeline.dataset.name);
    std::path::absolute(&dir)
        .unwrap_or(dir)
        .to_string_lossy()
        .into_owned()
}
