//! Hosts named by network clients' operands rather than URLs (`ssh git@github.com`,
//! `scp f host:dir`, `nc example.com 80`, `git clone git@github.com:o/r.git`), as `host:port`.
//!
//! These go to `Classification::hosts`, which an approval of the line covers (docs/sandbox.md,
//! "one ask per intent"): the approved `ssh host` then connects to `host:22` without a second
//! ask. Only what the line itself says is read: a port or host that a configuration file
//! changes (`~/.ssh/config`'s `HostName`/`Port`, rsync's `-e 'ssh -p N'`) is not followed, so
//! the connection the client really makes is then asked, never covered by a guess. A line
//! with an operand tyba cannot know (`ssh $HOST`) names no host from its operands.

/// `host:port` of the operands of `program` (`args` its words after the name, all known).
/// URL operands are read by [`super::host_of`], not here.
pub(crate) fn operand_hosts(program: &str, args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    match program {
        // ssh(1): `ssh [OPTIONS] DESTINATION [COMMAND]`; `-p PORT`, `-o Port=N`, `-J JUMPS`.
        "ssh" | "slogin" | "autossh" => {
            let values = if program == "autossh" {
                "BbcDEeFIiJLlmOoPpQRSWwM"
            } else {
                "BbcDEeFIiJLlmOoPpQRSWw"
            };
            let (opts, operands) = getopt(args, values, true);
            let port = ssh_port(&opts, 'p');
            jumps(&opts, &mut out);
            if let Some(h) = operands.first().and_then(|d| user_host(d)) {
                push(&mut out, &h, port);
            }
        }
        // scp(1): every `[user@]host:path` operand; `-P PORT`.
        "scp" => {
            let (opts, operands) = getopt(args, "cDFiJloPSX", false);
            let port = ssh_port(&opts, 'P');
            jumps(&opts, &mut out);
            for o in &operands {
                if let Some(h) = ssh_like(o) {
                    push(&mut out, &h, port);
                }
            }
        }
        // sftp(1): `sftp [OPTIONS] DESTINATION` (`[user@]host[:path]`); `-P PORT`.
        "sftp" => {
            let (opts, operands) = getopt(args, "BbcDFiJloPRsS", true);
            let port = ssh_port(&opts, 'P');
            jumps(&opts, &mut out);
            if let Some(d) = operands.first() {
                let host = ssh_like(d).or_else(|| user_host(d));
                if let Some(h) = host {
                    push(&mut out, &h, port);
                }
            }
        }
        // rsync(1): `host:path` over ssh (22), `host::module` to a daemon (873).
        "rsync" => {
            let (_, operands) = getopt(args, "eBfTM", false);
            for o in &operands {
                if let Some((h, rest)) = o.split_once("::") {
                    if !rest.starts_with(':') {
                        if let Some(h) = user_host(h) {
                            push(&mut out, &h, Some(873));
                        }
                    }
                } else if let Some(h) = ssh_like(o) {
                    push(&mut out, &h, Some(22));
                }
            }
        }
        // nc(1) (OpenBSD's options; ncat and traditional nc read the same two operands):
        // `nc [OPTIONS] HOST PORT`. Not with a proxy (`-x`, `-X`: the connection goes to the
        // proxy), a listener (`-l`) or a unix socket (`-U`), or a port range.
        "nc" | "ncat" | "netcat" | "nc.openbsd" | "nc.traditional" => {
            let (opts, operands) = getopt(args, "IiMmOPpqsTVWwXx", false);
            let other = opts
                .iter()
                .any(|(c, _)| matches!(c, 'l' | 'U' | 'x' | 'X' | '-'));
            if let ([host, port], false) = (operands.as_slice(), other) {
                if let (Some(h), Ok(p)) = (user_host(host), port.parse::<u16>()) {
                    push(&mut out, &h, Some(p));
                }
            }
        }
        // telnet(1): `telnet [OPTIONS] HOST [PORT]` (23).
        "telnet" => {
            let (_, operands) = getopt(args, "belnXk", false);
            match operands.as_slice() {
                [host] => {
                    if let Some(h) = user_host(host) {
                        push(&mut out, &h, Some(23));
                    }
                }
                [host, port] => {
                    if let (Some(h), Ok(p)) = (user_host(host), port.parse::<u16>()) {
                        push(&mut out, &h, Some(p));
                    }
                }
                _ => {}
            }
        }
        _ => {}
    }
    out
}

