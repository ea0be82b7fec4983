//! View collation of strings: the Unicode Collation Algorithm with the root locale at
//! tertiary strength, ICU's defaults, which CouchDB's `couch_ejson_compare` NIF uses
//! (`ucol_open("")`, then `ucol_strcollIter`). Bunko uses ICU4X's implementation of the same
//! algorithm and data (CLDR root), compiled into the binary.

use std::cmp::Ordering;
use std::sync::LazyLock;

use icu_collator::options::CollatorOptions;
use icu_collator::{Collator, CollatorBorrowed, CollatorPreferences};

use super::value::{Scheme, push_terminated};

/// The root collator with default options (tertiary strength, non-ignorable variables, no
/// case level, no numeric ordering).
static COLLATOR: LazyLock<CollatorBorrowed<'static>> = LazyLock::new(|| {
    Collator::try_new(CollatorPreferences::default(), CollatorOptions::default())
        .expect("compiled collation data covers the root locale")
});

/// The view-collation [`Scheme`].
pub(super) struct Unicode;

impl Scheme for Unicode {
    // Null, False, True, Number, String, Array, Object.
    const TAGS: [u8; 7] = [0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70];

    /// CouchDB returns the collator's answer as is: strings it calls equal are equal.
    fn compare_str(a: &str, b: &str) -> Ordering {
        COLLATOR.compare(a, b)
    }

    /// The ICU4X sort key, which compares bytewise as [`Unicode::compare_str`] does.
    fn encode_str(s: &str, out: &mut Vec<u8>) {
        let mut key = Vec::with_capacity(2 * s.len() + 8);
        let Ok(()) = COLLATOR.write_sort_key_to(s, &mut key);
        push_terminated(&key, out);
    }
}
