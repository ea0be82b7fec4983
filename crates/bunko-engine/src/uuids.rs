//! Server-generated ids with CouchDB's algorithms (`couch_uuids`), chosen by the
//! `uuids/algorithm` setting:
//! - `sequential` (the default): a random 26-hex-digit prefix and a 6-hex-digit counter that
//!   grows by a small random step, so that ids made close together sort close together
//!   (good locality in an ordered store);
//! - `random`: 32 random hex digits;
//! - `utc_random`: the time in microseconds as 14 hex digits, then 18 random ones;
//! - `utc_id`: the same time, then `uuids/utc_id_suffix`.

use std::sync::LazyLock;

use parking_lot::Mutex;
use rand::Rng;

/// Generator of 32-hex-digit ids.
pub struct Uuids {
    state: Mutex<(String, u64)>,
    algorithm: Mutex<(Algorithm, String)>,
}

/// `uuids/algorithm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Sequential,
    Random,
    UtcRandom,
    UtcId,
}

impl Algorithm {
    /// The setting's value; `None` for an unknown name.
    pub fn parse(name: &str) -> Option<Algorithm> {
        match name.trim() {
            "sequential" => Some(Algorithm::Sequential),
            "random" => Some(Algorithm::Random),
            "utc_random" => Some(Algorithm::UtcRandom),
            "utc_id" => Some(Algorithm::UtcId),
            _ => None,
        }
    }
}

static GLOBAL: LazyLock<Uuids> = LazyLock::new(Uuids::new);

/// The process-wide generator.
pub fn global() -> &'static Uuids {
    &GLOBAL
}

const SUFFIX_LIMIT: u64 = 0xfff000;

impl Default for Uuids {
    fn default() -> Self {
        Self::new()
    }
}

impl Uuids {
    pub fn new() -> Self {
        Self {
            state: Mutex::new(fresh()),
            algorithm: Mutex::new((Algorithm::Sequential, String::new())),
        }
    }

    /// Sets the algorithm (and the `utc_id` suffix) of later ids.
    pub fn configure(&self, algorithm: Algorithm, utc_id_suffix: &str) {
        *self.algorithm.lock() = (algorithm, utc_id_suffix.to_string());
    }

    /// The next id, by the configured algorithm.
    pub fn next(&self) -> String {
        let (algorithm, suffix) = self.algorithm.lock().clone();
        match algorithm {
            Algorithm::Sequential => self.next_sequential(),
            Algorithm::Random => random_hex(),
            Algorithm::UtcRandom => {
                format!("{}{}", utc_prefix(), &hex::encode(rand::rng().random::<[u8; 9]>()))
            }
            Algorithm::UtcId => format!("{}{suffix}", utc_prefix()),
        }
    }

    fn next_sequential(&self) -> String {
        let mut state = self.state.lock();
        state.1 += rand::rng().random_range(1..0xffe);
        if state.1 >= SUFFIX_LIMIT {
            *state = fresh();
        }
        format!("{}{:06x}", state.0, state.1)
    }
}

/// 32 random hex digits (the `random` algorithm).
pub fn random_hex() -> String {
    hex::encode(rand::rng().random::<[u8; 16]>())
}

/// The time in microseconds since 1970 as 14 hex digits, strictly increasing from one id
/// to the next (as CouchDB's `erlang:now()`), so ids made in the same microsecond still
/// sort in the order they were made.
fn utc_prefix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    let next = |last: u64| Some(now.max(last.saturating_add(1)));
    let last = LAST.fetch_update(Ordering::Relaxed, Ordering::Relaxed, next).unwrap_or(now);
    let micros = now.max(last.saturating_add(1));
    format!("{micros:014x}")
}

fn fresh() -> (String, u64) {
    let bytes: [u8; 13] = rand::rng().random();
    (hex::encode(bytes), rand::rng().random_range(0..0x1000))
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_32_hex_and_increase() {
        let uuids = super::Uuids::new();
        let ids: Vec<String> = (0..1000).map(|_| uuids.next()).collect();
        assert!(ids.iter().all(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())));
        let increasing = ids.windows(2).filter(|w| w[0] < w[1]).count();
        assert!(increasing >= 990, "{increasing}");
    }

    #[test]
    fn each_algorithm_has_couchdbs_shape() {
        use super::Algorithm::*;
        let uuids = super::Uuids::new();
        uuids.configure(Random, "");
        let (a, b) = (uuids.next(), uuids.next());
        assert!(a.len() == 32 && a != b);
        uuids.configure(UtcRandom, "");
        let id = uuids.next();
        assert_eq!(id.len(), 32);
        assert!(id[..14] <= uuids.next()[..14]);
        uuids.configure(UtcId, "-node1");
        let id = uuids.next();
        assert_eq!((id.len(), &id[14..]), (20, "-node1"));
        let ids: Vec<String> = (0..100).map(|_| uuids.next()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "utc_id ids strictly increase");
    }
}