/// The repository operand of `git SUB ARGS` for clone, fetch, pull, push and ls-remote: the
/// first operand, when every option before it is a flag this knows to take no value or is
/// written `--name=value` (any other option may take the next word as its value, which
/// would then be read as the repository: `-o evil.example:x`); `None` otherwise, and then no
/// host is covered and the connection is asked.
pub(crate) fn git_repository<'a>(sub: &str, args: &'a [String]) -> Option<&'a str> {
    const FLAGS: &[&str] = &[
        "-q",
        "--quiet",
        "-v",
        "--verbose",
        "--progress",
        "--no-progress",
        "--bare",
        "--mirror",
        "--recursive",
        "--recurse-submodules",
        "--no-recurse-submodules",
        "--single-branch",
        "--no-single-branch",
        "--no-tags",
        "--tags",
        "--all",
        "--prune",
        "-p",
        "--force",
        "-f",
        "--dry-run",
        "-n",
        "--set-upstream",
        "-u",
        "--heads",
        "--refs",
        "--no-checkout",
        "--shared",
        "-s",
        "--local",
        "-l",
        "--no-hardlinks",
    ];
    if !matches!(sub, "clone" | "fetch" | "pull" | "push" | "ls-remote") {
        return None;
    }
    for a in args {
        if a == "--" {
            return None;
        }
        if a.starts_with('-') {
            let known = FLAGS.contains(&a.as_str()) || (a.starts_with("--") && a.contains('='));
            if !known {
                return None;
            }
            continue;
        }
        return Some(a.as_str());
    }
    None
}

/// The host of a git repository operand in scp-like syntax, `[user@]host:path` (port 22):
/// git's rule (connect.c `url_is_local_not_ssh`) is a `:` with no `/` before it; a URL or a
/// local path is not one.
pub(crate) fn git_ssh_host(repo: &str) -> Option<String> {
    if repo.contains("://") {
        return None;
    }
    ssh_like(repo).map(|h| format!("{h}:22"))
}

/// Options (`(letter, value)`; a long option is `('-', text)`) and operands of a getopt-style
/// command line whose options in `values` take a value (in the same word or the next). With
/// `stop_at_operand`, the first operand ends the options (ssh: the rest is the remote
/// command).
fn getopt(
    args: &[String],
    values: &str,
    stop_at_operand: bool,
) -> (Vec<(char, String)>, Vec<String>) {
    let mut opts = Vec::new();
    let mut operands = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            operands.extend(it.by_ref().cloned());
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            opts.push(('-', long.to_string()));
            continue;
        }
        match a.strip_prefix('-') {
            Some(group) if !group.is_empty() => {
                for (i, c) in group.char_indices() {
                    if values.contains(c) {
                        let rest = &group[i + c.len_utf8()..];
                        let v = if rest.is_empty() {
                            it.next().cloned().unwrap_or_default()
                        } else {
                            rest.to_string()
                        };
                        opts.push((c, v));
                        break;
                    }
                    opts.push((c, String::new()));
                }
            }
            _ => {
                operands.push(a.clone());
                if stop_at_operand {
                    break;
                }
            }
        }
    }
    (opts, operands)
}

/// The port an ssh-family line names: its port option (`-p`/`-P`), else `-o Port=N` (or
/// `Port N`), else 22. The last one given wins, as in ssh.
fn ssh_port(opts: &[(char, String)], letter: char) -> Option<u16> {
    let mut port = 22;
    for (c, v) in opts {
        if *c == letter {
            port = v.parse().ok()?;
        } else if *c == 'o' {
            let (k, val) = v
                .split_once('=')
                .or_else(|| v.split_once(char::is_whitespace))
                .unwrap_or((v.as_str(), ""));
            if k.trim().eq_ignore_ascii_case("port") {
                port = val.trim().parse().ok()?;
            }
        }
    }
    Some(port)
}

/// `-J` jump hosts (`[user@]host[:port]`, comma-separated, or `ssh://` URLs): the connection
/// goes to the first of them.
fn jumps(opts: &[(char, String)], out: &mut Vec<String>) {
    for (_, v) in opts.iter().filter(|(c, _)| *c == 'J') {
        for j in v.split(',') {
            if let Some(h) = super::host_of(j) {
                if !out.contains(&h) {
                    out.push(h);
                }
                continue;
            }
            let (host, port) = match j.rsplit_once(':') {
                Some((h, p)) if !h.contains(':') => match p.parse::<u16>() {
                    Ok(p) => (h, Some(p)),
                    Err(_) => continue,
                },
                _ => (j, Some(22)),
            };
            if let Some(h) = user_host(host) {
                push(out, &h, port);
            }
        }
    }
}

/// The host of `[user@]host:path` (a `:` with no `/` before it; `[v6]:path` too).
fn ssh_like(s: &str) -> Option<String> {
    if s.starts_with('/') || s.starts_with('.') || s.starts_with('-') {
        return None;
    }
    let after_user = s.rsplit_once('@').map_or(s, |(_, h)| h);
    let user_len = s.len() - after_user.len();
    let host = if let Some(v6) = after_user.strip_prefix('[') {
        let (h, rest) = v6.split_once(']')?;
        if !rest.starts_with(':') {
            return None;
        }
        format!("[{h}]")
    } else {
        let colon = after_user.find(':')?;
        if s[..user_len + colon].contains('/') {
            return None;
        }
        after_user[..colon].to_string()
    };
    user_host(&host)
}

