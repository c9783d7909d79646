//! Errors of the API layer, shaped after `meta/v1.Status` so callers classify them by `reason`.

use thiserror::Error;

/// Why an API call failed, as a `Status.reason` (or a local failure).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StatusReason {
    /// 404.
    NotFound,
    /// 409 from create: the name is taken.
    AlreadyExists,
    /// 409: a precondition or resourceVersion did not match.
    Conflict,
    /// 422: the request would produce an invalid object.
    Invalid,
    /// 415: the patch type is not supported for this resource.
    UnsupportedMediaType,
    /// 410: the requested resourceVersion is too old to watch from.
    Gone,
    /// 410: a list's continue token is too old to serve a consistent page.
    Expired,
    /// 406: no representation the client accepts can be served.
    NotAcceptable,
    /// 413: the request body is too large.
    RequestEntityTooLarge,
    /// 503: the server (or an aggregated API behind it) cannot answer now.
    ServiceUnavailable,
    /// 429: throttled; retry later.
    TooManyRequests,
    /// 400.
    BadRequest,
    /// 403: the request is not allowed, for example a create in a namespace being deleted.
    Forbidden,
    /// 405: the resource does not support the verb.
    MethodNotAllowed,
    /// 504 or a client-side deadline.
    Timeout,
    /// 500 or anything else.
    InternalError,
    /// 500 with no reason: the API server's answer to an error that is not a `Status`, such as
    /// etcd's refusal of an object too large to store.
    Unknown,
}

impl StatusReason {
    /// The HTTP code the API server uses for this reason.
    pub fn code(self) -> u16 {
        match self {
            StatusReason::NotFound => 404,
            StatusReason::AlreadyExists | StatusReason::Conflict => 409,
            StatusReason::Invalid => 422,
            StatusReason::UnsupportedMediaType => 415,
            StatusReason::Gone | StatusReason::Expired => 410,
            StatusReason::NotAcceptable => 406,
            StatusReason::RequestEntityTooLarge => 413,
            StatusReason::ServiceUnavailable => 503,
            StatusReason::TooManyRequests => 429,
            StatusReason::BadRequest => 400,
            StatusReason::Forbidden => 403,
            StatusReason::MethodNotAllowed => 405,
            StatusReason::Timeout => 504,
            StatusReason::InternalError | StatusReason::Unknown => 500,
        }
    }

    /// The reason of a `Status` a server answered: by its `reason` string, or by its code when
    /// the string is empty or unknown.
    pub fn from_status(reason: &str, code: u16) -> StatusReason {
        const ALL: [StatusReason; 17] = [
            // Where two reasons share a code, the first is what a bare code means.
            StatusReason::NotFound,
            StatusReason::Conflict,
            StatusReason::AlreadyExists,
            StatusReason::Invalid,
            StatusReason::UnsupportedMediaType,
            StatusReason::Gone,
            StatusReason::Expired,
            StatusReason::NotAcceptable,
            StatusReason::RequestEntityTooLarge,
            StatusReason::ServiceUnavailable,
            StatusReason::TooManyRequests,
            StatusReason::BadRequest,
            StatusReason::Forbidden,
            StatusReason::MethodNotAllowed,
            StatusReason::Timeout,
            StatusReason::InternalError,
            StatusReason::Unknown,
        ];
        ALL.into_iter()
            .find(|r| !reason.is_empty() && r.as_str() == reason)
            .or_else(|| ALL.into_iter().find(|r| r.code() == code))
            .unwrap_or(StatusReason::InternalError)
    }

