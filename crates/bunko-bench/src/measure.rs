//! Closed-loop load generation and its measurement.
//!
//! Each simulated client is one task (or thread) that sends its next request as soon as
//! the previous one answered, and records the latency of every successful request in its
//! own HdrHistogram (microseconds, 3 significant digits); the histograms are merged at the
//! end. A run stops either at a deadline ([`Until::Deadline`]: requests in flight then
//! still finish and count) or after a number of operations handed out from a shared
//! counter ([`Until::Count`], e.g. the batches of a load). Throughput is items (documents,
//! requests) divided by the wall time until the last client finished.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::error::Result;

/// When a run stops.
#[derive(Debug, Clone, Copy)]
pub enum Until {
    /// Clients start no new request after this long.
    Deadline(Duration),
    /// Clients take operation numbers `0..n` from a shared counter; each op gets one.
    Count(usize),
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Documents or requests done: what the throughput counts.
    pub items: u64,
    /// Requests (or commits) done, successful or not.
    pub requests: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub elapsed: Duration,
    /// Latencies of the successful requests in microseconds.
    pub latency: Histogram<u64>,
}

impl Sample {
    fn empty() -> Sample {
        Sample {
            items: 0,
            requests: 0,
            errors: 0,
            first_error: None,
            elapsed: Duration::ZERO,
            latency: histogram(),
        }
    }

    /// A run that could not start.
    pub fn failed(error: String) -> Sample {
        let mut sample = Sample::empty();
        sample.requests = 1;
        sample.errors = 1;
        sample.first_error = Some(error);
        sample
    }

    /// One operation of `items` items that took `elapsed`.
    pub fn single(items: u64, elapsed: Duration) -> Sample {
        let mut sample = Sample::empty();
        sample.record(Ok(items), elapsed);
        sample.elapsed = elapsed;
        sample
    }

    fn record(&mut self, outcome: Result<u64>, took: Duration) {
        self.requests += 1;
        match outcome {
            Ok(items) => {
                self.items += items;
                self.latency.saturating_record(took.as_micros().max(1) as u64);
            }
            Err(err) => {
                self.errors += 1;
                self.first_error.get_or_insert_with(|| err.to_string());
            }
        }
    }

    fn merge(&mut self, other: Sample) {
        self.items += other.items;
        self.requests += other.requests;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        // Both histograms have the same bounds, so adding cannot fail.
        let _ = self.latency.add(&other.latency);
    }

    /// Items per second.
    pub fn throughput(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 { self.items as f64 / secs } else { 0.0 }
    }

    /// The latency at quantile `q` (0..=1) in milliseconds, if anything succeeded.
    pub fn latency_ms(&self, q: f64) -> Option<f64> {
        (!self.latency.is_empty()).then(|| self.latency.value_at_quantile(q) as f64 / 1000.0)
    }
}

/// 1 µs to one hour at 3 significant digits.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("constant bounds are valid")
}

/// Runs `op` from every client until `until`. `op` gets its client and either a random
/// number (deadline runs) or its operation number (counted runs), and returns how many
/// items it did.
pub async fn drive<C, F, Fut>(clients: Vec<C>, until: Until, op: F) -> Sample
where
    C: Clone + Send + 'static,
    F: Fn(C, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<u64>> + Send + 'static,
{
    let op = Arc::new(op);
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(n, client)| {
            let (op, next) = (op.clone(), next.clone());
            let mut rng = SmallRng::seed_from_u64(n as u64 + 1);
            tokio::spawn(async move {
                let mut sample = Sample::empty();
                while let Some(arg) = next_arg(until, start, &next, &mut rng) {
                    let began = Instant::now();
                    let outcome = op(client.clone(), arg).await;
                    sample.record(outcome, began.elapsed());
                }
                sample
            })
        })
        .collect();
    let mut total = Sample::empty();
    for task in tasks {
        match task.await {
            Ok(sample) => total.merge(sample),
            Err(err) => {
                total.errors += 1;
                total.first_error.get_or_insert_with(|| format!("client task failed: {err}"));
            }
        }
    }
    total.elapsed = start.elapsed();
    total
}

/// As [`drive`] with `threads` OS threads calling a blocking `op(thread, arg)`; for the
/// in-process storage workload.
pub fn drive_threads<F>(threads: usize, until: Until, op: F) -> Sample
where
    F: Fn(usize, u64) -> Result<u64> + Send + Sync,
{
    let next = AtomicUsize::new(0);
    let start = Instant::now();
    let mut total = Sample::empty();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let (op, next) = (&op, &next);
                scope.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(thread as u64 + 1);
                    let mut sample = Sample::empty();
                    while let Some(arg) = next_arg(until, start, next, &mut rng) {
                        let began = Instant::now();
                        let outcome = op(thread, arg);
                        sample.record(outcome, began.elapsed());
                    }
                    sample
                })
            })
            .collect();
        for handle in handles {
            match handle.join() {
                Ok(sample) => total.merge(sample),
                Err(_) => {
                    total.errors += 1;
                    total.first_error.get_or_insert_with(|| "a writer thread panicked".into());
                }
            }
        }
    });
    total.elapsed = start.elapsed();
    total
}

fn next_arg(until: Until, start: Instant, next: &AtomicUsize, rng: &mut SmallRng) -> Option<u64> {
    match until {
        Until::Deadline(duration) => (start.elapsed() < duration).then(|| rng.random()),
        Until::Count(n) => {
            let i = next.fetch_add(1, Ordering::Relaxed);
            (i < n).then_some(i as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_threads_do_every_operation_once() {
        let seen = std::sync::Mutex::new(Vec::new());
        let sample = drive_threads(3, Until::Count(50), |_, i| {
            seen.lock().unwrap().push(i);
            Ok(2)
        });
        let mut seen = seen.into_inner().unwrap();
        seen.sort_unstable();
        assert_eq!(seen, (0..50).collect::<Vec<u64>>());
        assert_eq!((sample.items, sample.requests, sample.errors), (100, 50, 0));
        assert!(sample.latency_ms(0.99).is_some());
    }

    #[test]
    fn errors_are_counted_not_timed() {
        let sample = drive_threads(1, Until::Count(4), |_, i| {
            if i % 2 == 0 { Ok(1) } else { Err(crate::Error::Invalid(format!("op {i}"))) }
        });
        assert_eq!((sample.items, sample.errors), (2, 2));
        assert_eq!(sample.latency.len(), 2);
        assert_eq!(sample.first_error.as_deref(), Some("op 1"));
    }

    #[test]
    fn deadline_runs_stop() {
        let sample = drive_threads(2, Until::Deadline(Duration::from_millis(50)), |_, _| Ok(1));
        assert!(sample.items > 0);
        assert!(sample.elapsed < Duration::from_secs(5));
    }
}
