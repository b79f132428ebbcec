//! Programs that delete, change the metadata of, or write files: `rm` and kin, `chmod` and
//! kin, the writers (`cp`, `mv`, `ln`, `install`, `tee`, `dd`, `rsync`…) (DESIGN.md §2).

use super::*;

impl Analyzer<'_> {
    /// `rm`, `unlink`, `rmdir`, `shred`.
    pub(crate) fn rm(&mut self, st: &State, inv: &Invocation<'_>) {
        let p = inv.program.as_str();
        let mut recursive = false;
        let mut force = false;
        let mut dynamic = false;
        let mut targets = Vec::new();
        // The entry's table (`shred -n N`; rm's only value, `--interactive[=WHEN]`, is
        // optional: never the next word).
        let table = registry::lookup(p).map_or(&[][..], |e| e.options);
        for t in parse_opts(inv.args, table) {
            match t {
                Tok::Opt { name, value } => {
                    let n = name.as_str();
                    if n == "-r" || n == "-R" || names(n, "--recursive") {
                        recursive = true;
                    } else if n == "-f" || names(n, "--force") {
                        force = true;
                    } else if n.len() > 2 && names(n, "--interactive") {
                        // `--interactive=never` (`no`, `none`) never prompts: rm(1) says it is
                        // `-f` without ignoring missing files. A value that cannot be known may
                        // be `never`.
                        match value.as_ref().map(Field::known) {
                            Some(Some(w)) => force |= matches!(w.as_str(), "never" | "no" | "none"),
                            Some(None) => force = true,
                            None => {}
                        }
                    } else if names(n, "--no-preserve-root") {
                        self.add(
                            Verdict::Blocked,
                            "vault.no-preserve-root",
                            "`--no-preserve-root` lets rm delete /".to_string(),
                        );
                    }
                }
                Tok::DynamicOpt => dynamic = true,
                Tok::Operand(f) => targets.push(f),
            }
        }
        if p != "rm" {
            recursive = false;
        }
        // Input fed to rm answers its prompts (`yes | rm -r`): as good as `-f`.
        force |= inv.stdin == Stdin::Fed;
        self.add(Verdict::Yellow, "rm.delete", format!("`{p}` deletes files"));
        if recursive && (force || dynamic) {
            self.add(
                Verdict::Red,
                "rm.recursive-force",
                "recursive forced deletion".to_string(),
            );
        }
        if p == "shred"
            && targets.iter().any(|_| true)
            && inv.args.iter().any(|a| {
                a.known()
                    .is_some_and(|t| t == "-u" || t.starts_with("--remove"))
            })
        {
            self.add(
                Verdict::Yellow,
                "rm.delete",
                "`shred -u` deletes files".to_string(),
            );
        }
        for f in &targets {
            self.catastrophic_target(st, f, recursive, p);
            if recursive {
                self.guard_tree(st, f, p);
            }
            self.path_field(st, f, Access::Modify);
        }
    }

    /// A recursive modifying command aimed at `/`, `/*`, `~`, `$HOME`, any directory that
    /// holds the home (`/home`, `~/..`: it takes the home with it), a system path, or a
    /// top-level directory of the system's state (`/var`, `/opt`, `/run`, `/srv`, `/home`,
    /// `/root`) is a fixed denial (seed `004_893a9b0cb34e722a.txt`, the vault; review r3-04).
    /// Paths are compared after `..` and symbolic links are resolved.
    pub(crate) fn catastrophic_target(&mut self, st: &State, f: &Field, recursive: bool, p: &str) {
        if !recursive {
            return;
        }
        let text = match f.known_text() {
            Some(t) => t,
            None => {
                let prefix = f.known_prefix();
                if prefix == "/" || prefix.is_empty() && f.empty_variant().is_empty() {
                    // `rm -rf /$X` reaches anything under /.
                    if prefix == "/" {
                        self.add(
                            Verdict::Blocked,
                            "vault.catastrophic",
                            format!(
                                "`{p}` recursively modifies `{}` (anything under /)",
                                f.display()
                            ),
                        );
                    }
                }
                return;
            }
        };
        let home_text = self.ctx.home.map(|h| h.to_string_lossy());
        let home = home_text.as_deref().map(|h| h.trim_end_matches('/'));
        let trimmed = text.trim_end_matches('/');
        // A glob reaches everything in the directory it starts in: `rm -rf *` in `~` is
        // `rm -rf ~/*`.
        let globbed_dir = f.has_glob().then(|| {
            let before = crate::analysis::paths::pattern::literal_prefix(&text);
            match before.rfind('/') {
                Some(0) => "/".to_string(),
                Some(i) => before[..i].to_string(),
                None => ".".to_string(),
            }
        });
        let unglobbed = match &globbed_dir {
            Some(d) => d.as_str(),
            None => trimmed.trim_end_matches('/'),
        };
        // `rm -rf ""` fails; `/`, `//`, `/.`, `/*` are the root.
        let is_root = !text.is_empty()
            && (trimmed.is_empty() || unglobbed.is_empty() || unglobbed == "/" || trimmed == "/.");
        let is_home = home.is_some_and(|h| unglobbed == h || trimmed == h);
        let mut system = false;
        // The home as written and as the filesystem has it (`/home` may be a link).
        let homes: Vec<PathBuf> = home
            .filter(|h| h.starts_with('/'))
            .map(|h| {
                let lexical = crate::analysis::paths::lexical(Path::new("/"), h);
                let phys = crate::analysis::paths::resolve(Path::new("/"), h);
                vec![lexical, phys]
            })
            .unwrap_or_default();
        for cwd in st.cwds.iter().flatten() {
            let phys = crate::analysis::paths::resolve(cwd, unglobbed);
            if phys == Path::new("/")
                || crate::analysis::paths::is_system_path(&phys) && phys.components().count() <= 3
                || crate::analysis::paths::is_system_root(&phys)
            {
                system = true;
            }
            // The home itself or a directory holding it.
            if homes.iter().any(|h| h.starts_with(&phys)) {
                system = true;
            }
        }
        if is_root || is_home || system {
            self.add(
                Verdict::Blocked,
                "vault.catastrophic",
                format!("`{p}` recursively modifies `{text}`"),
            );
        }
    }

    /// `chmod`, `chown`, `chgrp`, `chattr`, `setfacl`: metadata changes.
    pub(crate) fn chmod(&mut self, st: &State, inv: &Invocation<'_>) {
        let p = inv.program.as_str();
        self.add(
            Verdict::Yellow,
            "cmd.metadata",
            format!("`{p}` changes file metadata"),
        );
        // These tools' only short options are flags (`-c -f -v -R -h -H -L -P`); any other word
        // starting with `-` is a mode (`chmod -w,u+w f`, `chattr -i f`) and so an operand.
        let mut recursive = false;
        let mut reference = false;
        let mut operands: Vec<Field> = Vec::new();
        let mut i = 0;
        let mut only_operands = false;
        while i < inv.args.len() {
            let a = &inv.args[i];
            i += 1;
            let Some(t) = a.known() else {
                operands.push(a.clone());
                continue;
            };
            if only_operands {
                operands.push(a.clone());
            } else if t == "--" {
                only_operands = true;
            } else if let Some(long) = t.strip_prefix("--") {
                let (name, val) = long
                    .split_once('=')
                    .map_or((long, None), |(n, v)| (n, Some(v)));
                if "recursive".starts_with(name) && !name.is_empty() {
                    recursive = true;
                } else if "reference".starts_with(name) && name.len() >= 3 {
                    reference = true;
                    let v = match val {
                        Some(v) => Some(Field::lit(v)),
                        None => {
                            i += 1;
                            inv.args.get(i - 1).cloned()
                        }
                    };
                    if let Some(v) = v {
                        self.path_field(st, &v, Access::Read);
                    }
                } else if "from".starts_with(name) && val.is_none() {
                    i += 1;
                }
            } else if t.len() > 1
                && t.starts_with('-')
                && t[1..].chars().all(|c| "cfvRHLPh".contains(c))
            {
                recursive |= t.contains('R');
            } else {
                operands.push(a.clone());
            }
        }
        // The first operand is the mode or owner, unless --reference gave it.
        let skip = usize::from(!reference);
        for f in operands.iter().skip(skip) {
            self.catastrophic_target(st, f, recursive, p);
            if recursive {
                self.guard_tree(st, f, p);
            }
            self.metadata_field(st, f, recursive);
        }
    }

    /// What lands in a destination directory that holds the pre-push hook (`.git/`,
    /// `.git/hooks/`): a copy, move or link into a directory writes `DIR/NAME` of each source
    /// (`rsync SRC/ DIR`: each entry of SRC), and leaves the directory itself in place, so
    /// `cp x .git/` is a write of `.git/x`, not a change of `.git`. `None` (the directory is
    /// checked as the target) when the destination is not such a directory in every place
    /// the line may be, `-T` makes it the target itself, or a source cannot be known.
    fn landing_in_hook_dir(
        &self,
        st: &State,
        inv: &Invocation<'_>,
        sources: &[Field],
        d: &Field,
    ) -> Option<Vec<String>> {
        let p = inv.program.as_str();
        let no_target = inv.args.iter().filter_map(Field::known).any(|t| {
            t == "--no-target-directory"
                || (t.starts_with('-') && !t.starts_with("--") && t.contains('T') && p != "rsync")
        });
        if no_target || sources.is_empty() || d.has_glob() {
            return None;
        }
        let dir = d.known()?;
        let pc = self.path_ctx();
        let mut out = Vec::new();
        for cwd in &st.cwds {
            let cwd = cwd.as_ref()?;
            let phys = crate::analysis::paths::resolve(cwd, &dir);
            if !phys.is_dir() || !crate::analysis::paths::holds_hook(&pc, &phys) {
                return None;
            }
            let mut words = Vec::new();
            for s in sources {
                let text = s.known()?;
                if s.has_glob() {
                    match crate::analysis::paths::glob(cwd, &text, st.glob_opts())? {
                        m if m.is_empty() => words.push(text),
                        m => words.extend(m),
                    }
                } else {
                    words.push(text);
                }
            }
            for text in words {
                let names: Vec<String> = if p == "rsync"
                    && (text.ends_with('/') || text.ends_with("/."))
                {
                    let rd = std::fs::read_dir(crate::analysis::paths::resolve(cwd, &text)).ok()?;
                    // A name that is no UTF-8 text cannot be written as a word: where the
                    // copy goes is then not known.
                    let names: Vec<String> = rd
                        .flatten()
                        .take(257)
                        .map(|e| e.file_name().into_string().ok())
                        .collect::<Option<_>>()?;
                    if names.len() > 256 {
                        return None;
                    }
                    names
                } else {
                    let base = text.trim_end_matches('/').rsplit('/').next().unwrap_or("");
                    if base.is_empty() || base == "." || base == ".." {
                        return None;
                    }
                    vec![base.to_string()]
                };
                for n in names {
                    let w = format!("{}/{n}", dir.trim_end_matches('/'));
                    if !out.contains(&w) {
                        out.push(w);
                    }
                }
            }
        }
        Some(out)
    }

    /// A copy, move or link into an existing directory writes `DIR/NAME` of each source: a
    /// NAME that is a control file or a credential (`cp -r backup/.vscode .`, `mv
    /// old/.envrc src/`) is checked as that path too (DESIGN.md §2 red). Names below the
    /// sources of a recursive copy are not listed.
    fn named_landings(
        &mut self,
        st: &State,
        inv: &Invocation<'_>,
        sources: &[Field],
        d: &Field,
        access: Access,
    ) {
        let no_target = inv.args.iter().filter_map(Field::known).any(|t| {
            t == "--no-target-directory"
                || (t.starts_with('-') && !t.starts_with("--") && t.contains('T'))
        });
        let Some(dir) = d.known().filter(|_| !no_target && !d.has_glob()) else {
            return;
        };
        let mut landed = Vec::new();
        for cwd in st.cwds.iter().flatten() {
            if !crate::analysis::paths::resolve(cwd, &dir).is_dir() {
                continue;
            }
            for s in sources {
                let Some(text) = s.known() else { continue };
                let words = if s.has_glob() {
                    crate::analysis::paths::glob(cwd, &text, st.glob_opts()).unwrap_or_default()
                } else {
                    vec![text]
                };
                for w in words {
                    let base = w.trim_end_matches('/').rsplit('/').next().unwrap_or("");
                    let named = crate::analysis::paths::control::control_component(&[base], 0)
                        .is_some()
                        || crate::analysis::paths::credential_component(base);
                    let l = format!("{}/{base}", dir.trim_end_matches('/'));
                    if named && !base.is_empty() && !landed.contains(&l) {
                        landed.push(l);
                    }
                }
            }
        }
        for l in landed {
            self.path_field(st, &Field::lit(&l), access);
        }
    }

    /// Commands that write or create their targets.
    pub(crate) fn writer(&mut self, st: &State, inv: &Invocation<'_>) {
        let p = inv.program.as_str();
        self.add(
            Verdict::Yellow,
            "cmd.writes",
            format!("`{p}` changes files"),
        );
        if p == "dd" {
            for a in inv.args {
                let Some(t) = a.known() else {
                    self.path_field(st, a, Access::Any);
                    continue;
                };
                let t = match (t.split_once('='), self.ctx.home) {
                    (Some((k, v)), Some(h)) if v == "~" || v.starts_with("~/") => {
                        format!("{k}={}{}", h.display(), &v[1..])
                    }
                    _ => t,
                };
                if let Some(v) = t.strip_prefix("of=") {
                    if v.starts_with("/dev/") && !crate::analysis::paths::is_system_exception(v) {
                        self.add(
                            Verdict::Blocked,
                            "vault.device-write",
                            format!("`dd of={v}` writes a device"),
                        );
                    }
                    self.path_field(st, &Field::lit(v), Access::Write);
                } else if let Some(v) = t.strip_prefix("if=") {
                    self.path_field(st, &Field::lit(v), Access::Read);
                }
            }
            return;
        }
        // The entry's table: which options take a value (`registry/changes.rs`).
        let spec = registry::lookup(p).map_or(&[][..], |e| e.options);
        let mut operands = Vec::new();
        let mut target_dir: Option<Field> = None;
        // `mkdir -p`: the missing directories above each operand are made too.
        let mut parents = false;
        // `mkdir -m`, `install -m`: the mode of what they make is the line's own.
        let mut mode = false;
        // A recursive copy: what it writes may be a directory tree.
        let mut tree = false;
        let writes_before = self.out.writes.len();
        for t in parse_opts(inv.args, spec) {
            match t {
                Tok::Opt { name, value } => {
                    let n = name.as_str();
                    parents |= p == "mkdir" && (n == "-p" || names(n, "--parents"));
                    mode |= matches!(p, "mkdir" | "install") && (n == "-m" || names(n, "--mode"));
                    if (n == "-t" || names(n, "--target-directory")) && p != "touch" {
                        target_dir = value;
                    } else if p == "rsync"
                        && (n == "-e" || names(n, "--rsh") || names(n, "--rsync-path"))
                    {
                        self.add(
                            Verdict::Red,
                            "cmd.program-option",
                            format!("`rsync {n}` runs a program"),
                        );
                    } else if p == "rsync"
                        && (n.len() > 4 && names(n, "--delete")
                            || n.starts_with("--delete-")
                            || names(n, "--remove-source-files"))
                    {
                        self.add(
                            Verdict::Red,
                            "rm.recursive-force",
                            format!("`rsync {n}` deletes files without confirmation"),
                        );
                    } else if p == "install" && names(n, "--strip-program") {
                        self.add(
                            Verdict::Red,
                            "cmd.program-option",
                            "`install --strip-program` runs a program".to_string(),
                        );
                    } else if let Some(v) = value {
                        if matches!(n, "-r")
                            || names(n, "--reference")
                            || names(n, "--exclude-from")
                            || names(n, "--files-from")
                            || names(n, "--include-from")
                            || names(n, "--password-file")
                        {
                            self.path_field(st, &v, Access::Read);
                        } else if names(n, "--log-file")
                            || names(n, "--temp-dir")
                            || names(n, "--backup-dir")
                            || names(n, "--partial-dir")
                        {
                            self.path_field(st, &v, Access::Write);
                        }
                    }
                }
                Tok::DynamicOpt => {}
                Tok::Operand(f) => operands.push(f),
            }
        }
        if p == "rsync"
            && operands.iter().any(|o| {
                o.known().is_some_and(|t| {
                    t.contains("::")
                        || t.starts_with("rsync://")
                        || t.split('/').next().is_some_and(|h| h.contains(':'))
                })
            })
        {
            self.add(
                Verdict::Red,
                "net.client",
                "`rsync` to a remote host uses the network".to_string(),
            );
            for o in &operands {
                if o.known()
                    .is_some_and(|t| t.split('/').next().is_some_and(|h| h.contains(':')))
                {
                    continue;
                }
                self.path_field(st, o, Access::Any);
            }
            return;
        }
        // `install -d DIR…` creates every operand.
        let install_dirs = p == "install"
            && inv.args.iter().any(|a| {
                a.known().is_some_and(|t| {
                    t == "--directory"
                        || t.starts_with('-') && !t.starts_with("--") && t.contains('d')
                })
            });
        match p {
            // `install -d` makes the missing directories above each operand too.
            _ if install_dirs => {
                for o in operands {
                    self.dir_field(st, &o, true);
                }
            }
            "mkdir" => {
                for o in operands {
                    self.dir_field(st, &o, parents);
                }
            }
            "tee" | "touch" | "truncate" | "mkfifo" | "mknod" => {
                if p == "mknod" {
                    self.add(
                        Verdict::Red,
                        "cmd.device-node",
                        "`mknod` can create device nodes".to_string(),
                    );
                }
                for o in operands {
                    self.path_field(st, &o, Access::Write);
                }
            }
            _ => {
                // SOURCE… DEST, or -t DIR SOURCE….
                let (sources, dest): (Vec<Field>, Option<Field>) = match target_dir {
                    Some(d) => (operands, Some(d)),
                    None => {
                        let mut o = operands;
                        let d = if o.len() >= 2 || p == "ln" && o.len() == 1 {
                            o.pop()
                        } else {
                            None
                        };
                        if p == "ln" && d.is_none() {
                            (o, Some(Field::lit(".")))
                        } else {
                            (o, d)
                        }
                    }
                };
                // A hard link (`ln` without -s, `cp -l`) makes the source writable through the new
                // name: as good as changing it.
                let symbolic = inv.args.iter().filter_map(Field::known).any(|t| {
                    t == "--symbolic"
                        || t.starts_with('-') && !t.starts_with("--") && t.contains('s')
                });
                let hard_link = (p == "ln" && !symbolic)
                    || (p == "cp"
                        && inv.args.iter().filter_map(Field::known).any(|t| {
                            t == "--link"
                                || t.starts_with('-') && !t.starts_with("--") && t.contains('l')
                        }));
                let src_access = if p == "mv" || hard_link {
                    Access::Modify
                } else {
                    Access::Read
                };
                let recursive_copy = inv.args.iter().any(|a| {
                    a.known().is_some_and(|t| {
                        t == "-r"
                            || t == "-R"
                            || t == "-a"
                            || t.starts_with("--recursive")
                            || t.starts_with("--archive")
                            || t.starts_with('-')
                                && !t.starts_with("--")
                                && (t.contains('r') || t.contains('R') || t.contains('a'))
                    })
                });
                tree = recursive_copy && matches!(p, "cp" | "rsync");
                for s in &sources {
                    // Renaming a tree moves the hook in it.
                    if p == "mv" {
                        self.guard_tree(st, s, p);
                    }
                    self.path_field(st, s, src_access);
                }
                if let Some(d) = dest {
                    if recursive_copy
                        && p == "rsync"
                        && inv
                            .args
                            .iter()
                            .any(|a| a.known().is_some_and(|t| t.starts_with("--delete")))
                    {
                        self.catastrophic_target(st, &d, true, p);
                        self.guard_tree(st, &d, p);
                    }
                    // `mv`/`ln` replace the destination itself (even `/dev/null`).
                    let dest_access = if p == "mv" || p == "ln" {
                        Access::Modify
                    } else {
                        Access::Write
                    };
                    match self.landing_in_hook_dir(st, inv, &sources, &d) {
                        Some(landed) => {
                            for w in landed {
                                self.path_field(st, &Field::lit(&w), dest_access);
                            }
                        }
                        // `install` and `cp` remove a destination file they cannot write
                        // and make it anew (`install` always): a save by their own rule.
                        // Not a `cp` that may make a link there instead (`-P`, `-d`, `-a`,
                        // `-s`, `-l`, `--preserve=links`): the file would be removed for
                        // something else (review 16's r16-01).
                        None if (p == "install" || p == "cp" && !cp_makes_links(inv.args))
                            && sources.len() == 1 =>
                        {
                            self.saved_field(st, &d);
                            self.named_landings(st, inv, &sources, &d, dest_access);
                        }
                        None => {
                            self.path_field(st, &d, dest_access);
                            self.named_landings(st, inv, &sources, &d, dest_access);
                        }
                    }
                }
            }
        }
        // The mode `-m` names is set on what the line writes: the line's own change
        // (`Classification::metadata`), not a second ask (review 18's r18-03).
        let written = self
            .out
            .writes
            .get(writes_before..)
            .unwrap_or_default()
            .to_vec();
        if mode {
            crate::verdict::push_new(&mut self.out.metadata, written.clone());
        }
        if tree {
            crate::verdict::push_new(&mut self.out.trees_made, written);
        }
    }
}

