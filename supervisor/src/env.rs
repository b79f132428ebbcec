//! The agent's environment: secrets withheld (issue 4 §6, issue 13 class 11).
//!
//! A variable is withheld when (first match wins, `docs/sandbox.md` "Secrets in the
//! environment"):
//! 1. its name is one that always holds a secret or a credential's handle, whatever its value
//!    ([`ALWAYS_SECRET`], and `OP_SESSION_*`): `SSH_AUTH_SOCK`, `BW_SESSION`, `MYSQL_PWD`…;
//! 2. its **value** has the shape of a secret, whatever its name: a private key (PEM), a URL
//!    with credentials (`scheme://user:pass@host`, a token as the user, or a query parameter
//!    named like a secret: `?token=`, `&sig=`…), a `password=` keyword (libpq and ODBC
//!    strings), a webhook URL (Slack, Discord, Teams, Telegram bots, any `/hooks/` or
//!    `/webhook…` path: the URL is the credential), or a token with a known issuer's prefix
//!    (`ghp_`, `github_pat_`, `glpat-`, `xoxb-`, `sk-ant-`, `AKIA…`, a JWT…);
//! 3. its name has a secret's shape (contains `TOKEN`, `SECRET`, `PASSWORD`, `CREDENTIAL`,
//!    `API_KEY`…, ends in `_KEY`, `_PWD`, `_PASS`, `_AUTH`, `_DSN`, `_SESSION`, `_PAT`,
//!    starts with `AWS_`) **and** its value is not a path: a value that is one existing
//!    absolute path, or a `:`-list of them, names where a secret is kept, which Landlock
//!    guards, not the secret (`AWS_CA_BUNDLE`, `GOOGLE_APPLICATION_CREDENTIALS`,
//!    `SSL_KEY_FILE`).
//!
//! Everything else is passed. `--pass-env NAME` passes a withheld name on purpose.

use std::ffi::{OsStr, OsString};
use std::path::Path;

/// Why a variable is withheld.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretKind {
    /// Its name always holds a secret or a handle on one ([`ALWAYS_SECRET`]).
    Handle,
    /// Its name has a secret's shape and its value is not a path.
    Name,
    /// Its value is a URL or a connection string carrying credentials.
    Credentials,
    /// Its value is a webhook URL (the URL itself lets anyone post).
    Webhook,
    /// Its value has the shape of an issuer's token.
    Token,
    /// Its value holds a private key.
    PrivateKey,
}

impl SecretKind {
    /// A short description for the start-up report.
    pub fn describe(&self) -> &'static str {
        match self {
            SecretKind::Handle => "credential handle",
            SecretKind::Name => "secret name",
            SecretKind::Credentials => "credentials in value",
            SecretKind::Webhook => "webhook URL",
            SecretKind::Token => "token",
            SecretKind::PrivateKey => "private key",
        }
    }
}

/// Names withheld whatever their value (upper-cased comparison): agent sockets, session keys
/// of password managers, passwords read by clients.
pub const ALWAYS_SECRET: &[&str] = &[
    "SSH_AUTH_SOCK",
    "GPG_AGENT_INFO",
    "KRB5CCNAME",
    "DOCKER_AUTH_CONFIG",
    "NETRC",
    "BW_SESSION",
    "BWS_ACCESS_TOKEN",
    "MYSQL_PWD",
    "PGPASSWORD",
    "PGPASSFILE",
    "VAULT_TOKEN",
    "HCLOUD_TOKEN",
];

/// Prefixes of names withheld whatever their value (`OP_SESSION_<account>`: 1Password CLI).
const ALWAYS_SECRET_PREFIXES: &[&str] = &["OP_SESSION_"];

const NAME_PARTS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "API_KEY",
    "APIKEY",
    "ACCESS_KEY",
    "PRIVATE_KEY",
    "CREDENTIAL",
    "COOKIE",
    "SESSION_KEY",
    "AUTH_KEY",
    "WEBHOOK",
];
const NAME_SUFFIXES: &[&str] = &[
    "_KEY", "_PWD", "_PASS", "_AUTH", "_DSN", "_SESSION", "_PAT", "_SIG",
];
const NAME_PREFIXES: &[&str] = &["AWS_"];

/// Whether a variable name has a secret's shape (rule 1 or 3 of the module docs, the value
/// aside). Matching is on the upper-cased name.
pub fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    always_secret(&n)
        || NAME_PARTS.iter().any(|p| n.contains(p))
        || NAME_SUFFIXES.iter().any(|s| n.ends_with(s))
        || NAME_PREFIXES.iter().any(|p| n.starts_with(p))
}

