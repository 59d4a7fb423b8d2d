//! Base images built on the real engine.

use std::time::{Duration, Instant};

use kiln_core::{ContainerRuntime, ImageBuild, NetworkMode, RuntimeError};
use kiln_launch::{ensure_image, python_image, tagged};

use crate::support::{run, runtime, sh, spec, start, unique};

#[tokio::test]
async fn small_images_build_once_and_failures_carry_the_log() {
    let rt = runtime().await;
    let build = tagged(
        ImageBuild {
            dockerfile: format!(
                "FROM debian:bookworm\nCOPY hello.txt /hello.txt\nLABEL kiln.it={}\n",
                unique("build")
            ),
            context: vec![(
                "hello.txt".to_string(),
                b"hello from the context\n".to_vec(),
            )],
            ..ImageBuild::default()
        },
        "kiln-it/small",
        "1",
    );
    let mut log = Vec::new();
    let started = Instant::now();
    assert!(
        ensure_image(&rt, &build, &mut |b: &[u8]| log.extend_from_slice(b))
            .await
            .unwrap()
    );
    eprintln!("small build: {:?}", started.elapsed());
    assert!(String::from_utf8_lossy(&log).contains("Successfully tagged"));
    assert!(!ensure_image(&rt, &build, &mut |_: &[u8]| {}).await.unwrap());

    let mut from_build = spec("build");
    from_build.image = build.tag.clone();
    let c = start(&rt, &from_build).await;
    assert_eq!(
        sh(&rt, &c.0, "cat /hello.txt").await,
        "hello from the context\n"
    );
    rt.remove(&c.0).await.unwrap();
    rt.remove_image(&build.tag).await.unwrap();

    // The steps before the failing one leave images; the failed build removes them.
    let marker = unique("failing");
    let failing = tagged(
        ImageBuild {
            dockerfile: format!(
                "FROM debian:bookworm\nLABEL kiln.it={marker}\nRUN echo step > /step\nRUN echo about to fail && exit 7\n"
            ),
            ..ImageBuild::default()
        },
        "kiln-it/failing",
        "1",
    );
    match ensure_image(&rt, &failing, &mut |_: &[u8]| {}).await {
        Err(RuntimeError::Build { image, message }) => {
            assert_eq!(image, failing.tag);
            // Docker's classic builder says the one, Podman's Buildah the other.
            assert!(
                message.contains("non-zero code: 7") || message.contains("exit status 7"),
                "{message}"
            );
            assert!(message.contains("about to fail"), "{message}");
        }
        other => panic!("expected a build error, got {other:?}"),
    }
    assert!(!rt.image_exists(&failing.tag).await.unwrap());
    let left = rt.list_images("kiln.it", &marker).await.unwrap();
    assert!(left.is_empty(), "a failed build left images: {left:?}");
}

