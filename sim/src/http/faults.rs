//! Injected trouble on the HTTP face, all off by default: latency before each request is served,
//! a QPS ceiling answered with 429, error rates per verb (500, 429 or a timeout), and watches that
//! end after a number of events or a time.
//!
//! Faults are decided before a request reaches the store, so a failed request changes nothing,
//! as with a real server that failed before admission. Each knob parses from the command-line
//! syntax documented on its parser, and a bad value is an error naming the flag's syntax. A
//! request failed by a fault is marked ([`INJECTED`]), so that its audit line tells it from a
//! failure of the server's own.

use super::request::HttpVerb;
use kube_gc::api::{ApiError, StatusReason};
use kube_gc::duration::parse as parse_duration;
use kube_gc::rate::TokenBucket;
use parking_lot::Mutex;
use rand::Rng;
use std::str::FromStr;
use std::time::Duration;

tokio::task_local! {
    /// Set when admission failed the request being served with an injected fault (an error rate
    /// or the QPS ceiling): what its audit line says.
    pub(super) static INJECTED: std::cell::Cell<bool>;
}

/// Marks the request being served as failed by an injected fault, and returns `err`.
fn injected(err: ApiError) -> ApiError {
    let _ = INJECTED.try_with(|injected| injected.set(true));
    err
}

/// How long a request waits before it is served.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Latency {
    /// No wait.
    #[default]
    None,
    /// Always this long.
    Fixed(Duration),
    /// Uniformly between the two.
    Uniform(Duration, Duration),
    /// Exponentially distributed with this mean.
    Exponential(Duration),
}

impl Latency {
    fn sample(&self) -> Duration {
        let mut rng = rand::thread_rng();
        match *self {
            Latency::None => Duration::ZERO,
            Latency::Fixed(d) => d,
            Latency::Uniform(lo, hi) => lo + (hi - lo).mul_f64(rng.gen::<f64>()),
            Latency::Exponential(mean) => mean.mul_f64(-(1.0 - rng.gen::<f64>()).ln()),
        }
    }
}

impl FromStr for Latency {
    type Err = String;

    /// `2ms` (fixed), `1ms..5ms` (uniform) or `exp:2ms` (exponential with that mean).
    fn from_str(s: &str) -> Result<Self, String> {
        let syntax = || format!("latency {s:?}: expected 2ms, 1ms..5ms or exp:2ms");
        if let Some(mean) = s.strip_prefix("exp:") {
            return parse_duration(mean).map(Latency::Exponential).map_err(|_| syntax());
        }
        if let Some((lo, hi)) = s.split_once("..") {
            let (lo, hi) = (
                parse_duration(lo).map_err(|_| syntax())?,
                parse_duration(hi).map_err(|_| syntax())?,
            );
            return if lo <= hi {
                Ok(Latency::Uniform(lo, hi))
            } else {
                Err(syntax())
            };
        }
        parse_duration(s).map(Latency::Fixed).map_err(|_| syntax())
    }
}

/// What a request that draws an injected error gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InjectedError {
    /// 500 InternalError.
    Internal,
    /// 429 TooManyRequests with Retry-After.
    Throttled,
    /// No answer for [`ErrorRate`]'s timeout, then 504 Timeout.
    Timeout,
}

/// A share of one verb's requests (or every verb's) that fail.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorRate {
    /// The verb; `None` for all.
    pub verb: Option<HttpVerb>,
    /// Between 0 and 1.
    pub rate: f64,
    /// How they fail.
    pub error: InjectedError,
}

impl FromStr for ErrorRate {
    type Err = String;

    /// `VERB=RATE[:500|429|timeout]`, VERB a verb name or `*`; the error defaults to 500.
    fn from_str(s: &str) -> Result<Self, String> {
        let syntax = || format!("error rate {s:?}: expected VERB=RATE[:500|429|timeout], e.g. delete=0.01:429");
        let (verb, rest) = s.split_once('=').ok_or_else(syntax)?;
        let verb = match verb {
            "*" => None,
            name => Some(*HttpVerb::ALL.iter().find(|v| v.as_str() == name).ok_or_else(syntax)?),
        };
        let (rate, error) = rest.split_once(':').unwrap_or((rest, "500"));
        let rate: f64 = rate.parse().map_err(|_| syntax())?;
        let error = match error {
            "500" => InjectedError::Internal,
            "429" => InjectedError::Throttled,
            "timeout" => InjectedError::Timeout,
            _ => return Err(syntax()),
        };
        if !(0.0..=1.0).contains(&rate) {
            return Err(syntax());
        }
        Ok(ErrorRate { verb, rate, error })
    }
}

/// Every knob; the default injects nothing.
#[derive(Clone, Debug, Default)]
pub struct HttpFaults {
    /// Wait before serving each request.
    pub latency: Latency,
    /// Requests per second served before the rest get 429; bursts of up to one second's worth.
    pub qps: Option<f64>,
    /// Error rates, tried in order.
    pub error_rates: Vec<ErrorRate>,
    /// How long a request drawing [`InjectedError::Timeout`] hangs before its 504.
    pub timeout: Duration,
    /// End every watch after this many events.
    pub watch_drop_events: Option<usize>,
    /// End every watch after this long.
    pub watch_drop_after: Option<Duration>,
    /// Never end a watch-list's initial events with their bookmark, as a server that ignores
    /// `sendInitialEvents` would.
    pub withhold_initial_events_end: bool,
    /// Inject faults only into requests whose `User-Agent` contains this; `None`: every request.
    /// A fault suite aims them at the collector while its own workload sees a healthy server.
    pub target: Option<String>,
}

