//! Push resolution: a `git push` command line plus the repository state → the remote refs it
//! would update, following git 2.47 (`builtin/push.c`: `cmd_push`, `set_refspecs`,
//! `refspec_append_mapped`, `setup_default_push_refspecs`, `do_push`; `remote.c`:
//! `remote_get`, `pushremote_get`, `match_push_refs`, `match_explicit`, `get_ref_match`;
//! git-push(1), git-config(1) `push.*`, `remote.*`, `branch.*`).
//!
//! Where git would fail on an explicit refspec (missing source, ambiguous or unknown
//! destination) the destinations it names are still reported, marked not `certain`: a
//! protected destination named on the line is blocked even when git would fail (DESIGN.md §6).
//! Where the remote's refs cannot be read (a network URL), rules that depend on them assume the
//! worst: matching pushes every local branch, short destinations may name any ref, and
//! `--prune`/`--mirror` may delete a protected ref.

use crate::config::FlatConfig;
use crate::refspec::{
    count_refspec_match, expansions, match_pattern, omitted, pattern_matches_ignore_case,
    PushRefspec,
};
use crate::repo::RepoState;
use crate::OptionError;
use serde::Serialize;
use std::path::{Path, PathBuf};
use tyba_policy::git_options::{self as opts, Parsed};
use tyba_policy::redact::{redact_credentials, redact_url};

/// One remote ref a push would write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefUpdate {
    /// Full remote ref name (`refs/heads/main`), or a name git would reject.
    pub dst: String,
    /// What is pushed there (the source as written, or the local ref name); `None` deletes it.
    pub src: Option<String>,
    /// Forced (`+`, `--force`, `--mirror`).
    pub force: bool,
    /// `false` when git might not do this (it would fail, or the remote's refs are unknown and
    /// the guard assumes the worst).
    pub certain: bool,
}

/// The updates sent to one push URL of one remote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Target {
    /// The remote as named on the line or in configuration (`origin`), or the URL/path given.
    /// Serialized with its credentials redacted (`tyba_policy::redact`).
    #[serde(serialize_with = "ser_redacted_url")]
    pub remote: String,
    /// The push URL (after `pushurl`/`insteadOf` rules), if any: the real one, credentials
    /// included, for resolution; serialized with them redacted.
    #[serde(serialize_with = "ser_redacted_opt_url")]
    pub url: Option<String>,
    /// Whether the remote's refs were read (a local path); otherwise they were assumed.
    pub remote_refs_known: bool,
    /// The path the push URL names when it is a local one (`file://…`, or no `:` before the
    /// first `/`), absolute and lexical (relative URLs against the repository's base
    /// directory); `None` for network URLs. Never a grant: the supervisor only compares it
    /// with the path git's receive-pack is started on (`docs/sandbox.md`, "Pushes to a
    /// repository on a local path"). Not serialized.
    #[serde(skip)]
    pub local_path: Option<PathBuf>,
    /// The updates, destinations in resolution order.
    pub updates: Vec<RefUpdate>,
}

/// Everything resolved about one `git push`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PushPlan {
    /// One entry per push URL.
    pub targets: Vec<Target>,
    /// `--no-verify` is in effect (last wins): the pre-push hook is skipped.
    pub no_verify: bool,
    /// Why git would push nothing (it dies before sending), if it would.
    pub git_fails: Option<String>,
    /// Where resolution had to assume (human notes, in order); serialized redacted.
    #[serde(serialize_with = "ser_redacted_texts")]
    pub notes: Vec<String>,
}

// Reports (`tyba git-guard check --json`) are read by people and agents: URL credentials
// never reach them.
fn ser_redacted_url<S: serde::Serializer>(v: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&redact_url(v))
}

fn ser_redacted_opt_url<S: serde::Serializer>(v: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(u) => s.serialize_some(&*redact_url(u)),
        None => s.serialize_none(),
    }
}

fn ser_redacted_texts<S: serde::Serializer>(v: &[String], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|t| redact_credentials(t)))
}

impl PushPlan {
    /// Every update, with its remote, in order.
    pub fn updates(&self) -> impl Iterator<Item = (&Target, &RefUpdate)> {
        self.targets
            .iter()
            .flat_map(|t| t.updates.iter().map(move |u| (t, u)))
    }
}

