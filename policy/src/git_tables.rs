//! The git tables the policy and the git guard (tyba-git-guard) share, for git 2.47
//! (git(1) "OPTIONS", `git --list-cmds=builtins`, git-config(1) "Variables"). One set, so
//! the classifier and the guard never disagree about which word is a subcommand, which
//! global option takes a value, or which configuration key runs a program.
//!
//! They live here because tyba-git-guard depends on tyba-policy (the guard reports
//! [`crate::Finding`]s and reads the policy's configuration); the policy cannot depend on
//! the guard without a cycle.

/// Builtin git commands of git 2.47 (`git --list-cmds=builtins`): an alias cannot shadow them.
pub const BUILTINS: &[&str] = &[
    "add",
    "am",
    "annotate",
    "apply",
    "archive",
    "bisect",
    "blame",
    "branch",
    "bugreport",
    "bundle",
    "cat-file",
    "check-attr",
    "check-ignore",
    "check-mailmap",
    "check-ref-format",
    "checkout",
    "checkout--worker",
    "checkout-index",
    "cherry",
    "cherry-pick",
    "clean",
    "clone",
    "column",
    "commit",
    "commit-graph",
    "commit-tree",
    "config",
    "count-objects",
    "credential",
    "credential-cache",
    "credential-cache--daemon",
    "credential-store",
    "describe",
    "diagnose",
    "diff",
    "diff-files",
    "diff-index",
    "diff-tree",
    "difftool",
    "fast-export",
    "fast-import",
    "fetch",
    "fetch-pack",
    "fmt-merge-msg",
    "for-each-ref",
    "for-each-repo",
    "format-patch",
    "fsck",
    "fsck-objects",
    "fsmonitor--daemon",
    "gc",
    "get-tar-commit-id",
    "grep",
    "hash-object",
    "help",
    "hook",
    "index-pack",
    "init",
    "init-db",
    "interpret-trailers",
    "log",
    "ls-files",
    "ls-remote",
    "ls-tree",
    "mailinfo",
    "mailsplit",
    "maintenance",
    "merge",
    "merge-base",
    "merge-file",
    "merge-index",
    "merge-ours",
    "merge-recursive",
    "merge-recursive-ours",
    "merge-recursive-theirs",
    "merge-subtree",
    "merge-tree",
    "mktag",
    "mktree",
    "multi-pack-index",
    "mv",
    "name-rev",
    "notes",
    "pack-objects",
    "pack-redundant",
    "pack-refs",
    "patch-id",
    "pickaxe",
    "prune",
    "prune-packed",
    "pull",
    "push",
    "range-diff",
    "read-tree",
    "rebase",
    "receive-pack",
    "reflog",
    "refs",
    "remote",
    "remote-ext",
    "remote-fd",
    "repack",
    "replace",
    "replay",
    "rerere",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "revert",
    "rm",
    "send-pack",
    "shortlog",
    "show",
    "show-branch",
    "show-index",
    "show-ref",
    "sparse-checkout",
    "stage",
    "stash",
    "status",
    "stripspace",
    "submodule--helper",
    "switch",
    "symbolic-ref",
    "tag",
    "unpack-file",
    "unpack-objects",
    "update-index",
    "update-ref",
    "update-server-info",
    "upload-archive",
    "upload-archive--writer",
    "upload-pack",
    "var",
    "verify-commit",
    "verify-pack",
    "verify-tag",
    "version",
    "whatchanged",
    "worktree",
    "write-tree",
];

/// Subcommands that push (`git-push(1)`, `git-send-pack(1)`, `git-http-push(1)`, the contrib
/// `git subtree push`).
pub const PUSHING_SUBCOMMANDS: &[&str] = &["push", "send-pack", "http-push", "subtree"];

/// Subcommands that run a command they are given, with the configuration of the git that
/// runs them (`-c` reaches the command through `GIT_CONFIG_PARAMETERS`): `rebase --exec`,
/// `bisect run`, `submodule foreach`, `difftool -x`, `filter-branch --*-filter`,
/// `mergetool` (its configured tool).
pub const COMMAND_RUNNING_SUBCOMMANDS: &[&str] = &[
    "rebase",
    "bisect",
    "submodule",
    "difftool",
    "filter-branch",
    "mergetool",
    "submodule--helper",
];