    /// The `Status.reason` string; empty for [`StatusReason::Unknown`].
    pub fn as_str(self) -> &'static str {
        match self {
            StatusReason::NotFound => "NotFound",
            StatusReason::AlreadyExists => "AlreadyExists",
            StatusReason::Conflict => "Conflict",
            StatusReason::Invalid => "Invalid",
            StatusReason::UnsupportedMediaType => "UnsupportedMediaType",
            StatusReason::Gone => "Gone",
            StatusReason::Expired => "Expired",
            StatusReason::NotAcceptable => "NotAcceptable",
            StatusReason::RequestEntityTooLarge => "RequestEntityTooLarge",
            StatusReason::ServiceUnavailable => "ServiceUnavailable",
            StatusReason::TooManyRequests => "TooManyRequests",
            StatusReason::BadRequest => "BadRequest",
            StatusReason::Forbidden => "Forbidden",
            StatusReason::MethodNotAllowed => "MethodNotAllowed",
            StatusReason::Timeout => "Timeout",
            StatusReason::InternalError => "InternalError",
            StatusReason::Unknown => "",
        }
    }
}

/// `error` and its sources on one line, each source's first line added unless the line so far
/// already says it (kube-rs messages often end with their source's message, and a YAML error
/// adds a multi-line excerpt): for logs and command-line errors.
pub fn one_line(error: &(dyn std::error::Error + 'static)) -> String {
    let first_line = |e: &dyn std::error::Error| e.to_string().lines().next().unwrap_or_default().to_string();
    let mut line = first_line(error);
    let mut source = error.source();
    while let Some(e) = source {
        let message = first_line(e);
        if !line.contains(&message) {
            line = format!("{line}: {message}");
        }
        source = e.source();
    }
    line
}

/// An API call's failure.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ApiError {
    /// The server answered with a `Status` failure.
    #[error("{reason:?} ({}): {message}", reason.code())]
    Status {
        /// Classifies the failure.
        reason: StatusReason,
        /// The server's message.
        message: String,
        /// How long the server asked the client to wait before trying again (its Retry-After,
        /// which the API server also writes as `details.retryAfterSeconds`).
        retry_after: Option<std::time::Duration>,
        /// The `details` the server gave beyond the wait; none for most errors, and boxed so
        /// that they cost every other error one word.
        details: Option<Box<StatusDetails>>,
    },
    /// The REST mapper knows no resource for this apiVersion and kind: an unknown kind, one not
    /// discovered yet, or a version no longer served.
    #[error("no matches for kind {kind:?} in version {api_version:?}")]
    NoKindMatch {
        /// The apiVersion asked for.
        api_version: String,
        /// The kind asked for.
        kind: String,
    },
    /// No answer came from the server: the client failed to connect, to speak TLS or HTTP, or to
    /// decode what came back. Classified, counted and retried as 503 ServiceUnavailable.
    #[error("no answer from the API server: {source}")]
    Transport {
        /// What the client reported, with its own sources.
        #[source]
        source: TransportError,
    },
}

/// One of a `Status`'s `details.causes`: what went wrong with one field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusCause {
    /// The cause's `type` (`reason` in Go), for example `FieldManagerConflict`.
    pub reason: String,
    /// What went wrong.
    pub message: String,
    /// The field, as a path such as `.spec.replicas`.
    pub field: String,
}

/// What a `Status` failure's `details` say of its causes and its object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusDetails {
    /// The `details.causes`, such as the fields of an apply conflict or of a 422.
    pub causes: Vec<StatusCause>,
    /// The object the failure is about (`details.name`, `group` and `kind`), as a 422 names it
    /// and kubectl reads it back.
    pub object: Option<StatusObject>,
}

/// The object a `Status` failure is about, as its `details` name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusObject {
    /// The object's name.
    pub name: String,
    /// Its API group; empty for the core group.
    pub group: String,
    /// Its kind.
    pub kind: String,
}

/// A client failure kept whole, sources and all; cheap to clone. Two are equal when they are the
/// same failure.
#[derive(Clone, Debug)]
pub struct TransportError(std::sync::Arc<dyn std::error::Error + Send + Sync>);

