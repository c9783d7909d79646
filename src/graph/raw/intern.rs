//! Interned strings for the few values that repeat across millions of nodes: apiVersion, kind and
//! namespace.
//!
//! A [`Sym`] is one pointer to an entry of a process-wide table, so it is 8 bytes and compares by
//! address. A [`TypeMeta`] is the pair (apiVersion, kind) interned the same way: every identity
//! and owner reference names one.
//!
//! # What an entry costs, and for how long
//!
//! The values come from the objects a tenant writes: an owner reference's apiVersion and kind are
//! free text to the API server, and a tenant may name a new one in every object. So an entry
//! counts its holders, and leaves the table with the last, which frees it. A value held by
//! [`POPULAR`] holders at once
//! (a served kind, a busy namespace) stops counting and stays for the life of the process: clones
//! and drops of it then write nothing, so that builders on many cores do not contend on the count
//! of `v1/Pod`. What the table keeps for good is thus bounded by the objects it took to get there,
//! about one entry per [`POPULAR`] objects.
//!
//! Invariants:
//!
//! - every `Sym` comes from [`Sym::new`] and every `TypeMeta` from [`TypeMeta::new`], which hand
//!   out one live entry per distinct value, so address equality is value equality;
//! - an entry in the table has at least one holder or is immortal, except between its last
//!   release and its removal, during which no new holder can acquire it ([`acquire`] refuses a
//!   count of zero, and an interner replaces it);
//! - a reader uses an entry it found in the table only under the lock of the table's shard, and
//!   the last holder frees the entry only once it has held that lock, so no one reaches a freed
//!   entry.

use crate::sync::process_wide::{fence, AtomicU32, Ordering};
use parking_lot::RwLock;
use std::borrow::Borrow;
use std::collections::HashSet;
use std::fmt;
use std::hash::BuildHasher;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::LazyLock;

/// Holders at once from which an entry stops counting and is never freed.
const POPULAR: u32 = 1024;

/// The count of an entry that no longer counts.
const IMMORTAL: u32 = u32::MAX;

/// One interned value and its count of holders.
struct Entry<V> {
    holders: AtomicU32,
    value: V,
}

/// What a table interns: its lookup form, and what leaves with an entry.
trait Value: Hash + Eq + Sync + Sized + 'static {
    /// What a lookup borrows.
    type Probe: Hash + Eq + ?Sized;

    /// The process-wide table.
    fn table() -> &'static LazyLock<Table<Self>>;

    /// This value as a lookup borrows it.
    fn probe(&self) -> &Self::Probe;

    /// Lets go of what the value holds, once its entry is out of the table with no holder left.
    ///
    /// # Safety
    ///
    /// Called at most once per entry, once it is out of its table with no holder, or was never
    /// in it; the value is not used afterwards.
    unsafe fn unlink(&self) {}
}

/// The table's key: an entry, hashed and compared by value.
struct Key<V: 'static>(NonNull<Entry<V>>);

impl<V> Key<V> {
    fn value(&self) -> &V {
        // SAFETY: a key is in the table only while its entry is live, and is read only under its
        // shard's lock (module invariants).
        unsafe { &self.0.as_ref().value }
    }
}

impl<V: Hash> Hash for Key<V> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.value().hash(state);
    }
}

impl<V: PartialEq> PartialEq for Key<V> {
    fn eq(&self, other: &Self) -> bool {
        self.value() == other.value()
    }
}

impl<V: Eq> Eq for Key<V> {}

impl Borrow<str> for Key<Box<str>> {
    fn borrow(&self) -> &str {
        self.value()
    }
}

impl Borrow<(Sym, Sym)> for Key<Pair> {
    fn borrow(&self) -> &(Sym, Sym) {
        self.value().probe()
    }
}

// SAFETY: keys point to entries whose value is immutable once interned (`Sym` and `Pair` are
// Sync) and whose count is atomic; a table hands them between threads, never the right to free
// them, which only the last release takes.
unsafe impl<V: Sync> Send for Key<V> {}
// SAFETY: as above.
unsafe impl<V: Sync> Sync for Key<V> {}

/// Shards of a table, so that threads interning different values rarely meet on one lock.
const SHARDS: usize = 64;