/// Whether a full remote ref name is `refs/heads/<p>` for a protected name `p`, compared
/// ASCII case-insensitively (DESIGN.md §2 "blocked": `main`/`master` in any letter case).
pub fn is_protected(dst: &str, protected: &[String]) -> bool {
    dst.strip_prefix("refs/heads/")
        .is_some_and(|b| protected.iter().any(|p| p.eq_ignore_ascii_case(b)))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PushDefault {
    Nothing,
    Matching,
    Simple,
    Upstream,
    Current,
    Unknown,
}

#[derive(Debug, Clone, Default)]
struct Flags {
    all: bool,
    mirror: bool,
    force: bool,
    prune: bool,
    delete: bool,
    tags: bool,
    no_verify: bool,
    follow_tags: bool,
    auto_upstream: bool,
}

/// A remote as `remote_get` builds it.
#[derive(Debug, Clone)]
struct Remote {
    name: String,
    /// `(url, from_pushurl)`.
    push_urls: Vec<(String, bool)>,
    push: Vec<String>,
    mirror: bool,
}

/// Parses `git push` words (after `push`) with git's option rules.
///
/// # Errors
/// [`OptionError`] where git would die with a usage message.
pub(crate) fn parse_push_args(words: &[String]) -> Result<Parsed, OptionError> {
    opts::parse(words, opts::PUSH_OPTIONS)
}

/// Resolves a `git push` whose words (after `push`) are `words` against `state`.
///
/// # Errors
/// [`OptionError`] where git would die parsing the options (nothing is pushed).
pub fn resolve(
    state: &RepoState,
    words: &[String],
    protected: &[String],
) -> Result<PushPlan, OptionError> {
    resolve_with(state, words, protected, RemoteRefs::ReadLocal)
}

/// Where the remote's refs come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteRefs {
    /// Read them when the remote is a local path; unknown otherwise (the default).
    ReadLocal,
    /// Never read them: resolve as if every remote were on the network. Tests use this to
    /// check that the worst-case assumptions cover what git really does.
    AssumeUnknown,
}

/// [`resolve`] with a choice of how remote refs are obtained.
///
/// # Errors
/// [`OptionError`] where git would die parsing the options (nothing is pushed).
pub fn resolve_with(
    state: &RepoState,
    words: &[String],
    protected: &[String],
    remote_refs: RemoteRefs,
) -> Result<PushPlan, OptionError> {
    let parsed = parse_push_args(words)?;
    Ok(resolve_parsed(state, &parsed, protected, remote_refs))
}

fn flags_of(parsed: &Parsed, cfg: &FlatConfig) -> Flags {
    let mut f = Flags {
        auto_upstream: cfg
            .boolean("push", None, "autosetupremote")
            .unwrap_or(false),
        ..Flags::default()
    };
    for o in &parsed.options {
        let on = !o.unset;
        match o.long {
            "all" => f.all = on,
            "mirror" => {
                f.mirror = on;
                f.force = on;
            }
            "force" => f.force = on,
            "prune" => f.prune = on,
            "delete" => f.delete = on,
            "tags" => f.tags = on,
            "no-verify" => f.no_verify = on,
            "follow-tags" => f.follow_tags = on,
            _ => {}
        }
    }
    f
}

fn push_default(cfg: &FlatConfig) -> PushDefault {
    match cfg.string("push", None, "default") {
        None => PushDefault::Simple,
        Some("nothing") => PushDefault::Nothing,
        Some("matching") => PushDefault::Matching,
        Some("simple") => PushDefault::Simple,
        Some("upstream") | Some("tracking") => PushDefault::Upstream,
        Some("current") => PushDefault::Current,
        Some(_) => PushDefault::Unknown,
    }
}

