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

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::LazyLock;

/// A process-wide intern table: each key's one value.
type Table<K, V> = LazyLock<papaya::HashMap<K, V, foldhash::fast::RandomState>>;

/// The value interned for `key`, made by `make` (which leaks it) on first use. If another thread
/// wins the race to insert `key`, its value is the one returned and `make`'s copy stays unused.
fn intern<K, V, Q>(table: &Table<K, V>, key: &Q, make: impl FnOnce() -> (K, V)) -> V
where
    K: Hash + Eq,
    V: Copy,
    Q: Hash + papaya::Equivalent<K> + ?Sized,
{
    let table = table.pin();
    if let Some(found) = table.get(key) {
        return *found;
    }
    let (key, value) = make();
    match table.try_insert(key, value) {
        Ok(inserted) => *inserted,
        Err(occupied) => *occupied.current,
    }
}

/// An interned string.
#[derive(Clone, Copy)]
#[allow(clippy::borrowed_box, reason = "a thin pointer: 8 bytes where a `&str` takes 16")]
pub struct Sym(&'static Box<str>);

static SYMS: Table<&'static str, Sym> = LazyLock::new(Default::default);

impl Sym {
    /// The interned copy of `s`, added on first use. Any thread may intern.
    pub fn new(s: &str) -> Sym {
        intern(&SYMS, s, || {
            // Leaked on purpose: the table lives as long as the process.
            let sym = Sym(Box::leak(Box::new(Box::from(s))));
            (sym.as_str(), sym)
        })
    }

    /// The string.
    pub fn as_str(&self) -> &'static str {
        self.0
    }
}

super::string_view!(Sym);

impl PartialEq for Sym {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for Sym {}

/// By address, as equality is.
impl Hash for Sym {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::ptr::hash(self.0, state);
    }
}

/// An interned (apiVersion, kind) pair.
#[derive(Clone, Copy)]
pub struct TypeMeta(&'static Pair);

/// The pair a [`TypeMeta`] points to, aligned so that its address leaves [`TAG_BITS`] low bits
/// free for [`TaggedTypeMeta`].
#[repr(align(16))]
struct Pair(Sym, Sym);

/// Low bits of a pair's address that are always zero.
const TAG_BITS: u32 = 4;
const TAG_MASK: usize = (1 << TAG_BITS) - 1;

static TYPES: Table<(Sym, Sym), TypeMeta> = LazyLock::new(Default::default);

impl TypeMeta {
    /// The interned pair, added on first use. Any thread may intern.
    pub fn new(api_version: Sym, kind: Sym) -> TypeMeta {
        let key = (api_version, kind);
        // Leaked on purpose, as symbols are.
        intern(&TYPES, &key, || {
            (key, TypeMeta(Box::leak(Box::new(Pair(key.0, key.1)))))
        })
    }

    /// This type and `tag` (less than 16) in one word.
    pub(super) fn tagged(self, tag: u8) -> TaggedTypeMeta {
        debug_assert!(usize::from(tag) <= TAG_MASK, "a tag has {TAG_BITS} bits");
        let p = std::ptr::NonNull::from(self.0).cast::<u8>();
        TaggedTypeMeta(p.map_addr(|a| a | (usize::from(tag) & TAG_MASK)))
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

/// A [`TypeMeta`] and 4 bits of its holder's in one word, which an owner reference uses for its
/// two optional flags: the pair's alignment leaves its address's low bits free.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct TaggedTypeMeta(std::ptr::NonNull<u8>);

// SAFETY: the word points to an interned pair, which is immutable and lives as long as the
// process; sharing or sending the pointer shares nothing else.
unsafe impl Send for TaggedTypeMeta {}
// SAFETY: as above.
unsafe impl Sync for TaggedTypeMeta {}

impl TaggedTypeMeta {
    /// The type.
    pub(super) fn type_meta(self) -> TypeMeta {
        let p = self
            .0
            .map_addr(|a| std::num::NonZeroUsize::new(a.get() & !TAG_MASK).expect("a pair's address is not zero"));
        // SAFETY: `tagged` made this from a `&'static Pair` by setting low bits its alignment
        // leaves zero; clearing them gives back that reference, with its provenance.
        TypeMeta(unsafe { p.cast::<Pair>().as_ref() })
    }

    /// The tag.
    pub(super) fn tag(self) -> u8 {
        (self.0.addr().get() & TAG_MASK) as u8
    }
}

impl PartialEq for TypeMeta {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for TypeMeta {}

/// By address, as equality is.
impl Hash for TypeMeta {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::ptr::hash(self.0, state);
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

    #[test]
    fn a_tagged_type_meta_should_give_back_its_type_and_tag() {
        let a = TypeMeta::new(Sym::new("apps/v1"), Sym::new("ReplicaSet"));
        for tag in 0..16 {
            let tagged = a.tagged(tag);
            assert_eq!((tagged.type_meta(), tagged.tag()), (a, tag));
        }
        assert_ne!(a.tagged(1), a.tagged(2));
        assert_eq!(std::mem::size_of::<Option<TaggedTypeMeta>>(), 8);
    }
}
