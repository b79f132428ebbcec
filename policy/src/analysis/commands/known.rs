//! Names the analyser knows that are not programs of the registry: variables that make
//! programs run code, bash's builtins, the system directories whose programs are matched by
//! name (DESIGN.md §2a "Words and paths", "Variables").

use super::*;

/// Variables that make programs run code (DESIGN.md §2a, "and the like"), red when assigned
/// in any form. Each makes a program load or run code from a place, module or command the
/// value names, before or instead of what the command line says (the manual of each reader):
///
/// - shells: `BASH_ENV`, `ENV` (a file sourced first, bash(1)/sh(1)), `PROMPT_COMMAND`,
///   `PS4` (run or expanded by bash), `FPATH` (zsh/ksh autoloaded functions), `NULLCMD`,
///   `READNULLCMD` (zsh runs them for a redirection with no command);
/// - glibc: every `LD_*` of the dynamic loader ([`is_exec_var`], ld.so(8): `LD_PRELOAD`,
///   `LD_LIBRARY_PATH`, `LD_AUDIT`, `LD_ORIGIN_PATH`…, all cleared for set-uid programs),
///   `GCONV_PATH` (`iconv_open(3)` loads the gconv modules found there: any program that
///   converts a character set, `git log --encoding=X` included), `GETCONF_DIR` (getconf(1)
///   runs the programs found there);
/// - OpenSSL: `OPENSSL_CONF`, `OPENSSL_CONF_INCLUDE` (a configuration that loads engines or
///   providers by path, config(5ssl)), `OPENSSL_ENGINES`, `OPENSSL_MODULES` (where they are
///   loaded from);
/// - pagers, editors, helpers git and others run (git(1) ENVIRONMENT): `PAGER`, `MANPAGER`,
///   `GIT_PAGER`, `EDITOR`, `VISUAL`, `GIT_EDITOR`, `GIT_SEQUENCE_EDITOR`, `GIT_SSH`,
///   `GIT_SSH_COMMAND`, `GIT_EXTERNAL_DIFF`, `GIT_EXEC_PATH`, `GIT_ASKPASS`, `SSH_ASKPASS`,
///   `SUDO_ASKPASS`, `GIT_PROXY_COMMAND`, `BROWSER`, `LESSOPEN`, `LESSCLOSE`, and
///   `GIT_TEMPLATE_DIR` (hooks copied into every repository `git init` makes);
/// - editors' own start-up code: `VIMINIT`, `GVIMINIT`, `EXINIT` (commands vim runs),
///   `VIM`, `VIMRUNTIME` (where vim reads its vimrc and plugins), `EMACSLOADPATH`;
/// - Python: `PYTHONSTARTUP`, `PYTHONPATH`, `PYTHONHOME` (where modules, `site` and
///   `sitecustomize` are imported from), `PYTHONUSERBASE` (its `.pth` files run their
///   `import` lines), `PYTHONPYCACHEPREFIX` (compiled bytecode is read from there),
///   `PYTHONWARNINGS` (a dotted warning category is imported), `PYTHONBREAKPOINT` (the
///   module of the hook is imported);
/// - Perl: `PERL5OPT` (`-M` modules), `PERL5LIB`, `PERLLIB`, `PERL5DB`; Ruby: `RUBYOPT`
///   (`-r`), `RUBYLIB`, `GEM_PATH`, `GEM_HOME`; Node.js: `NODE_OPTIONS` (`--require`),
///   `NODE_PATH`, `NODE_REPL_EXTERNAL_MODULE`, `NODE_COMPILE_CACHE` (compiled code read
///   back); the JVM: `JAVA_TOOL_OPTIONS`, `_JAVA_OPTIONS`, `JDK_JAVA_OPTIONS`
///   (`-javaagent`), `CLASSPATH`; .NET: `DOTNET_STARTUP_HOOKS`, `CORECLR_PROFILER_PATH*`;
///   Lua: `LUA_INIT*`, `LUA_PATH*`, `LUA_CPATH*`; PHP: `PHPRC`, `PHP_INI_SCAN_DIR`
///   (`auto_prepend_file`); R: `R_PROFILE`, `R_PROFILE_USER`; Erlang: `ERL_AFLAGS`,
///   `ERL_ZFLAGS`, `ERL_FLAGS` (`-eval`); `RIPGREP_CONFIG_PATH` (`--pre`).
///
/// Not listed, on purpose: variables that only name data (`LOCPATH`, `NLSPATH`, `TZDIR`,
/// `TERMINFO`), files written (`MALLOC_TRACE`, `LD_DEBUG_OUTPUT` is covered by `LD_*`
/// anyway), or build settings (`CC`, `RUSTC_WRAPPER`, `GOFLAGS`: a build runs code of the
/// worktree already and is yellow).
pub(super) const EXEC_VARS: &[&str] = &[
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "PS4",
    "FPATH",
    "NULLCMD",
    "READNULLCMD",
    "GCONV_PATH",
    "GETCONF_DIR",
    "OPENSSL_CONF",
    "OPENSSL_CONF_INCLUDE",
    "OPENSSL_ENGINES",
    "OPENSSL_MODULES",
    "PAGER",
    "MANPAGER",
    "GIT_PAGER",
    "EDITOR",
    "VISUAL",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_EXTERNAL_DIFF",
    "GIT_EXEC_PATH",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "SUDO_ASKPASS",
    "GIT_PROXY_COMMAND",
    "GIT_TEMPLATE_DIR",
    "BROWSER",
    "LESSOPEN",
    "LESSCLOSE",
    "VIMINIT",
    "GVIMINIT",
    "EXINIT",
    "VIM",
    "VIMRUNTIME",
    "EMACSLOADPATH",
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONUSERBASE",
    "PYTHONPYCACHEPREFIX",
    "PYTHONWARNINGS",
    "PYTHONBREAKPOINT",
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "PERL5DB",
    "RUBYOPT",
    "RUBYLIB",
    "GEM_PATH",
    "GEM_HOME",
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_REPL_EXTERNAL_MODULE",
    "NODE_COMPILE_CACHE",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    "DOTNET_STARTUP_HOOKS",
    "PHPRC",
    "PHP_INI_SCAN_DIR",
    "R_PROFILE",
    "R_PROFILE_USER",
    "ERL_AFLAGS",
    "ERL_ZFLAGS",
    "ERL_FLAGS",
    "RIPGREP_CONFIG_PATH",
];

