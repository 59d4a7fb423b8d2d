//! What a bollard error says: a broken connection or an answer of the engine, its status, an
//! archive the engine cannot unpack, and its message.

use bollard::errors::Error as BollardError;

/// Whether a bollard error is about the connection rather than an answer of the engine.
pub(super) fn is_transport(e: &BollardError) -> bool {
    matches!(
        e,
        BollardError::RequestTimeoutError
            | BollardError::IOError { .. }
            | BollardError::HyperResponseError { .. }
            | BollardError::HyperLegacyError { .. }
            | BollardError::HttpClientError { .. }
            | BollardError::SocketNotFoundError(_)
    )
}

/// HTTP status of an engine error response.
pub(super) fn status(e: &BollardError) -> Option<u16> {
    match e {
        BollardError::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

/// Whether the engine's answer to an upload says it cannot unpack the archive (an entry type
/// it does not handle, a malformed header), as opposed to the engine failing (its disk full)
/// or the container being gone.
pub(super) fn refuses_archive(e: &BollardError) -> bool {
    match e {
        BollardError::DockerResponseServerError {
            status_code,
            message,
        } => {
            // Only what the archive's content causes: an engine going down mid-upload also
            // fails the unpacking ("signal: killed"), and that must stay an engine failure.
            let message = message.to_ascii_lowercase();
            let content = [
                "unhandled tar header type",
                "invalid tar header",
                "archive/tar:",
            ];
            !message.contains("no space left")
                && (*status_code == 400 || content.iter().any(|c| message.contains(c)))
        }
        _ => false,
    }
}

/// An engine error as a message: the engine's own text when it sent one.
pub(super) fn describe(e: &BollardError) -> String {
    match e {
        BollardError::DockerResponseServerError {
            status_code,
            message,
        } => format!("{message} (HTTP {status_code})"),
        other => other.to_string(),
    }
}
