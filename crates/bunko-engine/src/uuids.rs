//! Server-generated ids with CouchDB's default `sequential` algorithm: a random 26-hex-digit
//! prefix and a 6-hex-digit counter that grows by a small random step, so that ids made
//! close together sort close together (good locality in an ordered store).

use std::sync::LazyLock;

use parking_lot::Mutex;
use rand::Rng;

/// Generator of 32-hex-digit ids.
pub struct Uuids {
    state: Mutex<(String, u64)>,
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
        Self { state: Mutex::new(fresh()) }
    }

    /// The next id.
    pub fn next(&self) -> String {
        let mut state = self.state.lock();
        state.1 += rand::rng().random_range(1..0xffe);
        if state.1 >= SUFFIX_LIMIT {
            *state = fresh();
        }
        format!("{}{:06x}", state.0, state.1)
    }
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
}