/// Resolves already-parsed push options.
pub(crate) fn resolve_parsed(
    state: &RepoState,
    parsed: &Parsed,
    protected: &[String],
    refs_mode: RemoteRefs,
) -> PushPlan {
    let cfg = &state.config;
    let mut plan = PushPlan::default();
    let mut flags = flags_of(parsed, cfg);
    plan.no_verify = flags.no_verify;
    if parsed.help {
        plan.git_fails = Some("`-h` prints the usage".into());
        return plan;
    }
    let mode = push_default(cfg);
    let mut rs: Vec<String> = Vec::new();
    if flags.tags {
        rs.push("refs/tags/*".into());
    }
    let mut explicit_count = 0;
    let repo_arg: Option<String> = parsed
        .operands
        .first()
        .cloned()
        .or_else(|| parsed.last_value("repo").map(str::to_string));
    if let Some(repo) = parsed.operands.first() {
        let refs = &parsed.operands[1..];
        explicit_count = refs.len();
        set_refspecs(state, repo, refs, &flags, mode, &mut rs, &mut plan);
    }
    let Some(remote) = pushremote_get(state, repo_arg.as_deref()) else {
        plan.git_fails = Some("no configured push destination".into());
        return plan;
    };
    if remote.mirror {
        flags.mirror = true;
        flags.force = true;
    }
    let fail = |why: &str, plan: &mut PushPlan| {
        if plan.git_fails.is_none() {
            plan.git_fails = Some(why.to_string());
        }
    };
    if flags.delete && (flags.tags || flags.all || flags.mirror) {
        fail(
            "--delete is incompatible with --all, --mirror and --tags",
            &mut plan,
        );
    }
    if flags.delete && parsed.operands.len() < 2 {
        fail("--delete needs refs", &mut plan);
    }
    if flags.all && (flags.tags || explicit_count > 0) {
        fail(
            "--all cannot be combined with --tags or refspecs",
            &mut plan,
        );
    }
    if flags.mirror && (flags.tags || explicit_count > 0) {
        fail(
            "--mirror cannot be combined with --tags or refspecs",
            &mut plan,
        );
    }
    if flags.all && flags.mirror {
        fail("--all and --mirror are incompatible", &mut plan);
    }
    let dies_early = plan.git_fails.is_some();
    if dies_early {
        // git dies before sending anything; only destinations named on the line are kept.
        flags.all = false;
        flags.mirror = false;
        flags.prune = false;
    }

    // do_push: the default refspecs.
    let mut specs_from_default = false;
    if rs.is_empty() && !flags.all && !dies_early {
        if !remote.push.is_empty() {
            rs = remote.push.clone();
        } else if !flags.mirror {
            specs_from_default = true;
            default_refspecs(state, &remote, mode, &flags, &mut rs, &mut plan);
            if rs.is_empty() {
                return plan;
            }
        }
    }
    let specs: Vec<PushRefspec> = rs
        .iter()
        .filter_map(|s| {
            let p = PushRefspec::parse(s);
            if p.is_none() {
                plan.notes
                    .push(format!("invalid refspec `{s}`: git refuses the push"));
            }
            p
        })
        .collect();
    if specs.len() != rs.len() && plan.git_fails.is_none() {
        plan.git_fails = Some("invalid refspec".into());
    }
    let certain = plan.git_fails.is_none();
    let urls: Vec<(String, bool)> = if remote.push_urls.is_empty() {
        vec![(remote.name.clone(), false)]
    } else {
        remote.push_urls.clone()
    };
    for (url, _) in urls {
        let remote_refs = match refs_mode {
            RemoteRefs::ReadLocal => remote_refs_for(state, &url),
            RemoteRefs::AssumeUnknown => None,
        };
        let updates = match_push_refs(
            state,
            remote_refs.as_deref(),
            &specs,
            &flags,
            protected,
            certain,
        );
        plan.targets.push(Target {
            remote: remote.name.clone(),
            local_path: local_url_path(state, &url),
            url: Some(url),
            remote_refs_known: remote_refs.is_some(),
            updates,
        });
    }
    if specs_from_default && mode == PushDefault::Unknown {
        plan.notes
            .push("unknown push.default: every mode assumed".into());
    }
    plan
}

fn set_refspecs(
    state: &RepoState,
    repo: &str,
    refs: &[String],
    flags: &Flags,
    mode: PushDefault,
    rs: &mut Vec<String>,
    plan: &mut PushPlan,
) {
    let mut i = 0;
    while i < refs.len() {
        let r = &refs[i];
        i += 1;
        if r == "tag" {
            let Some(t) = refs.get(i) else {
                plan.git_fails = Some("tag shorthand without <tag>".into());
                break;
            };
            i += 1;
            rs.push(if flags.delete {
                format!(":refs/tags/{t}")
            } else {
                format!("refs/tags/{t}")
            });
        } else if flags.delete {
            if r.contains(':') || r.is_empty() {
                plan.git_fails = Some("--delete only accepts plain target ref names".into());
                // keep what it names, for the guard
                if let Some(d) = r.rsplit(':').next() {
                    if !d.is_empty() {
                        rs.push(format!(":{d}"));
                    }
                }
                continue;
            }
            rs.push(format!(":{r}"));
        } else if !r.contains(':') {
            let remote = remote_get(state, repo, true);
            rs.push(map_refspec(state, r, remote.as_ref(), mode));
        } else {
            rs.push(r.clone());
        }
    }
}

