//! [`Count`]: every request sent, by verb and the HTTP code it ended with.
//!
//! Invariant: each call that reaches this layer is counted once, when it ends; beneath the retry
//! layer, so each try is a request of its own. Successes count as 200.

use super::{Layer, Request, Verb};
use crate::api::{ApiError, CallCount, StatusReason};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};

/// The counting layer; see the [module docs](self).
///
/// Successes, nearly every request, are counted on a lock-free counter per verb; failures, by
/// verb and code, under a lock.
#[derive(Default)]
pub struct Count {
    ok: [AtomicU64; Verb::ALL.len()],
    failed: parking_lot::Mutex<BTreeMap<(Verb, u16), u64>>,
}

impl Count {
    /// Counts one request of `verb` that ended with `result`.
    pub fn record<T>(&self, verb: Verb, result: &Result<T, ApiError>) {
        match result {
            // Relaxed: the counters are statistics; they order nothing else.
            Ok(_) => _ = self.ok[verb as usize].fetch_add(1, Ordering::Relaxed),
            Err(e) => {
                let code = e.reason().map_or(500, StatusReason::code);
                *self.failed.lock().entry((verb, code)).or_default() += 1;
            }
        }
    }

    /// The requests of `verb` so far, whatever their outcome.
    pub fn of(&self, verb: Verb) -> u64 {
        let failed: u64 = self
            .failed
            .lock()
            .iter()
            .filter(|((v, _), _)| *v == verb)
            .map(|(_, n)| n)
            .sum();
        self.ok[verb as usize].load(Ordering::Relaxed) + failed
    }
}

impl Layer for Count {
    async fn around<T, F, Fut>(&self, request: Request<'_>, mut call: F) -> Result<T, ApiError>
    where
        T: Send,
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, ApiError>> + Send,
    {
        let result = call().await;
        self.record(request.verb, &result);
        result
    }

    fn call_counts(&self) -> Option<Vec<CallCount>> {
        let ok = Verb::ALL
            .into_iter()
            .map(|verb| ((verb, 200), self.ok[verb as usize].load(Ordering::Relaxed)));
        let mut counts: BTreeMap<(Verb, u16), u64> = ok.filter(|&(_, n)| n > 0).collect();
        counts.extend(self.failed.lock().iter().map(|(&key, &n)| (key, n)));
        let counts = counts.into_iter().map(|((verb, code), count)| CallCount {
            verb: verb.as_str(),
            code,
            count,
        });
        Some(counts.collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_call_should_be_counted_by_verb_and_code() {
        let count = Count::default();
        let _ = count.around(Verb::Get.into(), || async { Ok(()) }).await;
        let _ = count.around(Verb::Get.into(), || async { Ok(()) }).await;
        let _ = count
            .around(Verb::Delete.into(), || async {
                Err::<(), _>(ApiError::status(StatusReason::TooManyRequests, "slow down"))
            })
            .await;
        let counts = count.call_counts().expect("counts");
        let find = |verb, code| {
            counts
                .iter()
                .find(|c| c.verb == verb && c.code == code)
                .map(|c| c.count)
        };
        assert_eq!(find("get", 200), Some(2));
        assert_eq!(find("delete", 429), Some(1));
        assert_eq!(
            find("delete", 200),
            None,
            "no success counted for a verb that only failed"
        );
        assert_eq!(
            (count.of(Verb::Get), count.of(Verb::Delete), count.of(Verb::List)),
            (2, 1, 0)
        );
    }
}
