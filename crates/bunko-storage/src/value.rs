//! How a [`crate::Fjall`] store writes values to fjall: [`ValueCodec`].
//!
//! Format 1 (directories from before issue 20's value compression) stores every value as
//! given. Format 2 (and 3, which differs only in the engine's records) prefixes each value
//! with one byte:
//!
//! - `0x00`: the value follows as given;
//! - `0x01`: a zstd frame follows (recording its decompressed size), which decompresses
//!   to the value;
//! - `0x02` (format 3): a *head* left as given, then a zstd frame of the rest: a LEB128
//!   length of the head, the head, the frame. A writer gives the head's length
//!   ([`crate::Batch::put_with_head`]) so that readers of the head alone
//!   ([`crate::Read::get_head`]) need not decompress the rest: the engine's `Doc` record
//!   keeps its revision tree as the head and the body it carries as the rest.
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
const HEAD_ZSTD: u8 = 0x02;

/// What a reader wants of a value: all of it, or its head ([`crate::Read::get_head`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Whole,
    Head,
}

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
    /// The stored form of `value`, whose first `head` bytes are its head (0: none). The
    /// head stays readable without decompression; the rest is compressed where it pays.
    pub(crate) fn encode(self, value: Vec<u8>, head: usize) -> Result<Vec<u8>> {
        match self {
            ValueCodec::Bare => Ok(value),
            ValueCodec::Framed { compress } => {
                if compress && 0 < head && head < value.len() {
                    if let Some(stored) = head_compressed(&value, head)? {
                        return Ok(stored);
                    }
                } else if compress
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

    /// The value whose stored form is `stored`, or its head only if `part` asks for it
    /// and it was stored with one (else the whole value, whose head is its prefix).
    pub(crate) fn decode(self, stored: &[u8], part: Part) -> Result<Vec<u8>> {
        match (self, stored.split_first()) {
            (ValueCodec::Bare, _) => Ok(stored.to_vec()),
            (ValueCodec::Framed { .. }, Some((&RAW, value))) => Ok(value.to_vec()),
            (ValueCodec::Framed { .. }, Some((&ZSTD, frame))) => decompressed(frame, 0),
            (ValueCodec::Framed { .. }, Some((&HEAD_ZSTD, rest))) => {
                let (head, frame) = split_head(rest)?;
                match part {
                    Part::Head => Ok(head.to_vec()),
                    Part::Whole => {
                        let mut value = decompressed(frame, head.len())?;
                        value[..head.len()].copy_from_slice(head);
                        Ok(value)
                    }
                }
            }
            (ValueCodec::Framed { .. }, other) => Err(Error::Corrupt(format!(
                "a stored value starts with {:?}, not a value header (0, 1 or 2)",
                other.map(|(first, _)| *first)
            ))),
        }
    }
}

/// `value` as `0x02` + its first `head` bytes + a zstd frame of the rest, or `None` if
/// the rest is too short to compress or would not shrink by 1/16.
fn head_compressed(value: &[u8], head: usize) -> Result<Option<Vec<u8>>> {
    let rest = &value[head..];
    if rest.len() < MIN_COMPRESSED {
        return Ok(None);
    }
    let mut stored = Vec::with_capacity(12 + head + zstd::zstd_safe::compress_bound(rest.len()));
    stored.push(HEAD_ZSTD);
    let mut len = head as u64;
    while len >= 0x80 {
        stored.push((len as u8 & 0x7f) | 0x80);
        len >>= 7;
    }
    stored.push(len as u8);
    stored.extend_from_slice(&value[..head]);
    let start = stored.len();
    let stored = compress_into(stored, rest)?;
    Ok((stored.len() - start < rest.len() - rest.len() / 16).then_some(stored))
}

/// The head and the zstd frame of a `0x02` value (after its header byte).
fn split_head(rest: &[u8]) -> Result<(&[u8], &[u8])> {
    let corrupt = || Error::Corrupt("a stored value's head length is damaged".into());
    let (mut len, mut shift, mut used) = (0u64, 0u32, 0usize);
    loop {
        let byte = *rest.get(used).ok_or_else(corrupt)?;
        used += 1;
        len |= u64::from(byte & 0x7f).checked_shl(shift).ok_or_else(corrupt)?;
        if byte < 0x80 {
            break;
        }
        shift += 7;
        if shift > 35 {
            return Err(corrupt());
        }
    }
    let len = usize::try_from(len).map_err(|_| corrupt())?;
    let rest = &rest[used..];
    if len > rest.len() {
        return Err(corrupt());
    }
    Ok(rest.split_at(len))
}

/// `value` as `0x01` + zstd frame, or `None` if that would not save 1/16 of it.
fn compressed(value: &[u8]) -> Result<Option<Vec<u8>>> {
    let wanted = value.len() - value.len() / 16;
    let mut stored = Vec::with_capacity(1 + zstd::zstd_safe::compress_bound(value.len()));
    stored.push(ZSTD);
    let stored = compress_into(stored, value)?;
    Ok((stored.len() < wanted).then_some(stored))
}

/// `stored` with a zstd frame of `value` appended.
fn compress_into(stored: Vec<u8>, value: &[u8]) -> Result<Vec<u8>> {
    let start = stored.len() as u64;
    let mut cursor = std::io::Cursor::new(stored);
    cursor.set_position(start);
    COMPRESSOR.with_borrow_mut(|compressor| {
        let compressor = match compressor {
            Some(compressor) => compressor,
            None => compressor.insert(zstd::bulk::Compressor::new(LEVEL).map_err(zstd_error)?),
        };
        compressor.compress_to_buffer(value, &mut cursor).map_err(zstd_error)
    })?;
    Ok(cursor.into_inner())
}

/// The value in zstd `frame`, after `prefix` bytes left for the caller to fill.
fn decompressed(frame: &[u8], prefix: usize) -> Result<Vec<u8>> {
    // An empty input is zero frames, which zstd sizes as 0 bytes.
    let len = Some(frame)
        .filter(|frame| !frame.is_empty())
        .and_then(zstd::bulk::Decompressor::upper_bound)
        .filter(|&len| len <= MAX_VALUE_LEN)
        .ok_or_else(|| Error::Corrupt("a compressed value records no valid size".into()))?;
    let mut value = Vec::with_capacity(prefix + len);
    value.resize(prefix, 0);
    let mut cursor = std::io::Cursor::new(value);
    cursor.set_position(prefix as u64);
    DECOMPRESSOR.with_borrow_mut(|decompressor| {
        let decompressor = match decompressor {
            Some(decompressor) => decompressor,
            None => decompressor.insert(zstd::bulk::Decompressor::new().map_err(zstd_error)?),
        };
        decompressor.decompress_to_buffer(frame, &mut cursor).map_err(zstd_error)
    })?;
    Ok(cursor.into_inner())
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
                for head in [0, 1, 40, value.len()] {
                    let stored = codec.encode(value.clone(), head.min(value.len()))?;
                    assert_eq!(&codec.decode(&stored, Part::Whole)?, value, "{codec:?}");
                    let read = codec.decode(&stored, Part::Head)?;
                    assert!(value.starts_with(&read) && read.len() >= head.min(value.len()));
                }
            }
        }
        Ok(())
    }

    #[test]
    fn documents_are_compressed_and_small_values_are_not() -> Result<()> {
        let codec = ValueCodec::Framed { compress: true };
        let doc = document(1);
        let stored = codec.encode(doc.clone(), 0)?;
        assert_eq!(stored[0], ZSTD);
        assert!(stored.len() < doc.len() * 2 / 3, "{} of {}", stored.len(), doc.len());
        assert_eq!(codec.encode(b"{\"a\":1}".to_vec(), 0)?, b"\x00{\"a\":1}");
        let off = ValueCodec::Framed { compress: false };
        assert_eq!(off.encode(doc.clone(), 0)?[0], RAW);
        assert_eq!(ValueCodec::Bare.encode(doc.clone(), 10)?, doc);
        Ok(())
    }

    #[test]
    fn a_head_stays_readable_and_the_rest_is_compressed() -> Result<()> {
        let codec = ValueCodec::Framed { compress: true };
        let mut value = b"the head".to_vec();
        value.extend_from_slice(&document(2));
        let stored = codec.encode(value.clone(), 8)?;
        assert_eq!(&stored[..10], b"\x02\x08the head");
        assert!(stored.len() < value.len() * 2 / 3, "{} of {}", stored.len(), value.len());
        assert_eq!(codec.decode(&stored, Part::Head)?, b"the head");
        assert_eq!(codec.decode(&stored, Part::Whole)?, value);
        // A rest too short to compress: stored as given, and a head read gets it all.
        let short = b"the head and a short rest".to_vec();
        let stored = codec.encode(short.clone(), 8)?;
        assert_eq!(stored[0], RAW);
        assert_eq!(codec.decode(&stored, Part::Head)?, short);
        Ok(())
    }

    #[test]
    fn a_damaged_value_is_an_error_not_a_panic() {
        let codec = ValueCodec::Framed { compress: true };
        let damaged: [&[u8]; 8] = [
            b"",
            b"\x07abc",
            b"\x01",
            b"\x01\x28\xb5\x2f\xfd garbage",
            b"\x02",
            b"\x02\x09abc",
            b"\x02\xff\xff\xff\xff\xff\xff",
            b"\x02\x01a\x28\xb5\x2f\xfd garbage",
        ];
        for stored in damaged {
            assert!(
                matches!(codec.decode(stored, Part::Whole), Err(Error::Corrupt(_))),
                "{stored:?}"
            );
        }
    }
}
