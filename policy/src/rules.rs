//! The registry of rule ids: every finding tyba's built-in rules emit names one of these,
//! with the colours it is emitted at and a one-line description. `docs/rules.md` is
//! generated from this table ([`markdown`]); a test fails when it is stale, when a rule
//! emitted in the sources is missing here, or when an entry here is emitted nowhere.
//!
//! Ids are dotted, `family.rule` (DESIGN.md §2, §2a name the families). Two families are
//! open-ended: `wrapper.<program>` (a wrapper that runs another command; the worse of yellow
//! and the command) and `policy.<id>` (a rule of a policy file, with the colour the file
//! gives it).

use crate::verdict::Verdict;

/// One registered rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// The stable id findings carry (`Finding::rule`), e.g. `git.push.protected`; a family
    /// is written `wrapper.*`.
    pub id: &'static str,
    /// The colours the rule is emitted at (most rules have one).
    pub colours: &'static [Verdict],
    /// What the rule finds, one line.
    pub doc: &'static str,
}

macro_rules! rules {
    ($( $name:ident = $id:literal, [$($c:ident),+], $doc:literal; )*) => {
        $(
            #[doc = concat!("`", $id, "`: ", $doc)]
            pub const $name: Rule = Rule {
                id: $id,
                colours: &[$(Verdict::$c),+],
                doc: $doc,
            };
        )*
        /// Every registered rule, sorted by id.
        pub const ALL: &[Rule] = &[$($name),*];
        /// Every registered rule with the name of its const here, for checks over sources
        /// that emit `rules::NAME.id`.
        pub const BY_NAME: &[(&str, Rule)] = &[$((stringify!($name), $name)),*];
    };
}