/// Whether `cp`'s options may make links rather than copies (`-P`/`--no-dereference`, `-d`,
/// `-a`/`--archive`, `-s`/`--symbolic-link`, `-l`/`--link`, `--preserve` with links or all).
fn cp_makes_links(args: &[Field]) -> bool {
    args.iter().any(|a| match a.known() {
        None => true,
        Some(t) if t.starts_with("--") => {
            ["--no-dereference", "--archive", "--link", "--symbolic-link"]
                .iter()
                .any(|o| names(&t, o))
                || t.starts_with("--preserve") && (t.contains("links") || t.contains("all"))
        }
        Some(t) => t.starts_with('-') && t[1..].chars().any(|c| "Pdasl".contains(c)),
    })
}

#[cfg(test)]
mod tests {
    use super::testing::{expect, expect_git};
    use crate::Verdict::{Blocked, Red, Yellow};

    /// A copy, move or link into `.git/` writes a file inside it (red), not `.git` itself;
    /// what lands on the hook, or a source that may be named `hooks`, stays blocked.
    #[test]
    fn writes_into_the_git_directory() {
        for hook in [false, true] {
            expect_git(
                hook,
                &[
                    ("cp src/lib.rs .git/", Red, "path.git-dir"),
                    ("cp src/lib.rs .git", Red, "path.git-dir"),
                    ("mv src/lib.rs .git/", Red, "path.git-dir"),
                    ("ln src/lib.rs .git/", Red, "path.git-dir"),
                    ("ln -s src/lib.rs .git/", Red, "path.git-dir"),
                    ("cp -r src .git", Red, "path.git-dir"),
                    ("cp -t .git src/lib.rs", Red, "path.git-dir"),
                    ("rsync -a src/ .git/", Red, "path.git-dir"),
                    ("install -m 644 src/lib.rs .git/", Red, "path.git-dir"),
                    ("echo x > .git/info/exclude", Red, "path.git-dir"),
                    ("cp src/lib.rs .git/hooks/", Red, "path.git-hooks"),
                    ("cp -r hooks .git/", Blocked, "git.guard.hook"),
                    ("cp x/pre-push .git/hooks/", Blocked, "git.guard.hook"),
                    ("cp -T src/lib.rs .git", Blocked, "git.guard.hook"),
                    ("cp \"$X\" .git/", Blocked, "git.guard.hook"),
                    ("mv .git/hooks/pre-push .git/", Blocked, "git.guard.hook"),
                    ("cp src/lib.rs .git/config", Red, "path.git-config"),
                ],
            );
        }
    }