/// `refspec_append_mapped`: a one-sided refspec naming exactly one local ref is mapped through
/// `remote.<r>.push`, or with `push.default=upstream` to the branch's upstream.
fn map_refspec(state: &RepoState, r: &str, remote: Option<&Remote>, mode: PushDefault) -> String {
    let matched = count_refspec_match(r, state.local_refs.iter().map(String::as_str));
    if matched.len() != 1 {
        return r.to_string();
    }
    let name = matched[0];
    if let Some(remote) = remote {
        if !remote.push.is_empty() {
            let specs: Vec<PushRefspec> = remote
                .push
                .iter()
                .filter_map(|s| PushRefspec::parse(s))
                .collect();
            if let Some((dst, force)) = query_push_refspecs(&specs, name) {
                return format!("{}{}:{}", if force { "+" } else { "" }, name, dst);
            }
        }
    }
    if mode == PushDefault::Upstream {
        if let Some(branch) = name.strip_prefix("refs/heads/") {
            let merges = branch_merges(&state.config, branch);
            if merges.len() == 1 {
                return format!("{r}:{}", merges[0]);
            }
        }
    }
    r.to_string()
}

/// `query_refspecs` on push refspecs, source side: the destination for the full name `src`.
fn query_push_refspecs(specs: &[PushRefspec], src: &str) -> Option<(String, bool)> {
    if omitted(src, specs) {
        return None;
    }
    for s in specs {
        let Some(dst) = &s.dst else { continue };
        if s.negative || s.matching {
            continue;
        }
        if s.pattern {
            if let Some(d) = match_pattern(&s.src, src, Some(dst)) {
                return Some((d, s.force));
            }
        } else if s.src == src {
            return Some((dst.clone(), s.force));
        }
    }
    None
}

/// `branch.<b>.merge` values, counted only when `branch.<b>.remote` is set (`set_merge`).
fn branch_merges<'a>(cfg: &'a FlatConfig, branch: &str) -> Vec<&'a str> {
    if cfg.string("branch", Some(branch), "remote").is_none() {
        return Vec::new();
    }
    cfg.all("branch", Some(branch), "merge")
}

/// `remote_for_branch`: the fetch remote of a branch.
fn remote_for_branch<'a>(cfg: &'a FlatConfig, branch: Option<&str>) -> &'a str {
    branch
        .and_then(|b| cfg.string("branch", Some(b), "remote"))
        .unwrap_or("origin")
}

fn setup_simple_like(
    state: &RepoState,
    remote: &Remote,
    mode: PushDefault,
    flags: &Flags,
) -> Result<(String, String), String> {
    let Some(branch_ref) = state.current_branch() else {
        return Err("HEAD is detached".into());
    };
    let branch = branch_ref.trim_start_matches("refs/heads/");
    let cfg = &state.config;
    let same_remote = remote.name == remote_for_branch(cfg, Some(branch));
    let merges = branch_merges(cfg, branch);
    let upstream = || -> Result<String, String> {
        if merges.is_empty() && flags.auto_upstream {
            return Ok(branch_ref.to_string());
        }
        match merges.as_slice() {
            [] => Err(format!(
                "the current branch {branch} has no upstream branch"
            )),
            [one] => Ok(one.to_string()),
            _ => Err(format!(
                "the current branch {branch} has multiple upstream branches"
            )),
        }
    };
    let dst = match mode {
        PushDefault::Simple => {
            if same_remote {
                let up = upstream()?;
                if up != branch_ref {
                    return Err(
                        "the upstream branch does not match the current branch's name".into(),
                    );
                }
            }
            branch_ref.to_string()
        }
        PushDefault::Upstream => {
            if !same_remote {
                return Err(format!(
                    "remote {} is not the upstream of the current branch",
                    remote.name
                ));
            }
            upstream()?
        }
        _ => branch_ref.to_string(),
    };
    Ok((branch_ref.to_string(), dst))
}

