//! An object's own name as its identity keeps it.
//!
//! Most objects of a large cluster are named by a controller after their owner: a ReplicaSet's
//! pods are `<replicaset>-<5 characters>`, a Job's and a DaemonSet's alike, a StatefulSet's
//! `<statefulset>-<ordinal>`. The owner's name is already stored once ([`Name`]) and shared by its
//! node and by the ownerReferences of its dependents. So an [`ObjectName`] is either a whole name,
//! or such a stem and the few characters after its dash, inline: a pod then needs no block of its
//! own for its name, where it took a 32-byte one.
//!
//! Layout: 16 bytes, the stem's pointer and one word for the suffix, its length in the first byte
//! (0 for a whole name) and up to [`MAX_SUFFIX`] bytes of text after it.
//!
//! Invariants: a derived name's text is the stem, a dash and the suffix, of 1 to [`MAX_SUFFIX`]
//! bytes; a whole name's is the stem's. Names compare, order and hash by text, whichever form
//! holds them, so the form is a matter of memory only and never part of a decision.

use super::name::Name;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

/// The longest suffix kept inline: what a word holds beside the length byte.
const MAX_SUFFIX: usize = 7;

/// Longest text [`ObjectName::with_str`] assembles on the stack: an object name's limit (253, a
/// DNS subdomain) with room to spare; a longer one, which only a custom resource can have, is
/// assembled on the heap.
const STACK_TEXT: usize = 320;

/// An object's name: whole, or a shared stem and an inline suffix (see the module docs).
#[derive(Clone)]
pub struct ObjectName {
    stem: Name,
    suffix: [u8; MAX_SUFFIX + 1],
}

impl ObjectName {
    /// A whole name holding a copy of `s`.
    pub fn new(s: &str) -> ObjectName {
        ObjectName::from(Name::new(s))
    }

    /// `name` as `stem`, a dash and a suffix of at most 7 bytes, when it is one: the name a
    /// controller generates for its dependent (see the module docs).
    pub fn derived(stem: &Name, name: &str) -> Option<ObjectName> {
        let suffix = name.strip_prefix(stem.as_str())?.strip_prefix('-')?;
        if suffix.is_empty() || suffix.len() > MAX_SUFFIX {
            return None;
        }
        let mut inline = [0; MAX_SUFFIX + 1];
        inline[0] = suffix.len() as u8;
        inline[1..=suffix.len()].copy_from_slice(suffix.as_bytes());
        Some(ObjectName {
            stem: stem.clone(),
            suffix: inline,
        })
    }

    /// The stem and the suffix: the text is the stem alone when the suffix is empty, else the
    /// stem, a dash and the suffix.
    fn pieces(&self) -> (&str, &str) {
        let bytes = &self.suffix[1..=usize::from(self.suffix[0])];
        // SAFETY: the suffix bytes were copied from a `&str` after an ASCII dash, so they are
        // whole characters: valid UTF-8.
        (self.stem.as_str(), unsafe { std::str::from_utf8_unchecked(bytes) })
    }

    /// The whole name's shared storage, when this is one.
    pub fn as_whole(&self) -> Option<&Name> {
        (self.suffix[0] == 0).then_some(&self.stem)
    }

    /// The name's length in bytes.
    pub fn len(&self) -> usize {
        match self.pieces() {
            (stem, "") => stem.len(),
            (stem, suffix) => stem.len() + 1 + suffix.len(),
        }
    }

    /// True for the empty name.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs `f` on the name's text, assembled on the stack for a derived name.
    pub fn with_str<R>(&self, f: impl FnOnce(&str) -> R) -> R {
        let (stem, suffix) = self.pieces();
        if suffix.is_empty() {
            return f(stem);
        }
        let len = self.len();
        if len > STACK_TEXT {
            return f(&self.to_string());
        }
        let mut buf = [0u8; STACK_TEXT];
        buf[..stem.len()].copy_from_slice(stem.as_bytes());
        buf[stem.len()] = b'-';
        buf[stem.len() + 1..len].copy_from_slice(suffix.as_bytes());
        // SAFETY: two valid UTF-8 strings joined by an ASCII dash.
        f(unsafe { std::str::from_utf8_unchecked(&buf[..len]) })
    }

    /// The name as a [`Name`]: this one's storage when it is whole, a new copy when derived.
    pub fn to_name(&self) -> Name {
        self.as_whole().cloned().unwrap_or_else(|| self.with_str(Name::new))
    }

    /// True when the text is `s`.
    fn is(&self, s: &str) -> bool {
        match self.pieces() {
            (stem, "") => stem == s,
            (stem, suffix) => {
                s.len() == self.len() && s.starts_with(stem) && s[stem.len()..].strip_prefix('-') == Some(suffix)
            }
        }
    }
}

