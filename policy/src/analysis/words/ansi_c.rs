//! ANSI-C quoting (`$'…'`), per bash(1) "QUOTING".

/// Decodes the body of an ANSI-C quoted string (`$'…'`), per bash(1) "QUOTING".
pub(crate) fn decode_ansi_c(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            out.push('\\');
            break;
        };
        match e {
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            'e' | 'E' => out.push('\u{1b}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\u{b}'),
            '\\' => out.push('\\'),
            '\'' => out.push('\''),
            '"' => out.push('"'),
            '?' => out.push('?'),
            '0'..='7' => {
                let mut v = e.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|c| c.to_digit(8)) {
                        Some(d) => {
                            v = v * 8 + d;
                            chars.next();
                        }
                        None => break,
                    }
                }
                if !push_code(&mut out, v) {
                    break;
                }
            }
            'x' | 'u' | 'U' => {
                let max = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let mut v = 0u32;
                let mut n = 0;
                while n < max {
                    match chars.peek().and_then(|c| c.to_digit(16)) {
                        Some(d) => {
                            v = v.wrapping_mul(16).wrapping_add(d);
                            chars.next();
                            n += 1;
                        }
                        None => break,
                    }
                }
                if n == 0 {
                    out.push('\\');
                    out.push(e);
                } else if !push_code(&mut out, v) {
                    break;
                }
            }
            'c' => {
                if let Some(x) = chars.next() {
                    if !push_code(&mut out, (x as u32) & 0x1f) {
                        break;
                    }
                }
            }
            other => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    out
}

/// Pushes the character of code `v`; `false` at a NUL, where bash ends the string (the rest
/// of the `$'…'` text is dropped: `$'\0etc'` is empty).
fn push_code(out: &mut String, v: u32) -> bool {
    if v == 0 {
        return false;
    }
    out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
    true
}