fn default_refspecs(
    state: &RepoState,
    remote: &Remote,
    mode: PushDefault,
    flags: &Flags,
    rs: &mut Vec<String>,
    plan: &mut PushPlan,
) {
    match mode {
        PushDefault::Matching => rs.push(":".into()),
        PushDefault::Nothing => plan.git_fails = Some("push.default is \"nothing\"".into()),
        PushDefault::Simple | PushDefault::Upstream | PushDefault::Current => {
            match setup_simple_like(state, remote, mode, flags) {
                Ok((src, dst)) => rs.push(format!("{src}:{dst}")),
                Err(e) => plan.git_fails = Some(e),
            }
        }
        PushDefault::Unknown => {
            // git dies on a malformed push.default; assume any mode could apply.
            rs.push(":".into());
            for m in [
                PushDefault::Simple,
                PushDefault::Upstream,
                PushDefault::Current,
            ] {
                if let Ok((src, dst)) = setup_simple_like(state, remote, m, flags) {
                    rs.push(format!("{src}:{dst}"));
                }
            }
        }
    }
}

fn valid_remote_nick(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/')
}

/// `remote_get(name)` (`given` = named on the command line or in `--repo`).
fn remote_get(state: &RepoState, name: &str, given: bool) -> Option<Remote> {
    let cfg = &state.config;
    let mut urls: Vec<String> = cfg
        .all("remote", Some(name), "url")
        .into_iter()
        .map(str::to_string)
        .collect();
    let pushurls: Vec<String> = cfg
        .all("remote", Some(name), "pushurl")
        .into_iter()
        .map(str::to_string)
        .collect();
    let mut push: Vec<String> = cfg
        .all("remote", Some(name), "push")
        .into_iter()
        .map(str::to_string)
        .collect();
    let mirror = cfg.boolean("remote", Some(name), "mirror").unwrap_or(false);
    if urls.is_empty() && valid_remote_nick(name) {
        if let Ok(text) = std::fs::read_to_string(state.common_dir.join("remotes").join(name)) {
            for line in text.lines() {
                if let Some(v) = line.strip_prefix("URL:") {
                    let v = v.trim();
                    if !v.is_empty() {
                        urls.push(v.to_string());
                    }
                } else if let Some(v) = line.strip_prefix("Push:") {
                    let v = v.trim();
                    if !v.is_empty() {
                        push.push(v.to_string());
                    }
                }
            }
        }
        if urls.is_empty() {
            if let Ok(text) = std::fs::read_to_string(state.common_dir.join("branches").join(name))
            {
                let line = text.lines().next().unwrap_or("").trim().to_string();
                if !line.is_empty() {
                    let (url, frag) = match line.split_once('#') {
                        Some((u, f)) => (u.to_string(), f.to_string()),
                        None => (
                            line.clone(),
                            cfg.string("init", None, "defaultbranch")
                                .unwrap_or("master")
                                .to_string(),
                        ),
                    };
                    urls.push(url);
                    push.push(format!("HEAD:refs/heads/{frag}"));
                }
            }
        }
    }
    if urls.is_empty() && given {
        urls.push(name.to_string());
    }
    if urls.is_empty() {
        return None;
    }
    let push_urls: Vec<(String, bool)> = if pushurls.is_empty() {
        urls.iter()
            .map(|u| (rewrite_url(cfg, u, true), false))
            .collect()
    } else {
        pushurls
            .iter()
            .map(|u| (rewrite_url(cfg, u, false), true))
            .collect()
    };
    Some(Remote {
        name: name.to_string(),
        push_urls,
        push,
        mirror,
    })
}

/// `url.<base>.insteadOf` / `pushInsteadOf` (longest matching prefix wins; `pushInsteadOf`
/// first for URLs that come from `remote.<r>.url`).
fn rewrite_url(cfg: &FlatConfig, url: &str, push_side: bool) -> String {
    let best = |key: &str| -> Option<String> {
        let mut best: Option<(usize, String)> = None;
        for e in &cfg.entries {
            if e.section == "url" && e.name == key {
                if let (Some(base), Some(prefix)) = (&e.sub, &e.value) {
                    if url.starts_with(prefix.as_str())
                        && best.as_ref().is_none_or(|(l, _)| prefix.len() > *l)
                    {
                        best = Some((prefix.len(), format!("{base}{}", &url[prefix.len()..])));
                    }
                }
            }
        }
        best.map(|(_, u)| u)
    };
    if push_side {
        if let Some(u) = best("pushinsteadof") {
            return u;
        }
    }
    best("insteadof").unwrap_or_else(|| url.to_string())
}

