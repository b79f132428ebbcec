//! Credentials in URLs are never repeated in text a person or the agent reads.
//!
//! Remote URLs often carry a secret: `https://alice:ghp_…@github.com/x/y`,
//! `https://oauth2:TOKEN@gitlab.com/…`, a token as the user name (`https://ghp_…@github.com`),
//! `ssh://user:pass@host/…`, the scp-like `user:pass@host:path`, or a token in the query string
//! (`?access_token=…`). Reasons, prompts and reports quote URLs (a push's remote, a fetched
//! address); every such text goes through [`redact_credentials`] (or [`redact_url`] for one
//! URL) where it is made, so no caller can forget it.
//!
//! What is replaced by `***`:
//! - the whole userinfo of a URL with a scheme (`scheme://userinfo@host`), user name included:
//!   a lone user name is often the token itself;
//! - `user:pass` of the scp-like form (`user:pass@host:path`); a bare user name there
//!   (`git@github.com:x/y`) is kept, it is the ssh login, not a secret;
//! - the value of query parameters whose name says it is a secret (`token`, `access_token`,
//!   `password`, `key`, `sig`, `X-Amz-Signature`, …).
//!
//! Limits: the text is scanned for URL-shaped words; a secret not shaped like a URL (a bare
//! token in a header, an environment assignment) is not recognised.

use std::borrow::Cow;

/// What replaces a secret.
pub const REDACTED: &str = "***";

/// Query parameter names (compared ASCII case-insensitively, `-` and `_` ignored) whose
/// values are secrets.
const SECRET_PARAMS: &[&str] = &[
    "token",
    "accesstoken",
    "privatetoken",
    "authtoken",
    "apitoken",
    "idtoken",
    "refreshtoken",
    "password",
    "passwd",
    "pass",
    "pwd",
    "secret",
    "clientsecret",
    "key",
    "apikey",
    "accesskey",
    "sig",
    "signature",
    "xamzsignature",
    "xamzcredential",
    "xamzsecuritytoken",
    "auth",
    "authorization",
    "code",
];

/// Characters that end a URL-shaped word in free text.
fn is_delimiter(c: char) -> bool {
    c.is_whitespace() || matches!(c, '\'' | '"' | '`' | '(' | ')' | '<' | '>' | '[' | ']')
}

fn is_scheme_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')
}

fn secret_param(name: &str) -> bool {
    let norm: String = name
        .chars()
        .filter(|c| !matches!(c, '-' | '_'))
        .map(|c| c.to_ascii_lowercase())
        .collect();
    SECRET_PARAMS.contains(&norm.as_str())
}

/// `a=1&token=x#frag` → `a=1&token=***#frag`.
fn redact_query(query: &str) -> String {
    let (params, fragment) = match query.find('#') {
        Some(i) => (&query[..i], &query[i..]),
        None => (query, ""),
    };
    let mut out = String::with_capacity(query.len());
    for (i, p) in params.split('&').enumerate() {
        if i > 0 {
            out.push('&');
        }
        match p.split_once('=') {
            Some((k, v)) if secret_param(k) && !v.is_empty() => {
                out.push_str(k);
                out.push('=');
                out.push_str(REDACTED);
            }
            _ => out.push_str(p),
        }
    }
    out.push_str(fragment);
    out
}

/// One URL (or git's scp-like `[user@]host:path`) with its credentials replaced by `***`;
/// anything else unchanged.
///
/// ```
/// use tyba_policy::redact::redact_url;
/// assert_eq!(
///     redact_url("https://alice:ghp_SECRET@github.com/x/y"),
///     "https://***@github.com/x/y"
/// );
/// assert_eq!(redact_url("alice:pw@host:x/y.git"), "***@host:x/y.git");
/// assert_eq!(redact_url("git@github.com:x/y"), "git@github.com:x/y");
/// ```
pub fn redact_url(url: &str) -> Cow<'_, str> {
    if let Some(i) = url.find("://") {
        let scheme = &url[..i];
        if !scheme.is_empty() && scheme.chars().all(is_scheme_char) {
            let after = &url[i + 3..];
            let auth_end = after.find(['/', '?', '#']).unwrap_or(after.len());
            let authority = &after[..auth_end];
            let rest = &after[auth_end..];
            let host = match authority.rfind('@') {
                Some(at) => Cow::Owned(format!("{REDACTED}@{}", &authority[at + 1..])),
                None => Cow::Borrowed(authority),
            };
            let rest = match rest.find('?') {
                Some(q) => Cow::Owned(format!("{}?{}", &rest[..q], redact_query(&rest[q + 1..]))),
                None => Cow::Borrowed(rest),
            };
            if matches!(host, Cow::Borrowed(_)) && rest == after[auth_end..] {
                return Cow::Borrowed(url);
            }
            return Cow::Owned(format!("{scheme}://{host}{rest}"));
        }
        return Cow::Borrowed(url);
    }
    // scp-like: `user:pass@host:path`, with no `/` before the `@`.
    if let Some(at) = url.find('@') {
        let userinfo = &url[..at];
        if userinfo.contains(':') && !userinfo.contains('/') && url[at + 1..].contains(':') {
            return Cow::Owned(format!("{REDACTED}@{}", &url[at + 1..]));
        }
    }
    Cow::Borrowed(url)
}