/// A process-wide intern table: shards of a hash set of keys, each behind a lock. A reader uses
/// an entry it finds only under its shard's lock (to acquire it); the last holder takes the entry
/// out under the write lock, so once it holds that lock no one else can reach the entry.
///
/// Locks rather than a lock-free map: values come and go for good (a tenant's random kinds), and
/// a lock-free map that only drops removed slots when it grows grew without bound under that
/// churn (2 GB after 150 000 distinct kinds).
struct Table<V: 'static> {
    hasher: foldhash::fast::RandomState,
    shards: Box<[Shard<V>]>,
}

/// One shard of a [`Table`].
type Shard<V> = RwLock<HashSet<Key<V>, foldhash::fast::RandomState>>;

impl<V: Value> Table<V>
where
    Key<V>: Borrow<V::Probe>,
{
    fn new() -> Self {
        Table {
            hasher: foldhash::fast::RandomState::default(),
            shards: (0..SHARDS).map(|_| RwLock::default()).collect(),
        }
    }

    fn shard(&self, probe: &V::Probe) -> &Shard<V> {
        let hash = self.hasher.hash_one(probe);
        &self.shards[(hash as usize) % SHARDS]
    }
}

/// One more holder of the entry `found` points to, unless it is on its way out.
fn acquire<V>(found: NonNull<Entry<V>>) -> bool {
    // SAFETY: the caller holds the entry, or found it in the table under its shard's lock, which
    // it still holds.
    let holders = unsafe { &found.as_ref().holders };
    let mut n = holders.load(Ordering::Relaxed);
    loop {
        if n == IMMORTAL {
            return true;
        }
        if n == 0 {
            return false;
        }
        let next = if n + 1 >= POPULAR { IMMORTAL } else { n + 1 };
        match holders.compare_exchange_weak(n, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(now) => n = now,
        }
    }
}

/// One more holder of an entry the caller already holds.
fn retain<V>(held: NonNull<Entry<V>>) {
    let acquired = acquire(held);
    debug_assert!(acquired, "a held entry has a holder");
}

/// The entry of the value `probe` looks up, made by `make` and added on first use; the caller
/// holds it once. Any thread may intern.
fn intern<V: Value>(probe: &V::Probe, make: impl FnOnce() -> V) -> NonNull<Entry<V>>
where
    Key<V>: Borrow<V::Probe>,
{
    let shard = V::table().shard(probe);
    if let Some(found) = shard.read().get(probe).map(|key| key.0).filter(|&found| acquire(found)) {
        return found;
    }
    let mut keys = shard.write();
    if let Some(found) = keys.get(probe).map(|key| key.0) {
        if acquire(found) {
            return found;
        }
        // Its last holder let go and waits for this lock to take it out; it is ours to replace
        // (the holder then finds another entry under the value, and frees its own).
        keys.remove(probe);
    }
    let entry = NonNull::from(Box::leak(Box::new(Entry {
        holders: AtomicU32::new(1),
        value: make(),
    })));
    keys.insert(Key(entry));
    entry
}

/// Drops one holder of `held`; the last one takes the entry out of its table (unless a new one
/// replaced it there), lets go of what it holds, and frees it.
fn release<V: Value>(held: NonNull<Entry<V>>)
where
    Key<V>: Borrow<V::Probe>,
{
    // SAFETY: the caller holds the entry, so it is live.
    let entry = unsafe { held.as_ref() };
    let mut n = entry.holders.load(Ordering::Relaxed);
    loop {
        if n == IMMORTAL {
            return;
        }
        debug_assert!(n > 0, "released more often than held");
        match entry
            .holders
            .compare_exchange_weak(n, n - 1, Ordering::Release, Ordering::Relaxed)
        {
            Ok(_) => break,
            Err(now) => n = now,
        }
    }
    if n > 1 {
        return;
    }
    // The last holder: every other holder's use happened before its release, as with `Arc`.
    fence(Ordering::Acquire);
    let shard = V::table().shard(entry.value.probe());
    {
        let mut keys = shard.write();
        if keys.get(entry.value.probe()).is_some_and(|key| key.0 == held) {
            keys.remove(entry.value.probe());
        }
    }
    // SAFETY: the entry has no holder and a count of zero is never raised again; a reader that
    // found it did so under the shard's lock, which this thread has held since, so no one can
    // reach it. This is its one unlink, and the box came from `Box::leak` in `intern`.
    unsafe {
        entry.value.unlink();
        drop(Box::from_raw(held.as_ptr()));
    }
}

