//! Interned strings for the few values that repeat across millions of nodes: apiVersion, kind and
//! namespace.
//!
//! A [`Sym`] is one pointer into a process-wide table, so it is 8 bytes, `Copy`, and compares by
//! address. The table only grows: the apiVersions, kinds and namespaces of a cluster are few and
//! long-lived, and a deleted namespace costs its name once.
//!
//! A [`TypeMeta`] is the pair (apiVersion, kind) interned the same way: every identity and owner
//! reference names one, and a cluster has a few hundred at most.
//!
//! Invariant: every `Sym` comes from [`Sym::new`] and every `TypeMeta` from [`TypeMeta::new`],
//! which hand out one address per distinct value, so address equality is value equality.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::LazyLock;

/// An interned string.
#[derive(Clone, Copy)]
#[allow(clippy::borrowed_box, reason = "a thin pointer: 8 bytes where a `&str` takes 16")]
pub struct Sym(&'static Box<str>);

static TABLE: LazyLock<papaya::HashSet<Sym, foldhash::fast::RandomState>> = LazyLock::new(Default::default);

impl Sym {
    /// The interned copy of `s`, added on first use. Any thread may intern.
    pub fn new(s: &str) -> Sym {
        let table = TABLE.pin();
        if let Some(found) = table.get(s) {
            return *found;
        }
        // Leaked on purpose: the table lives as long as the process. If another thread wins the
        // race to insert `s`, this copy stays unused; the table still holds exactly one.
        let candidate = Sym(Box::leak(Box::new(Box::from(s))));
        table.insert(candidate);
        *table.get(s).expect("interned string present after insert")
    }

    /// The string.
    pub fn as_str(&self) -> &'static str {
        self.0
    }

    /// Number of distinct strings interned by the process.
    pub fn interned() -> usize {
        TABLE.len()
    }
}

impl Deref for Sym {
    type Target = str;
    fn deref(&self) -> &str {
        self.0
    }
}

impl Borrow<str> for Sym {
    fn borrow(&self) -> &str {
        self.0
    }
}

impl PartialEq for Sym {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for Sym {}

impl PartialEq<str> for Sym {
    fn eq(&self, other: &str) -> bool {
        **self.0 == *other
    }
}

impl PartialEq<&str> for Sym {
    fn eq(&self, other: &&str) -> bool {
        **self.0 == **other
    }
}

/// Hashes the string, as `str` does, so that the table can be searched by `&str`.
impl Hash for Sym {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl Ord for Sym {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for Sym {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Sym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl fmt::Debug for Sym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<&str> for Sym {
    fn from(s: &str) -> Self {
        Sym::new(s)
    }
}

/// An interned (apiVersion, kind) pair.
#[derive(Clone, Copy)]
pub struct TypeMeta(&'static (Sym, Sym));

static TYPES: LazyLock<papaya::HashSet<TypeMeta, foldhash::fast::RandomState>> = LazyLock::new(Default::default);

impl TypeMeta {
    /// The interned pair, added on first use. Any thread may intern.
    pub fn new(api_version: Sym, kind: Sym) -> TypeMeta {
        let key = (api_version, kind);
        let table = TYPES.pin();
        if let Some(found) = table.get(&key) {
            return *found;
        }
        // Leaked on purpose, as symbols are.
        table.insert(TypeMeta(Box::leak(Box::new(key))));
        *table.get(&key).expect("interned type present after insert")
    }

    /// The apiVersion.
    pub fn api_version(self) -> Sym {
        self.0 .0
    }

    /// The kind.
    pub fn kind(self) -> Sym {
        self.0 .1
    }
}

impl Borrow<(Sym, Sym)> for TypeMeta {
    fn borrow(&self) -> &(Sym, Sym) {
        self.0
    }
}

impl PartialEq for TypeMeta {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for TypeMeta {}

/// Hashes the pair, as `(Sym, Sym)` does, so that the table can be searched by pair.
impl Hash for TypeMeta {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl fmt::Debug for TypeMeta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.api_version(), self.kind())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sym_should_share_one_address_per_string() {
        let a = Sym::new("apps/v1");
        let b = Sym::new(&String::from("apps/v1"));
        assert!(std::ptr::eq(a.as_str(), b.as_str()));
        assert_eq!(a, b);
        assert_ne!(a, Sym::new("v1"));
        assert_eq!(a, "apps/v1");
        assert_eq!(std::mem::size_of::<Sym>(), 8);
    }

    #[test]
    fn type_meta_should_share_one_address_per_pair() {
        let (apps, rs) = (Sym::new("apps/v1"), Sym::new("ReplicaSet"));
        let a = TypeMeta::new(apps, rs);
        assert_eq!(a, TypeMeta::new(Sym::new("apps/v1"), Sym::new("ReplicaSet")));
        assert_ne!(a, TypeMeta::new(rs, apps));
        assert_eq!((a.api_version(), a.kind()), (apps, rs));
    }
}