/// The running state of the faults: the QPS ceiling's token bucket.
pub(super) struct Admission {
    faults: HttpFaults,
    bucket: Mutex<TokenBucket>,
}

impl Admission {
    pub(super) fn new(faults: HttpFaults) -> Self {
        // No ceiling is an unlimited bucket; a ceiling's burst is one second of it.
        let qps = faults.qps.unwrap_or(0.0);
        let burst = qps.ceil().clamp(1.0, f64::from(u32::MAX)) as u32;
        Admission {
            faults,
            bucket: Mutex::new(TokenBucket::new(qps, burst)),
        }
    }

    pub(super) fn faults(&self) -> &HttpFaults {
        &self.faults
    }

    /// True when faults apply to a request with these headers (see [`HttpFaults::target`]).
    pub(super) fn targets(&self, headers: &axum::http::HeaderMap) -> bool {
        self.faults
            .target
            .as_ref()
            .is_none_or(|t| super::audit::user_agent(headers).contains(t.as_str()))
    }

    /// Waits the injected latency, then admits a `verb` request (`None` for discovery) or fails
    /// it.
    pub(super) async fn admit(&self, verb: Option<HttpVerb>) -> Result<(), ApiError> {
        let wait = self.faults.latency.sample();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        self.take_token()?;
        let Some(verb) = verb else { return Ok(()) };
        let drawn = self
            .faults
            .error_rates
            .iter()
            .find(|r| r.verb.is_none_or(|v| v == verb) && rand::thread_rng().gen::<f64>() < r.rate);
        let error = match drawn.map(|r| r.error) {
            None => return Ok(()),
            Some(InjectedError::Internal) => ApiError::status(
                StatusReason::InternalError,
                "an error on the server (\"injected fault\") has prevented the request from succeeding",
            ),
            Some(InjectedError::Throttled) => too_many_requests(),
            Some(InjectedError::Timeout) => {
                tokio::time::sleep(self.faults.timeout).await;
                ApiError::status(
                    StatusReason::Timeout,
                    "the server was unable to return a response in the time allotted, but may still be processing \
                     the request",
                )
            }
        };
        Err(injected(error))
    }

    fn take_token(&self) -> Result<(), ApiError> {
        if self.bucket.lock().try_take(tokio::time::Instant::now()) {
            Ok(())
        } else {
            Err(injected(too_many_requests()))
        }
    }
}

fn too_many_requests() -> ApiError {
    ApiError::status(
        StatusReason::TooManyRequests,
        "Too many requests, please try again later.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_should_parse_and_reject_with_the_syntax() {
        assert_eq!("2ms".parse(), Ok(Latency::Fixed(Duration::from_millis(2))));
        assert_eq!(
            "1ms..5ms".parse(),
            Ok(Latency::Uniform(Duration::from_millis(1), Duration::from_millis(5)))
        );
        assert_eq!("exp:1s".parse(), Ok(Latency::Exponential(Duration::from_secs(1))));
        assert!("5ms..1ms".parse::<Latency>().unwrap_err().contains("expected"));
        assert!("2 parsecs".parse::<Latency>().is_err());
        let rate: ErrorRate = "delete=0.25:429".parse().unwrap();
        assert_eq!(
            (rate.verb, rate.rate, rate.error),
            (Some(HttpVerb::Delete), 0.25, InjectedError::Throttled)
        );
        assert_eq!("*=1".parse::<ErrorRate>().unwrap().error, InjectedError::Internal);
        assert!("frob=0.1".parse::<ErrorRate>().is_err());
        assert!("get=1.5".parse::<ErrorRate>().is_err());
    }

    #[tokio::test]
    async fn qps_ceiling_should_throttle_beyond_the_burst() {
        let admission = Admission::new(HttpFaults {
            qps: Some(5.0),
            ..HttpFaults::default()
        });
        let mut throttled = 0;
        for _ in 0..20 {
            if let Err(e) = admission.admit(Some(HttpVerb::Get)).await {
                assert_eq!(e.reason(), Some(StatusReason::TooManyRequests));
                throttled += 1;
            }
        }
        assert!(throttled >= 14, "only {throttled} of 20 requests were throttled");
    }

    #[tokio::test]
    async fn error_rate_of_one_should_fail_its_verb_only() {
        let admission = Admission::new(HttpFaults {
            error_rates: vec!["patch=1:500".parse().unwrap()],
            ..HttpFaults::default()
        });
        let err = admission.admit(Some(HttpVerb::Patch)).await.unwrap_err();
        assert_eq!(err.reason(), Some(StatusReason::InternalError));
        assert!(admission.admit(Some(HttpVerb::Get)).await.is_ok());
    }

    #[test]
    fn faults_should_hit_only_the_targeted_user_agent() {
        let admission = Admission::new(HttpFaults {
            target: Some("kube-gc/".into()),
            ..HttpFaults::default()
        });
        let headers = |agent: &str| {
            let mut headers = axum::http::HeaderMap::new();
            headers.insert(axum::http::header::USER_AGENT, agent.parse().expect("a header value"));
            headers
        };
        assert!(admission.targets(&headers("kube-gc/0.1.0 (host-abc)")));
        assert!(!admission.targets(&headers("kubectl/v1.33.0")));
        assert!(!admission.targets(&axum::http::HeaderMap::new()));
        assert!(Admission::new(HttpFaults::default()).targets(&headers("anyone")));
    }
}