/// One holder of an entry: a clone is one more, a drop one fewer. Compares and hashes by
/// address, which is by value (module invariants).
struct Held<V: Value>(NonNull<Entry<V>>)
where
    Key<V>: Borrow<V::Probe>;

impl<V: Value> Held<V>
where
    Key<V>: Borrow<V::Probe>,
{
    fn intern(probe: &V::Probe, make: impl FnOnce() -> V) -> Self {
        Held(intern(probe, make))
    }

    fn value(&self) -> &V {
        // SAFETY: this holder keeps the entry live.
        unsafe { &self.0.as_ref().value }
    }
}

impl<V: Value> Clone for Held<V>
where
    Key<V>: Borrow<V::Probe>,
{
    fn clone(&self) -> Self {
        retain(self.0);
        Held(self.0)
    }
}

impl<V: Value> Drop for Held<V>
where
    Key<V>: Borrow<V::Probe>,
{
    fn drop(&mut self) {
        release(self.0);
    }
}

impl<V: Value> PartialEq for Held<V>
where
    Key<V>: Borrow<V::Probe>,
{
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl<V: Value> Eq for Held<V> where Key<V>: Borrow<V::Probe> {}

impl<V: Value> Hash for Held<V>
where
    Key<V>: Borrow<V::Probe>,
{
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

// SAFETY: an entry's value is immutable once interned and `Sync` (`Value`), and its count is
// atomic; the holder that frees it is the last, whichever thread it is on.
unsafe impl<V: Value> Send for Held<V> where Key<V>: Borrow<V::Probe> {}
// SAFETY: as above.
unsafe impl<V: Value> Sync for Held<V> where Key<V>: Borrow<V::Probe> {}

/// An interned string.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Sym(Held<Box<str>>);

static SYMS: LazyLock<Table<Box<str>>> = LazyLock::new(Table::new);

impl Value for Box<str> {
    type Probe = str;

    fn table() -> &'static LazyLock<Table<Self>> {
        &SYMS
    }

    fn probe(&self) -> &str {
        self
    }
}

impl Sym {
    /// The interned copy of `s`, added on first use. Any thread may intern.
    pub fn new(s: &str) -> Sym {
        Sym(Held::intern(s, || Box::from(s)))
    }

    /// The string.
    pub fn as_str(&self) -> &str {
        self.0.value()
    }
}

crate::graph::string_view!(Sym);

/// An interned (apiVersion, kind) pair.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TypeMeta(Held<Pair>);

/// The pair a [`TypeMeta`] points to, aligned so that its entry's address leaves [`TAG_BITS`] low
/// bits free for [`TaggedTypeMeta`]. It holds its two symbols until its entry leaves the table
/// ([`Value::unlink`]).
#[derive(PartialEq, Eq, Hash)]
#[repr(align(16))]
struct Pair(ManuallyDrop<(Sym, Sym)>);

impl Value for Pair {
    type Probe = (Sym, Sym);

    fn table() -> &'static LazyLock<Table<Self>> {
        &TYPES
    }

    fn probe(&self) -> &(Sym, Sym) {
        &self.0
    }

    unsafe fn unlink(&self) {
        // SAFETY: the one unlink of this entry (the caller's contract), and the symbols are never
        // dropped otherwise.
        drop(unsafe { std::ptr::read(&*self.0) });
    }
}

/// Low bits of an entry's address that are always zero.
const TAG_BITS: u32 = 4;
const TAG_MASK: usize = (1 << TAG_BITS) - 1;

static TYPES: LazyLock<Table<Pair>> = LazyLock::new(Table::new);

impl TypeMeta {
    /// The interned pair, added on first use. Any thread may intern.
    pub fn new(api_version: Sym, kind: Sym) -> TypeMeta {
        let probe = (api_version, kind);
        // A new pair holds its own clones; the caller's are dropped either way.
        TypeMeta(Held::intern(&probe, || Pair(ManuallyDrop::new(probe.clone()))))
    }

    /// This type and `tag` (less than 16) in one word, which takes over this holder.
    pub(in crate::graph) fn tagged(self, tag: u8) -> TaggedTypeMeta {
        debug_assert!(usize::from(tag) <= TAG_MASK, "a tag has {TAG_BITS} bits");
        let this = ManuallyDrop::new(self);
        TaggedTypeMeta(this.0 .0.cast::<u8>().map_addr(|a| a | (usize::from(tag) & TAG_MASK)))
    }

