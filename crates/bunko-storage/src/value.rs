//! How a [`crate::Fjall`] store writes values to fjall: [`ValueCodec`].
//!
//! Format 1 (directories from before issue 20's value compression) stores every value as
//! given. Format 2 (and 3, which differs only in the engine's records) prefixes each value
//! with one byte:
//!
//! - `0x00`: the value follows as given;
//! - `0x01`: a zstd frame follows (recording its decompressed size), which decompresses
//!   to the value.
//!
//! fjall compresses whole data blocks with LZ4, which finds repeated strings but codes no
//! literal in fewer than 8 bits: the benchmark documents (random hex padding, 4 bits of
//! information per character) shrank by ~10% with it. zstd's entropy coding of literals
//! shrinks them to ~55%, one value at a time, so a point read decompresses only its own
//! value. Values shorter than [`MIN_COMPRESSED`] (doc infos, seq entries, counters) are
//! stored as given: a zstd frame costs ~10 bytes of header and would not pay. A value that
//! zstd does not shrink by at least 1/16 (attachment chunks of random or already compressed
//! bytes) is stored as given too, so reading it costs one copy as before.
//!
//! Compression and decompression contexts are kept per thread: creating one costs more
//! than compressing a 1 KB value.

use std::cell::RefCell;

use crate::{Error, MAX_VALUE_LEN, Result};

/// Values shorter than this are never compressed.
pub const MIN_COMPRESSED: usize = 128;

/// zstd's level for values: its fastest regular level; higher levels find little more in
/// ~1 KB documents and cost several times the CPU.
const LEVEL: i32 = 1;

const RAW: u8 = 0x00;
const ZSTD: u8 = 0x01;

/// How values are written to and read from fjall; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValueCodec {
    /// Format 1: values as given, no header.
    Bare,
    /// Format 2: a header byte; zstd-compressed where it pays if `compress`.
    Framed { compress: bool },
}

thread_local! {
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

impl ValueCodec {
    /// The stored form of `value`.
    pub(crate) fn encode(self, value: Vec<u8>) -> Result<Vec<u8>> {
        match self {
            ValueCodec::Bare => Ok(value),
            ValueCodec::Framed { compress } => {
                if compress
                    && value.len() >= MIN_COMPRESSED
                    && let Some(stored) = compressed(&value)?
                {
                    return Ok(stored);
                }
                let mut stored = Vec::with_capacity(value.len() + 1);
                stored.push(RAW);
                stored.extend_from_slice(&value);
                Ok(stored)
            }
        }
    }

    /// The value whose stored form is `stored`.
    pub(crate) fn decode(self, stored: &[u8]) -> Result<Vec<u8>> {
        match (self, stored.split_first()) {
            (ValueCodec::Bare, _) => Ok(stored.to_vec()),
            (ValueCodec::Framed { .. }, Some((&RAW, value))) => Ok(value.to_vec()),
            (ValueCodec::Framed { .. }, Some((&ZSTD, frame))) => decompressed(frame),
            (ValueCodec::Framed { .. }, other) => Err(Error::Corrupt(format!(
                "a stored value starts with {:?}, not a value header (0 or 1)",
                other.map(|(first, _)| *first)
            ))),
        }
    }
}

/// `value` as `0x01` + zstd frame, or `None` if that would not save 1/16 of it.
fn compressed(value: &[u8]) -> Result<Option<Vec<u8>>> {
    let wanted = value.len() - value.len() / 16;
    let mut stored = Vec::with_capacity(1 + zstd::zstd_safe::compress_bound(value.len()));
    stored.push(ZSTD);
    let mut cursor = std::io::Cursor::new(stored);
    cursor.set_position(1);
    COMPRESSOR.with_borrow_mut(|compressor| {
        let compressor = match compressor {
            Some(compressor) => compressor,
            None => compressor.insert(zstd::bulk::Compressor::new(LEVEL).map_err(zstd_error)?),
        };
        compressor.compress_to_buffer(value, &mut cursor).map_err(zstd_error)
    })?;
    let stored = cursor.into_inner();
    Ok((stored.len() < wanted).then_some(stored))
}

/// The value in zstd `frame`.
fn decompressed(frame: &[u8]) -> Result<Vec<u8>> {
    // An empty input is zero frames, which zstd sizes as 0 bytes.
    let len = Some(frame)
        .filter(|frame| !frame.is_empty())
        .and_then(zstd::bulk::Decompressor::upper_bound)
        .filter(|&len| len <= MAX_VALUE_LEN)
        .ok_or_else(|| Error::Corrupt("a compressed value records no valid size".into()))?;
    let mut value = Vec::with_capacity(len);
    DECOMPRESSOR.with_borrow_mut(|decompressor| {
        let decompressor = match decompressor {
            Some(decompressor) => decompressor,
            None => decompressor.insert(zstd::bulk::Decompressor::new().map_err(zstd_error)?),
        };
        decompressor.decompress_to_buffer(frame, &mut value).map_err(zstd_error)
    })?;
    Ok(value)
}

fn zstd_error(err: std::io::Error) -> Error {
    Error::Corrupt(format!("zstd: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ~1 KB like the benchmark documents: a few fields, then random hex.
    fn document(seed: u64) -> Vec<u8> {
        let mut x = seed;
        let hex: String = (0..55)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                format!("{x:016x}")
            })
            .collect();
        format!(r#"{{"deviceID":"device-7","ts":1700000000,"pad":"{hex}"}}"#).into_bytes()
    }

    #[test]
    fn every_codec_reads_back_what_it_wrote() -> Result<()> {
        let random: Vec<u8> = document(3).iter().map(|b| b.wrapping_mul(151) ^ 0x5a).collect();
        let values = [Vec::new(), b"short".to_vec(), document(1), vec![b'a'; 100_000], random];
        let codecs = [
            ValueCodec::Bare,
            ValueCodec::Framed { compress: false },
            ValueCodec::Framed { compress: true },
        ];
        for codec in codecs {
            for value in &values {
                let stored = codec.encode(value.clone())?;
                assert_eq!(&codec.decode(&stored)?, value, "{codec:?}");
            }
        }
        Ok(())
    }

    #[test]
    fn documents_are_compressed_and_small_values_are_not() -> Result<()> {
        let codec = ValueCodec::Framed { compress: true };
        let doc = document(1);
        let stored = codec.encode(doc.clone())?;
        assert_eq!(stored[0], ZSTD);
        assert!(stored.len() < doc.len() * 2 / 3, "{} of {}", stored.len(), doc.len());
        assert_eq!(codec.encode(b"{\"a\":1}".to_vec())?, b"\x00{\"a\":1}");
        let off = ValueCodec::Framed { compress: false };
        assert_eq!(off.encode(doc.clone())?[0], RAW);
        assert_eq!(ValueCodec::Bare.encode(doc.clone())?, doc);
        Ok(())
    }

    #[test]
    fn a_damaged_value_is_an_error_not_a_panic() {
        let codec = ValueCodec::Framed { compress: true };
        for stored in [&b""[..], b"\x07abc", b"\x01", b"\x01\x28\xb5\x2f\xfd garbage"] {
            assert!(matches!(codec.decode(stored), Err(Error::Corrupt(_))), "{stored:?}");
        }
    }
}
