//! The framer on its own: targets encoded, bodies untouched, keep-alive and pipelining,
//! any split of the input, malformed heads replaced.

use super::*;

/// Feeds `input` in pieces of `step` bytes and returns what hyper would read.
fn run(input: &[u8], step: usize) -> Vec<u8> {
    let mut framer = Framer::new();
    let mut out = Vec::new();
    for piece in input.chunks(step) {
        framer.feed(piece, &mut out);
    }
    framer.finish(&mut out);
    out
}

/// The same output whatever the split, which is returned.
fn framed(input: &[u8]) -> Vec<u8> {
    let whole = run(input, input.len().max(1));
    for step in [1, 2, 3, 7, 64] {
        assert_eq!(run(input, step), whole, "split into pieces of {step}");
    }
    whole
}

#[test]
fn curl_style_targets_are_percent_encoded() {
    let input = b"GET /db/_design/d/_view/by-device?keys=[\"device-123456\"]&limit=1 HTTP/1.1\r\nhost: x\r\n\r\n";
    let want = b"GET /db/_design/d/_view/by-device?keys=%5B%22device-123456%22%5D&limit=1 HTTP/1.1\r\nhost: x\r\n\r\n";
    assert_eq!(framed(input), want);
    let input = "GET /db/{a}|b\\c^d`e/caf\u{e9}?startkey=\"\u{3042}\" HTTP/1.1\r\n\r\n";
    let want =
        "GET /db/%7Ba%7D%7Cb%5Cc%5Ed%60e/caf%C3%A9?startkey=%22%E3%81%82%22 HTTP/1.1\r\n\r\n";
    assert_eq!(framed(input.as_bytes()), want.as_bytes());
}

#[test]
fn valid_targets_and_headers_are_unchanged() {
    let input = b"\r\nPUT /db/a%22b?x=1+2&y=%7B HTTP/1.1\r\nContent-Type: application/json\r\nX-Q: \"[q]\"\r\nContent-Length: 2\r\n\r\n{}";
    assert_eq!(framed(input), input);
}

#[test]
fn every_visible_byte_in_a_target_parses_as_a_uri() {
    for b in 0x21..=0xffu8 {
        let mut head = b"GET /db/x".to_vec();
        head.push(b);
        head.extend_from_slice(b"?k=");
        head.push(b);
        head.extend_from_slice(b" HTTP/1.1\r\n\r\n");
        let out = framed(&head);
        let text = String::from_utf8(out.clone()).expect("ASCII");
        let target = text.split(' ').nth(1).unwrap();
        assert!(axum::http::Uri::try_from(target).is_ok(), "byte {b:#x}: {target}");
        assert!(!text.contains(BAD_REQUEST_HEADER), "byte {b:#x} refused");
    }
}

/// Bodies that look like request lines with raw quotes are never touched, and the request
/// after each body is encoded again.
#[test]
fn keep_alive_and_pipelined_requests_with_bodies() {
    let body = b"GET /\"x\" HTTP/1.1\r\n\r\n";
    let mut input =
        format!("PUT /db/a HTTP/1.1\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
    input.extend_from_slice(body);
    input.extend_from_slice(b"GET /db/_all_docs?startkey=\"a\" HTTP/1.1\r\n\r\n");
    input.extend_from_slice(b"POST /db/_bulk_docs HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
    input.extend_from_slice(b"15;ext=1\r\nGET /\"y\" HTTP/1.1\r\n\r\n\r\n0\r\nTrailer: t\r\n\r\n");
    input.extend_from_slice(b"GET /db/[b] HTTP/1.1\r\n\r\n");
    let out = String::from_utf8(framed(&input)).unwrap();
    let want = concat!(
        "PUT /db/a HTTP/1.1\r\nContent-Length: 21\r\n\r\nGET /\"x\" HTTP/1.1\r\n\r\n",
        "GET /db/_all_docs?startkey=%22a%22 HTTP/1.1\r\n\r\n",
        "POST /db/_bulk_docs HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "15;ext=1\r\nGET /\"y\" HTTP/1.1\r\n\r\n\r\n0\r\nTrailer: t\r\n\r\n",
        "GET /db/%5Bb%5D HTTP/1.1\r\n\r\n",
    );
    assert_eq!(out, want);
}

#[test]
fn malformed_heads_become_a_bad_request_and_the_rest_is_dropped() {
    for (input, reason) in [
        (&b"GET /a b c HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n"[..], "Bad request line or header"),
        (b"GET / HTTP/1.1\r\nbad header\r\n\r\n", "Bad request line or header"),
        (b"GET /\x01 HTTP/1.1\r\n\r\n", "Bad request line or header"),
        (b"PUT / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", "Bad Content-Length"),
        (b"PUT / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", "Conflicting"),
        (b"PUT / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", "Transfer-Encoding must end"),
    ] {
        let out = String::from_utf8(framed(input)).unwrap();
        assert!(out.starts_with("GET / HTTP/1.1\r\n"), "{out}");
        assert!(out.contains(&format!("{BAD_REQUEST_HEADER}: {reason}")), "{out}");
        assert_eq!(out.matches("GET /").count(), 1, "nothing after the bad head: {out}");
    }
}

#[test]
fn a_head_over_the_limit_is_refused() {
    let mut input = b"GET /".to_vec();
    input.resize(MAX_HEAD + 10, b'a');
    let out = String::from_utf8(run(&input, 8192)).unwrap();
    assert!(out.contains("request head too large"), "{}", &out[..200]);
    // Raw quotes triple in size: the encoded head counts.
    let mut input = b"GET /".to_vec();
    input.resize(MAX_HEAD / 2, b'"');
    input.extend_from_slice(b" HTTP/1.1\r\n\r\n");
    let out = String::from_utf8(run(&input, 8192)).unwrap();
    assert!(out.contains("request head too large"));
}

#[test]
fn http2_preface_and_upgrades_pass_through() {
    let input = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x12\"[";
    assert_eq!(framed(input), input);
    let input = b"GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\nGET /\"x\" HTTP/1.1\r\n";
    assert_eq!(framed(input), input);
}

#[test]
fn a_partial_head_at_the_end_is_handed_on_as_it_is() {
    assert_eq!(run(b"GET /\"a\" HTT", 4), b"GET /\"a\" HTT");
}

/// A long head sent a byte at a time is parsed a few times, not once per byte.
#[test]
fn a_head_dripped_byte_by_byte_passes_whole() {
    let mut input = b"GET /db/_all_docs?keys=[\"".to_vec();
    input.resize(40_000, b'a');
    input.extend_from_slice(b"\"] HTTP/1.1\r\nHost: x\r\n\r\n");
    let out = run(&input, 1);
    let want = String::from_utf8(input)
        .unwrap()
        .replace('"', "%22")
        .replace('[', "%5B")
        .replace(']', "%5D");
    assert_eq!(String::from_utf8(out).unwrap(), want);
}

#[test]
fn mid_request_is_known_for_lingering_closes() {
    let mut framer = Framer::new();
    let mut out = Vec::new();
    assert!(!framer.mid_request());
    framer.feed(b"PUT /db/a HTTP/1.1\r\nContent-Length: 4\r\n\r\n{}", &mut out);
    assert!(framer.mid_request(), "two body bytes still to come");
    framer.feed(b"  ", &mut out);
    assert!(!framer.mid_request());
    framer.feed(b"GET / HT", &mut out);
    assert!(framer.mid_request(), "a partial head");
}