/// Prefixes of variables that make programs run code: the dynamic loader's `LD_*` (ld.so(8);
/// the loader reads every one, and glibc's list grows: sudo and shadow clear them all the
/// same), git's `GIT_CONFIG*` (configuration given in the environment), exported bash
/// functions `BASH_FUNC_*`, .NET's `CORECLR_PROFILER_PATH*`, Lua's versioned `LUA_INIT*`,
/// `LUA_PATH*`, `LUA_CPATH*` (lua(1)).
const EXEC_VAR_PREFIXES: &[&str] = &[
    "LD_",
    "GIT_CONFIG",
    "BASH_FUNC_",
    "CORECLR_PROFILER_PATH",
    "LUA_INIT",
    "LUA_PATH",
    "LUA_CPATH",
];

/// Whether assigning `name` makes programs run code ([`EXEC_VARS`], [`EXEC_VAR_PREFIXES`]):
/// red in any form of assignment.
pub(crate) fn is_exec_var(name: &str) -> bool {
    EXEC_VARS.contains(&name) || EXEC_VAR_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Whether assigning `value` to `name` can make a program run code: [`is_exec_var`], except
/// for a known value of the two variables that import code only through a dotted module
/// path (Python's `warnings._getcategory` and `sys.breakpointhook` look a name without a
/// `.` up in `builtins`): `PYTHONWARNINGS` whose filters' categories (third `:` field of
/// each `,`-separated filter) hold no `.`, `PYTHONBREAKPOINT` with no `.`.
/// `None`: the value is not known.
pub(crate) fn is_exec_assignment(name: &str, value: Option<&str>) -> bool {
    if !is_exec_var(name) {
        return false;
    }
    match (name, value) {
        ("PYTHONWARNINGS", Some(v)) => v
            .split(',')
            .any(|f| f.split(':').nth(2).is_some_and(|c| c.contains('.'))),
        ("PYTHONBREAKPOINT", Some(v)) => v.contains('.'),
        _ => true,
    }
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
