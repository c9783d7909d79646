//! A validation failure of one field, worded as the API server words it (`field.Error`): every
//! rule of the simulated cluster and the owner-reference rule the event sources share report in
//! this one form, so that a 422's message and its `details.causes` read as a cluster's.
//!
//! The wording: `<field>: <body>`, where the body is `Invalid value: <value>: <detail>`,
//! `Required value: <detail>`, `Too long: <detail>` or `Forbidden: <detail>` (the detail left out,
//! with its colon, when empty). Several failures join as upstream's aggregate does: one alone, or
//! `[a, b]` with repeats dropped.

use std::fmt;

/// What kind of failure a [`FieldError`] is; each has its `Status` cause type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// The value breaks a rule; carries the value as the API server prints it (a string quoted).
    Invalid(String),
    /// A required value is missing.
    Required,
    /// The value is longer than allowed.
    TooLong,
    /// The field may not be set here.
    Forbidden,
}

/// One failed check of one field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The field's path, as `metadata.labels`.
    pub field: String,
    /// The kind of failure.
    pub kind: FieldErrorKind,
    /// What the rule says, as `must be no more than 63 characters`; may be empty.
    pub detail: String,
}

impl FieldError {
    /// The string `value` of `field` breaks a rule.
    pub fn invalid(field: impl Into<String>, value: &str, detail: impl Into<String>) -> Self {
        FieldError::invalid_shown(field, format!("{value:?}"), detail)
    }

    /// `field`'s value, already printed as the API server prints it (`shown`), breaks a rule.
    pub fn invalid_shown(field: impl Into<String>, shown: String, detail: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            kind: FieldErrorKind::Invalid(shown),
            detail: detail.into(),
        }
    }

    /// `field` must be set.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            kind: FieldErrorKind::Required,
            detail: detail.into(),
        }
    }

    /// `field` holds more than `max_bytes` bytes.
    pub fn too_long(field: impl Into<String>, max_bytes: usize) -> Self {
        FieldError {
            field: field.into(),
            kind: FieldErrorKind::TooLong,
            detail: format!("must have at most {max_bytes} bytes"),
        }
    }

    /// `field` may not be set.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            kind: FieldErrorKind::Forbidden,
            detail: detail.into(),
        }
    }

    /// The message without the field (`ErrorBody`): what a `Status` cause carries.
    pub fn body(&self) -> String {
        let head = match &self.kind {
            FieldErrorKind::Invalid(shown) => format!("Invalid value: {shown}"),
            FieldErrorKind::Required => "Required value".to_string(),
            FieldErrorKind::TooLong => "Too long".to_string(),
            FieldErrorKind::Forbidden => "Forbidden".to_string(),
        };
        if self.detail.is_empty() {
            head
        } else {
            format!("{head}: {}", self.detail)
        }
    }

    /// The `type` of the `Status` cause this failure makes.
    pub fn cause_type(&self) -> &'static str {
        match self.kind {
            FieldErrorKind::Invalid(_) => "FieldValueInvalid",
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::TooLong => "FieldValueTooLong",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// `errors` as one message: the only one, or all in brackets, each once.
pub fn aggregate(errors: &[FieldError]) -> String {
    let mut messages: Vec<String> = Vec::with_capacity(errors.len());
    for message in errors.iter().map(ToString::to_string) {
        if !messages.contains(&message) {
            messages.push(message);
        }
    }
    match &messages[..] {
        [one] => one.clone(),
        all => format!("[{}]", all.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_should_read_as_the_api_server_words_it() {
        let cases = [
            (
                FieldError::invalid("metadata.name", "Bad_Name", "must be lower case"),
                "metadata.name: Invalid value: \"Bad_Name\": must be lower case",
                "FieldValueInvalid",
            ),
            (
                FieldError::required("metadata.name", "name or generateName is required"),
                "metadata.name: Required value: name or generateName is required",
                "FieldValueRequired",
            ),
            (
                FieldError::required("metadata.namespace", ""),
                "metadata.namespace: Required value",
                "FieldValueRequired",
            ),
            (
                FieldError::too_long("metadata.annotations", 262_144),
                "metadata.annotations: Too long: must have at most 262144 bytes",
                "FieldValueTooLong",
            ),
            (
                FieldError::forbidden("metadata.namespace", "not allowed on this type"),
                "metadata.namespace: Forbidden: not allowed on this type",
                "FieldValueForbidden",
            ),
        ];
        for (error, message, cause) in cases {
            assert_eq!(error.to_string(), message);
            assert_eq!(error.cause_type(), cause);
            assert_eq!(format!("{}: {}", error.field, error.body()), message);
        }
    }

    #[test]
    fn an_aggregate_should_bracket_several_and_drop_repeats() {
        let a = FieldError::required("a", "");
        let b = FieldError::required("b", "");
        assert_eq!(aggregate(std::slice::from_ref(&a)), "a: Required value");
        assert_eq!(aggregate(&[a.clone(), b, a]), "[a: Required value, b: Required value]");
    }
}
