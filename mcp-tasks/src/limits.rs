//! [`Limits`]: how much one request may carry, with the error each limit answers.
//!
//! | limit | default | set with | over it |
//! | --- | --- | --- | --- |
//! | request size (one JSON-RPC message: an HTTP body, a stdio line) | 4 MiB ([`Limits::DEFAULT_MAX_REQUEST_BYTES`]) | [`Limits::with_max_request_bytes`] | HTTP `413` with a JSON-RPC `-32600` body; stdio: one `-32600` line (without `id`: the request was not read), the stream goes on |
//! | `tools/call` `params.arguments`, serialized | 1 MiB ([`Limits::DEFAULT_MAX_ARGUMENTS_BYTES`]) | [`Limits::with_max_arguments_bytes`] | `-32602` naming `params.arguments`, its size and the limit (HTTP `400`); no task is created |
//!
//! The request-size default is rmcp's own HTTP body limit, so a message accepted over HTTP
//! is accepted over stdio. Give a server its limits with
//! [`TaskServer::with_limits`](crate::TaskServer::with_limits):
//!
//! ```
//! use mcp_tasks::{Limits, TaskServer, Toolkit};
//!
//! let limits = Limits::default()
//!     .with_max_request_bytes(16 * 1024 * 1024)
//!     .with_max_arguments_bytes(8 * 1024 * 1024);
//! let server = TaskServer::new(Toolkit::new()).with_limits(limits);
//! assert_eq!(server.limits().max_request_bytes(), 16 * 1024 * 1024);
//! ```

/// Limits on what one request may carry. [`Limits::default()`] is 4 MiB per request
/// ([`Limits::DEFAULT_MAX_REQUEST_BYTES`]) and 1 MiB of `tools/call` arguments
/// ([`Limits::DEFAULT_MAX_ARGUMENTS_BYTES`]); see the [module docs](self) for what each
/// limit answers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    max_request_bytes: usize,
    max_arguments_bytes: usize,
}

impl Limits {
    /// The default size limit of one request: 4 MiB, the same as rmcp's HTTP body limit.
    pub const DEFAULT_MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;
    /// The default size limit of a `tools/call`'s `arguments`, serialized: 1 MiB.
    pub const DEFAULT_MAX_ARGUMENTS_BYTES: usize = 1024 * 1024;

    /// The defaults (the same as [`Limits::default()`]).
    #[must_use]
    pub const fn new() -> Self {
        Self {
            max_request_bytes: Self::DEFAULT_MAX_REQUEST_BYTES,
            max_arguments_bytes: Self::DEFAULT_MAX_ARGUMENTS_BYTES,
        }
    }

    /// Sets the size limit of one request in bytes: an HTTP body or a stdio line (without
    /// its newline). Larger requests are answered with `-32600` and never parsed.
    #[must_use]
    pub const fn with_max_request_bytes(mut self, bytes: usize) -> Self {
        self.max_request_bytes = bytes;
        self
    }

    /// Sets the size limit of a `tools/call`'s `params.arguments` in bytes, as compact JSON.
    /// Larger arguments are answered with `-32602` before the tool sees them.
    #[must_use]
    pub const fn with_max_arguments_bytes(mut self, bytes: usize) -> Self {
        self.max_arguments_bytes = bytes;
        self
    }

    /// The size limit of one request in bytes.
    #[must_use]
    pub const fn max_request_bytes(&self) -> usize {
        self.max_request_bytes
    }

    /// The size limit of a `tools/call`'s arguments in bytes.
    #[must_use]
    pub const fn max_arguments_bytes(&self) -> usize {
        self.max_arguments_bytes
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::Limits;

    #[test]
    fn defaults_and_setters() {
        let limits = Limits::default();
        assert_eq!(limits.max_request_bytes(), 4 * 1024 * 1024);
        assert_eq!(limits.max_arguments_bytes(), 1024 * 1024);
        let limits = limits
            .with_max_request_bytes(10)
            .with_max_arguments_bytes(5);
        assert_eq!(
            (limits.max_request_bytes(), limits.max_arguments_bytes()),
            (10, 5)
        );
    }
}