/// `pushremote_get(name)`.
fn pushremote_get(state: &RepoState, name: Option<&str>) -> Option<Remote> {
    match name {
        Some(n) => remote_get(state, n, true),
        None => {
            let cfg = &state.config;
            let branch = state
                .current_branch()
                .map(|b| b.trim_start_matches("refs/heads/"));
            let n = branch
                .and_then(|b| cfg.string("branch", Some(b), "pushremote"))
                .or_else(|| cfg.string("remote", None, "pushdefault"))
                .unwrap_or_else(|| remote_for_branch(cfg, branch));
            remote_get(state, n, false)
        }
    }
}

/// The refs of the repository at a push URL, if it is a local path git would open directly
/// (`url_is_local_not_ssh`: no `:` before the first `/`, or `file://`).
fn remote_refs_for(state: &RepoState, url: &str) -> Option<Vec<String>> {
    let path = local_url_path(state, url)?;
    let mut refs = RepoState::remote_refs_at(&path).or_else(|| {
        let mut with_git = path.clone().into_os_string();
        with_git.push(".git");
        RepoState::remote_refs_at(Path::new(&with_git))
    })?;
    refs.retain(|r| r != "HEAD");
    Some(refs)
}

/// The path a push URL names when it is local (`file://`, or no `:` before the first `/`:
/// git's `url_is_local_not_ssh`), relative ones against [`RepoState::base_dir`]; lexical, as
/// written (nothing is opened).
fn local_url_path(state: &RepoState, url: &str) -> Option<PathBuf> {
    if let Some(p) = url.strip_prefix("file://") {
        return Some(PathBuf::from(p));
    }
    if url.contains("://") {
        return None;
    }
    if let Some(colon) = url.find(':') {
        match url.find('/') {
            Some(slash) if slash < colon => {}
            _ => return None,
        }
    }
    let p = Path::new(url);
    Some(if p.is_absolute() {
        p.to_path_buf()
    } else {
        state.base_dir().join(p)
    })
}

/// Upper, lower and capitalised spellings of the protected names, as the refs an unknown
/// remote might hold.
fn hypothetical_protected(protected: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for p in protected {
        let mut cap = p.to_ascii_lowercase();
        if let Some(first) = cap.get_mut(..1) {
            first.make_ascii_uppercase();
        }
        for v in [
            p.clone(),
            p.to_ascii_lowercase(),
            p.to_ascii_uppercase(),
            cap,
        ] {
            let full = format!("refs/heads/{v}");
            if !out.contains(&full) {
                out.push(full);
            }
        }
    }
    out
}

/// `get_ref_match`: the destination (from the source side) or source (from the destination
/// side) a pattern or matching refspec gives `name`, with the refspec used.
fn get_ref_match<'a>(
    specs: &'a [PushRefspec],
    name: &str,
    mirror: bool,
    from_src: bool,
) -> Option<(String, &'a PushRefspec)> {
    let mut chosen: Option<usize> = None;
    let mut result: Option<String> = None;
    for (i, item) in specs.iter().enumerate() {
        if item.negative {
            continue;
        }
        if item.matching && (chosen.is_none() || item.force) {
            chosen = Some(i);
            continue;
        }
        if item.pattern {
            let dst_side = item.dst.as_deref().unwrap_or(&item.src);
            let m = if from_src {
                match_pattern(&item.src, name, Some(dst_side))
            } else {
                match_pattern(dst_side, name, Some(&item.src))
            };
            if m.is_some() {
                chosen = Some(i);
                result = m;
                break;
            }
        }
    }
    let pat = &specs[chosen?];
    if pat.matching {
        if !mirror && !name.starts_with("refs/heads/") {
            return None;
        }
        result = Some(name.to_string());
    }
    Some((result?, pat))
}

/// Updates in order, with an index so that adding one is O(1) even for 10,000 refs.
#[derive(Default)]
struct Updates {
    list: Vec<RefUpdate>,
    index: std::collections::HashMap<(String, Option<String>), usize>,
    dsts: std::collections::HashSet<String>,
}

impl Updates {
    fn push(&mut self, u: RefUpdate) {
        let key = (u.dst.clone(), u.src.clone());
        if let Some(&i) = self.index.get(&key) {
            self.list[i].certain |= u.certain;
            self.list[i].force |= u.force;
        } else {
            self.dsts.insert(u.dst.clone());
            self.index.insert(key, self.list.len());
            self.list.push(u);
        }
    }
}