impl TransportError {
    /// Keeps `error`.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        TransportError(std::sync::Arc::new(error))
    }
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for TransportError {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for TransportError {}

impl ApiError {
    /// Builds a `Status` error.
    pub fn status(reason: StatusReason, message: impl Into<String>) -> Self {
        ApiError::Status {
            reason,
            message: message.into(),
            retry_after: None,
            details: None,
        }
    }

    /// The details, made empty first if there are none.
    fn details_mut(&mut self) -> Option<&mut StatusDetails> {
        match self {
            ApiError::Status { details, .. } => Some(details.get_or_insert_with(Box::default)),
            ApiError::NoKindMatch { .. } | ApiError::Transport { .. } => None,
        }
    }

    fn details(&self) -> Option<&StatusDetails> {
        match self {
            ApiError::Status { details, .. } => details.as_deref(),
            ApiError::NoKindMatch { .. } | ApiError::Transport { .. } => None,
        }
    }

    /// The same error, about `subject`.
    #[must_use]
    pub fn with_object(mut self, subject: StatusObject) -> Self {
        if let Some(details) = self.details_mut() {
            details.object = Some(subject);
        }
        self
    }

    /// The object the server named as the failure's subject, if it did.
    pub fn object(&self) -> Option<&StatusObject> {
        self.details()?.object.as_ref()
    }

    /// The same error, naming the fields that caused it.
    #[must_use]
    pub fn with_causes(mut self, causes: Vec<StatusCause>) -> Self {
        if let Some(details) = self.details_mut() {
            details.causes = causes;
        }
        self
    }

    /// The fields the server named as causes; none for most errors.
    pub fn causes(&self) -> &[StatusCause] {
        self.details().map_or(&[], |d| &d.causes)
    }

    /// The same error, asking the client to wait `wait` before trying again.
    #[must_use]
    pub fn with_retry_after(mut self, wait: std::time::Duration) -> Self {
        if let ApiError::Status { retry_after, .. } = &mut self {
            *retry_after = Some(wait);
        }
        self
    }

    /// How long the server asked the client to wait before trying again, if it did.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            ApiError::Status { retry_after, .. } => *retry_after,
            ApiError::NoKindMatch { .. } | ApiError::Transport { .. } => None,
        }
    }

    /// The status reason, if the server answered.
    pub fn reason(&self) -> Option<StatusReason> {
        match self {
            ApiError::Status { reason, .. } => Some(*reason),
            ApiError::NoKindMatch { .. } => None,
            ApiError::Transport { .. } => Some(StatusReason::ServiceUnavailable),
        }
    }

    /// 404.
    pub fn is_not_found(&self) -> bool {
        self.reason() == Some(StatusReason::NotFound)
    }

    /// 409 Conflict (not AlreadyExists).
    pub fn is_conflict(&self) -> bool {
        self.reason() == Some(StatusReason::Conflict)
    }

    /// 410, whether the server words it Gone or Expired: the version asked for is no longer
    /// kept, and the caller must list again.
    pub fn is_gone(&self) -> bool {
        self.reason().is_some_and(|r| r.code() == 410)
    }

    /// 415.
    pub fn is_unsupported_media_type(&self) -> bool {
        self.reason() == Some(StatusReason::UnsupportedMediaType)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_status_should_read_the_reason_then_fall_back_to_the_code() {
        assert_eq!(StatusReason::from_status("Expired", 410), StatusReason::Expired);
        assert_eq!(StatusReason::from_status("", 409), StatusReason::Conflict);
        assert_eq!(StatusReason::from_status("Whatever", 404), StatusReason::NotFound);
        assert_eq!(StatusReason::from_status("", 599), StatusReason::InternalError);
    }

    #[test]
    fn both_410_reasons_should_mean_gone() {
        for reason in [StatusReason::Gone, StatusReason::Expired] {
            assert!(ApiError::status(reason, "too old resource version").is_gone());
        }
        assert!(!ApiError::status(StatusReason::Conflict, "x").is_gone());
    }
}