    /// The apiVersion.
    pub fn api_version(&self) -> &Sym {
        &self.pair().0 .0
    }

    /// The kind.
    pub fn kind(&self) -> &Sym {
        &self.pair().0 .1
    }

    fn pair(&self) -> &Pair {
        self.0.value()
    }
}

/// A [`TypeMeta`] and 4 bits of its holder's in one word, which an owner reference uses for its
/// two optional flags: the pair's alignment leaves its address's low bits free. It holds its type
/// as a `TypeMeta` does.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(in crate::graph) struct TaggedTypeMeta(NonNull<u8>);

// SAFETY: as for `Held`, which it is.
unsafe impl Send for TaggedTypeMeta {}
// SAFETY: as above.
unsafe impl Sync for TaggedTypeMeta {}

impl TaggedTypeMeta {
    /// The type, borrowed from this word.
    pub(in crate::graph) fn type_meta(&self) -> TypeMetaRef<'_> {
        let p = self
            .0
            .map_addr(|a| std::num::NonZeroUsize::new(a.get() & !TAG_MASK).expect("an entry's address is not zero"));
        TypeMetaRef {
            // Not a holder: it borrows this word's, and is never dropped as a `TypeMeta`.
            type_meta: ManuallyDrop::new(TypeMeta(Held(p.cast::<Entry<Pair>>()))),
            _word: PhantomData,
        }
    }

    /// The tag.
    pub(in crate::graph) fn tag(&self) -> u8 {
        (self.0.addr().get() & TAG_MASK) as u8
    }
}

impl Clone for TaggedTypeMeta {
    fn clone(&self) -> Self {
        std::mem::forget(TypeMeta::clone(&self.type_meta()));
        TaggedTypeMeta(self.0)
    }
}

impl Drop for TaggedTypeMeta {
    fn drop(&mut self) {
        // The view's `TypeMeta`, dropped as one, releases this word's holder.
        drop(ManuallyDrop::into_inner(self.type_meta().type_meta));
    }
}

/// A [`TypeMeta`] borrowed from a [`TaggedTypeMeta`]: derefs to it; `.clone()` makes a holder.
pub struct TypeMetaRef<'a> {
    type_meta: ManuallyDrop<TypeMeta>,
    _word: PhantomData<&'a TaggedTypeMeta>,
}

impl<'a> TypeMetaRef<'a> {
    /// The apiVersion, for as long as the word this borrows from.
    pub fn api_version(&self) -> &'a Sym {
        &self.pair().0 .0
    }

    /// The kind, for as long as the word this borrows from.
    pub fn kind(&self) -> &'a Sym {
        &self.pair().0 .1
    }

    fn pair(&self) -> &'a Pair {
        // SAFETY: the word this borrows from holds the entry for 'a.
        unsafe { &self.type_meta.0 .0.as_ref().value }
    }
}

impl Deref for TypeMetaRef<'_> {
    type Target = TypeMeta;

    fn deref(&self) -> &TypeMeta {
        &self.type_meta
    }
}

/// An interned (namespace, apiVersion, kind): what an identity shares with every object of its
/// kind in its namespace, in one word. A node's identity would otherwise spend 8 more bytes on a
/// second pointer, which is the difference between a 64-byte block and the next size up.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Scope(Held<ScopeEntry>);

/// The triple a [`Scope`] points to. It holds its namespace and type until its entry leaves the
/// table ([`Value::unlink`]), as [`Pair`] does.
#[derive(PartialEq, Eq, Hash)]
struct ScopeEntry(ManuallyDrop<(Sym, TypeMeta)>);

static SCOPES: LazyLock<Table<ScopeEntry>> = LazyLock::new(Table::new);

impl Value for ScopeEntry {
    type Probe = (Sym, TypeMeta);

    fn table() -> &'static LazyLock<Table<Self>> {
        &SCOPES
    }

    fn probe(&self) -> &(Sym, TypeMeta) {
        &self.0
    }

    unsafe fn unlink(&self) {
        // SAFETY: the one unlink of this entry (the caller's contract), and the pair is never
        // dropped otherwise.
        drop(unsafe { std::ptr::read(&*self.0) });
    }
}