/// `match_push_refs` for one remote.
fn match_push_refs(
    state: &RepoState,
    remote_refs: Option<&[String]>,
    specs_in: &[PushRefspec],
    flags: &Flags,
    protected: &[String],
    certain: bool,
) -> Vec<RefUpdate> {
    let matching_default;
    let specs: &[PushRefspec] = if specs_in.iter().all(|s| s.negative) && specs_in.is_empty() {
        matching_default = vec![PushRefspec {
            force: false,
            negative: false,
            matching: true,
            pattern: false,
            src: String::new(),
            dst: None,
        }];
        &matching_default
    } else {
        specs_in
    };
    let local = &state.local_refs;
    let mut out = Updates::default();
    let force = flags.force;

    // match_explicit_refs
    for spec in specs
        .iter()
        .filter(|s| !s.pattern && !s.matching && !s.negative)
    {
        let deleting = spec.src.is_empty();
        let matches = if deleting {
            Vec::new()
        } else {
            count_refspec_match(&spec.src, local.iter().map(String::as_str))
        };
        let src_ref: Option<String> = if matches.len() == 1 {
            Some(matches[0].to_string())
        } else if matches.is_empty() && spec.src == "HEAD" {
            state.current_branch().map(str::to_string)
        } else {
            None
        };
        let src_ok = deleting || matches.len() == 1 || (matches.is_empty() && spec.src == "HEAD");
        let ok = certain && (src_ok || matches.is_empty());
        // Destination names before matching against the remote.
        let dst_values: Vec<(String, bool)> = match &spec.dst {
            Some(d) => vec![(d.clone(), ok)],
            None => {
                if let Some(r) = &src_ref {
                    // git's match_explicit_refs: with no destination, the source ref's
                    // resolved name (a symbolic ref `feat` -> `refs/heads/main` pushes to
                    // `main`); a chain that does not end on a branch makes git fail.
                    let (end, ended) = state.resolve_symref(r);
                    let sure = ok && ended && (end == *r || end.starts_with("refs/heads/"));
                    vec![(end, sure)]
                } else if spec.src == "HEAD" {
                    // detached: git sends to a ref named HEAD, which the remote refuses
                    vec![("HEAD".to_string(), false)]
                } else if matches.len() > 1 {
                    matches.iter().map(|m| (m.to_string(), false)).collect()
                } else {
                    // not a ref: git dies ("cannot be resolved to branch"); the name still counts
                    expansions(&spec.src)
                        .into_iter()
                        .filter(|e| e.starts_with("refs/heads/"))
                        .map(|e| (e, false))
                        .collect()
                }
            }
        };
        let src_is = |prefix: &str| src_ref.as_deref().is_some_and(|r| r.starts_with(prefix));
        for (dv, dv_certain) in dst_values {
            let dsts: Vec<(String, bool)> = resolve_dst(&dv, remote_refs, deleting, |g| {
                if src_is("refs/heads/") {
                    Some(format!("refs/heads/{g}"))
                } else if src_is("refs/tags/") {
                    Some(format!("refs/tags/{g}"))
                } else {
                    None
                }
            });
            for (d, c) in dsts {
                out.push(RefUpdate {
                    dst: d,
                    src: if deleting {
                        None
                    } else {
                        Some(src_ref.clone().unwrap_or_else(|| spec.src.clone()))
                    },
                    force: force || spec.force,
                    certain: c && dv_certain && (src_ok || deleting),
                });
            }
        }
    }

    // the remainder: patterns and matching
    let explicit_dsts: std::collections::HashSet<String> = out.dsts.clone();
    let remote_set: std::collections::HashSet<&str> = remote_refs
        .map(|r| r.iter().map(String::as_str).collect())
        .unwrap_or_default();
    let local_set: std::collections::HashSet<&str> = local.iter().map(String::as_str).collect();
    let has_remote = |n: &str| remote_set.contains(n);
    for l in local {
        let Some((dst, pat)) = get_ref_match(specs, l, flags.mirror, true) else {
            continue;
        };
        if explicit_dsts.contains(&dst) {
            continue;
        }
        let exists = has_remote(&dst);
        let mut c = certain;
        if !exists && pat.matching && !(flags.all || flags.mirror) {
            if remote_refs.is_some() {
                continue;
            }
            c = false; // unknown remote: assume the branch exists there
        }
        out.push(RefUpdate {
            dst,
            src: Some(l.clone()),
            force: force || pat.force,
            certain: c,
        });
    }

    // --prune / --mirror: remote refs with no local counterpart are deleted.
    if flags.prune || flags.mirror {
        let (candidates, c): (Vec<String>, bool) = match remote_refs {
            Some(r) => (r.to_vec(), certain),
            None => (hypothetical_protected(protected), false),
        };
        let targeted = out.dsts.clone();
        for r in candidates {
            if targeted.contains(&r) {
                continue;
            }
            let src = match get_ref_match(specs, &r, flags.mirror, false) {
                Some((s, _)) => Some(s),
                None if remote_refs.is_none() => {
                    // an unknown remote ref spelled in another case may still match a pattern
                    specs
                        .iter()
                        .find(|s| {
                            s.pattern
                                && pattern_matches_ignore_case(
                                    s.dst.as_deref().unwrap_or(&s.src),
                                    &r,
                                )
                        })
                        .map(|_| String::new())
                }
                None => None,
            };
            if let Some(s) = src {
                if s.is_empty() || !local_set.contains(s.as_str()) {
                    out.push(RefUpdate {
                        dst: r,
                        src: None,
                        force: true,
                        certain: c,
                    });
                }
            }
        }
    }
    // --follow-tags: annotated tags reachable from what is pushed; tags are never protected,
    // so every local tag is listed as possible.
    if flags.follow_tags {
        for t in local.iter().filter(|r| r.starts_with("refs/tags/")) {
            if !out.dsts.contains(t) {
                out.push(RefUpdate {
                    dst: t.clone(),
                    src: Some(t.clone()),
                    force,
                    certain: false,
                });
            }
        }
    }
    apply_negative(out.list, specs)
}