rules! {
    CMD_AWK = "cmd.awk", [Yellow], "an awk program, which can run commands and write files";
    CMD_BUILD = "cmd.build", [Yellow], "a package manager or build tool: runs builds, scripts or installs";
    CMD_DEVICE_NODE = "cmd.device-node", [Red], "`mknod` can create device nodes";
    CMD_DYNAMIC_ARGS = "cmd.dynamic-args", [Yellow], "a listed program with words that cannot be known";
    CMD_DYNAMIC_NAME = "cmd.dynamic-name", [Yellow], "the program word cannot be known before the line runs";
    CMD_METADATA = "cmd.metadata", [Yellow], "a command that changes file metadata (mode, owner, attributes)";
    CMD_NOT_READ_ONLY = "cmd.not-read-only", [Yellow], "a green program with an option that is not read-only";
    CMD_PATH_SHADOWED = "cmd.path-shadowed", [Yellow], "a bare program name looked up in a PATH the line put another directory first in";
    CMD_PROGRAM_OPTION = "cmd.program-option", [Red], "an option whose value is a program the command runs";
    CMD_UNLISTED = "cmd.unlisted", [Yellow], "a program that is not on the green list";
    CMD_UNLISTED_PROGRAM = "cmd.unlisted-program", [Yellow], "a program named by a path outside the system program directories";
    CMD_WRITES = "cmd.writes", [Yellow], "a command that writes, creates, moves or links files";
    CONFIG_GLOBAL = "config.global", [Red], "a write to the user's or the system's configuration";
    CONFIG_TOOL_WRITE = "config.tool-write", [Red], "a package tool's `config` write (`.npmrc` and the like: credentials, code later)";
    ENV_CONFIG_MOVED = "env.config-moved", [Yellow, Red], "assigning a variable that moves where programs read configuration (`HOME`, `XDG_CONFIG_HOME`, `GIT_DIR`…); red when the new place is one the agent can write or cannot be known";
    ENV_EXEC_VARIABLE = "env.exec-variable", [Red], "assigning a variable that makes programs run code (DESIGN §2a)";
    ENV_PREFIX_ASSIGNMENT = "env.prefix-assignment", [Yellow], "a command run with a variable changed for it";
    GIT_ALIAS = "git.alias", [Yellow], "a git alias, analysed as what it expands to";
    GIT_CONFIG_CODE = "git.config-code", [Red], "a git configuration key whose value is a program or shell command";
    GIT_CONFIG_WRITE = "git.config-write", [Red], "`git config` that writes the repository's configuration (.git/config)";
    GIT_GUARD_GIT_DIR = "git.guard.git-dir", [Blocked], "a change to the files that say where git's directory is (`commondir`, `gitdir`, a linked worktree's `.git` file): git's configuration and hooks move with them";
    GIT_GUARD_HOOK = "git.guard.hook", [Blocked], "a change to the pre-push hook git would run";
    GIT_GUARD_HOOKS_PATH = "git.guard.hooks-path", [Blocked], "a change of `core.hooksPath`, `hook.*` or the configuration that holds them";
    GIT_GUARD_NO_VERIFY = "git.guard.no-verify", [Blocked], "`git push --no-verify` (any spelling) skips the pre-push hook";
    GIT_GUARD_SEND_PACK = "git.guard.send-pack", [Blocked], "`git send-pack`/`http-push` push without the pre-push hook";
    GIT_HOOK_RUN = "git.hook-run", [Red], "`git hook run` runs repository hooks";
    GIT_NOT_READ_ONLY = "git.not-read-only", [Yellow], "a git command that is not read-only";
    GIT_PROGRAM_OPTION = "git.program-option", [Red], "a git option whose value is a program (`git grep -O<cmd>`)";
    GIT_PUSH_PROTECTED = "git.push.protected", [Blocked], "a push that would update a protected branch";
    GIT_PUSH_UNRESOLVED = "git.push.unresolved", [Blocked], "a push whose destination cannot be resolved and could reach a protected branch";
    GIT_RUNS_COMMAND = "git.runs-command", [Yellow], "a git subcommand that runs a command it is given (`rebase --exec`, `bisect run`, `submodule foreach`)";
    HOOK_OPAQUE_TOOL = "hook.opaque-tool", [Yellow], "an agent tool call whose effect the hook cannot see";
    HOOK_UNKNOWN_INPUT = "hook.unknown-input", [Yellow], "a hook input with a field or tool tyba does not know, asked inside a session with the raw input";
    INTERP_CODE = "interp.code", [Yellow], "an interpreter running code tyba does not analyse";
    LOADER_CODE = "loader.code", [Red], "the dynamic loader run with an option that loads other code (`--preload`, `--audit`, `--library-path`)";
    NET_CLIENT = "net.client", [Red], "a network client";
    NET_DEV_TCP = "net.dev-tcp", [Red], "a `/dev/tcp` or `/dev/udp` redirection opens a connection";
    NET_FETCH = "net.fetch", [Red], "a web fetch tool action";
    NET_FETCH_AND_RUN = "net.fetch-and-run", [Red], "a runner that fetches code from the network and runs it (`npx`, `uvx`)";
    NET_GIT = "net.git", [Red], "a git subcommand that uses the network";
    NET_SERVER = "net.server", [Red], "a server or listener";
    PATH_CONTROL_FILE = "path.control-file", [Red], "a write to an agent or IDE control file";
    PATH_CREDENTIAL = "path.credential", [Red], "a credential path, inside the worktree too";
    PATH_GIT_CONFIG = "path.git-config", [Red], "a change to the repository's git configuration file";
    PATH_GIT_DIR = "path.git-dir", [Red], "a change to the repository's git directory as a whole, or a write inside it";
    PATH_GIT_HOOKS = "path.git-hooks", [Red], "a change under the repository's hooks directory";
    PATH_GLOB_TOO_WIDE = "path.glob-too-wide", [Yellow], "a glob that matches more paths than tyba checks";
    PATH_OUTSIDE_WORKTREE = "path.outside-worktree", [Red], "a path that resolves outside the worktree";
    PATH_POLICY_OPENED = "path.policy-opened", [Yellow], "a path outside the worktree the policy file opens";
    PATH_SYMLINK_SCAN = "path.symlink-scan", [Yellow], "a recursion that follows symlinks over more entries than tyba checks";
    PATH_UNRESOLVED = "path.unresolved", [Yellow], "a path that cannot be resolved before the line runs";
    PERSIST_SCHEDULER = "persist.scheduler", [Red], "code scheduled to run outside the sandbox later (`crontab`, `at`, `systemctl --user`)";
    PERSIST_SERVICE = "persist.service", [Red], "a change to what the service manager runs (`systemctl enable|link|edit|start…`)";
    POLICY = "policy.*", [Yellow, Red, Blocked], "a rule of a policy file (`[[rule]]`), with the colour the file gives it";
    PROC_KILL_ALL = "proc.kill-all", [Red], "a signal to every process, a process group, PID 1 or tyba (`kill -1`, `kill 1`, `pkill .`, `killall5`)";
    RM_DELETE = "rm.delete", [Yellow], "a command that deletes files";
    RM_FIND_DELETE = "rm.find-delete", [Red], "`find -delete` or `find -exec rm`";
    RM_RECURSIVE_FORCE = "rm.recursive-force", [Red], "a recursive forced deletion (`rm -rf`, `git rm -r -f`, `git clean -fd`)";
    SHELL_DYNAMIC_CODE = "shell.dynamic-code", [Red], "code assembled at run time handed to a shell (like a pipe into a shell)";
    SHELL_DYNAMIC_EXPANSION = "shell.dynamic-expansion", [Yellow], "an expansion that assigns or looks up variables indirectly";
    SHELL_EMPTY = "shell.empty", [Yellow], "the command is empty";
    SHELL_EVAL = "shell.eval", [Yellow], "`eval` of a known string, analysed as a line";
    SHELL_INTERPRETER = "shell.interpreter", [Yellow], "a shell that runs shell code";
    SHELL_PARSE_ERROR = "shell.parse-error", [Yellow], "a line the bash grammar does not parse";
    SHELL_PIPE_TO_INTERPRETER = "shell.pipe-to-interpreter", [Red], "input piped or redirected into an interpreter";
    SHELL_PIPE_TO_SHELL = "shell.pipe-to-shell", [Red], "input piped or redirected into a shell";
    SHELL_REDIRECT_WRITE = "shell.redirect-write", [Yellow], "a redirection that writes a file";
    SHELL_SCRIPT = "shell.script", [Yellow], "a script file run by a shell";
    SHELL_SOURCE = "shell.source", [Green, Yellow], "`source`/`.` of a file (green: a marker on a command running a definition from a sourced definitions file)";
    SHELL_SUBSCRIPT_CODE = "shell.subscript-code", [Yellow], "a subscript holding a command substitution bash may run";
    SHELL_TOO_COMPLEX = "shell.too-complex", [Blocked], "a line too complex to analyse in full";
    SHELL_TOO_DEEP = "shell.too-deep", [Blocked], "a line nested deeper than tyba analyses";
    SHELL_UNPARSEABLE_WORD = "shell.unparseable-word", [Yellow], "a word that could not be parsed";
    SUPERVISOR_CONTROL = "supervisor.control", [Red, Blocked], "a `tyba` subcommand that grants approvals, changes autonomy, edits hook entries or removes worktrees: the agent deciding for its supervisor (blocked: `hook uninstall` switches the agent's hook off)";
    TOOL_NO_PATH = "tool.no-path", [Yellow], "a file tool action that names no path";
    VAULT_CATASTROPHIC = "vault.catastrophic", [Blocked], "a recursive modification of `/`, the home or a directory holding it, a system path or a system root (`/var`, `/opt`, `/run`, `/srv`, `/home`, `/root`)";
    VAULT_DEVICE_WRITE = "vault.device-write", [Blocked], "a write to a device under `/dev`";
    VAULT_DISK = "vault.disk", [Blocked], "a file-system or partition-table maker";
    VAULT_FORK_BOMB = "vault.fork-bomb", [Blocked], "a function that spawns itself: a fork bomb";
    VAULT_NO_PRESERVE_ROOT = "vault.no-preserve-root", [Blocked], "`--no-preserve-root`";
    VAULT_POWER = "vault.power", [Blocked], "stopping or restarting the machine";
    VAULT_SYSTEM_PATH = "vault.system-path", [Blocked], "a modification inside a system path (`/etc`, `/usr`, `/bin`, …)";
    WRAPPER = "wrapper.*", [Yellow], "a wrapper (`wrapper.<program>`) that runs another command: the worse of yellow and the command";
    WRAPPER_CHROOT = "wrapper.chroot", [Red], "`chroot` runs a command under another root";
    WRAPPER_ENV = "wrapper.env", [Yellow], "`env` runs a command with a changed environment";
    WRAPPER_FD_EXEC = "wrapper.fd-exec", [Yellow], "`fd -x/-X` runs a command per match";
    WRAPPER_FIND_EXEC = "wrapper.find-exec", [Yellow], "`find -exec` runs a command per match";
    WRAPPER_MAPFILE = "wrapper.mapfile", [Yellow], "`mapfile -C` runs a callback";
    WRAPPER_MULTICALL = "wrapper.multicall", [Yellow], "a multi-call binary runs the applet its first argument names";
    WRAPPER_PARALLEL = "wrapper.parallel", [Yellow], "`parallel`/`xargs`-like runners run a command per input";
    WRAPPER_SHELL = "wrapper.shell", [Yellow], "`sudo -s/-i` opens a root shell";
    WRAPPER_WATCH = "wrapper.watch", [Yellow], "`watch` runs a command repeatedly";
}