    #[test]
    fn deletions() {
        expect(&[
            ("rm build/x.o", Yellow, "rm.delete"),
            ("rm -rf build", Red, "rm.recursive-force"),
            ("rm -r -f build", Red, "rm.recursive-force"),
            ("rm --recursive --force build", Red, "rm.recursive-force"),
            ("rm -rf ~", Blocked, "vault.catastrophic"),
            ("rm -rf /", Blocked, "vault.catastrophic"),
            ("rm -rf /etc", Blocked, ""),
            ("shred -u secret.txt", Yellow, ""),
        ]);
    }

    /// review r3-04: the home's ancestors are the home; the system's state directories are
    /// system paths for a recursive modification, what lies below them is not.
    #[test]
    #[allow(clippy::unwrap_used)]
    fn a_recursive_modification_of_a_directory_holding_the_home_is_catastrophic() {
        use crate::{Action, Context, Policy, Verdict};
        let root = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(root.path()).unwrap();
        let home = base.join("home/user");
        let wt = home.join("repo");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::create_dir_all(base.join("home/other")).unwrap();
        std::fs::create_dir_all(home.join("sub")).unwrap();
        std::os::unix::fs::symlink(base.join("home"), base.join("link")).unwrap();
        let ctx = Context {
            worktree: &wt,
            cwd: &wt,
            home: Some(&home),
            scratch: None,
            git: None,
        };
        let b = base.display();
        let cases: Vec<(String, Verdict)> = vec![
            (format!("rm -rf {b}/home"), Blocked),
            (format!("rm -rf {b}/home/"), Blocked),
            (format!("rm -rf {b}/home/user/.."), Blocked),
            (format!("rm -rf {b}/home/./user/../../home"), Blocked),
            (format!("rm -rf {b}/home/*"), Blocked),
            (format!("rm -rf {b}/link"), Blocked),
            (format!("rm -rf {b}"), Blocked),
            ("rm -rf ../..".to_string(), Blocked),
            ("rm -rf ~/..".to_string(), Blocked),
            (format!("chmod -R 000 {b}/home"), Blocked),
            (format!("chown -R nobody {b}/home/user/.."), Blocked),
            (format!("find {b}/home -delete"), Blocked),
            ("rm -rf /var".to_string(), Blocked),
            ("rm -rf /opt/".to_string(), Blocked),
            ("rm -rf /run".to_string(), Blocked),
            ("rm -rf /srv".to_string(), Blocked),
            ("rm -rf /boot".to_string(), Blocked),
            ("chmod -R 777 /var/../opt".to_string(), Blocked),
            // Not holding the home, not a system root: asked as before.
            (format!("rm -rf {b}/home/other"), Red),
            (format!("rm -rf {b}/home/user/sub"), Red),
            ("rm -rf ../repo/build".to_string(), Red),
            ("rm -rf /var/tmp/build".to_string(), Red),
            ("rm -rf /run/user/1000/x".to_string(), Red),
            (format!("rm {b}/home/user/../x"), Red),
        ];
        let mut bad = Vec::new();
        for (line, want) in &cases {
            let c = Policy::embedded_default().classify(
                &Action::Exec {
                    command: line.clone(),
                },
                &ctx,
            );
            let catastrophic = c.findings.iter().any(|f| f.rule == "vault.catastrophic");
            if c.verdict != *want || catastrophic != (*want == Blocked) {
                bad.push(format!("{line}: {:?} {:?}", c.verdict, c.findings));
            }
        }
        assert!(bad.is_empty(), "\n{}", bad.join("\n"));
    }

    #[test]
    fn metadata_and_writes() {
        expect(&[
            ("chmod +x run.sh", Yellow, "cmd.metadata"),
            ("chmod -R 777 /etc", Blocked, ""),
            ("cp a b", Yellow, "cmd.writes"),
            ("mv a b", Yellow, "cmd.writes"),
            ("cp a /usr/bin/a", Blocked, ""),
            ("cp -t /etc a", Blocked, ""),
            ("ln -s /etc/passwd p", Red, "path.outside-worktree"),
            ("mknod dev c 1 1", Red, "cmd.device-node"),
        ]);
    }

    /// What lands in a directory by a control file's or a credential's name is that path.
    #[test]
    fn names_landing_in_a_directory() {
        expect(&[
            ("cp -r backup/.idea .", Red, "path.control-file"),
            ("mv old/mise.toml ./", Red, "path.control-file"),
            ("cp -t . saved/.tool-versions", Red, "path.control-file"),
            ("ln -s docs/.zed .", Red, "path.control-file"),
            ("cp -r old/.ssh .", Red, "path.credential"),
            ("cp -r old/.idea -T x", Yellow, "cmd.writes"),
            ("cp docs/guide.md .", Yellow, "cmd.writes"),
        ]);
    }
}