/// Negative refspecs: git 2.47 drops an update whose destination matches one; other versions
/// have matched the source. An update is dropped only when both sides are excluded; when one
/// side is, it is kept as possible (conservative across versions).
fn apply_negative(out: Vec<RefUpdate>, specs: &[PushRefspec]) -> Vec<RefUpdate> {
    if !specs.iter().any(|s| s.negative) {
        return out;
    }
    out.into_iter()
        .filter_map(|mut u| {
            let dst_ex = omitted(&u.dst, specs);
            let src_ex = u
                .src
                .as_deref()
                .is_some_and(|s| s.starts_with("refs/") && omitted(s, specs));
            match (dst_ex, src_ex) {
                (true, true) => None,
                (false, false) => Some(u),
                _ => {
                    u.certain = false;
                    Some(u)
                }
            }
        })
        .collect()
}

/// Resolves a destination name against the remote's refs (`match_explicit`): one match is
/// used; a full `refs/…` name is created; otherwise git guesses from the source's kind
/// (`guess_ref`). With unknown remote refs every expansion is possible.
fn resolve_dst(
    dst: &str,
    remote_refs: Option<&[String]>,
    deleting: bool,
    guess: impl Fn(&str) -> Option<String>,
) -> Vec<(String, bool)> {
    match remote_refs {
        Some(refs) => {
            let m = count_refspec_match(dst, refs.iter().map(String::as_str));
            match m.len() {
                1 => vec![(m[0].to_string(), true)],
                0 => {
                    if dst.starts_with("refs/") {
                        vec![(dst.to_string(), true)]
                    } else if deleting {
                        named_candidates(dst)
                    } else if let Some(g) = guess(dst) {
                        vec![(g, true)]
                    } else {
                        named_candidates(dst)
                    }
                }
                _ => m.into_iter().map(|x| (x.to_string(), false)).collect(),
            }
        }
        None => {
            if dst.starts_with("refs/") {
                return vec![(dst.to_string(), true)];
            }
            let mut v: Vec<(String, bool)> = Vec::new();
            if let Some(g) = guess(dst) {
                v.push((g, false));
            }
            for e in named_candidates(dst) {
                if !v.iter().any(|(x, _)| *x == e.0) {
                    v.push(e);
                }
            }
            v
        }
    }
}

/// Every `refs/…` expansion of a short name, none certain.
fn named_candidates(dst: &str) -> Vec<(String, bool)> {
    expansions(dst)
        .into_iter()
        .filter(|e| e.starts_with("refs/") && !e.ends_with("/HEAD"))
        .map(|e| (e, false))
        .collect()
}
