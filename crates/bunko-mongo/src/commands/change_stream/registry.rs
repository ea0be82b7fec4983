//! Open change streams by cursor id (the cursor registry of `cursors.rs`, holding streams),
//! and how a `getMore` with nothing new waits without holding a thread.

use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::Stream;

/// What a waiting `getMore` wakes on.
pub(crate) struct Wake {
    pub receivers: Vec<watch::Receiver<u64>>,
    /// Also wake every [`POLL`] (collections may appear).
    pub poll: bool,
}

/// A `getMore` that found nothing and has time left: `conn.rs` waits, then runs it again.
pub(crate) struct Wait {
    pub wake: Wake,
    pub until: Instant,
}

/// When a `getMore` that waits for news stops waiting: its `maxTimeMS` (1 s by default, at
/// most 60 s) after it first ran (a command run again after a wait keeps its deadline).
pub(crate) fn deadline(
    ctx: &mut crate::commands::Ctx,
    command: &bson::Document,
) -> Result<Instant, crate::error::MongoError> {
    let wait =
        crate::commands::int_of(command, "maxTimeMS")?.map_or(1000, |ms| ms.clamp(0, 60_000));
    let wait = Duration::from_millis(u64::try_from(wait).unwrap_or(0));
    Ok(*ctx.session.await_until.get_or_insert(Instant::now() + wait))
}

/// How often a stream whose scope can gain collections looks for them while waiting.
const POLL: Duration = Duration::from_millis(200);

impl Wait {
    /// Waits until a database in scope changes, the poll tick, or the deadline.
    pub(crate) async fn wait(self) {
        let deadline = tokio::time::Instant::from_std(self.until);
        let mut receivers = self.wake.receivers;
        let changed = async {
            if receivers.is_empty() {
                std::future::pending::<()>().await;
            }
            let waits = receivers.iter_mut().map(|r| Box::pin(r.changed()));
            let _ = futures::future::select_all(waits).await;
        };
        let tick = async {
            if self.wake.poll {
                tokio::time::sleep(POLL).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            _ = changed => {}
            _ = tick => {}
            _ = tokio::time::sleep_until(deadline) => {}
        }
    }
}

/// Open change streams, in the same registry type as `find` cursors.
pub(crate) type Streams = crate::cursors::Cursors<Stream>;