/// Free text (a reason, a message, a command line) with the credentials of every URL-shaped
/// word in it replaced by `***` ([`redact_url`]). Words are delimited by whitespace, quotes,
/// backquotes, parentheses and brackets; a word may carry a prefix before its URL
/// (`url=https://u:p@h`).
///
/// ```
/// use tyba_policy::redact::redact_credentials;
/// assert_eq!(
///     redact_credentials("push to remote origin (https://alice:tok@github.com/x/y)"),
///     "push to remote origin (https://***@github.com/x/y)"
/// );
/// ```
pub fn redact_credentials(text: &str) -> Cow<'_, str> {
    if !text.contains('@') && !text.contains('?') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut changed = false;
    let mut word_start = None;
    let mut flush = |out: &mut String, word: &str| {
        let red = redact_word(word);
        changed |= matches!(red, Cow::Owned(_));
        out.push_str(&red);
    };
    for (i, c) in text.char_indices() {
        if is_delimiter(c) {
            if let Some(s) = word_start.take() {
                flush(&mut out, &text[s..i]);
            }
            out.push(c);
        } else if word_start.is_none() {
            word_start = Some(i);
        }
    }
    if let Some(s) = word_start {
        flush(&mut out, &text[s..]);
    }
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(text)
    }
}

/// One word of free text: the URL in it (from its scheme on) redacted, or the whole word as
/// an scp-like address.
fn redact_word(word: &str) -> Cow<'_, str> {
    if let Some(i) = word.find("://") {
        let start = word[..i]
            .char_indices()
            .rev()
            .take_while(|(_, c)| is_scheme_char(*c))
            .last()
            .map_or(i, |(j, _)| j);
        return match redact_url(&word[start..]) {
            Cow::Borrowed(_) => Cow::Borrowed(word),
            Cow::Owned(u) => Cow::Owned(format!("{}{u}", &word[..start])),
        };
    }
    // A prefix like `url=` or `remote.origin.url=` before an scp-like address.
    let start = word.rfind('=').map_or(0, |j| j + 1);
    match redact_url(&word[start..]) {
        Cow::Borrowed(_) => Cow::Borrowed(word),
        Cow::Owned(u) => Cow::Owned(format!("{}{u}", &word[..start])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_of_scheme_urls_is_redacted() {
        for (url, want) in [
            (
                "https://alice:ghp_SECRETTOKEN123@github.com/x/y",
                "https://***@github.com/x/y",
            ),
            (
                "https://ghp_TOKEN@github.com/x/y",
                "https://***@github.com/x/y",
            ),
            ("http://u:p@h:8080", "http://***@h:8080"),
            ("ssh://git:pw@host:22/x.git", "ssh://***@host:22/x.git"),
            ("git+ssh://u:p@host/x", "git+ssh://***@host/x"),
            (
                "https://oauth2:t@gitlab.com/g/p.git?x=1",
                "https://***@gitlab.com/g/p.git?x=1",
            ),
            // An `@` in the password (badly encoded) still hides all of it.
            ("https://a:b@c@host/p", "https://***@host/p"),
        ] {
            assert_eq!(redact_url(url), want, "{url}");
        }
    }

    #[test]
    fn urls_without_credentials_are_unchanged() {
        for url in [
            "https://github.com/x/y",
            "git@github.com:x/y.git",
            "/srv/git/repo.git",
            "../other",
            "file:///srv/repo",
            "origin",
            "https://github.com/x/y?ref=main",
            "https://h/p/user@example.com",
        ] {
            assert!(matches!(redact_url(url), Cow::Borrowed(_)), "{url}");
            assert!(matches!(redact_credentials(url), Cow::Borrowed(_)), "{url}");
        }
    }

    #[test]
    fn scp_like_password_is_redacted_but_a_login_is_kept() {
        assert_eq!(redact_url("alice:pw@host:x/y.git"), "***@host:x/y.git");
        assert_eq!(redact_url("git@host:x/y.git"), "git@host:x/y.git");
    }

    #[test]
    fn secret_query_parameters_are_redacted() {
        assert_eq!(
            redact_url("https://h/repo.git?access_token=abc&ref=x"),
            "https://h/repo.git?access_token=***&ref=x"
        );
        assert_eq!(
            redact_url("https://s3/b?X-Amz-Signature=ff&X-Amz-Credential=k#f"),
            "https://s3/b?X-Amz-Signature=***&X-Amz-Credential=***#f"
        );
        assert_eq!(
            redact_url("https://u:p@h/p?private_token=z"),
            "https://***@h/p?private_token=***"
        );
    }

    #[test]
    fn every_url_in_free_text_is_redacted() {
        let text = "push would update protected refs/heads/main on remote origin \
                    (https://alice:ghp_SECRETTOKEN123@github.com/x/y); also `bob:pw@h:r`, \
                    url=ssh://c:d@e/f and 'http://g@h/i?token=j'";
        let got = redact_credentials(text);
        assert_eq!(
            got,
            "push would update protected refs/heads/main on remote origin \
             (https://***@github.com/x/y); also `***@h:r`, \
             url=ssh://***@e/f and 'http://***@h/i?token=***'"
        );
        for secret in ["ghp_SECRETTOKEN123", "alice", "pw", "c:d", "g@", "=j"] {
            assert!(!got.contains(secret), "{secret} in {got}");
        }
    }

    #[test]
    fn text_without_urls_is_borrowed() {
        let t = "`git push` uses the network";
        assert!(matches!(redact_credentials(t), Cow::Borrowed(_)));
        // Non-ASCII text is walked by characters, never split inside one.
        assert_eq!(
            redact_credentials("é https://ü:ö@h/ä é"),
            "é https://***@h/ä é"
        );
    }
}