impl Borrow<(Sym, TypeMeta)> for Key<ScopeEntry> {
    fn borrow(&self) -> &(Sym, TypeMeta) {
        self.value().probe()
    }
}

thread_local! {
    /// The scope this thread interned last: events come a namespace and a kind at a time, so
    /// most identities skip the table.
    static LAST_SCOPE: std::cell::RefCell<Option<Scope>> = const { std::cell::RefCell::new(None) };
}

impl Scope {
    /// The interned triple, added on first use. Any thread may intern.
    pub fn new(namespace: Sym, type_meta: TypeMeta) -> Scope {
        Scope::last(|last| *last.namespace() == namespace && *last.type_meta() == type_meta)
            .unwrap_or_else(|| Scope::intern((namespace, type_meta)))
    }

    /// [`Scope::new`] of a namespace as a watch event spells it: the namespace is interned only
    /// when it is not the last scope's, which it is for most events, since a list or a watch-list
    /// gives a namespace's objects one after another.
    pub fn of(namespace: &str, type_meta: &TypeMeta) -> Scope {
        Scope::last(|last| **last.namespace() == *namespace && last.type_meta() == type_meta)
            .unwrap_or_else(|| Scope::intern((Sym::new(namespace), type_meta.clone())))
    }

    /// The scope this thread interned last, when `is_last` says it is the one asked for.
    fn last(is_last: impl FnOnce(&Scope) -> bool) -> Option<Scope> {
        LAST_SCOPE.with(|last| last.borrow().as_ref().filter(|scope| is_last(scope)).cloned())
    }

    /// The entry of `probe`, added on first use, which becomes this thread's last scope.
    fn intern(probe: (Sym, TypeMeta)) -> Scope {
        let scope = Scope(Held::intern(&probe, || ScopeEntry(ManuallyDrop::new(probe.clone()))));
        LAST_SCOPE.with(|last| *last.borrow_mut() = Some(scope.clone()));
        scope
    }

    /// The namespace; `""` for cluster-scoped objects.
    pub fn namespace(&self) -> &Sym {
        &self.0.value().0 .0
    }

    /// The apiVersion and kind.
    pub fn type_meta(&self) -> &TypeMeta {
        &self.0.value().0 .1
    }
}

