//! One `git` invocation → findings: git's global options (`git.c`, `handle_options`), the
//! environment it is given, alias expansion (`alias.*`, git-config(1)), and per subcommand:
//! `push` (resolved), `send-pack`/`http-push` (no pre-push hook), `config` (writes that move
//! or replace the hook).

use crate::config::{is_guard_key, split_key};
use crate::push::{self, is_protected, PushPlan};
use crate::repo::{Locator, RepoState};
use std::path::{Path, PathBuf};
use tyba_policy::git_options::{self, GlobalEnd};
use tyba_policy::redact::{redact_credentials, redact_url};
use tyba_policy::{AliasExpansion, Finding, Verdict};

/// Rule id: a push whose destinations include a protected branch.
pub const RULE_PROTECTED: &str = tyba_policy::rules::GIT_PUSH_PROTECTED.id;
/// Rule id: a push the guard cannot resolve that could reach a protected branch.
pub const RULE_UNRESOLVED: &str = tyba_policy::rules::GIT_PUSH_UNRESOLVED.id;
/// Rule id: `git push --no-verify` (any spelling) skips the pre-push hook.
pub const RULE_NO_VERIFY: &str = tyba_policy::rules::GIT_GUARD_NO_VERIFY.id;
/// Rule id: `core.hooksPath`, `hook.*` or an include changed for a git command.
pub const RULE_HOOKS_PATH: &str = tyba_policy::rules::GIT_GUARD_HOOKS_PATH.id;
/// Rule id: `git send-pack`/`git http-push` push without running the pre-push hook.
pub const RULE_SEND_PACK: &str = tyba_policy::rules::GIT_GUARD_SEND_PACK.id;

/// Environment variables whose assignment on a git command can replace the configuration
/// that holds `core.hooksPath` or the directory hooks are found in.
const HOOK_ENV: &[&str] = &[
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM",
    "GIT_CONFIG",
    "GIT_COMMON_DIR",
];

/// What the guard found about one invocation, with the details `tyba git-guard check` prints.
#[derive(Debug, Clone, Default)]
pub struct Analysis {
    /// Blocked findings, in the order found.
    pub findings: Vec<Finding>,
    /// The alias the subcommand expands to, if any.
    pub alias: Option<AliasExpansion>,
    /// Every push resolved (the invocation's own, or those inside aliases), in order.
    pub pushes: Vec<PushPlan>,
}

impl Analysis {
    fn block(&mut self, rule: &str, reason: String) {
        let f = blocked(rule, &reason);
        if !self.findings.contains(&f) {
            self.findings.push(f);
        }
    }

    pub(crate) fn merge(&mut self, other: Analysis) {
        for f in other.findings {
            if !self.findings.contains(&f) {
                self.findings.push(f);
            }
        }
        self.pushes.extend(other.pushes);
    }
}

/// A blocked finding. Its reason quotes remotes, URLs and configuration values (which the
/// agent or the person read): URL credentials are redacted here, where every finding is made
/// (`tyba_policy::redact`).
pub(crate) fn blocked(rule: &str, reason: &str) -> Finding {
    Finding::new(
        Verdict::Blocked,
        rule,
        redact_credentials(reason).into_owned(),
    )
}

/// Global options and environment after `git.c`'s `handle_options`.
#[derive(Debug, Clone, Default)]
struct Global {
    loc: Locator,
    /// `(key, value)` overrides in git's order; `value` `None` for `-c key` (implicit true).
    overrides: Vec<(String, Option<String>)>,
    /// Index of the subcommand in the words.
    cmd_at: Option<usize>,
    /// An option git does not know (it dies), if any.
    unknown: Option<String>,
}