fn always_secret(upper: &str) -> bool {
    ALWAYS_SECRET.contains(&upper) || ALWAYS_SECRET_PREFIXES.iter().any(|p| upper.starts_with(p))
}

/// Why `name=value` is withheld, or `None` to pass it (the rule of the module docs; paths
/// are tested against the file system).
pub fn secret_kind(name: &str, value: &OsStr) -> Option<SecretKind> {
    secret_kind_with(name, value, &|p| std::fs::symlink_metadata(p).is_ok())
}

/// [`secret_kind`] with `exists` telling which absolute paths exist.
pub fn secret_kind_with(
    name: &str,
    value: &OsStr,
    exists: &dyn Fn(&Path) -> bool,
) -> Option<SecretKind> {
    let upper = name.to_ascii_uppercase();
    if always_secret(&upper) {
        return Some(SecretKind::Handle);
    }
    let v = value.to_string_lossy();
    if let Some(k) = value_kind(&v) {
        return Some(k);
    }
    if is_secret_name(name) && !v.is_empty() && !is_path_list(&v, exists) {
        return Some(SecretKind::Name);
    }
    None
}

/// One existing absolute path, or a `:`-separated list of them.
fn is_path_list(v: &str, exists: &dyn Fn(&Path) -> bool) -> bool {
    v.split(':').all(|p| {
        p.starts_with('/')
            && !p.chars().any(|c| c.is_whitespace() || c.is_control())
            && exists(Path::new(p))
    })
}

/// The secret shape of a value, if any (rule 2 of the module docs).
fn value_kind(v: &str) -> Option<SecretKind> {
    if v.contains("-----BEGIN") && v.contains("PRIVATE KEY") {
        return Some(SecretKind::PrivateKey);
    }
    let mut url_kind = None;
    for (i, _) in v.match_indices("://") {
        let start = v[..i]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || "+.-".contains(c)))
            .map_or(0, |s| s + 1);
        if start == i {
            continue;
        }
        let rest = &v[i + 3..];
        let end = rest
            .find(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == '"' || c == '\'')
            .unwrap_or(rest.len());
        match url_secret(&rest[..end]) {
            Some(SecretKind::Credentials) => return Some(SecretKind::Credentials),
            Some(k) => url_kind = Some(k),
            None => {}
        }
    }
    if url_kind.is_some() {
        return url_kind;
    }
    if keyword_password(v) {
        return Some(SecretKind::Credentials);
    }
    if is_token(v.trim()) {
        return Some(SecretKind::Token);
    }
    None
}

/// Query parameter names that carry a credential.
const SECRET_PARAMS: &[&str] = &[
    "token",
    "access_token",
    "refresh_token",
    "id_token",
    "auth",
    "api_key",
    "apikey",
    "key",
    "secret",
    "client_secret",
    "password",
    "passwd",
    "pwd",
    "sig",
    "signature",
    "x-amz-signature",
    "x-amz-security-token",
    "x-goog-signature",
    "sv",
];

/// `rest` is what follows `scheme://`: credentials in the user info or the query, or a
/// webhook.
fn url_secret(rest: &str) -> Option<SecretKind> {
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..auth_end];
    if let Some(at) = authority.rfind('@') {
        let userinfo = &authority[..at];
        match userinfo.split_once(':') {
            Some((_, pass)) if !pass.is_empty() => return Some(SecretKind::Credentials),
            None if userinfo.len() >= 16
                && userinfo
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)) =>
            {
                return Some(SecretKind::Credentials)
            }
            _ => {}
        }
    }
    let after = &rest[auth_end..];
    let (path, query) = match after.split_once('?') {
        Some((p, q)) => (p, q.split('#').next().unwrap_or("")),
        None => (after.split('#').next().unwrap_or(""), ""),
    };
    for pair in query.split('&') {
        if let Some((k, val)) = pair.split_once('=') {
            if !val.is_empty() && SECRET_PARAMS.contains(&k.to_ascii_lowercase().as_str()) {
                return Some(SecretKind::Credentials);
            }
        }
    }
    let host = authority
        .rsplit('@')
        .next()
        .unwrap_or("")
        .split(':')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    // Where the hook's own token may be: every segment on a hook host, the segments after a
    // `hooks`/`webhook…` segment, a Telegram `bot<token>` segment itself.
    let from = if host.starts_with("hooks.")
        || host.ends_with(".webhook.office.com")
        || host == "webhook.site"
    {
        Some(0)
    } else if host == "api.telegram.org" {
        segs.iter().position(|s| s.starts_with("bot"))
    } else {
        segs.iter()
            .position(|s| s == "hooks" || s.starts_with("webhook"))
            .map(|i| i + 1)
    };
    // A page about webhooks (`/docs/webhooks`) or a bare hook host names no hook: a token
    // segment (8 characters or more, with a digit) must follow.
    let token_seg = |s: &String| s.len() >= 8 && s.chars().any(|c| c.is_ascii_digit());
    from.is_some_and(|i| segs.iter().skip(i).any(token_seg))
        .then_some(SecretKind::Webhook)
}

