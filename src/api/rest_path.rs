//! REST paths and queries, built so that no name can steer a request.
//!
//! Names, namespaces and owner references come from tenants' objects, so every path segment is
//! either escaped as a URL path segment (as client-go's URLs escape them: everything but the
//! unreserved characters and `$&+,:;=@` is percent-encoded, so a space, `?`, `#` or a non-ASCII
//! letter stays inside its segment) or refused before a request is built.
//!
//! Invariant: a path built here names exactly the group, version, resource, namespace and name it
//! was given, or it is not built. A segment that no object or resource can have is refused: empty
//! (an empty name would name the collection), `.` or `..` (which a URL resolves to another path),
//! or one holding `/` or `%` (which would split the segment, or be decoded into another name). The
//! API server refuses such names on create, so nothing with one exists: the refusal is
//! [`StatusReason::NotFound`], which every caller already takes as the object's absence, the
//! answer the server would give, and never retried.

use super::{ApiError, Gvr, StatusReason};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use std::fmt::Write;

/// Bytes a path segment keeps as they are: the unreserved characters and the sub-delimiters and
/// `:` `@` that a path allows, less `/`. Everything else is percent-encoded.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'$')
    .remove(b'&')
    .remove(b'+')
    .remove(b',')
    .remove(b':')
    .remove(b';')
    .remove(b'=')
    .remove(b'@');

/// The REST path of a collection (`name` `None`) or an object; see the [module docs](self).
pub fn path(gvr: &Gvr, namespace: &str, name: Option<&str>) -> Result<String, ApiError> {
    let mut path = String::from(if gvr.group.is_empty() { "/api" } else { "/apis" });
    if !gvr.group.is_empty() {
        push_segment(&mut path, &gvr.group)?;
    }
    push_segment(&mut path, &gvr.version)?;
    if !namespace.is_empty() {
        path.push_str("/namespaces");
        push_segment(&mut path, namespace)?;
    }
    push_segment(&mut path, &gvr.resource)?;
    if let Some(name) = name {
        push_segment(&mut path, name)?;
    }
    Ok(path)
}

/// Appends `/segment`, escaped, or refuses a segment that cannot name anything.
fn push_segment(path: &mut String, segment: &str) -> Result<(), ApiError> {
    if matches!(segment, "" | "." | "..") || segment.contains(['/', '%']) {
        return Err(ApiError::status(
            StatusReason::NotFound,
            format!("{segment:?} is not a name the API server accepts, so nothing has it: not requested"),
        ));
    }
    write!(path, "/{}", utf8_percent_encode(segment, SEGMENT)).expect("writing to a String cannot fail");
    Ok(())
}

/// `path?query`, each value percent-encoded: a continue token or resourceVersion is opaque and may
/// hold characters a query string reserves.
pub fn with_query(path: &str, pairs: &[(&str, &str)]) -> String {
    let query = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    format!("{path}?{query}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_should_be_percent_encoded() {
        let uri = with_query("/api/v1/pods", &[("limit", "500"), ("continue", "a+b/c=&d")]);
        assert_eq!(uri, "/api/v1/pods?limit=500&continue=a%2Bb%2Fc%3D%26d");
    }

    #[test]
    fn paths_should_follow_the_rest_layout() {
        let deployments = Gvr::new("apps", "v1", "deployments");
        assert_eq!(
            path(&deployments, "ns", Some("d")).unwrap(),
            "/apis/apps/v1/namespaces/ns/deployments/d"
        );
        assert_eq!(path(&Gvr::new("", "v1", "nodes"), "", None).unwrap(), "/api/v1/nodes");
    }

    #[test]
    fn every_segment_should_stay_in_its_place() {
        let pods = Gvr::new("", "v1", "pods");
        for (name, escaped) in [
            ("a b", "a%20b"),
            ("a?watch=true", "a%3Fwatch=true"),
            ("a#frag", "a%23frag"),
            ("ünï", "%C3%BCn%C3%AF"),
            ("a.b-c_d~e", "a.b-c_d~e"),
            ("...", "..."),
        ] {
            let expected = format!("/api/v1/namespaces/ns/pods/{escaped}");
            assert_eq!(path(&pods, "ns", Some(name)).unwrap(), expected, "{name:?}");
        }
        let long = "a".repeat(253);
        assert!(path(&pods, "ns", Some(&long)).unwrap().ends_with(&long));
        assert!(path(&pods, "n s", None)
            .unwrap()
            .starts_with("/api/v1/namespaces/n%20s/"));
    }

    #[test]
    fn a_segment_nothing_can_have_should_be_not_found_without_a_request() {
        let pods = Gvr::new("", "v1", "pods");
        for name in ["", ".", "..", "../x", "a/b", "x%2Fy", "%"] {
            let err = path(&pods, "ns", Some(name)).unwrap_err();
            assert!(err.is_not_found(), "{name:?}: {err}");
        }
        assert!(path(&pods, "..", Some("a")).unwrap_err().is_not_found());
        assert!(path(&Gvr::new("a/b", "v1", "x"), "", None).unwrap_err().is_not_found());
    }
}
