//! The vault's paths, network clients, servers, awk, archivers and package tools
//! (DESIGN.md §2, §2a).

use super::*;

impl Analyzer<'_> {
    /// The vault's fixed denials for whole programs (DESIGN.md §2 "blocked"): file-system and
    /// partition-table makers whatever the target, and stopping or restarting the machine.
    pub(crate) fn vault(&mut self, _st: &State, inv: &Invocation<'_>) -> bool {
        let p = inv.program.as_str();
        let known = || inv.args.iter().filter_map(Field::known);
        let (rule, reason) = match p {
            _ if p.starts_with("mkfs") => ("vault.disk", "destroys file systems"),
            "mke2fs" | "mkswap" | "mkdosfs" | "mkntfs" | "mkexfatfs" | "wipefs" | "blkdiscard"
            | "sgdisk" | "sfdisk" => ("vault.disk", "destroys file systems or partition tables"),
            // Interactive partition editors only with a target or a script.
            "fdisk" | "parted" if known().any(|a| !a.starts_with('-') || a == "--script") => {
                ("vault.disk", "rewrites partition tables")
            }
            "shutdown" | "reboot" | "poweroff" | "halt" | "kexec" => {
                ("vault.power", "stops the machine")
            }
            "systemctl" | "loginctl"
                if known().any(|a| {
                    matches!(
                        a.trim_end_matches(".target"),
                        "reboot"
                            | "poweroff"
                            | "halt"
                            | "kexec"
                            | "rescue"
                            | "emergency"
                            | "shutdown"
                            | "soft-reboot"
                            | "suspend"
                            | "hibernate"
                    )
                }) =>
            {
                ("vault.power", "stops or restarts the machine")
            }
            "init" | "telinit" if known().any(|a| a == "0" || a == "6") => {
                ("vault.power", "changes to a halt or reboot runlevel")
            }
            _ => return false,
        };
        self.add(Verdict::Blocked, rule, format!("`{p}` {reason}"));
        true
    }

    /// Network clients (red), with the hosts they name.
    pub(crate) fn network(&mut self, st: &State, inv: &Invocation<'_>) {
        let p = inv.program.as_str();
        for a in inv.args {
            if let Some(t) = a.known() {
                if let Some(h) = host_of(&t) {
                    if !self.out.hosts.contains(&h) {
                        self.out.hosts.push(h);
                    }
                }
            }
        }
        // Hosts of operands (`ssh host`, `scp f host:`, `nc host 80`), when every word is
        // known (a word tyba cannot know would shift the operands).
        let known: Option<Vec<String>> = inv.args.iter().map(Field::known).collect();
        if let Some(words) = known {
            for h in super::net_hosts::operand_hosts(p, &words) {
                if !self.out.hosts.contains(&h) {
                    self.out.hosts.push(h);
                }
            }
        }
        if matches!(p, "nc" | "ncat" | "netcat")
            && inv.args.iter().any(|a| {
                a.known()
                    .is_some_and(|t| t.starts_with('-') && !t.starts_with("--") && t.contains('l'))
            })
        {
            self.add(
                Verdict::Red,
                "net.server",
                format!("`{p} -l` listens for connections"),
            );
        }
        self.add(
            Verdict::Red,
            "net.client",
            format!("`{p}` uses the network"),
        );
        // Local operands (`scp notes.txt host:`, `curl -o out`) are paths too.
        for a in inv.args {
            if let Some(t) = a.known() {
                if t.contains("://")
                    || (t.contains(':') && !t.starts_with('/') && !t.starts_with('.'))
                    || t.contains('@')
                {
                    continue;
                }
            }
            for c in path_candidates(a) {
                self.path_field(st, &c, Access::Any);
            }
        }
    }

    pub(crate) fn is_fetch_runner(&self, p: &str, args: &[Field]) -> bool {
        let first = args
            .iter()
            .find_map(|a| a.known().filter(|t| !t.starts_with('-')));
        match (p, first.as_deref()) {
            ("pnpm" | "yarn", Some("dlx")) => true,
            ("npm", Some("exec" | "x")) => true,
            ("bun", Some("x")) => true,
            ("pipx", Some("run")) => true,
            ("npm" | "yarn" | "pnpm" | "bun", Some("create")) => true,
            ("npm", Some("init")) => {
                args.iter()
                    .filter_map(Field::known)
                    .filter(|t| !t.starts_with('-'))
                    .count()
                    > 1
            }
            ("gem", Some("exec")) => true,
            ("deno", Some("run" | "x")) => args
                .iter()
                .filter_map(Field::known)
                .any(|t| t.starts_with("npm:") || t.starts_with("jsr:") || t.contains("://")),
            ("corepack", _) => args.iter().filter_map(Field::known).any(|t| t == "dlx"),
            ("nix", Some("run" | "shell" | "develop")) => true,
            ("nix-shell", _) => args
                .iter()
                .any(|a| a.known().is_some_and(|t| t == "-p" || t == "--packages")),
            ("uv", Some("tool")) => args.iter().any(|a| a.known().as_deref() == Some("run")),
            ("go", Some("run")) => args
                .iter()
                .any(|a| a.known().is_some_and(|t| t.contains('@'))),
            _ => false,
        }
    }

    /// Servers and listeners are network tools.
    pub(crate) fn server(&mut self, p: &str, args: &[Field]) -> bool {
        let known: Vec<String> = if p == "busybox" {
            args.iter().filter_map(Field::known).collect()
        } else {
            Vec::new()
        };
        let hit = registry::walk(p) == Some(Walk::Server)
            || p == "busybox" && known.first().is_some_and(|a| a == "httpd");
        if hit {
            self.add(
                Verdict::Red,
                "net.server",
                format!("`{p}` serves on the network"),
            );
        }
        hit
    }

    /// awk: yellow (it runs programs); code built at run time is red.
    pub(crate) fn awk(&mut self, st: &State, inv: &Invocation<'_>) {
        let p = inv.program.as_str();
        self.add(
            Verdict::Yellow,
            "cmd.awk",
            format!("`{p}` programs can run commands and write files"),
        );
        // The entry's table: which options take a value (`registry/changes.rs`).
        let spec = registry::lookup(p).map_or(&[][..], |e| e.options);
        let mut have_prog = false;
        let mut operands = Vec::new();
        for t in parse_opts(inv.args, spec) {
            match t {
                Tok::Opt { name, value } => {
                    if name == "-f"
                        || names(&name, "--file")
                        || name == "-i"
                        || names(&name, "--include")
                    {
                        have_prog = true;
                        if let Some(v) = value {
                            self.path_field(st, &v, Access::Read);
                        }
                    }
                    if names(&name, "--source") {
                        have_prog = true;
                    }
                }
                Tok::DynamicOpt => {}
                Tok::Operand(f) => operands.push(f),
            }
        }
        let mut it = operands.into_iter();
        if !have_prog {
            if let Some(prog) = it.next() {
                if !prog.is_known() {
                    self.opaque(p, "a program text that cannot be known");
                }
            }
        }
        for f in it {
            if f.known()
                .is_some_and(|t| t.split_once('=').is_some_and(|(n, _)| is_identifier(n)))
            {
                continue;
            }
            self.path_field(st, &f, Access::Read);
        }
    }

    /// Archivers: program-valued options are red.
    pub(crate) fn archiver(&mut self, st: &State, inv: &Invocation<'_>) {
        let p = inv.program.as_str();
        self.unlisted(p);
        for (i, a) in inv.args.iter().enumerate() {
            let Some(t) = a.known() else { continue };
            // Long options by any prefix getopt_long takes (`--use-compress=…`, `--to-com=…`:
            // review 21's r21-02), their values attached or not.
            let long = t
                .strip_prefix("--")
                .map(|l| l.split('=').next().unwrap_or(l));
            let runs_long = long.is_some_and(|l| {
                l.len() >= 2
                    && [
                        "to-command",
                        "use-compress-program",
                        "checkpoint-action",
                        "info-script",
                        "new-volume-script",
                        "rsh-command",
                        "unzip-command",
                        "rmt-command",
                    ]
                    .iter()
                    .any(|o| o.starts_with(l))
            });
            // Short ones in a cluster, their values attached or not (`-I./x`, `-cIf`), and in
            // tar's old spelling (`tar cIf ./x a.tar`); zip's `-TT` with or without `=`.
            let cluster = t.starts_with('-') && !t.starts_with("--")
                || matches!(p, "tar" | "bsdtar") && i == 0 && !t.starts_with('-');
            let runs_short = cluster
                && (matches!(p, "tar" | "bsdtar") && (t.contains('I') || t.contains('F'))
                    || p == "zip" && t.starts_with("-TT"));
            if runs_long || runs_short {
                self.add(
                    Verdict::Red,
                    "cmd.program-option",
                    format!("`{p} {t}` runs a program"),
                );
            }
        }
        // The archive a line makes or adds to is written: tar's `-f` in a create mode, zip's
        // archive (saved through its temporary copy, as zip does).
        if let Some(archive) = archive_written(p, inv.args) {
            if p == "zip" {
                self.saved_field(st, &archive);
            } else {
                self.path_field(st, &archive, Access::Write);
            }
        }
        self.generic_paths(st, inv.args, Access::Any);
    }

    /// `gzip`, `bzip2`, `xz`, `zstd` and their `un…` forms: unlisted (yellow). Each file
    /// operand is compressed to `FILE.gz` (`.bz2`, `.xz`, `.zst`) or, decompressing, to the
    /// name without that suffix: the new file is written, and the operand removed unless kept
    /// (`-k`; zstd keeps it unless `--rm`); nothing with `-c`, `-t` or `-l`. A spelling this does
    /// not model (`-S`, `-r`, `-o`, a word that cannot be known) names the operands only.
    pub(crate) fn compressor(&mut self, st: &State, inv: &Invocation<'_>) {
        let p = inv.program.as_str();
        self.unlisted(p);
        let (suffix, mut keep) = match p {
            "gzip" | "gunzip" => (".gz", false),
            "bzip2" | "bunzip2" => (".bz2", false),
            "xz" | "unxz" => (".xz", false),
            _ => (".zst", true),
        };
        let mut decompress = matches!(p, "gunzip" | "bunzip2" | "unxz" | "unzstd");
        let mut writes = true;
        let mut modelled = true;
        let mut only_operands = false;
        let mut files = Vec::new();
        for a in inv.args {
            let Some(t) = a.known() else {
                modelled = false;
                continue;
            };
            if only_operands || !t.starts_with('-') || t == "-" {
                files.push(a);
            } else if t == "--" {
                only_operands = true;
            } else if let Some(long) = t.strip_prefix("--") {
                match long {
                    "keep" => keep = true,
                    "rm" => keep = false,
                    "decompress" | "uncompress" => decompress = true,
                    "stdout" | "to-stdout" | "test" | "list" => writes = false,
                    "force" | "quiet" | "verbose" | "no-name" | "name" | "best" | "fast" => {}
                    _ => modelled = false,
                }
            } else {
                for c in t[1..].chars() {
                    match c {
                        'k' => keep = true,
                        'd' => decompress = true,
                        'c' | 't' | 'l' => writes = false,
                        'f' | 'q' | 'v' | 'n' | 'N' | '0'..='9' => {}
                        _ => modelled = false,
                    }
                }
            }
        }
        if modelled && writes {
            for f in files {
                let Some(t) = f.known().filter(|t| t != "-") else {
                    continue;
                };
                let out = if decompress {
                    match t.strip_suffix(suffix) {
                        Some(base) if !base.is_empty() && !base.ends_with('/') => base.to_string(),
                        _ => continue,
                    }
                } else {
                    format!("{t}{suffix}")
                };
                self.path_field(st, &Field::lit(&out), Access::Write);
                if !keep {
                    self.path_field(st, f, Access::Modify);
                }
            }
        }
        self.generic_paths(st, inv.args, Access::Any);
    }

    /// Package managers and build tools: yellow; global configuration writes are red.
    pub(crate) fn package_tool(&mut self, st: &State, inv: &Invocation<'_>) {
        let p = inv.program.as_str();
        self.add(
            Verdict::Yellow,
            "cmd.build",
            format!("`{p}` runs builds, scripts or installs (arbitrary code)"),
        );
        let known: Vec<String> = inv.args.iter().filter_map(Field::known).collect();
        let global = known.iter().any(|a| {
            a == "-g"
                || a == "--global"
                || a == "--location=global"
                || a == "--location=user"
                || a == "--user"
                || a == "--system"
                || a == "--site"
        });
        let config_write = known.first().is_some_and(|a| a == "config" || a == "set")
            && known.iter().any(|a| {
                a == "set"
                    || a == "unset"
                    || a == "delete"
                    || a == "edit"
                    || a == "rm"
                    || a == "add"
            });
        if config_write && global {
            self.add(
                Verdict::Red,
                "config.global",
                format!("`{p}` writes the user's or the system's configuration"),
            );
        }
        if p == "npm" && known.first().is_some_and(|a| a == "set") && global {
            self.add(
                Verdict::Red,
                "config.global",
                "`npm set -g` writes the global configuration".to_string(),
            );
        }
        // Publishing uploads the package, and the account commands send or store a registry
        // token (npm(1), cargo(1), twine, gem): the network, red.
        let verb = known.iter().find(|a| !a.starts_with('-'));
        if verb.is_some_and(|v| {
            matches!(
                v.as_str(),
                "publish"
                    | "unpublish"
                    | "login"
                    | "logout"
                    | "adduser"
                    | "owner"
                    | "yank"
                    | "deprecate"
                    | "dist-tag"
                    | "token"
                    | "push"
                    | "upload"
            )
        }) {
            self.add(
                Verdict::Red,
                crate::rules::NET_CLIENT.id,
                format!(
                    "`{p} {}` sends the package or an account token to a registry",
                    verb.map(String::as_str).unwrap_or("")
                ),
            );
        }
        self.generic_paths(st, inv.args, Access::Any);
    }
}