/// Whether git run with subcommand `sub` may push: a pushing subcommand, one that runs a
/// command it is given, or a word that is not a builtin (an alias or an external
/// `git-<sub>` program may do anything).
pub fn may_push(sub: &str) -> bool {
    PUSHING_SUBCOMMANDS.contains(&sub)
        || COMMAND_RUNNING_SUBCOMMANDS.contains(&sub)
        || !BUILTINS.contains(&sub)
}

/// How the policy reads a read-only subcommand's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOnly {
    /// Read-only whatever its options, but for those that run a configured program or write
    /// a file on any subcommand (`--ext-diff`, `--textconv`, `--output`), which the git judge
    /// checks for every subcommand.
    Plain,
    /// Read-only only in some of its forms (`branch` listing, `config --get`, `stash list`):
    /// the git judge has a rule of its own for it.
    Judged,
}

/// Subcommands on the green list (DESIGN.md §2a), each with how its words are judged; the
/// one list of them (the policy's git judge reads it).
pub const READ_ONLY_SUBCOMMANDS: &[(&str, ReadOnly)] = &[
    ("status", ReadOnly::Plain),
    ("log", ReadOnly::Plain),
    ("show", ReadOnly::Plain),
    ("diff", ReadOnly::Plain),
    ("blame", ReadOnly::Plain),
    ("rev-parse", ReadOnly::Plain),
    ("ls-files", ReadOnly::Plain),
    ("ls-tree", ReadOnly::Plain),
    ("cat-file", ReadOnly::Plain),
    ("rev-list", ReadOnly::Plain),
    ("show-ref", ReadOnly::Plain),
    ("for-each-ref", ReadOnly::Plain),
    ("merge-base", ReadOnly::Plain),
    ("describe", ReadOnly::Plain),
    ("shortlog", ReadOnly::Plain),
    ("count-objects", ReadOnly::Plain),
    ("grep", ReadOnly::Judged),
    ("branch", ReadOnly::Judged),
    ("tag", ReadOnly::Judged),
    ("remote", ReadOnly::Judged),
    ("config", ReadOnly::Judged),
    ("stash", ReadOnly::Judged),
    ("worktree", ReadOnly::Judged),
    ("reflog", ReadOnly::Judged),
    // `git version [--build-options]` (and `git --version`, `git -v`, which git.c rewrites
    // to it) prints git's own version: read-only like the rest.
    ("version", ReadOnly::Judged),
];

/// How subcommand `sub` is read-only, if it is on the green list ([`READ_ONLY_SUBCOMMANDS`]).
pub fn read_only(sub: &str) -> Option<ReadOnly> {
    READ_ONLY_SUBCOMMANDS
        .iter()
        .find(|(s, _)| *s == sub)
        .map(|(_, r)| *r)
}

/// Global options that take a value, separate (`-C DIR`) or after `=` (`--git-dir=DIR`).
pub const GLOBAL_VALUE_OPTIONS: &[&str] = &[
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--super-prefix",
    "--config-env",
    "--attr-source",
    "--shallow-file",
];

/// Global options without a value that leave the subcommand to run.
pub const GLOBAL_FLAGS: &[&str] = &[
    "--no-pager",
    "-P",
    "-p",
    "--paginate",
    "--no-replace-objects",
    "--literal-pathspecs",
    "--no-literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-optional-locks",
    "--no-advice",
    "--no-lazy-fetch",
    "--bare",
];

/// Global options after which git prints something and exits (or runs `git help`): no
/// subcommand runs. `--exec-path` prints only without `=PATH`.
pub const GLOBAL_EXITING_OPTIONS: &[&str] = &[
    "--exec-path",
    "--html-path",
    "--man-path",
    "--info-path",
    "-v",
    "--version",
    "-h",
    "--help",
];