impl fmt::Debug for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} in {:?}", self.type_meta(), self.namespace())
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
        let a = TypeMeta::new(apps.clone(), rs.clone());
        assert_eq!(a, TypeMeta::new(Sym::new("apps/v1"), Sym::new("ReplicaSet")));
        assert_ne!(a, TypeMeta::new(rs.clone(), apps.clone()));
        assert_eq!((a.api_version(), a.kind()), (&apps, &rs));
    }

    #[test]
    fn a_scope_should_be_one_entry_however_it_is_asked_for() {
        let pods = TypeMeta::new(Sym::new("v1"), Sym::new("Pod"));
        let a = Scope::of("team-a", &pods);
        assert_eq!(a, Scope::new(Sym::new("team-a"), pods.clone()));
        assert_eq!(Scope::of("team-a", &pods), a, "from the last scope");
        let b = Scope::of("team-b", &pods);
        assert_ne!(a, b);
        assert_eq!((&**b.namespace(), b.type_meta()), ("team-b", &pods));
        assert_eq!(Scope::of("team-a", &pods), a, "from the table");
        assert_eq!(Scope::new(Sym::new("team-b"), pods), b);
    }

    #[test]
    fn a_tagged_type_meta_should_give_back_its_type_and_tag() {
        let a = TypeMeta::new(Sym::new("apps/v1"), Sym::new("ReplicaSet"));
        for tag in 0..16 {
            let tagged = a.clone().tagged(tag);
            assert_eq!((&*tagged.type_meta(), tagged.tag()), (&a, tag));
            let copy = tagged.clone();
            assert_eq!(copy, tagged);
        }
        assert_ne!(a.clone().tagged(1), a.clone().tagged(2));
        assert_eq!(std::mem::size_of::<Option<TaggedTypeMeta>>(), 8);
    }

    /// Values no one holds any more leave the table: a tenant's random kinds cost nothing once
    /// its objects are gone.
    #[test]
    fn a_value_should_leave_the_table_with_its_last_holder() {
        let contains = |s: &str| SYMS.shard(s).read().contains(s);
        let kind = Sym::new("Kq7f3-only-here");
        let again = kind.clone();
        let pair = TypeMeta::new(Sym::new("q7f3.example/v1"), kind);
        let tagged = pair.clone().tagged(3);
        drop(pair);
        assert!(contains("Kq7f3-only-here") && contains("q7f3.example/v1"), "still held");
        drop(tagged);
        assert!(contains("Kq7f3-only-here"), "one holder left");
        assert!(!contains("q7f3.example/v1"), "the pair's symbols go with the pair");
        drop(again);
        assert!(!contains("Kq7f3-only-here"));
        let back = Sym::new("Kq7f3-only-here");
        assert_eq!(back, "Kq7f3-only-here", "and comes back as new");
    }

    #[test]
    fn a_popular_value_should_stay_for_good() {
        let first = Sym::new("ns-popular-q7f3");
        let held: Vec<Sym> = (1..POPULAR).map(|_| first.clone()).collect();
        drop(first);
        drop(held);
        assert!(SYMS.shard("ns-popular-q7f3").read().contains("ns-popular-q7f3"));
    }

    /// Threads interning values none of them names twice, each kept for a few rounds: the
    /// shards' sets grow and shrink while entries die and others look up. On the lock-free map
    /// tried before, an entry freed when it left the map was still read through an old table a
    /// resize left behind: this crashed in every run of 4 threads × 300 000 rounds.
    /// `INTERN_CHURN_THREADS` and `INTERN_CHURN_ROUNDS` size longer runs; under Miri it is short,
    /// and keeps fewer values, so that some die within it.
    #[test]
    fn threads_should_churn_distinct_values_through_resizes() {
        let env = |name: &str, default: usize| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
        let rounds = env("INTERN_CHURN_ROUNDS", if cfg!(miri) { 24 } else { 300_000 });
        let keep = if cfg!(miri) { 8 } else { 64 };
        let threads = env("INTERN_CHURN_THREADS", 4);
        std::thread::scope(|s| {
            for t in 0..threads {
                s.spawn(move || {
                    let mut kept = std::collections::VecDeque::new();
                    for i in 0..rounds {
                        let text = format!("churn-q7f3-{t}-{i}");
                        let kind = Sym::new(&text);
                        let pair = TypeMeta::new(Sym::new(&format!("g{}.churn/v1", i % 7)), kind.clone());
                        assert_eq!(kind.as_str(), text);
                        assert_eq!(pair.kind().as_str(), text);
                        kept.push_back((kind, pair));
                        if kept.len() > keep {
                            kept.pop_front();
                        }
                    }
                });
            }
        });
        let left: usize = SYMS
            .shards
            .iter()
            .map(|shard| {
                shard
                    .read()
                    .iter()
                    .filter(|key| key.value().starts_with("churn-q7f3-"))
                    .count()
            })
            .sum();
        assert_eq!(left, 0, "every value left the table with its last holder");
        // The room the table keeps follows what is live, not how many values came and went (a
        // lock-free map tried before kept removed slots, and grew to 2 GB under such churn).
        let room: usize = SYMS.shards.iter().map(|shard| shard.read().capacity()).sum();
        assert!(room < 64 * 1024, "{room} slots after the churn");
    }

    /// Threads interning, tagging, cloning and dropping the same few values at once, each
    /// checking that what it holds reads back as the value it asked for.
    #[test]
    fn threads_should_share_and_free_entries_without_mixing_values() {
        let rounds = if cfg!(miri) { 16 } else { 20_000 };
        std::thread::scope(|s| {
            for t in 0..4 {
                s.spawn(move || {
                    let mut kept = Vec::new();
                    for i in 0..rounds {
                        let text = format!("race-q7f3-{}", (i * 7 + t) % 5);
                        let a = Sym::new(&text);
                        let pair = TypeMeta::new(Sym::new(&format!("race-q7f3/v{}", i % 2)), a.clone());
                        let tagged = pair.clone().tagged((i % 16) as u8);
                        assert_eq!(a.as_str(), text);
                        assert_eq!(pair.kind().as_str(), text);
                        assert_eq!(tagged.clone().type_meta().kind().as_str(), text);
                        // Some outlive a few rounds, so that entries die while others look.
                        if i % 3 == t % 3 {
                            kept.push(tagged);
                        }
                        if kept.len() > 4 {
                            kept.remove(0);
                        }
                    }
                });
            }
        });
    }
}