/// Rules whose findings mean the line's paths came from text that can change between the
/// ask and the run (an alias body in a configuration file, a sourced or run script):
/// [`crate::Shape::indirect`] is set when one fires.
pub const INDIRECT: &[Rule] = &[GIT_ALIAS, SHELL_SOURCE, SHELL_SCRIPT];

/// The registered rule an id belongs to: the entry of that id, else its family
/// (`wrapper.<program>`, `policy.<id>`); `None` for an id nobody registered.
pub fn lookup(id: &str) -> Option<&'static Rule> {
    if let Ok(i) = ALL.binary_search_by(|r| r.id.cmp(id)) {
        return ALL.get(i);
    }
    let family = match id.split_once('.') {
        Some(("wrapper", rest)) if !rest.is_empty() => &WRAPPER,
        Some(("policy", rest)) if !rest.is_empty() => &POLICY,
        _ => return None,
    };
    Some(family)
}

/// `docs/rules.md`: the registry as a Markdown table, one row per rule, sorted by id.
pub fn markdown() -> String {
    let mut s = String::from(
        "# Rule ids\n\n\
         Generated from `policy/src/rules.rs` (`tyba_policy::rules::markdown`); \
         `cargo test -p tyba-policy --test rules` fails when this file is stale \
         (regenerate with `TYBA_BLESS=1 cargo test -p tyba-policy --test rules`).\n\n\
         Every finding of `tyba classify` names one of these ids. The verdict of an action \
         is the worst colour of its findings (DESIGN.md §2).\n\n\
         | id | colour | what it finds |\n|---|---|---|\n",
    );
    for r in ALL {
        let colours: Vec<&str> = r.colours.iter().map(|c| c.as_str()).collect();
        s.push_str(&format!(
            "| `{}` | {} | {} |\n",
            r.id,
            colours.join(", "),
            r.doc.replace('|', "\\|")
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_is_sorted_and_has_no_duplicates() {
        for w in ALL.windows(2) {
            assert!(w[0].id < w[1].id, "{} before {}", w[0].id, w[1].id);
        }
    }

    #[test]
    fn lookup_finds_entries_and_families() {
        assert_eq!(lookup("git.push.protected"), Some(&GIT_PUSH_PROTECTED));
        assert_eq!(lookup("wrapper.nohup"), Some(&WRAPPER));
        assert_eq!(lookup("wrapper.env"), Some(&WRAPPER_ENV));
        assert_eq!(lookup("policy.terraform-destroy"), Some(&POLICY));
        assert_eq!(lookup("wrapper."), None);
        assert_eq!(lookup("no.such-rule"), None);
    }
}