/// A build cut off mid-way (its client gone, as when kiln is killed) leaves the images of its
/// finished steps. They carry the build's labels, so the cleanup of its dataset's leftovers
/// finds and removes them. (Not on Podman 4.3: its Buildah keeps a cut-off build's working
/// container, which holds the step images and which its Docker API does not list.)
#[tokio::test]
async fn a_build_cut_off_leaves_step_images_its_dataset_cleanup_removes() {
    let rt = std::sync::Arc::new(runtime().await);
    let dataset = unique("cut-off");
    let build = ImageBuild {
        tag: format!("kiln-it/cut-off:{}", std::process::id()),
        dockerfile: format!(
            "FROM debian:bookworm\nRUN echo {dataset} > /one\nRUN echo two > /two\nRUN sleep 600\n"
        ),
        labels: [(
            kiln_core::runtime::LABEL_DATASET.to_string(),
            dataset.clone(),
        )]
        .into(),
        ..ImageBuild::default()
    };
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let building = {
        let (rt, log) = (std::sync::Arc::clone(&rt), std::sync::Arc::clone(&log));
        tokio::spawn(async move {
            let mut sink = |b: &[u8]| log.lock().unwrap().push_str(&String::from_utf8_lossy(b));
            rt.build_image(&build, &mut sink).await
        })
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while !log.lock().unwrap().contains("RUN sleep 600") {
        assert!(!building.is_finished(), "{}", log.lock().unwrap());
        assert!(Instant::now() < deadline, "{}", log.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Dropping the request closes the connection: the engine cancels the build, and removes
    // the container of the step that ran (it carries the labels too).
    building.abort();
    let _ = building.await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !rt
        .list_labelled(kiln_core::runtime::LABEL_DATASET, &dataset)
        .await
        .unwrap()
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "the cut-off step's container stays"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let steps: Vec<String> = log
        .lock()
        .unwrap()
        .lines()
        // ` ---> <12 hex>` from Docker's classic builder, `--> <11 hex>` from Podman's Buildah.
        .filter_map(|l| l.trim().split_once("> ").map(|(_, id)| id.trim()))
        .filter(|id| id.len() >= 11 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_string)
        .collect();
    assert!(steps.len() >= 3, "{}", log.lock().unwrap());
    let labelled = |images: Vec<kiln_core::ImageInfo>| -> Vec<String> {
        images
            .into_iter()
            .filter(|i| i.labels.get(kiln_core::runtime::LABEL_DATASET) == Some(&dataset))
            .map(|i| i.id)
            .collect()
    };
    let left = labelled(rt.list_all_images().await.unwrap().unwrap_or_default());
    for step in &steps[1..] {
        assert!(
            left.iter()
                .any(|id| id.trim_start_matches("sha256:").starts_with(step.as_str())),
            "step image {step} lacks the build's labels: {left:?}"
        );
    }
    // The engine lets go of the last step image when it has removed the cut-off step's
    // container, which it may still be doing after that container left the listing; a cleanup
    // meanwhile leaves the image in use alone (a later one removes it). So clean up until
    // nothing is left.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        rt.remove_leftover_images(kiln_core::runtime::LABEL_DATASET, &dataset)
            .await
            .unwrap();
        let left = labelled(rt.list_all_images().await.unwrap().unwrap_or_default());
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "the cleanup left {left:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A context archive reaches COPY with its modes and symlinks, next to the plain files.
#[tokio::test]
async fn a_context_archive_keeps_modes_and_symlinks() {
    let rt = runtime().await;
    let mut tar = tar::Builder::new(Vec::new());
    let script = b"#!/bin/sh\necho run\n";
    let mut header = tar::Header::new_gnu();
    header.set_size(script.len() as u64);
    header.set_mode(0o755);
    tar.append_data(&mut header, "repo/bin/run.sh", &script[..])
        .unwrap();
    let mut link = tar::Header::new_gnu();
    link.set_entry_type(tar::EntryType::Symlink);
    link.set_size(0);
    tar.append_link(&mut link, "repo/run", "bin/run.sh")
        .unwrap();
    let build = tagged(
        ImageBuild {
            dockerfile: format!(
                "FROM debian:bookworm\nCOPY note.txt /note.txt\nCOPY repo /repo\nRUN test -x /repo/bin/run.sh && test -L /repo/run && /repo/run && cat /note.txt\nLABEL kiln.it={}\n",
                unique("archive")
            ),
            context: vec![("note.txt".to_string(), b"plain\n".to_vec())],
            context_archive: tar.into_inner().unwrap(),
            ..ImageBuild::default()
        },
        "kiln-it/archive",
        "1",
    );
    let mut log = Vec::new();
    ensure_image(&rt, &build, &mut |b: &[u8]| log.extend_from_slice(b))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", String::from_utf8_lossy(&log)));
    assert!(String::from_utf8_lossy(&log).contains("run\n"));
    rt.remove_image(&build.tag).await.unwrap();
}

/// Builds the Python image with the host's CA bundle and installs a package from PyPI in it:
/// behind a TLS-inspecting proxy this only works when the bundle is installed in the image.
/// Slow the first time (a few minutes); later runs reuse the image.
#[tokio::test]
async fn python_image_installs_from_pypi_with_the_host_ca_bundle() {
    let rt = runtime().await;
    let bundle = std::fs::read("/etc/ssl/certs/ca-certificates.crt")
        .expect("the host CA bundle (package ca-certificates)");
    let build = python_image(Some(&bundle));
    let started = Instant::now();
    let mut log = Vec::new();
    let built = ensure_image(&rt, &build, &mut |b: &[u8]| log.extend_from_slice(b))
        .await
        .unwrap();
    eprintln!(
        "python image {} (built: {built}) in {:?}",
        build.tag,
        started.elapsed()
    );

    let mut container_spec = spec("python");
    container_spec.image = build.tag.clone();
    container_spec.network = NetworkMode::Bridge;
    let c = start(&rt, &container_spec).await;
    assert_eq!(sh(&rt, &c.0, "python3 --version").await, "Python 3.11.2\n");
    assert!(sh(&rt, &c.0, "uv --version").await.starts_with("uv "));
    assert_eq!(
        sh(&rt, &c.0, "command -v python3 pip3").await,
        "/usr/bin/python3\n/usr/bin/pip3\n"
    );
    assert_eq!(
        sh(&rt, &c.0, "echo $PIP_CERT $UV_SYSTEM_CERTS").await,
        "/etc/ssl/certs/ca-certificates.crt 1\n"
    );

    let script = "uv venv -q /tmp/venv \
        && uv pip install -q --python /tmp/venv/bin/python --exclude-newer 2025-01-01 six \
        && /tmp/venv/bin/python -c 'import six; print(six.__version__)' \
        && cd /tmp && pip download -q --no-deps six && ls six-*.whl";
    let started = Instant::now();
    let (outcome, _) = run(
        &rt,
        &c.0,
        &kiln_core::ExecSpec::new(script, Duration::from_secs(300)),
    )
    .await;
    eprintln!("uv install + pip download of six: {:?}", started.elapsed());
    assert_eq!(outcome.exit_code, 0, "{}", outcome.output);
    // six 1.17.0 was released on 2024-12-04, before the --exclude-newer date.
    assert!(outcome.output.starts_with("1.17.0\n"), "{}", outcome.output);
    rt.remove(&c.0).await.unwrap();
}
