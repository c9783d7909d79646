//! Object names: one shared, immutable string per name, behind an 8-byte pointer.
//!
//! A name is stored once and shared by everything that holds it: the node, the ownerReferences of
//! its dependents that name it (see [`crate::event`]), the monitor that watches it and any queued
//! identity. Cloning is a reference-count increment; the bytes go with the last holder.

use std::hash::{Hash, Hasher};
use triomphe::ThinArc;

/// A shared object name.
#[derive(Clone)]
pub struct Name(ThinArc<(), u8>);

impl Name {
    /// A name holding a copy of `s`.
    pub fn new(s: &str) -> Name {
        Name(ThinArc::from_header_and_slice((), s.as_bytes()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        // SAFETY: the bytes were copied from a `&str` in `Name::new` and are never mutated (a
        // `ThinArc` hands out shared references only), so they are valid UTF-8.
        unsafe { std::str::from_utf8_unchecked(&self.0.slice) }
    }

    /// True when both hold the same allocation.
    pub fn ptr_eq(a: &Name, b: &Name) -> bool {
        a.0.ptr() == b.0.ptr()
    }
}

super::string_view!(Name);

impl PartialEq for Name {
    fn eq(&self, other: &Self) -> bool {
        Name::ptr_eq(self, other) || self.as_str() == other.as_str()
    }
}

impl Eq for Name {}

/// By text, as equality is.
impl Hash for Name {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_should_read_back_what_it_was_made_from() {
        for s in ["", "web-7d9f8c6b5-x2x9z", "ünïcode"] {
            let name = Name::new(s);
            assert_eq!(name.as_str(), s);
            assert_eq!(name.clone(), name);
        }
        assert_eq!(std::mem::size_of::<Name>(), 8);
    }
}
