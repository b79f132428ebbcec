//! ANSI-C quoting (`$'…'`), per bash(1) "QUOTING".
//!
//! bash decodes `\xHH` and `\NNN` to single bytes, not characters: `$'cfg\xff'` names the
//! file whose name ends with the byte 0xff, which is no UTF-8 text. Such a word cannot be
//! told apart from another by text, so [`decode_ansi_c`] answers `None` for it and the word
//! is unknown (docs/policy.md "Names that are not UTF-8").

/// Decodes the body of an ANSI-C quoted string (`$'…'`), per bash(1) "QUOTING", to the
/// bytes bash makes of it; `None` when they are no UTF-8 text (`\xff`, `\377`, a `\u`
/// surrogate), which the caller takes as a value it cannot know.
pub(crate) fn decode_ansi_c(s: &str) -> Option<String> {
    let mut out: Vec<u8> = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        i += 1;
        if c != b'\\' {
            out.push(c);
            continue;
        }
        let Some(&e) = b.get(i) else {
            out.push(b'\\');
            break;
        };
        i += 1;
        match e {
            b'a' => out.push(0x07),
            b'b' => out.push(0x08),
            b'e' | b'E' => out.push(0x1b),
            b'f' => out.push(0x0c),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'v' => out.push(0x0b),
            b'\\' | b'\'' | b'"' | b'?' => out.push(e),
            b'0'..=b'7' => {
                let mut v = u32::from(e - b'0');
                for _ in 0..2 {
                    match b.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            v = v * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                // bash keeps the low byte: `\777` is 0xff, `\400` a NUL.
                if !push_byte(&mut out, (v & 0xff) as u8) {
                    break;
                }
            }
            b'x' | b'u' | b'U' => {
                let max = match e {
                    b'x' => 2,
                    b'u' => 4,
                    _ => 8,
                };
                let mut v = 0u32;
                let mut n = 0;
                while n < max {
                    match b.get(i).and_then(|&d| char::from(d).to_digit(16)) {
                        Some(d) => {
                            v = v.wrapping_mul(16).wrapping_add(d);
                            i += 1;
                            n += 1;
                        }
                        None => break,
                    }
                }
                if n == 0 {
                    out.push(b'\\');
                    out.push(e);
                    continue;
                }
                if e == b'x' {
                    if !push_byte(&mut out, v as u8) {
                        break;
                    }
                    continue;
                }
                if v == 0 {
                    break;
                }
                // A code point that is no character (a surrogate, beyond U+10FFFF): bash
                // writes bytes that are no UTF-8 text.
                let ch = char::from_u32(v)?;
                let mut buf = [0u8; 4];
                out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
            }
            b'c' => {
                // bash takes the next byte (`\c\\` counts the backslash once).
                if let Some(&x) = b.get(i) {
                    i += 1;
                    if !push_byte(&mut out, x & 0x1f) {
                        break;
                    }
                }
            }
            other => {
                out.push(b'\\');
                out.push(other);
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Pushes one byte; `false` at a NUL, where bash ends the string (the rest of the `$'…'`
/// text is dropped: `$'\0etc'` is empty).
fn push_byte(out: &mut Vec<u8>, v: u8) -> bool {
    if v == 0 {
        return false;
    }
    out.push(v);
    true
}
