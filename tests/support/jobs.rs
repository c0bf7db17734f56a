//! Background jobs seen from the pages (issue 15): the job a bulk action's
//! POST started (its `HX-Redirect` or `Location`), and waiting until a job
//! is finished (a state, never a duration).
#![allow(dead_code)]

use std::time::Duration;

use asynqdeck::Inspector;
use asynqdeck::inspector::jobs::JobStatus;

use super::http::Reply;

/// How long a test waits for a job to finish (a generous deadline on a
/// loaded machine; the jobs of the tests are small).
pub const JOB_DEADLINE: Duration = Duration::from_secs(60);

/// The id of the job a bulk action's POST started: the last segment of
/// its `HX-Redirect` (htmx) or `Location` (303) to `/jobs/{id}`. Panics
/// with the answer when there is none.
pub fn started_id(reply: &Reply) -> String {
    let to = reply
        .header("hx-redirect")
        .or_else(|| reply.header("location"))
        .unwrap_or_else(|| panic!("no job redirect: {} {}", reply.status, reply.body));
    let id = to
        .rsplit_once("/jobs/")
        .unwrap_or_else(|| panic!("redirect {to:?} is no job page"))
        .1;
    id.to_string()
}

/// Waits until job `id` is finished (done, cancelled or failed) and
/// returns it; panics after [`JOB_DEADLINE`] with its last state.
pub async fn finished(insp: &Inspector, id: &str) -> JobStatus {
    let got = super::eventually(JOB_DEADLINE, || async {
        let j = insp.job(id).await.expect("read the job");
        j.phase.is_finished().then_some(j)
    })
    .await;
    match got {
        Some(j) => j,
        None => {
            let last = insp.job(id).await.expect("read the job");
            panic!(
                "job {id} not finished after {JOB_DEADLINE:?}: {} {} of {}",
                last.phase.as_str(),
                last.handled(),
                last.total
            )
        }
    }
}
