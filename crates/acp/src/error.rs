//! How serving a client fails.

/// Why the ACP connection ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    /// The transport or the protocol failed.
    #[error("ACP connection: {0}")]
    Connection(String),
}