/// `password=…` or `pwd=…` as a keyword of a connection string (libpq `host=db
/// password=x`, ODBC `Server=db;Pwd=x`).
fn keyword_password(v: &str) -> bool {
    let l = v.to_ascii_lowercase();
    ["password=", "pwd=", "passwd="].iter().any(|k| {
        l.match_indices(k).any(|(i, _)| {
            let before_ok = i == 0 || {
                let b = l.as_bytes()[i - 1];
                b == b' ' || b == b';' || b == b'&' || b == b'?' || b == b'\t'
            };
            let val = &l[i + k.len()..];
            before_ok && val.chars().next().is_some_and(|c| c != ' ' && c != ';')
        })
    })
}

/// Prefixes of issuers' tokens (GitHub, GitLab, Slack, Anthropic, OpenAI, Stripe, npm, PyPI,
/// Hugging Face, DigitalOcean, Shopify, SendGrid).
const TOKEN_PREFIXES: &[&str] = &[
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "gldt-",
    "glrt-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xoxr-",
    "xoxs-",
    "xapp-",
    "sk-ant-",
    "sk-proj-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "npm_",
    "pypi-",
    "hf_",
    "dop_v1_",
    "shpat_",
    "SG.",
];

fn token_chars(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.=+/".contains(c))
}

/// Whether `v` as a whole has the shape of an issued token.
fn is_token(v: &str) -> bool {
    if v.len() < 20 || !token_chars(v) {
        return false;
    }
    if TOKEN_PREFIXES.iter().any(|p| v.starts_with(p)) {
        return true;
    }
    // OpenAI's older keys: `sk-` and 40+ characters.
    if v.starts_with("sk-") && v.len() >= 40 {
        return true;
    }
    // AWS access key ids: AKIA/ASIA and 16 upper-case letters or digits.
    if v.len() == 20
        && (v.starts_with("AKIA") || v.starts_with("ASIA"))
        && v[4..]
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
    {
        return true;
    }
    // Google API keys.
    if v.starts_with("AIza") && v.len() == 39 {
        return true;
    }
    // JSON Web Tokens: three base64url parts, the first a JSON object.
    let parts: Vec<&str> = v.split('.').collect();
    parts.len() == 3 && parts[0].starts_with("eyJ") && parts.iter().all(|p| p.len() >= 4)
}

/// An environment: `(name, value)` pairs in order.
pub type EnvVars = Vec<(OsString, OsString)>;

/// Splits an environment into what the agent gets and what is withheld. Names in `pass` are
/// kept even when they look secret (`--pass-env NAME`).
///
/// Returns `(kept, withheld)`: `kept` in the input order, `withheld` the names and why, in the
/// input order.
pub fn scrub_env_explained(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    pass: &[String],
) -> (EnvVars, Vec<(String, SecretKind)>) {
    let mut kept = Vec::new();
    let mut stripped = Vec::new();
    for (k, v) in vars {
        let name = k.to_string_lossy().into_owned();
        match secret_kind(&name, &v) {
            Some(kind) if !pass.iter().any(|p| p == &name) => stripped.push((name, kind)),
            _ => kept.push((k, v)),
        }
    }
    (kept, stripped)
}

