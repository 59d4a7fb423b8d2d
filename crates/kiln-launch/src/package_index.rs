//! The package index check: when a setup step fails to resolve its dependencies, whether the
//! package index of its ecosystem (PyPI, npm's registry, crates.io, ...) answers at all from
//! the same container. An index that does not answer (an outage, a proxy that went down, an
//! engine without a route out) says nothing about the repository, so the item gets no row and
//! a later run retries it.

use std::time::Duration;

use kiln_core::{RuntimeError, Session};

/// How long the check may take in all.
const CHECK_TIMEOUT: Duration = Duration::from_secs(60);

/// A registry that did not answer: its address and what the request reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unanswered {
    /// The address asked (the index the ecosystem's installer reads).
    pub url: String,
    /// The request's error, as the container's client reported it.
    pub error: String,
}

/// The check as a shell script: asks `url` with the first client the container has (curl,
/// Python, Node, wget; each honours the proxy variables) and prints `kiln-registry: ok <url>`
/// on any HTTP answer, an error status included, or `kiln-registry: down <url>: <error>`.
fn script(url: &str) -> String {
    format!(
        r#"url="{url}"
case "$url" in http://*|https://*) ;; *) echo "kiln-registry: ok $url (not an address)"; exit 0;; esac
if command -v curl >/dev/null 2>&1; then
  error=$(curl -sS -o /dev/null --max-time 20 "$url" 2>&1)
elif command -v python3 >/dev/null 2>&1; then
  error=$(python3 -c 'import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[1], timeout=20)
except urllib.error.HTTPError:
    pass
except Exception as e:
    sys.exit(str(e))' "$url" 2>&1)
elif command -v node >/dev/null 2>&1; then
  error=$(node -e 'fetch(process.argv[1], {{signal: AbortSignal.timeout(20000)}}).then(() => process.exit(0), e => {{ console.error(String(e.cause || e)); process.exit(1) }})' "$url" 2>&1)
elif command -v wget >/dev/null 2>&1; then
  error=$(wget -q -O /dev/null -T 20 "$url" 2>&1); status=$?
  [ "$status" -eq 8 ] && error=""
  [ "$status" -eq 0 ] || [ "$status" -eq 8 ]
else
  echo "kiln-registry: ok $url (no client to ask with)"; exit 0
fi
if [ $? -eq 0 ]; then echo "kiln-registry: ok $url"; else echo "kiln-registry: down $url: $(echo "$error" | tail -n 3 | tr '\n' ' ')"; fi
"#
    )
}

/// Reads the check's output: the registry that did not answer, if one did not.
fn read(output: &str) -> Option<Unanswered> {
    let line = output
        .lines()
        .find_map(|l| l.trim().strip_prefix("kiln-registry: down "))?;
    let (url, error) = line.split_once(": ").unwrap_or((line, ""));
    Some(Unanswered {
        url: url.to_string(),
        error: error.trim().to_string(),
    })
}

/// Asks the package index at `index` (a shell expression, [`crate::ecosystems::package_index`])
/// from the session's container; `Some` when it does not answer; `None` with no index to ask. A check that cannot run (a timeout of its own) counts as an answer: only a registry
/// proven silent defers an item.
///
/// # Errors
/// When the engine fails.
pub(crate) async fn unanswered(
    session: &mut Session,
    index: Option<&str>,
) -> Result<Option<Unanswered>, RuntimeError> {
    let Some(url) = index else {
        return Ok(None);
    };
    session.note("# a dependency failed to resolve: does the registry answer at all?");
    let shown = format!("kiln registry check {url}");
    let outcome = match session
        .run_shown_as(&script(url), &shown, CHECK_TIMEOUT, 1 << 16)
        .await
    {
        Ok(outcome) => outcome,
        Err(RuntimeError::ContainerStopped { .. } | RuntimeError::DiskExceeded { .. }) => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    Ok(read(&outcome.output))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_reports_the_silent_registry_with_its_error() {
        assert_eq!(read("kiln-registry: ok https://pypi.org/simple/\n"), None);
        assert_eq!(
            read(
                "+ x\nkiln-registry: down https://pypi.org/simple/: curl: (6) Could not resolve host: pypi.org \n"
            ),
            Some(Unanswered {
                url: "https://pypi.org/simple/".into(),
                error: "curl: (6) Could not resolve host: pypi.org".into(),
            })
        );
        assert_eq!(
            crate::ecosystems::package_index(crate::ecosystems::Ecosystem(
                &crate::ecosystems::native::ENTRY
            )),
            None
        );
    }

    /// The script runs under the host's shell: with no client that can reach an address
    /// (a port nobody listens on), it reports the registry down; a bare word is no address.
    #[test]
    fn the_script_reports_a_refused_connection_as_down() {
        let run = |url: &str| {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(script(url))
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            read(&out)
        };
        let down = run("http://127.0.0.1:9/simple/");
        assert_eq!(
            down.as_ref().map(|d| d.url.as_str()),
            Some("http://127.0.0.1:9/simple/"),
            "{down:?}"
        );
        assert!(down.is_some_and(|d| !d.error.is_empty()));
        assert_eq!(run("direct"), None);
    }
}
