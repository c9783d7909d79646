//! The API server's validation of `metadata.ownerReferences`, shared by the simulated cluster
//! (which answers 422 Invalid) and by every event source (which drops an unreadable object), so
//! a malformed reference is judged by one rule wherever it comes from.

use super::OwnerReference;
use thiserror::Error;

/// Why an ownerReferences list is invalid.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum InvalidOwnerReference {
    /// A required field is empty.
    #[error("metadata.ownerReferences[{index}].{field}: Required value")]
    Missing {
        /// Position of the ref in the list.
        index: usize,
        /// `apiVersion`, `kind`, `name` or `uid`.
        field: &'static str,
    },
    /// The apiVersion has no version part (`apps/`) or is not a group-version (`apps/v1/extra`).
    #[error("metadata.ownerReferences[{index}].apiVersion: Invalid value: {api_version:?}: version must not be empty")]
    BadApiVersion {
        /// Position of the ref in the list.
        index: usize,
        /// The offending value.
        api_version: String,
    },
    /// More than one ref sets `controller: true`.
    #[error(
        "metadata.ownerReferences: Invalid value: only one reference can have Controller set to true, found {count}"
    )]
    MultipleControllers {
        /// How many refs claim to be the controller.
        count: usize,
    },
}

/// Checks every ref the way the API server does on create and update.
pub fn validate_owner_references(refs: &[OwnerReference]) -> Result<(), InvalidOwnerReference> {
    for (index, r) in refs.iter().enumerate() {
        for (field, value) in [
            ("apiVersion", &r.api_version),
            ("kind", &r.kind),
            ("name", &r.name),
            ("uid", &r.uid),
        ] {
            if value.is_empty() {
                return Err(InvalidOwnerReference::Missing { index, field });
            }
        }
        // Upstream reads the version through `schema.FromAPIVersionAndKind`, which leaves it empty
        // when the apiVersion is not a group-version (`apps/`, and also `apps/v1/extra`: more than
        // one `/` does not parse), so both are "version must not be empty".
        let version = super::split_api_version(&r.api_version).1;
        if version.is_empty() || version.contains('/') {
            return Err(InvalidOwnerReference::BadApiVersion {
                index,
                api_version: r.api_version.clone(),
            });
        }
    }
    let count = refs.iter().filter(|r| r.controller == Some(true)).count();
    if count > 1 {
        return Err(InvalidOwnerReference::MultipleControllers { count });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: "p".into(),
            uid: "u".into(),
            ..Default::default()
        }
    }

    #[test]
    fn validation_should_reject_empty_uid_and_missing_kind() {
        let no_uid = OwnerReference {
            uid: String::new(),
            ..good()
        };
        assert_eq!(
            validate_owner_references(&[no_uid]),
            Err(InvalidOwnerReference::Missing { index: 0, field: "uid" })
        );
        let no_kind = OwnerReference {
            kind: String::new(),
            ..good()
        };
        assert_eq!(
            validate_owner_references(&[good(), no_kind]),
            Err(InvalidOwnerReference::Missing {
                index: 1,
                field: "kind"
            })
        );
    }

    #[test]
    fn validation_should_reject_an_api_version_that_is_not_a_group_version() {
        for bad in ["apps/", "apps/v1/extra", "a//b"] {
            let r = OwnerReference {
                api_version: bad.into(),
                ..good()
            };
            assert!(
                matches!(
                    validate_owner_references(&[r]),
                    Err(InvalidOwnerReference::BadApiVersion { index: 0, .. })
                ),
                "{bad}"
            );
        }
        for fine in ["v1", "apps/v1", "example.com/v1beta1"] {
            let r = OwnerReference {
                api_version: fine.into(),
                ..good()
            };
            assert_eq!(validate_owner_references(&[r]), Ok(()), "{fine}");
        }
    }

    #[test]
    fn validation_should_reject_two_controllers_but_accept_duplicates() {
        let c = OwnerReference {
            controller: Some(true),
            ..good()
        };
        assert!(matches!(
            validate_owner_references(&[c.clone(), c]),
            Err(InvalidOwnerReference::MultipleControllers { count: 2 })
        ));
        assert!(validate_owner_references(&[good(), good()]).is_ok());
    }
}