/// [`scrub_env_explained`] with the withheld names only.
pub fn scrub_env(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    pass: &[String],
) -> (EnvVars, Vec<String>) {
    let (kept, stripped) = scrub_env_explained(vars, pass);
    (kept, stripped.into_iter().map(|(n, _)| n).collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// Paths that "exist" in these tests.
    fn exists(p: &Path) -> bool {
        [
            "/etc/ssl/certs/ca-certificates.crt",
            "/home/p/.config/gcloud/key.json",
            "/etc/ssl/private/site.key",
            "/usr/share/ca",
        ]
        .iter()
        .any(|e| Path::new(e) == p)
    }

    fn kind(name: &str, value: &str) -> Option<SecretKind> {
        secret_kind_with(name, OsStr::new(value), &exists)
    }

    #[test]
    fn handles_are_withheld_whatever_their_value() {
        for (n, v) in [
            ("BW_SESSION", "q1w2e3r4t5y6u7i8o9p0"),
            ("BW_SESSION", "/etc/ssl/certs/ca-certificates.crt"),
            ("OP_SESSION_my", "abc"),
            ("OP_SESSION_team_example", "x"),
            ("MYSQL_PWD", "hunter2"),
            ("mysql_pwd", "hunter2"),
            ("PGPASSWORD", "p"),
            ("SSH_AUTH_SOCK", "/tmp/ssh-x/agent.1"),
            ("KRB5CCNAME", "FILE:/tmp/krb5cc_1000"),
            ("VAULT_TOKEN", "s.abc"),
        ] {
            assert_eq!(kind(n, v), Some(SecretKind::Handle), "{n}={v}");
        }
    }

    #[test]
    fn credentials_in_urls_and_connection_strings() {
        for (n, v) in [
            ("DATABASE_URL", "postgres://app:s3cret@db.internal:5432/app"),
            ("REDIS_URL", "redis://:pw@localhost:6379/0"),
            ("MIRROR", "https://user:pass@example.com/repo.git"),
            (
                "GIT_REMOTE",
                "https://ghp_abcdefghijklmnop1234@github.com/o/r",
            ),
            ("HTTPS_PROXY", "http://me:pw@proxy:3128"),
            ("FEED", "https://example.com/feed?token=abc123"),
            (
                "BLOB",
                "https://acct.blob.core.windows.net/c/f?sv=2022&sig=AbC%3D",
            ),
            (
                "S3_OBJECT",
                "https://b.s3.amazonaws.com/k?X-Amz-Signature=deadbeef",
            ),
            (
                "SERVICES",
                "a=http://ok.example, b=amqp://guest:guest@rabbit/",
            ),
            ("PG_CONN", "host=db user=app password=s3cret dbname=app"),
            ("ODBC", "Driver=x;Server=db;Uid=sa;Pwd=s3cret;"),
        ] {
            assert_eq!(kind(n, v), Some(SecretKind::Credentials), "{n}={v}");
        }
        for (n, v) in [
            ("DATABASE_URL", "postgres://localhost/app"),
            ("UPSTREAM", "ssh://git@github.com/o/r.git"),
            ("REPO", "git@github.com:o/r.git"),
            ("HOMEPAGE", "https://example.com/?q=rust&page=2"),
            ("NO_PROXY", "localhost,127.0.0.1"),
            ("PG_CONN", "host=db user=app dbname=app"),
            ("MAILTO", "someone@example.com"),
        ] {
            assert_eq!(kind(n, v), None, "{n}={v}");
        }
    }

    #[test]
    fn webhooks() {
        for (n, v) in [
            (
                "NOTIFY",
                "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
            ),
            (
                "ALERTS",
                "https://discord.com/api/webhooks/123456789012345678/abcdefABCDEF-_",
            ),
            (
                "CHAT",
                "https://discordapp.com/api/webhooks/123456789012345678/abcDEF123",
            ),
            (
                "TEAMS",
                "https://contoso.webhook.office.com/webhookb2/0f1e2d3c-aaaa@cccc/IncomingWebhook/9a8b7c6d/eeee",
            ),
            ("BOT", "https://api.telegram.org/bot123456:ABCdef/sendMessage"),
            ("CI_HOOK", "https://ci.example.com/hooks/0123456789abcdef"),
        ] {
            assert_eq!(kind(n, v), Some(SecretKind::Webhook), "{n}={v}");
        }
        for (n, v) in [
            ("DOCS", "https://docs.github.com/en/webhooks"),
            ("DOCS2", "https://example.com/docs/webhooks/setup-guide"),
            ("SLACK_HOME", "https://slack.com/"),
            ("HOOKS_API", "https://hooks.example.com/"),
        ] {
            assert_eq!(kind(n, v), None, "{n}={v}");
        }
    }

    #[test]
    fn tokens_by_shape_whatever_the_name() {
        for (n, v) in [
            ("GH", "ghp_0123456789abcdefghijABCDEFGHIJ012345"),
            ("X", "github_pat_11AAAAAAA0123456789_abcdefghijklmnop"),
            ("GL", "glpat-abcdefghijklmnopqrst"),
            ("S", "xoxb-1234567890-1234567890123-abcdefghijklmnopqrstuvwx"),
            ("MODEL", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"),
            ("OAI", "sk-proj-abcdefghijklmnopqrstuvwxyz"),
            ("OLD", "sk-abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"),
            ("ID", "AKIAIOSFODNN7EXAMPLE"),
            ("G", "AIzaSyA0123456789abcdefghijklmnopqrstuv"),
            ("NPM", "npm_abcdefghijklmnopqrstuvwxyz0123456789"),
            (
                "J",
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk",
            ),
        ] {
            assert_eq!(kind(n, v), Some(SecretKind::Token), "{n}={v}");
        }
        for (n, v) in [
            ("LANG", "sk-SE.UTF-8"),
            ("RUST_LOG", "info"),
            ("GIT_COMMIT", "0123456789abcdef0123456789abcdef01234567"),
            ("HOSTNAME", "AKIA-build-runner-01"),
        ] {
            assert_eq!(kind(n, v), None, "{n}={v}");
        }
    }

    #[test]
    fn private_keys() {
        assert_eq!(
            kind(
                "DEPLOY",
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEA\n-----END OPENSSH PRIVATE KEY-----"
            ),
            Some(SecretKind::PrivateKey)
        );
        assert_eq!(
            kind(
                "CERT",
                "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"
            ),
            None
        );
    }

    #[test]
    fn secret_names_unless_the_value_is_a_path() {
        for (n, v) in [
            ("GITHUB_TOKEN", "abc"),
            ("ANTHROPIC_API_KEY", "k"),
            ("DB_PASSWORD", "hunter2"),
            ("npm_config__auth", "dXNlcjpwYXNz"),
            (
                "AWS_SECRET_ACCESS_KEY",
                "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            ),
            ("AWS_PROFILE", "prod"),
            ("STRIPE_KEY", "rk_x"),
            ("SMTP_PASS", "p"),
            ("SENTRY_DSN", "x"),
            ("JIRA_PAT", "x"),
            ("SLACK_WEBHOOK", "x"),
            // A path that does not exist, or text around a path: still withheld.
            ("API_TOKEN", "/not/there"),
            ("DB_PASSWORD", "/etc/ssl/certs/ca-certificates.crt extra"),
        ] {
            assert_eq!(kind(n, v), Some(SecretKind::Name), "{n}={v}");
        }
        for (n, v) in [
            ("AWS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt"),
            (
                "GOOGLE_APPLICATION_CREDENTIALS",
                "/home/p/.config/gcloud/key.json",
            ),
            ("SSL_KEY", "/etc/ssl/private/site.key"),
            (
                "AWS_CONFIG_DIRS",
                "/usr/share/ca:/etc/ssl/certs/ca-certificates.crt",
            ),
            ("GITHUB_TOKEN", ""),
        ] {
            assert_eq!(kind(n, v), None, "{n}={v}");
        }
    }

    #[test]
    fn ordinary_variables_pass() {
        for (n, v) in [
            ("PATH", "/usr/bin:/bin"),
            ("HOME", "/home/p"),
            ("PWD", "/home/p/src"),
            ("OLDPWD", "/home/p"),
            ("GIT_AUTHOR_NAME", "P"),
            ("TERM", "xterm-256color"),
            ("LANG", "C.UTF-8"),
            ("CARGO_HOME", "/home/p/.cargo"),
            ("XDG_SESSION_TYPE", "wayland"),
            ("EDITOR", "vim"),
            ("KEYMAP", "us"),
        ] {
            assert_eq!(kind(n, v), None, "{n}={v}");
        }
    }

    #[test]
    fn pass_keeps_a_named_secret() {
        let v = vec![
            ("A_TOKEN".into(), "x".into()),
            ("PATH".into(), "/bin".into()),
            ("BW_SESSION".into(), "y".into()),
        ];
        let (kept, stripped) = scrub_env_explained(v, &["A_TOKEN".to_string()]);
        assert_eq!(kept.len(), 2);
        assert_eq!(
            stripped,
            vec![("BW_SESSION".to_string(), SecretKind::Handle)]
        );
    }
}
