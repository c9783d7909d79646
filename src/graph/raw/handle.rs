//! A [`Handle`] as a raw pointer and back, for the table's slots ([`super::table`]), and a new
//! handle from a node reached by reference.
//!
//! Invariant: every node lives in the `Arc` that `Handle::assemble`, the only place a node is
//! built, allocated for it; a pointer given out by [`Handle::into_raw`] carries one strong
//! reference, taken back exactly once by [`Handle::from_raw`].

use crate::graph::{Handle, Node};
use triomphe::Arc;

impl Handle {
    /// The node pointer, carrying this handle's strong reference (for the map's slots).
    #[inline]
    pub(in crate::graph) fn into_raw(self) -> *mut Node {
        Arc::into_raw(self.0).cast_mut()
    }

    /// Takes back a strong reference given out by [`Handle::into_raw`].
    ///
    /// # Safety
    /// `p` came from `into_raw` and this reference is taken back once.
    #[inline]
    pub(in crate::graph) unsafe fn from_raw(p: *mut Node) -> Handle {
        // SAFETY: per the contract above.
        Handle(unsafe { Arc::from_raw(p) })
    }

    /// A new handle on the node behind `p`, leaving the reference `p` carries in place.
    ///
    /// # Safety
    /// `p` came from `into_raw` and its reference has not been taken back yet.
    #[inline]
    pub(in crate::graph) unsafe fn clone_from_raw(p: *mut Node) -> Handle {
        // SAFETY: the node is alive, per the contract above.
        Handle(unsafe { triomphe::ArcBorrow::from_ptr(p) }.clone_arc())
    }
}

impl Node {
    /// A new handle on this node.
    #[inline]
    pub fn handle(&self) -> Handle {
        // SAFETY: every node lives inside the `Arc` that `Handle::assemble` allocated for it
        // (module docs), so `self` is the data pointer `Arc::into_raw` would give; `&self` shows
        // that allocation is alive, so its count may be raised.
        Handle(unsafe { triomphe::ArcBorrow::from_ptr(std::ptr::from_ref(self)) }.clone_arc())
    }
}
