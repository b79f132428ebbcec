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

/// The port a URL scheme connects to when the URL names none (the IANA assignments the
/// clients use); `None` for a scheme tyba does not know.
pub(crate) fn default_port(scheme: &str) -> Option<u16> {
    let s = scheme.to_ascii_lowercase();
    // `git+ssh`, `ssh+git`, `svn+ssh`: the transport after the `+` (or before) decides.
    if s.split('+').any(|p| p == "ssh") {
        return Some(22);
    }
    Some(match s.as_str() {
        "http" | "ws" => 80,
        "https" | "wss" => 443,
        "git" => 9418,
        "sftp" | "scp" => 22,
        "ftp" => 21,
        "ftps" => 990,
        "rsync" => 873,
        "telnet" => 23,
        "gopher" => 70,
        "dict" => 2628,
        "ldap" => 389,
        "ldaps" => 636,
        "imap" => 143,
        "imaps" => 993,
        "pop3" => 110,
        "pop3s" => 995,
        "smtp" => 25,
        "smtps" => 465,
        "rtsp" => 554,
        "smb" | "smbs" => 445,
        "mqtt" => 1883,
        "mqtts" => 8883,
        "svn" => 3690,
        _ => return None,
    })
}

/// The destination of a URL-like string (`https://user@host:port/…`) as `host:port`
/// (`[v6]:port` for an IPv6 literal): the explicit port, else the scheme's default port
/// ([`default_port`]). An approval of the line covers exactly these destinations (the
/// supervisor lets a connection through only to the port named here), so a URL of an
/// unknown scheme without a port gives the bare host, which covers no connection. `None`
/// for a string that is not a URL or whose authority is malformed (an empty host, a port
/// that is not a number below 65536): such a destination is asked on its own.
pub(crate) fn host_of(s: &str) -> Option<String> {
    let (scheme, rest) = s.split_once("://")?;
    if scheme.is_empty()
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let hostport = authority.rsplit('@').next().unwrap_or("");
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (h, after) = v6.split_once(']')?;
        (format!("[{h}]"), after)
    } else {
        match hostport.split_once(':') {
            Some((h, _)) => (h.to_string(), &hostport[h.len()..]),
            None => (hostport.to_string(), ""),
        }
    };
    if host.is_empty() || host == "[]" {
        return None;
    }
    let port = match port.strip_prefix(':') {
        // `http://host:/` is the default port, as curl and browsers read it.
        Some("") => default_port(scheme),
        Some(p) if p.bytes().all(|b| b.is_ascii_digit()) => Some(p.parse::<u16>().ok()?),
        Some(_) => return None,
        None if port.is_empty() => default_port(scheme),
        None => return None,
    };
    Some(match port {
        Some(p) => format!("{host}:{p}"),
        None => host,
    })
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

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn a_url_names_its_host_and_the_port_it_connects_to() {
        let cases: &[(&str, Option<&str>)] = &[
            ("http://192.0.2.2/x", Some("192.0.2.2:80")),
            ("http://192.0.2.2:8000/x", Some("192.0.2.2:8000")),
            ("http://192.0.2.2:/x", Some("192.0.2.2:80")),
            ("https://user:pw@Example.com?q", Some("Example.com:443")),
            ("HTTPS://example.com#f", Some("example.com:443")),
            ("git://example.com/r", Some("example.com:9418")),
            ("ssh://git@example.com/r", Some("example.com:22")),
            ("git+ssh://example.com:2222/r", Some("example.com:2222")),
            ("ftp://example.com", Some("example.com:21")),
            ("http://[::1]/x", Some("[::1]:80")),
            ("http://[2001:db8::1]:8080", Some("[2001:db8::1]:8080")),
            ("weird://example.com/", Some("example.com")),
            ("weird://example.com:7/", Some("example.com:7")),
            ("http://example.com:99999/", None),
            ("http://example.com:8o/", None),
            ("http://:80/", None),
            ("http://[]:80/", None),
            ("http://[::1/", None),
            ("http://a:1:2/", None),
            ("example.com:80", None),
            ("/dev/tcp/x", None),
            ("://example.com", None),
        ];
        for (url, want) in cases {
            assert_eq!(host_of(url).as_deref(), *want, "{url}");
        }
    }
}
