//! Failures for want of a network: the messages a test's failure prints when it reached for a
//! host it cannot reach (validation runs tests with the network off). Such a test says nothing
//! about the patch; validation keeps it out of both lists and names it in the row.

/// What resolvers and sockets print when there is no network: glibc's resolver (through
/// Python's `socket.gaierror`, urllib, requests and urllib3), Node's `getaddrinfo` and socket
/// codes, curl, Rust's standard library, Go's resolver. Connection refusals are left out: a test's own
/// server on loopback refuses too.
const SIGNS: &[&str] = &[
    "Temporary failure in name resolution",
    "Name or service not known",
    "No address associated with hostname",
    "nodename nor servname provided",
    "Network is unreachable",
    "getaddrinfo ENOTFOUND",
    "getaddrinfo EAI_AGAIN",
    "connect ENETUNREACH",
    "connect EHOSTUNREACH",
    "connect: network is unreachable",
    "Could not resolve host",
    "failed to lookup address information",
    ": no such host",
];

/// Whether `line` says that a host could not be resolved or reached for want of a network.
#[must_use]
pub fn names_missing_network(line: &str) -> bool {
    SIGNS.iter().any(|sign| line.contains(sign))
}

#[cfg(test)]
mod tests {
    use super::names_missing_network;

    #[test]
    fn resolver_and_socket_failures_are_recognised_and_refusals_are_not() {
        for line in [
            "E   urllib.error.URLError: <urlopen error [Errno -3] Temporary failure in name resolution>",
            "E   socket.gaierror: [Errno -2] Name or service not known",
            "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='data.example.org', port=443): Max retries exceeded (Caused by NameResolutionError(\"Failed to resolve 'data.example.org' ([Errno -5] No address associated with hostname)\"))",
            "OSError: [Errno 101] Network is unreachable",
            "Error: getaddrinfo ENOTFOUND registry.example.org",
            "Error: getaddrinfo EAI_AGAIN example.org",
            "curl: (6) Could not resolve host: example.org",
            "Os { code: -3, kind: Uncategorized, message: \"failed to lookup address information: Temporary failure in name resolution\" }",
            "dial tcp: lookup proxy.golang.org on 10.0.0.2:53: no such host",
            "dial tcp 93.184.215.14:80: connect: network is unreachable",
        ] {
            assert!(names_missing_network(line), "{line}");
        }
        for line in [
            "ConnectionRefusedError: [Errno 111] Connection refused",
            "Error: connect ECONNREFUSED 127.0.0.1:8080",
            "AssertionError: assert 'host' == 'hostname'",
            "[vite] Failed to resolve import \"./x\"",
        ] {
            assert!(!names_missing_network(line), "{line}");
        }
    }
}
