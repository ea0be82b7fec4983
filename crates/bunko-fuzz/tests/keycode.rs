//! Fuzz target: the storage key codec. Components read back as written, and two keys
//! compare as their component tuples do, whatever bytes (zeros included) the components hold.

use bunko_doc::keycode::{KeyReader, KeyWriter};

#[test]
fn storage_keys_round_trip_and_keep_tuple_order() {
    bunko_fuzz::bolero::check!().with_type::<(Vec<u8>, u64, Vec<u8>, u64)>().for_each(
        |(a, n, b, m)| {
            let key = |bytes: &[u8], n: u64| KeyWriter::new(7).bytes(bytes).u64(n).finish();
            let (ka, kb) = (key(a, *n), key(b, *m));
            let mut reader = KeyReader::new(&ka);
            assert_eq!(reader.u8().ok(), Some(7));
            assert_eq!(reader.bytes().ok().as_ref(), Some(a));
            assert_eq!(reader.u64().ok(), Some(*n));
            assert!(reader.done().is_ok());
            assert_eq!(ka.cmp(&kb), (a, n).cmp(&(b, m)), "{a:?},{n} vs {b:?},{m}");
            // A prefix of `a`'s bytes opens the range of every component starting with them.
            let cut = a.len() / 2;
            let open = KeyWriter::new(7).bytes_prefix(&a[..cut]);
            assert!(ka.starts_with(&open));
        },
    );
}

#[test]
fn garbage_keys_are_errors_not_panics() {
    bunko_fuzz::bolero::check!().for_each(|bytes: &[u8]| {
        let mut reader = KeyReader::new(bytes);
        let _ = reader.u8().and_then(|_| reader.string()).and_then(|_| reader.u64());
    });
}
