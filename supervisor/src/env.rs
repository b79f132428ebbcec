//! The agent's environment: secrets stripped (issue 4 §6).

/// Whether a variable name looks like it holds a secret (token, key, password, credentials,
/// an agent socket). Matching is on the upper-cased name.
pub fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    const PARTS: &[&str] = &[
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "API_KEY",
        "APIKEY",
        "ACCESS_KEY",
        "PRIVATE_KEY",
        "SECRET_KEY",
        "CREDENTIAL",
        "COOKIE",
        "SESSION_KEY",
        "AUTH_KEY",
        "DATABASE_URL",
    ];
    const EXACT: &[&str] = &[
        "SSH_AUTH_SOCK",
        "GPG_AGENT_INFO",
        "KRB5CCNAME",
        "DOCKER_AUTH_CONFIG",
        "NETRC",
    ];
    PARTS.iter().any(|p| n.contains(p))
        || EXACT.contains(&n.as_str())
        || n.starts_with("AWS_")
        || n.ends_with("_AUTH")
        || n.ends_with("_DSN")
}

/// Splits an environment into what the agent gets and the names withheld. Names in `pass`
/// are kept even when they look secret (`--pass-env NAME`).
///
/// Returns `(kept, stripped)`: `kept` in the input order, `stripped` the withheld names in the
/// input order.
pub fn scrub_env(
    vars: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
    pass: &[String],
) -> (Vec<(std::ffi::OsString, std::ffi::OsString)>, Vec<String>) {
    let mut kept = Vec::new();
    let mut stripped = Vec::new();
    for (k, v) in vars {
        let name = k.to_string_lossy().into_owned();
        if is_secret_name(&name) && !pass.iter().any(|p| p == &name) {
            stripped.push(name);
        } else {
            kept.push((k, v));
        }
    }
    (kept, stripped)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_recognised() {
        for n in [
            "GITHUB_TOKEN",
            "ANTHROPIC_API_KEY",
            "AWS_PROFILE",
            "SSH_AUTH_SOCK",
            "npm_config__auth",
            "DB_PASSWORD",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in [
            "PATH",
            "HOME",
            "GIT_AUTHOR_NAME",
            "TERM",
            "LANG",
            "CARGO_HOME",
        ] {
            assert!(!is_secret_name(n), "{n}");
        }
    }

    #[test]
    fn pass_keeps_a_named_secret() {
        let v = vec![
            ("A_TOKEN".into(), "x".into()),
            ("PATH".into(), "/bin".into()),
        ];
        let (kept, stripped) = scrub_env(v, &["A_TOKEN".to_string()]);
        assert_eq!(kept.len(), 2);
        assert!(stripped.is_empty());
    }
}
