//! `kiln report` rendered in headless Chromium (Debian's package, which scripts/test.sh
//! installs): the page's script draws every figure from the run's data, with one bar per data
//! point, and no error.

use std::path::Path;
use std::process::Command;

use crate::{kiln, run, text};

/// Renders the page at `path` in headless Chromium and returns the DOM after its scripts ran;
/// also writes a screenshot beside it.
fn chromium_dom(path: &Path, profile: &Path) -> String {
    let flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ];
    let url = format!("file://{}", path.display());
    let dom = run(Command::new("chromium")
        .args(flags)
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--dump-dom", &url]));
    assert!(
        dom.status.success(),
        "chromium (scripts/test.sh installs Debian's chromium) failed: {}",
        text(&dom)
    );
    let shot = path.with_extension("png");
    let screenshot = run(Command::new("chromium")
        .args(flags)
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--window-size=1200,2600"])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url));
    assert!(screenshot.status.success(), "{}", text(&screenshot));
    let png = std::fs::read(&shot).unwrap_or_default();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "the screenshot is {} bytes",
        png.len()
    );
    String::from_utf8_lossy(&dom.stdout).into_owned()
}

/// The value of attribute `name` on the element whose id is `id`, in a DOM dump.
fn attribute(dom: &str, tag_start: &str, name: &str) -> Option<String> {
    let at = dom.find(tag_start)?;
    let end = dom[at..].find('>')? + at;
    let tag = &dom[at..end];
    let key = format!("{name}=\"");
    let start = tag.find(&key)? + key.len();
    let len = tag[start..].find('"')?;
    Some(tag[start..start + len].to_string())
}

/// Writes the report of the latest run of the config at `config`, renders it, and checks that
/// every figure is drawn with one bar per data point; returns the page's data.
pub fn check_report(config: &Path, scratch: &Path) -> serde_json::Value {
    let path = scratch.join("report.html");
    let output = run(kiln()
        .arg("--config")
        .arg(config)
        .arg("report")
        .arg("--output")
        .arg(&path));
    assert!(output.status.success(), "{}", text(&output));
    let page = std::fs::read_to_string(&path).unwrap_or_default();
    for external in ["src=\"http", "href=\"http", "url(http"] {
        assert!(!page.contains(external), "an external asset: {external}");
    }
    let data_start = page
        .find(r#"<script type="application/json" id="kiln-data">"#)
        .map(|i| i + 47)
        .expect("no data block");
    let data_end = data_start + page[data_start..].find("</script>").unwrap_or(0);
    let data: serde_json::Value = serde_json::from_str(&page[data_start..data_end]).unwrap();

    let dom = chromium_dom(&path, &scratch.join("chromium-profile"));
    assert_eq!(attribute(&dom, "<body", "data-error"), None, "{dom}");
    assert_eq!(
        attribute(&dom, "<body", "data-plots").as_deref(),
        Some("7"),
        "{dom}"
    );
    let count = |key: &str| data[key].as_array().map_or(0, Vec::len);
    let expected = [
        ("funnel", count("funnel")),
        (
            "languages",
            data["languages"].as_array().map_or(0, |l| {
                l.iter()
                    .map(|x| x["states"].as_array().map_or(0, Vec::len))
                    .sum()
            }),
        ),
        ("failures", count("failures")),
        ("builders", count("builders")),
        ("instances", 2 * count("instances")),
        ("stages", count("stages")),
        ("tokens", 2 * count("tokens")),
    ];
    for (figure, bars) in expected {
        assert_eq!(
            attribute(&dom, &format!("<figure id=\"{figure}\""), "data-drawn"),
            Some(bars.to_string()),
            "figure {figure}"
        );
    }
    let drawn = dom.matches("class=\"bar\"").count();
    assert_eq!(drawn, expected.iter().map(|(_, n)| n).sum::<usize>());

    // The instance table: a row per instance, each linking to a log directory that exists
    // (the page is outside the run directory here, so the links are absolute).
    assert_eq!(
        attribute(&dom, "<table id=\"table\"", "data-rows"),
        Some(count("table").to_string()),
        "{dom}"
    );
    assert_eq!(
        dom.matches("<tr class=\"instance\"").count(),
        count("table")
    );
    let links: Vec<&str> = dom
        .split("href=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .collect();
    let with_logs = data["table"].as_array().map_or(0, |rows| {
        rows.iter().filter(|r| r["logs"].is_string()).count()
    });
    assert!(with_logs > 0, "no instance has logs: {data:#}");
    assert_eq!(links.len(), with_logs, "{links:?}");
    for link in &links {
        let dir = link.strip_prefix("file://").unwrap_or(link);
        assert!(
            Path::new(dir).is_dir(),
            "the logs link {link} leads nowhere"
        );
    }
    data
}
