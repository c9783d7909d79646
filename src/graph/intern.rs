//! Interned strings for the few values that repeat across millions of nodes: apiVersion, kind and
//! namespace.
//!
//! An interned [`Sym`] is an `Arc<str>`: equal strings share one allocation, so a node pays one
//! pointer for each instead of a copy. The table only grows; the set of apiVersions, kinds and
//! namespaces of a cluster is small and long-lived.

use std::sync::Arc;

/// An interned string.
pub type Sym = Arc<str>;

/// A concurrent intern table; any thread may intern.
#[derive(Default)]
pub struct Interner {
    table: papaya::HashSet<Sym>,
}

impl Interner {
    /// Returns the shared copy of `s`, adding it on first use.
    pub fn intern(&self, s: &str) -> Sym {
        let table = self.table.pin();
        if let Some(found) = table.get(s) {
            return found.clone();
        }
        table.insert(Arc::from(s));
        // Another thread may have won the insert; either way the table now holds the one copy.
        table.get(s).expect("interned string present after insert").clone()
    }

    /// Number of distinct strings interned.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// True when nothing was interned yet.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

impl std::fmt::Debug for Interner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interner").field("len", &self.len()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interner_should_share_one_allocation_per_string() {
        let interner = Interner::default();
        let a = interner.intern("apps/v1");
        let b = interner.intern("apps/v1");
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(interner.len(), 1);
    }
}
