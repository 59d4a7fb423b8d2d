//! What kiln's HTTP clients (the LM endpoint, the Hugging Face Hub) share: the TLS setup and
//! error messages that name every cause.

use std::sync::Arc;

/// A rustls client configuration on the ring provider that trusts the system's root
/// certificates (`/etc/ssl/certs`, or `SSL_CERT_FILE`), so a TLS-inspecting proxy's CA is
/// trusted as the host's own tools trust it. Only HTTP/1.1 is offered (reqwest is built
/// without HTTP/2). `need_roots`: an empty store is an error (an `https` endpoint).
///
/// # Errors
/// When no root certificate is found and one is needed, or rustls refuses the setup; the
/// message reads after "failed to".
pub fn client_tls_config(need_roots: bool) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for cert in found.certs {
        // One unreadable certificate in the system store must not cost the others.
        let _ = roots.add(cert);
    }
    if need_roots && roots.is_empty() {
        let errors: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
        return Err(format!(
            "find trusted root certificates in the system store (install ca-certificates, or set SSL_CERT_FILE): {}",
            errors.join("; ")
        ));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("configure TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// An error with its sources, as one line (reqwest's own message says only "error sending
/// request").
#[must_use]
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
