//! `--timeout`, read once: one deadline for a whole answer, and one message
//! when it passes, whichever backend was waiting.

use std::future::Future;
use std::time::{Duration, Instant};

use cloud_access::go_duration;

/// How long after the deadline the backstop fires. The backend's calls are
/// given the deadline itself, and one that gives up there names the service
/// that was slow (IMDS, an AWS action), which says more than this message;
/// the grace keeps that error from losing a race with the backstop (an HTTP
/// request's own timer starts a moment after the deadline was set).
const BACKSTOP_GRACE: Duration = Duration::from_millis(200);

/// `--timeout` ran out before the answer was ready.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error(
    "no answer within --timeout {} from {waiting_for}: check that it is reachable from the node, or raise --timeout (below kubelet's 1m limit)",
    go_duration::format(*.timeout)
)]
pub struct TimedOut {
    pub timeout: Duration,
    /// What the answer waited for: `token endpoint https://…`, `Azure (…) for REGISTRY`.
    pub waiting_for: String,
}

/// `work`, given the deadline its calls must keep (`timeout` from now),
/// bounded by that deadline: past it (and [`BACKSTOP_GRACE`]), [`TimedOut`]
/// naming `--timeout` and `waiting_for`.
pub async fn within_timeout<T, E, F>(
    timeout: Duration,
    waiting_for: impl FnOnce() -> String,
    work: impl FnOnce(Instant) -> F,
) -> Result<T, E>
where
    F: Future<Output = Result<T, E>>,
    E: From<TimedOut>,
{
    let deadline = Instant::now() + timeout;
    match tokio::time::timeout_at((deadline + BACKSTOP_GRACE).into(), work(deadline)).await {
        Ok(answer) => answer,
        Err(_) => Err(TimedOut {
            timeout,
            waiting_for: waiting_for(),
        }
        .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Eq)]
    enum Failure {
        Backstop(TimedOut),
        OwnDeadline,
    }

    impl From<TimedOut> for Failure {
        fn from(timed_out: TimedOut) -> Self {
            Failure::Backstop(timed_out)
        }
    }

    #[tokio::test]
    async fn work_that_never_ends_is_ended_by_the_backstop() {
        let started = Instant::now();
        let answer: Result<(), Failure> = within_timeout(
            Duration::from_millis(20),
            || "token endpoint https://sts.example.com/".to_owned(),
            |_| std::future::pending(),
        )
        .await;
        let Err(Failure::Backstop(timed_out)) = answer else {
            panic!("{answer:?}")
        };
        assert!(started.elapsed() >= Duration::from_millis(20) + BACKSTOP_GRACE);
        assert_eq!(
            timed_out.to_string(),
            "no answer within --timeout 20ms from token endpoint https://sts.example.com/: check that it is reachable from the node, or raise --timeout (below kubelet's 1m limit)"
        );
    }

    #[tokio::test]
    async fn a_call_that_keeps_the_deadline_reports_itself() {
        let answer: Result<(), Failure> = within_timeout(
            Duration::from_millis(20),
            || unreachable!("the call's own error comes first"),
            |deadline| async move {
                tokio::time::timeout_at(deadline.into(), std::future::pending::<()>())
                    .await
                    .map_err(|_| Failure::OwnDeadline)
            },
        )
        .await;
        assert_eq!(answer, Err(Failure::OwnDeadline));
        let done: Result<u8, Failure> = within_timeout(Duration::from_secs(5), String::new, |_| async { Ok(7) }).await;
        assert_eq!(done, Ok(7));
    }
}
