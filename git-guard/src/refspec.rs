//! Push refspecs and git's ref-name matching rules, following git 2.47's `refspec.c`
//! (`parse_refspec` for push), `refs.c` (`ref_rev_parse_rules`, `refname_match`) and
//! `remote.c` (`count_refspec_match`, `match_name_with_pattern`). gix's refspec matcher is
//! fetch-oriented, so the push rules are implemented here and tested against real git.

/// One push refspec (git-push(1) `<refspec>`): `[+]<src>[:<dst>]`, `^<src>` (negative),
/// `:` / `+:` (matching), with `*` patterns on both sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushRefspec {
    /// Leading `+`: force the update.
    pub force: bool,
    /// Leading `^`: a negative refspec excluding matching sources.
    pub negative: bool,
    /// `:` or `+:`: push "matching" branches.
    pub matching: bool,
    /// `*` in the source (and then in the destination, if one is given).
    pub pattern: bool,
    /// Source as written (`@` alone becomes `HEAD`); empty for a deletion (`:dst`).
    pub src: String,
    /// Destination as written after the last `:`; `None` for a one-sided refspec.
    pub dst: Option<String>,
}

impl PushRefspec {
    /// Parses one push refspec the way `parse_refspec(item, refspec, 0)` does.
    /// `None` for refspecs git rejects as invalid (git then dies without pushing).
    pub fn parse(spec: &str) -> Option<PushRefspec> {
        let mut lhs = spec;
        let mut force = false;
        let mut negative = false;
        if let Some(rest) = lhs.strip_prefix('+') {
            force = true;
            lhs = rest;
        } else if let Some(rest) = lhs.strip_prefix('^') {
            negative = true;
            lhs = rest;
        }
        let colon = lhs.rfind(':');
        if negative && colon.is_some() {
            return None;
        }
        if colon == Some(0) && lhs.len() == 1 {
            return Some(PushRefspec {
                force,
                negative,
                matching: true,
                pattern: false,
                src: String::new(),
                dst: None,
            });
        }
        let (src, dst) = match colon {
            Some(c) => (&lhs[..c], Some(lhs[c + 1..].to_string())),
            None => (lhs, None),
        };
        let dst_glob = dst.as_deref().is_some_and(|d| d.contains('*'));
        let src_glob = src.contains('*');
        let pattern = if src_glob {
            if dst.is_some() && !dst_glob {
                return None;
            }
            true
        } else if dst_glob {
            return None;
        } else {
            false
        };
        if pattern
            && (src.matches('*').count() > 1
                || dst.as_deref().is_some_and(|d| d.matches('*').count() > 1))
        {
            return None;
        }
        let src = if src == "@" {
            "HEAD".to_string()
        } else {
            src.to_string()
        };
        if negative && src.is_empty() {
            return None;
        }
        if let Some(d) = &dst {
            if d.is_empty() && !src.is_empty() {
                // `src:` is accepted by git as "push src to the same name" only for fetch;
                // for push an empty destination is invalid.
                return None;
            }
        }
        Some(PushRefspec {
            force,
            negative,
            matching: false,
            pattern,
            src,
            dst,
        })
    }
}

/// `ref_rev_parse_rules` of `refs.c`: how a short name is expanded, in order.
const RULES: &[(&str, &str)] = &[
    ("", ""),
    ("refs/", ""),
    ("refs/tags/", ""),
    ("refs/heads/", ""),
    ("refs/remotes/", ""),
    ("refs/remotes/", "/HEAD"),
];

/// `refname_match(abbrev, full)`: whether `full` is one of the expansions of `abbrev`.
pub fn refname_match(abbrev: &str, full: &str) -> bool {
    RULES.iter().any(|(pre, post)| {
        full.len() == pre.len() + abbrev.len() + post.len()
            && full.starts_with(pre)
            && full.ends_with(post)
            && &full[pre.len()..pre.len() + abbrev.len()] == abbrev
    })
}

/// The full names a short name could expand to (every rule of `ref_rev_parse_rules`).
pub fn expansions(abbrev: &str) -> Vec<String> {
    RULES
        .iter()
        .map(|(pre, post)| format!("{pre}{abbrev}{post}"))
        .collect()
}

