//! Names the analyser knows that are not programs of the registry: variables that make
//! programs run code, bash's builtins, the system directories whose programs are matched by
//! name (DESIGN.md §2a "Words and paths", "Variables").

use super::*;

/// Variables that make programs run code (DESIGN.md §2a), red when assigned in any form.
pub(super) const EXEC_VARS: &[&str] = &[
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "PAGER",
    "MANPAGER",
    "GIT_PAGER",
    "EDITOR",
    "VISUAL",
    "GIT_EDITOR",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_EXTERNAL_DIFF",
    "GIT_EXEC_PATH",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "PYTHONSTARTUP",
    "NODE_OPTIONS",
    "PERL5OPT",
    "RIPGREP_CONFIG_PATH",
    "LESSOPEN",
    "LESSCLOSE",
    "GIT_SEQUENCE_EDITOR",
    "GIT_PROXY_COMMAND",
    "RUBYOPT",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "PS4",
];

/// Whether assigning `name` makes programs run code (DESIGN.md §2a's list, `GIT_CONFIG*`,
/// exported bash functions `BASH_FUNC_*`): red in any form of assignment.
pub(crate) fn is_exec_var(name: &str) -> bool {
    EXEC_VARS.contains(&name) || name.starts_with("GIT_CONFIG") || name.starts_with("BASH_FUNC_")
}

/// bash's builtin commands (bash(1) "SHELL BUILTIN COMMANDS"): what `builtin NAME` may run.
pub(crate) const SHELL_BUILTINS: &[&str] = &[
    ".",
    ":",
    "[",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "cd",
    "command",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "declare",
    "dirs",
    "disown",
    "echo",
    "enable",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "fc",
    "fg",
    "getopts",
    "hash",
    "help",
    "history",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "wait",
];

/// Extracts the host of a URL-like string (`https://host:port/…`, `user@host:path`).
pub(crate) fn host_of(s: &str) -> Option<String> {
    if let Some((_, rest)) = s.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let host = authority.rsplit('@').next().unwrap_or("");
        if !host.is_empty() {
            return Some(host.to_string());
        }
    }
    None
}

/// System directories whose programs are matched by name (DESIGN.md §2a "Words and paths").
pub(crate) const SYSTEM_BIN_DIRS: &[&str] =
    &["/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"];

/// Peels `/proc/self/root`, `/proc/thread-self/root`, `/proc/<pid>/root` and folds the path;
/// returns the program name when the result lies directly in a system bin directory.
pub(super) fn system_program(path: &str) -> Option<String> {
    // Only an absolute path names a system program: `bin/cat` is a file in the worktree.
    if !path.starts_with('/') {
        return None;
    }
    let mut p = crate::analysis::paths::lexical(Path::new("/"), path);
    loop {
        let s = p.to_string_lossy().into_owned();
        let rest = ["/proc/self/root", "/proc/thread-self/root"]
            .iter()
            .find_map(|pre| s.strip_prefix(pre).map(str::to_string))
            .or_else(|| {
                let r = s.strip_prefix("/proc/")?;
                let (pid, tail) = r.split_once('/')?;
                (pid.bytes().all(|b| b.is_ascii_digit()) && !pid.is_empty())
                    .then(|| tail.strip_prefix("root").map(str::to_string))?
            });
        match rest {
            Some(r) if r.is_empty() || r.starts_with('/') => {
                p = PathBuf::from(if r.is_empty() { "/".to_string() } else { r })
            }
            _ => break,
        }
    }
    // The directory is resolved physically (`/usr/bin/X11` is a link to `.` on Debian), the
    // program name is kept (`/bin/sh` may be a link to `dash`, and is still `sh`).
    let parent_lex = p.parent()?;
    let parent_phys =
        crate::analysis::paths::resolve(Path::new("/"), &parent_lex.to_string_lossy());
    let parent = parent_lex.to_string_lossy().into_owned();
    if SYSTEM_BIN_DIRS.contains(&parent.as_str())
        || SYSTEM_BIN_DIRS
            .iter()
            .any(|d| crate::analysis::paths::resolve(Path::new("/"), d) == parent_phys)
    {
        p.file_name().map(|n| n.to_string_lossy().into_owned())
    } else {
        None
    }
}