/// The host of `[user@]host` when it is a plausible host name or address literal.
fn user_host(s: &str) -> Option<String> {
    let h = s.rsplit_once('@').map_or(s, |(_, h)| h);
    let ok = if let Some(v6) = h.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
        !v6.is_empty()
            && v6
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
    } else {
        !h.is_empty()
            && !h.starts_with(['-', '.'])
            && h.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    };
    ok.then(|| h.to_string())
}

fn push(out: &mut Vec<String>, host: &str, port: Option<u16>) {
    let Some(p) = port else { return };
    let h = format!("{host}:{p}");
    if !out.contains(&h) {
        out.push(h);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn operands_name_their_hosts_with_the_port_the_line_gives() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            ("ssh", &["git@github.com"], &["github.com:22"]),
            (
                "ssh",
                &["-p", "2222", "me@h.example", "ls", "x:y"],
                &["h.example:2222"],
            ),
            ("ssh", &["-p2222", "h"], &["h:2222"]),
            ("ssh", &["-vp", "2200", "h"], &["h:2200"]),
            ("ssh", &["-o", "Port=2022", "h"], &["h:2022"]),
            ("ssh", &["-oPort 2023", "h"], &["h:2023"]),
            ("ssh", &["-i", "key", "-l", "me", "h"], &["h:22"]),
            (
                "ssh",
                &["-J", "jump:2201,u@j2", "h"],
                &["jump:2201", "j2:22", "h:22"],
            ),
            ("ssh", &["-p", "x", "h"], &[]),
            ("ssh", &["ssh://h:2222"], &[]),
            ("scp", &["f", "me@h:dir/"], &["h:22"]),
            ("scp", &["-P", "2222", "h:a", "./b:c", "/x:y"], &["h:2222"]),
            ("scp", &["dir/a:b", "h"], &[]),
            ("scp", &["f", "[::1]:dir"], &["[::1]:22"]),
            ("sftp", &["me@h"], &["h:22"]),
            ("sftp", &["-P", "2022", "h:dir"], &["h:2022"]),
            ("rsync", &["-a", ".", "h:dir"], &["h:22"]),
            ("rsync", &["-av", "h::mod/x", "."], &["h:873"]),
            ("rsync", &["-e", "ssh -p 2", "a", "u@h:d"], &["h:22"]),
            ("nc", &["example.com", "80"], &["example.com:80"]),
            ("nc", &["-w", "3", "10.0.0.1", "443"], &["10.0.0.1:443"]),
            ("nc", &["-q", "2", "-w5", "h", "443"], &["h:443"]),
            ("nc", &["-l", "8080"], &[]),
            ("nc", &["-x", "proxy:1080", "h", "80"], &[]),
            ("nc", &["h", "80-90"], &[]),
            ("telnet", &["h"], &["h:23"]),
            ("telnet", &["h", "25"], &["h:25"]),
            ("ssh", &["-bad;host"], &[]),
            ("ssh", &["h;rm"], &[]),
        ];
        for (p, args, want) in cases {
            assert_eq!(operand_hosts(p, &v(args)), v(want), "{p} {args:?}");
        }
    }

    #[test]
    fn the_git_repository_operand_is_read_only_after_options_known_to_take_no_value() {
        let cases: &[(&str, &[&str], Option<&str>)] = &[
            ("clone", &["git@h:o/r", "dir"], Some("git@h:o/r")),
            (
                "clone",
                &["-q", "--depth=1", "git@h:o/r"],
                Some("git@h:o/r"),
            ),
            (
                "clone",
                &["https://h/o/r", "evil.example:x"],
                Some("https://h/o/r"),
            ),
            ("clone", &["--depth", "1", "git@h:o/r"], None),
            ("clone", &["-o", "evil.example:x", "https://h/r"], None),
            (
                "clone",
                &["--reference", "evil.example:x", "https://h/r"],
                None,
            ),
            (
                "fetch",
                &["--negotiation-tip", "evil.example:x", "origin"],
                None,
            ),
            ("push", &["-o", "evil.example:x", "origin", "main"], None),
            ("push", &["origin", "main:main"], Some("origin")),
            ("status", &["h:x"], None),
        ];
        for (sub, args, want) in cases {
            assert_eq!(git_repository(sub, &v(args)), *want, "{sub} {args:?}");
        }
    }

    #[test]
    fn git_scp_like_repositories_are_ssh_on_port_22() {
        assert_eq!(
            git_ssh_host("git@github.com:o/r.git").as_deref(),
            Some("github.com:22")
        );
        assert_eq!(git_ssh_host("h:r").as_deref(), Some("h:22"));
        for local in ["./a:b", "/srv/r.git", "dir/x:y", "https://h/r", "r"] {
            assert_eq!(git_ssh_host(local), None, "{local}");
        }
    }
}