/// `count_refspec_match(pattern, refs)`: the refs `pattern` names, strong matches (under
/// `refs/heads/`, `refs/tags/`, or spelled in full or from `refs/`) preferred over weak ones.
/// git treats anything but exactly one result as an error.
pub fn count_refspec_match<'a>(
    pattern: &str,
    refs: impl IntoIterator<Item = &'a str>,
) -> Vec<&'a str> {
    let mut strong = Vec::new();
    let mut weak = Vec::new();
    for name in refs {
        if !refname_match(pattern, name) {
            continue;
        }
        if name.len() != pattern.len()
            && pattern.len() + 5 != name.len()
            && !name.starts_with("refs/heads/")
            && !name.starts_with("refs/tags/")
        {
            weak.push(name);
        } else {
            strong.push(name);
        }
    }
    if strong.is_empty() {
        weak
    } else {
        strong
    }
}

/// `match_name_with_pattern(key, name, value)`: if `name` matches the one-`*` pattern `key`,
/// the text the `*` stood for substituted into `value` (or `name` itself when `value` is
/// `None`).
pub fn match_pattern(key: &str, name: &str, value: Option<&str>) -> Option<String> {
    let star = key.find('*')?;
    let (prefix, suffix) = (&key[..star], &key[star + 1..]);
    if name.len() < prefix.len() + suffix.len()
        || !name.starts_with(prefix)
        || !name.ends_with(suffix)
    {
        return None;
    }
    let middle = &name[prefix.len()..name.len() - suffix.len()];
    match value {
        None => Some(name.to_string()),
        Some(v) => {
            let vs = v.find('*')?;
            Some(format!("{}{}{}", &v[..vs], middle, &v[vs + 1..]))
        }
    }
}

/// Like [`match_pattern`] without substitution, comparing ASCII case-insensitively: used to
/// ask whether a pattern could reach a protected ref spelled in any letter case.
pub fn pattern_matches_ignore_case(key: &str, name: &str) -> bool {
    match_pattern(&key.to_ascii_lowercase(), &name.to_ascii_lowercase(), None).is_some()
}

/// Whether a (full) source name is excluded by the negative refspecs in `specs`
/// (`omit_name_by_refspec`: exact name, or pattern).
pub fn omitted(name: &str, specs: &[PushRefspec]) -> bool {
    specs.iter().filter(|s| s.negative).any(|s| {
        if s.pattern {
            match_pattern(&s.src, name, None).is_some()
        } else {
            s.src == name
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parse_shapes() {
        let r = PushRefspec::parse("+feature:main").unwrap();
        assert!(r.force && r.src == "feature" && r.dst.as_deref() == Some("main"));
        let r = PushRefspec::parse("feature:refs/heads/main:x").unwrap();
        assert_eq!(
            (r.src.as_str(), r.dst.as_deref()),
            ("feature:refs/heads/main", Some("x"))
        );
        assert!(PushRefspec::parse(":").unwrap().matching);
        assert!(PushRefspec::parse("+:").unwrap().matching);
        let r = PushRefspec::parse(":main").unwrap();
        assert!(r.src.is_empty() && r.dst.as_deref() == Some("main"));
        assert_eq!(PushRefspec::parse("@").unwrap().src, "HEAD");
        assert!(PushRefspec::parse("refs/heads/*:refs/heads/x").is_none());
        assert!(PushRefspec::parse("^refs/heads/main").unwrap().negative);
        assert!(PushRefspec::parse(":/fix bug here:main").is_some());
    }

    #[test]
    fn matching_rules() {
        let refs = [
            "refs/heads/main",
            "refs/tags/main",
            "refs/remotes/origin/main",
            "refs/heads/mainline",
        ];
        assert_eq!(
            count_refspec_match("main", refs),
            vec!["refs/heads/main", "refs/tags/main"]
        );
        assert_eq!(
            count_refspec_match("heads/main", refs),
            vec!["refs/heads/main"]
        );
        assert_eq!(
            count_refspec_match("origin/main", refs),
            vec!["refs/remotes/origin/main"]
        );
        assert_eq!(
            match_pattern(
                "refs/heads/feat*",
                "refs/heads/featin",
                Some("refs/heads/ma*")
            )
            .as_deref(),
            Some("refs/heads/main")
        );
        assert!(pattern_matches_ignore_case(
            "refs/heads/M*",
            "refs/heads/main"
        ));
    }
}