impl From<Name> for ObjectName {
    fn from(stem: Name) -> Self {
        ObjectName {
            stem,
            suffix: [0; MAX_SUFFIX + 1],
        }
    }
}

impl From<&str> for ObjectName {
    fn from(s: &str) -> Self {
        ObjectName::new(s)
    }
}

impl PartialEq for ObjectName {
    fn eq(&self, other: &Self) -> bool {
        match other.as_whole() {
            Some(whole) if self.as_whole().is_some_and(|mine| mine == whole) => true,
            Some(whole) => self.is(whole.as_str()),
            None => self.len() == other.len() && other.with_str(|s| self.is(s)),
        }
    }
}

impl Eq for ObjectName {}

impl PartialEq<Name> for ObjectName {
    fn eq(&self, other: &Name) -> bool {
        self.as_whole().is_some_and(|whole| Name::ptr_eq(whole, other)) || self.is(other.as_str())
    }
}

impl PartialEq<str> for ObjectName {
    fn eq(&self, other: &str) -> bool {
        self.is(other)
    }
}

impl PartialEq<&str> for ObjectName {
    fn eq(&self, other: &&str) -> bool {
        self.is(other)
    }
}

/// By text, as equality is: the same hash as the text's, in either form.
impl Hash for ObjectName {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.with_str(|s| s.hash(state));
    }
}

impl Ord for ObjectName {
    fn cmp(&self, other: &Self) -> Ordering {
        self.with_str(|a| other.with_str(|b| a.cmp(b)))
    }
}

impl PartialOrd for ObjectName {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pieces() {
            (stem, "") => f.write_str(stem),
            (stem, suffix) => write!(f, "{stem}-{suffix}"),
        }
    }
}

impl fmt::Debug for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.with_str(|s| fmt::Debug::fmt(s, f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    fn hash(x: &impl Hash) -> u64 {
        std::hash::BuildHasherDefault::<std::hash::DefaultHasher>::default().hash_one(x)
    }

    #[test]
    fn a_controllers_name_for_its_dependent_should_keep_only_the_suffix() {
        let rs = Name::new("web-7d9f8c6b5");
        let pod = ObjectName::derived(&rs, "web-7d9f8c6b5-x2x9z").expect("derived");
        assert!(pod.as_whole().is_none());
        assert_eq!(pod.to_string(), "web-7d9f8c6b5-x2x9z");
        assert_eq!(pod.len(), 19);
        assert_eq!(pod, "web-7d9f8c6b5-x2x9z");
        assert_eq!(std::mem::size_of::<ObjectName>(), 16);
        assert_eq!(std::mem::size_of::<Option<ObjectName>>(), 16);
    }

    #[test]
    fn a_name_that_does_not_extend_the_stem_by_a_short_suffix_should_not_be_derived() {
        let rs = Name::new("web");
        for name in ["web", "web-", "webx-a", "web-12345678", "api-1", "we"] {
            assert!(ObjectName::derived(&rs, name).is_none(), "{name}");
        }
        assert!(ObjectName::derived(&rs, "web-1234567").is_some());
        assert!(ObjectName::derived(&rs, "web-ü").is_some(), "a suffix may be any text");
    }

    #[test]
    fn both_forms_of_one_text_should_be_the_same_name() {
        let rs = Name::new("job");
        let derived = ObjectName::derived(&rs, "job-ab12c").unwrap();
        let whole = ObjectName::new("job-ab12c");
        assert_eq!(derived, whole);
        assert_eq!(whole, derived);
        assert_eq!(hash(&derived), hash(&whole));
        assert_eq!(hash(&derived), hash(&"job-ab12c"));
        assert_eq!(derived.cmp(&whole), Ordering::Equal);
        assert_eq!(derived, Name::new("job-ab12c"));
        assert_eq!(derived.to_name(), "job-ab12c");
        assert_ne!(derived, ObjectName::new("job-ab12"));
        assert_ne!(derived, ObjectName::derived(&rs, "job-ab12d").unwrap());
        assert!(ObjectName::derived(&rs, "job-a").unwrap() < derived);
        assert_eq!(format!("{derived:?}"), "\"job-ab12c\"");
    }

    #[test]
    fn a_derived_name_of_a_long_stem_should_read_back_whole() {
        let stem = Name::new(&"s".repeat(400));
        let name = format!("{}-0", "s".repeat(400));
        let derived = ObjectName::derived(&stem, &name).unwrap();
        assert_eq!(derived.with_str(str::to_owned), name);
        assert_eq!(hash(&derived), hash(&name.as_str()));
    }
}