fn abs(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

fn env_value<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
    env.iter()
        .rev()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// `GIT_CONFIG_PARAMETERS`: space-separated single-quoted `'key'='value'` or `'key=value'`.
fn parse_config_parameters(text: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for w in shlex::split(text).unwrap_or_default() {
        match w.split_once('=') {
            Some((k, v)) => out.push((k.to_string(), Some(v.to_string()))),
            None => out.push((w, None)),
        }
    }
    out
}

fn parse_global(words: &[String], env: &[(String, String)], cwd: &Path) -> Global {
    let mut g = Global {
        loc: Locator {
            cwd: cwd.to_path_buf(),
            ..Locator::default()
        },
        ..Global::default()
    };
    if let Some(d) = env_value(env, "GIT_DIR") {
        g.loc.git_dir = Some(abs(cwd, d));
    }
    if let Some(d) = env_value(env, "GIT_WORK_TREE") {
        g.loc.work_tree = Some(abs(cwd, d));
    }
    // GIT_CONFIG_COUNT/KEY/VALUE, then GIT_CONFIG_PARAMETERS (where -c also goes): git's order.
    if let Some(n) = env_value(env, "GIT_CONFIG_COUNT").and_then(|n| n.trim().parse::<usize>().ok())
    {
        for i in 0..n.min(1000) {
            if let Some(k) = env_value(env, &format!("GIT_CONFIG_KEY_{i}")) {
                let v = env_value(env, &format!("GIT_CONFIG_VALUE_{i}")).map(str::to_string);
                g.overrides.push((k.to_string(), v));
            }
        }
    }
    if let Some(p) = env_value(env, "GIT_CONFIG_PARAMETERS") {
        g.overrides.extend(parse_config_parameters(p));
    }
    // git.c `handle_options`, by the engine the policy's git judge uses too.
    let globals = git_options::parse_global(words);
    for o in &globals.options {
        let Some(v) = o.value.as_deref() else {
            if o.spec.name == "--bare" {
                g.loc.git_dir = Some(g.loc.cwd.clone());
            }
            continue;
        };
        match o.spec.name {
            "-C" => {
                if !v.is_empty() {
                    g.loc.cwd = abs(&g.loc.cwd, v);
                }
            }
            "-c" => match v.split_once('=') {
                Some((k, val)) => g.overrides.push((k.to_string(), Some(val.to_string()))),
                None => g.overrides.push((v.to_string(), None)),
            },
            name => apply_valued(&mut g, name, v, env),
        }
    }
    match globals.end {
        GlobalEnd::Subcommand(i) => g.cmd_at = Some(i),
        // git prints and exits (or runs `git help`/`git version`): no subcommand runs.
        GlobalEnd::Exits(_) | GlobalEnd::NoSubcommand => return g,
        GlobalEnd::Unknown(i) | GlobalEnd::MissingValue(i) => {
            g.unknown = words.get(i).cloned();
        }
    }
    g.loc.overrides = g
        .overrides
        .iter()
        .map(|(k, v)| match v {
            Some(v) => format!("{k}={v}"),
            None => k.clone(),
        })
        .collect();
    g
}

fn apply_valued(g: &mut Global, name: &str, value: &str, env: &[(String, String)]) {
    match name {
        "--git-dir" => g.loc.git_dir = Some(abs(&g.loc.cwd, value)),
        "--work-tree" => g.loc.work_tree = Some(abs(&g.loc.cwd, value)),
        "--config-env" => {
            if let Some((k, var)) = value.rsplit_once('=') {
                let v = env_value(env, var)
                    .map(str::to_string)
                    .or_else(|| std::env::var(var).ok());
                g.overrides
                    .push((k.to_string(), Some(v.unwrap_or_default())));
            }
        }
        _ => {}
    }
}

/// Inspects one invocation, recursing through aliases up to `depth`.
pub(crate) fn analyze(
    words: &[String],
    env: &[(String, String)],
    cwd: &Path,
    protected: &[String],
    depth: usize,
) -> Analysis {
    let mut a = Analysis::default();
    let g = parse_global(words, env, cwd);
    // Replacing the hooks configuration for one command switches the push guard off only when
    // that command can push: `push`, `send-pack`, or an alias or external command that may. A
    // read-only builtin run with its hooks switched off (`git -c core.hooksPath=/dev/null
    // status`, as Codex and Claude Code probe every repository) runs no pre-push hook anyway.
    let could_push = match g.cmd_at.map(|i| words[i].as_str()) {
        None => false,
        Some(c) => tyba_policy::git_tables::may_push(c),
    };
    if could_push {
        for (name, _) in env {
            if HOOK_ENV.contains(&name.as_str()) {
                a.block(RULE_HOOKS_PATH, format!("{name} on a git command can replace the configuration that runs the pre-push hook"));
            }
        }
        for (k, _) in &g.overrides {
            if is_guard_key(k) {
                a.block(
                    RULE_HOOKS_PATH,
                    format!("`{k}` set for a git command can switch the pre-push hook off"),
                );
            }
        }
    }
    let Some(cmd_at) = g.cmd_at else {
        if let Some(u) = &g.unknown {
            // git dies on an unknown global option; anything after it never runs, but be
            // conservative about words that look like a push.
            if words.iter().any(|w| w == "push" || w == "send-pack") {
                a.block(
                    RULE_UNRESOLVED,
                    format!("cannot parse git option `{u}` before a push"),
                );
            }
        }
        return a;
    };
    let cmd = words[cmd_at].as_str();
    let rest = &words[cmd_at + 1..];
    match cmd {
        "push" => {
            let state = RepoState::open(&g.loc);
            match state {
                Ok(state) => match push::resolve(&state, rest, protected) {
                    Ok(plan) => {
                        if pushes_submodules(&state, rest) {
                            a.block(
                                RULE_UNRESOLVED,
                                "the push also pushes submodules, whose destinations and hooks the guard does not resolve".into(),
                            );
                        }
                        report_push(&mut a, plan, protected)
                    }
                    Err(e) => {
                        if rest.iter().any(|w| could_name_protected(w, protected))
                            || rest
                                .iter()
                                .any(|w| w.starts_with("--no-") || w.starts_with("--n"))
                        {
                            a.block(RULE_UNRESOLVED, format!("git push options git would reject ({e}); the line names a protected ref or a hook bypass"));
                        }
                    }
                },
                Err(e) => {
                    if push_could_reach_protected_blind(rest, protected) {
                        a.block(
                            RULE_UNRESOLVED,
                            format!(
                                "cannot resolve the push ({e}); it could reach a protected branch"
                            ),
                        );
                    }
                    if let Ok(p) = push::parse_push_args(rest) {
                        if p.last_bool("no-verify") == Some(true) {
                            a.block(
                                RULE_NO_VERIFY,
                                "git push --no-verify skips the pre-push hook".into(),
                            );
                        }
                    }
                }
            }
        }
        "send-pack" | "http-push" => {
            a.block(
                RULE_SEND_PACK,
                format!("git {cmd} pushes without running the pre-push hook"),
            );
        }
        "config" => {
            if let Some(why) = config_write_of_guard_key(rest) {
                a.block(RULE_HOOKS_PATH, why);
            }
        }
        c if !tyba_policy::git_tables::BUILTINS.contains(&c) => {
            if depth > 16 {
                a.block(
                    RULE_UNRESOLVED,
                    format!("alias `{c}` recurses too deep to resolve"),
                );
                return a;
            }
            let value = match RepoState::open(&g.loc) {
                Ok(state) => state
                    .config
                    .string("alias", None, &c.to_ascii_lowercase())
                    .map(str::to_string),
                Err(_) => g
                    .overrides
                    .iter()
                    .rev()
                    .find(|(k, _)| {
                        split_key(k).is_some_and(|(s, sub, n)| {
                            s == "alias" && sub.is_none() && n == c.to_ascii_lowercase()
                        })
                    })
                    .map(|(_, v)| v.clone().unwrap_or_else(|| "true".into()))
                    .or_else(|| {
                        // outside a repository git still reads the global and system files
                        gix::config::File::from_globals().ok().and_then(|f| {
                            crate::config::FlatConfig::from_gix(&f)
                                .string("alias", None, &c.to_ascii_lowercase())
                                .map(str::to_string)
                        })
                    }),
            };
            if let Some(v) = value {
                analyze_alias(
                    &mut a,
                    &words[..cmd_at],
                    &v,
                    rest,
                    env,
                    cwd,
                    protected,
                    depth,
                );
            }
        }
        _ => {}
    }
    a
}

#[allow(clippy::too_many_arguments)]
fn analyze_alias(
    a: &mut Analysis,
    global: &[String],
    value: &str,
    rest: &[String],
    env: &[(String, String)],
    cwd: &Path,
    protected: &[String],
    depth: usize,
) {
    if let Some(text) = value.strip_prefix('!') {
        a.alias = Some(AliasExpansion::Shell(text.to_string()));
        let sub = crate::alias::analyze_shell(text, rest, env, cwd, protected, depth + 1);
        a.merge(sub);
        return;
    }
    let Some(words) = shlex::split(value) else {
        a.block(RULE_UNRESOLVED, "git alias with unbalanced quotes".into());
        return;
    };
    a.alias = Some(AliasExpansion::Git(words.clone()));
    let mut expanded: Vec<String> = global.to_vec();
    expanded.extend(words);
    expanded.extend(rest.iter().cloned());
    let sub = analyze(&expanded, env, cwd, protected, depth + 1);
    a.merge(sub);
}

fn report_push(a: &mut Analysis, plan: PushPlan, protected: &[String]) {
    if plan.no_verify {
        a.block(
            RULE_NO_VERIFY,
            "git push --no-verify skips the pre-push hook".into(),
        );
    }
    for (t, u) in plan.updates() {
        if is_protected(&u.dst, protected) {
            let verb = match (&u.src, u.certain) {
                (None, true) => "would delete",
                (None, false) => "could delete",
                (Some(_), true) => "would update",
                (Some(_), false) => "could update",
            };
            let remote = redact_url(&t.remote);
            let place = match &t.url {
                Some(url) if *url != t.remote => format!("remote {remote} ({})", redact_url(url)),
                _ => format!("remote {remote}"),
            };
            a.block(
                RULE_PROTECTED,
                format!("push {verb} protected {} on {place}", u.dst),
            );
        }
    }
    a.pushes.push(plan);
}

/// `--recurse-submodules=on-demand|only` (or `push.recurseSubmodules`, `submodule.recurse`)
/// in a repository with submodules: git pushes each submodule too, with its own hooks
/// directory where the guard's hook may be missing.
fn pushes_submodules(state: &RepoState, words: &[String]) -> bool {
    let has_submodules = state
        .workdir
        .as_deref()
        .is_some_and(|w| w.join(".gitmodules").exists());
    if !has_submodules {
        return false;
    }
    let cfg = &state.config;
    let mut mode: Option<String> = cfg.boolean("submodule", None, "recurse").map(|b| {
        if b {
            "on-demand".to_string()
        } else {
            "no".to_string()
        }
    });
    if let Some(v) = cfg.string("push", None, "recursesubmodules") {
        mode = Some(v.to_ascii_lowercase());
    }
    if let Ok(p) = push::parse_push_args(words) {
        if let Some(o) = p
            .options
            .iter()
            .rev()
            .find(|o| o.long == "recurse-submodules")
        {
            mode = if o.unset {
                Some("no".into())
            } else {
                o.value.clone().map(|v| v.to_ascii_lowercase())
            };
        }
    }
    matches!(
        mode.as_deref(),
        Some("on-demand") | Some("only") | Some("yes") | Some("true")
    )
}

/// Whether a word could name a protected branch as a destination (`main`, `+x:Main`,
/// `refs/heads/master`, `heads/main`, `:main`).
fn could_name_protected(word: &str, protected: &[String]) -> bool {
    let w = word.trim_start_matches(['+', '^']);
    let dst = w.rsplit(':').next().unwrap_or(w);
    let dst = dst.trim_start_matches("refs/").trim_start_matches("heads/");
    protected.iter().any(|p| p.eq_ignore_ascii_case(dst))
        || w.contains('*')
        || w == ":"
        || w.is_empty()
}

/// Without a repository: whether a push could reach a protected ref judging from its words.
fn push_could_reach_protected_blind(words: &[String], protected: &[String]) -> bool {
    let Ok(p) = push::parse_push_args(words) else {
        return true;
    };
    let tags_only = p.last_bool("tags") == Some(true);
    if p.last_bool("all") == Some(true) || p.last_bool("mirror") == Some(true) {
        return true;
    }
    if p.operands.len() <= 1 {
        return !tags_only;
    }
    // Without the configuration a one-sided refspec may be remapped (`remote.<r>.push`,
    // `push.default=upstream`) and a pattern may reach anything: only `src:dst` pairs whose
    // destination is visibly not protected, tags and deletions of such names pass.
    let refs = &p.operands[1..];
    let mut i = 0;
    while i < refs.len() {
        let w = &refs[i];
        if w == "tag" {
            i += 2;
            continue;
        }
        i += 1;
        if w.starts_with('^') {
            continue;
        }
        let one_sided = !w.contains(':') && p.last_bool("delete") != Some(true);
        if one_sided || w.contains('*') || could_name_protected(w, protected) {
            return true;
        }
    }
    p.last_bool("prune") == Some(true)
}

/// `git config` writing, renaming or removing a key that moves or replaces the hook. Classic
/// (`git config [opts] key value`, `--add`, `--unset`, `--rename-section`, …) and subcommand
/// forms (`git config set|unset|rename-section|remove-section`), git-config(1). An edit in an
/// editor (`--edit`, `edit`) names no key: the colour policy makes it red (DESIGN.md §2,
/// writes to `.git/config`), and a push after it is judged with the configuration it left.
fn config_write_of_guard_key(words: &[String]) -> Option<String> {
    const READ_FLAGS: &[&str] = &[
        "--get",
        "--get-all",
        "--get-regexp",
        "--get-urlmatch",
        "--get-color",
        "--get-colorbool",
        "-l",
        "--list",
    ];
    const VALUED: &[&str] = &[
        "-f",
        "--file",
        "--blob",
        "--type",
        "--default",
        "--comment",
        "--value",
    ];
    let mut operands: Vec<&str> = Vec::new();
    let mut read = false;
    let mut write_flag = false;
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_str();
        i += 1;
        if w == "--" {
            operands.extend(words[i..].iter().map(String::as_str));
            break;
        }
        if w == "-e" || w == "--edit" {
            return None;
        }
        if READ_FLAGS.contains(&w) {
            read = true;
        } else if matches!(
            w,
            "--add"
                | "--replace-all"
                | "--unset"
                | "--unset-all"
                | "--rename-section"
                | "--remove-section"
                | "--append"
                | "--all"
        ) {
            write_flag = true;
        } else if VALUED.contains(&w) {
            i += 1;
        } else if w.starts_with('-') {
        } else {
            operands.push(w);
        }
    }
    let (sub, args): (Option<&str>, &[&str]) = match operands.first() {
        Some(&s)
            if matches!(
                s,
                "list" | "get" | "set" | "unset" | "rename-section" | "remove-section" | "edit"
            ) =>
        {
            (Some(s), &operands[1..])
        }
        _ => (None, &operands[..]),
    };
    let writes = match sub {
        Some("edit") => return None,
        Some("list") | Some("get") => false,
        Some(_) => true,
        None => !read && (write_flag || args.len() >= 2),
    };
    if !writes {
        return None;
    }
    args.iter()
        .find(|k| is_guard_key(k))
        .map(|k| format!("git config writes `{k}`, which can switch the pre-push hook off"))
}

/// The pre-push hook file for the repository containing `cwd`.
pub(crate) fn hook_path(cwd: &Path) -> Option<PathBuf> {
    let state = RepoState::open(&Locator {
        cwd: cwd.to_path_buf(),
        ..Locator::default()
    })
    .ok()?;
    Some(state.hooks_dir().join("pre-push"))
}