/// Whether configuration key `key` (any letter case) set to `value` (when known) makes git
/// run a program or a shell command, or reach one (git-config(1): `core.pager`,
/// `core.sshCommand`, `diff.<driver>.command`, `filter.<driver>.clean`, aliases, includes, …).
/// Switching `core.fsmonitor` off, and `status.showUntrackedFiles`, run nothing. The push
/// guard's own keys (`core.hooksPath`, `hook.*`) are the guard's, not listed here.
pub fn runs_program(key: &str, value: Option<&str>) -> bool {
    let k = key.to_ascii_lowercase();
    // Switching a program-valued key off runs nothing (DESIGN.md §2a): `core.fsmonitor` and
    // `pager.<cmd>` are read as maybe-bools, where false and the empty string are off;
    // an empty `core.pager` means no pager; an empty `credential.helper` resets the list of
    // helpers (git-config(1)).
    let off = |v: &str| {
        matches!(
            v.to_ascii_lowercase().as_str(),
            "" | "false" | "no" | "off" | "0"
        )
    };
    let switched_off = match value {
        Some(v) if k == "core.fsmonitor" || k.starts_with("pager.") => off(v),
        Some(v)
            if k == "core.pager"
                || k == "credential.helper"
                || (k.starts_with("credential.") && k.ends_with(".helper")) =>
        {
            v.is_empty()
        }
        _ => false,
    };
    if switched_off {
        return false;
    }
    if k == "status.showuntrackedfiles" {
        return false;
    }
    matches!(
        k.as_str(),
        "core.pager"
            | "interactive.difffilter"
            | "core.editor"
            | "core.sshcommand"
            | "core.fsmonitor"
            | "core.askpass"
            | "core.gitproxy"
            | "diff.external"
            | "sequence.editor"
            | "gpg.program"
            | "gpg.ssh.program"
            | "gpg.x509.program"
            | "credential.helper"
            | "uploadpack.packobjectshook"
            | "include.path"
            | "core.alternaterefscommand"
            | "sendemail.smtpserver"
            | "merge.tool"
            | "diff.tool"
            | "core.worktree"
            | "remote.ext.url"
            | "protocol.allow"
            | "protocol.ext.allow"
            | "http.proxy"
            | "pager.log"
            | "web.browser"
            | "instaweb.httpd"
            | "ssh.variant"
            | "core.sshcmd"
    ) || k.starts_with("alias.")
        || k.starts_with("pager.")
        || k.starts_with("includeif.")
        || (k.starts_with("diff.") && (k.ends_with(".command") || k.ends_with(".textconv")))
        || (k.starts_with("trailer.") && (k.ends_with(".cmd") || k.ends_with(".command")))
        || (k.starts_with("submodule.")
            && k.ends_with(".update")
            && value.is_none_or(|v| v.starts_with('!')))
        || (k.starts_with("filter.")
            && (k.ends_with(".clean") || k.ends_with(".smudge") || k.ends_with(".process")))
        || (k.starts_with("merge.") && k.ends_with(".driver"))
        || (k.starts_with("mergetool.") && k.ends_with(".cmd"))
        || (k.starts_with("difftool.") && k.ends_with(".cmd"))
        || (k.starts_with("credential.") && k.ends_with(".helper"))
        || (k.starts_with("remote.")
            && (k.ends_with(".receivepack")
                || k.ends_with(".uploadpack")
                || k.ends_with(".proxy")
                || k.ends_with(".vcs")))
        || (k.starts_with("browser.") && (k.ends_with(".cmd") || k.ends_with(".path")))
        || (k.starts_with("man.") && (k.ends_with(".cmd") || k.ends_with(".path")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_are_consistent() {
        let mut sorted = BUILTINS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), BUILTINS.len(), "BUILTINS has duplicates");
        for (s, _) in READ_ONLY_SUBCOMMANDS {
            assert!(BUILTINS.contains(s), "{s} is not a git 2.47 builtin");
            assert!(!may_push(s), "{s}");
            assert_eq!(
                READ_ONLY_SUBCOMMANDS.iter().filter(|(o, _)| o == s).count(),
                1,
                "{s} listed twice"
            );
        }
        assert!(may_push("push") && may_push("rebase") && may_push("my-alias"));
    }

    #[test]
    fn program_keys() {
        assert!(runs_program("core.sshCommand", Some("x")));
        assert!(runs_program("Diff.X.Textconv", None));
        assert!(runs_program("submodule.m.update", Some("!sh")));
        assert!(!runs_program("submodule.m.update", Some("rebase")));
        assert!(!runs_program("core.fsmonitor", Some("false")));
        assert!(!runs_program("core.fsmonitor", Some("")));
        assert!(!runs_program("core.pager", Some("")));
        assert!(!runs_program("pager.log", Some("false")));
        assert!(!runs_program("credential.helper", Some("")));
        assert!(runs_program("core.pager", Some("false")));
        assert!(runs_program("core.editor", Some("")));
        assert!(runs_program("core.fsmonitor", Some("touch /tmp/p")));
        assert!(!runs_program("user.email", Some("x")));
        assert!(!runs_program("status.showUntrackedFiles", Some("all")));
    }
}