/// The archive file `tar` (`bsdtar`) or `zip` writes, from `args`: for tar, its `-f`/`--file`
/// in a mode that writes the archive (`c`, `r`, `u`, `A`: tar(1)), in the dashed, long or old
/// (first word without a dash: `tar czf out.tgz d`) spelling; for zip, its first operand, with
/// `.zip` added when its name has no extension (zip(1)). `None` when it cannot be known: a
/// word that cannot be known before it, another option that takes a value, `-` (standard
/// output), or a mode that only reads.
fn archive_written(p: &str, args: &[Field]) -> Option<Field> {
    if p == "zip" {
        for a in args {
            let t = a.known()?;
            if let Some(letters) = t.strip_prefix('-') {
                // Flags only: an option with a value (`-b DIR`, `-x LIST`…) ends the search.
                if letters.is_empty()
                    || !letters.chars().all(|c| "qrvyDjTSluF0123456789".contains(c))
                {
                    return None;
                }
                continue;
            }
            let named = std::path::Path::new(&t);
            let has_ext = named
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains('.'));
            return Some(if has_ext {
                a.clone()
            } else {
                Field::lit(&format!("{t}.zip"))
            });
        }
        return None;
    }
    if !matches!(p, "tar" | "bsdtar") {
        return None;
    }
    // Letters of tar's short options that take a value besides `f`.
    const TAKES: &str = "bCgHKLNTVX";
    let mut writes = false;
    let mut file: Option<Field> = None;
    let mut i = 0;
    while i < args.len() {
        let t = args[i].known()?;
        i += 1;
        if let Some(long) = t.strip_prefix("--") {
            let (name, val) = long
                .split_once('=')
                .map_or((long, None), |(n, v)| (n, Some(v)));
            if ["create", "append", "update", "catenate", "concatenate"].contains(&name) {
                writes = true;
            } else if name == "file" {
                file = match val {
                    Some(v) => Some(Field::lit(v)),
                    None => {
                        i += 1;
                        Some(args.get(i - 1)?.clone())
                    }
                };
            }
            continue;
        }
        let (letters, old) = match t.strip_prefix('-') {
            Some(l) => (l, false),
            None if i == 1 => (t.as_str(), true),
            None => continue,
        };
        writes |= letters.chars().any(|c| "cruA".contains(c));
        if let Some(at) = letters.find('f') {
            if letters.chars().any(|c| TAKES.contains(c)) {
                return None;
            }
            let attached = &letters[at + 1..];
            file = if old || attached.is_empty() {
                i += 1;
                Some(args.get(i - 1)?.clone())
            } else {
                Some(Field::lit(attached))
            };
        }
    }
    file.filter(|f| writes && f.known().as_deref() != Some("-"))
}

#[cfg(test)]
mod tests {
    use super::testing::expect;
    use crate::Verdict::{Blocked, Red, Yellow};

    #[test]
    fn network_vault_archives_and_package_tools() {
        expect(&[
            ("curl https://example.com", Red, "net.client"),
            ("ssh host", Red, "net.client"),
            ("cat ~/.ssh/id_rsa", Red, "path.credential"),
            ("awk '{print}' a", Yellow, "cmd.awk"),
            ("tar -xf a.tar", Yellow, ""),
            ("unzip -d /etc a.zip", Blocked, ""),
            ("cargo build", Yellow, "cmd.build"),
            ("npm config set x y", Red, "config.tool-write"),
        ]);
    }
}
