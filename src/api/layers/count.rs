//! [`Count`]: every request sent, by verb and the HTTP code it ended with.
//!
//! Invariant: each call that reaches this layer is counted once, when it ends; beneath the retry
//! layer, so each try is a request of its own. Successes count as 200.

use super::{Layer, Verb};
use crate::api::{ApiError, CallCount, StatusReason};
use std::collections::BTreeMap;
use std::future::Future;

/// The counting layer; see the [module docs](self).
#[derive(Default)]
pub struct Count {
    calls: parking_lot::Mutex<BTreeMap<(Verb, u16), u64>>,
}

impl Layer for Count {
    async fn around<T, F, Fut>(&self, verb: Verb, mut call: F) -> Result<T, ApiError>
    where
        T: Send,
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, ApiError>> + Send,
    {
        let result = call().await;
        let code = match &result {
            Ok(_) => 200,
            Err(e) => e.reason().map_or(500, StatusReason::code),
        };
        *self.calls.lock().entry((verb, code)).or_default() += 1;
        result
    }

    fn call_counts(&self) -> Option<Vec<CallCount>> {
        let calls = self.calls.lock();
        Some(
            calls
                .iter()
                .map(|(&(verb, code), &count)| CallCount {
                    verb: verb.as_str(),
                    code,
                    count,
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_call_should_be_counted_by_verb_and_code() {
        let count = Count::default();
        let _ = count.around(Verb::Get, || async { Ok(()) }).await;
        let _ = count.around(Verb::Get, || async { Ok(()) }).await;
        let _ = count
            .around(Verb::Delete, || async {
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
    }
}
