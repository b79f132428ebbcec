//! Sessions and their worktrees (issue 4 §1).
//!
//! Default: a new linked worktree on a new branch `tyba/<session-id>` from `HEAD`, made with
//! `git worktree add`, at `$XDG_STATE_HOME/tyba/worktrees/<repo>-<session-id>` (or
//! `~/.local/state/tyba/worktrees/…`). When the session ends it is removed if the session
//! changed nothing in it ([`Session::finish`]); otherwise it is kept, with the commands to
//! review and merge the work, and `tyba clean` removes it once merged
//! ([`crate::worktrees`]).
//!
//! Warnings ([`Session::warnings`]): the main repository has uncommitted changes (the new
//! worktree starts from `HEAD` without them); the directory is not in a repository (the agent
//! works in it directly, with no branch of its own). A repository without commits is an
//! error ([`SessionError::NoCommits`]): there is no `HEAD` to start a worktree from.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Errors preparing a session's worktree.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// A git command failed.
    #[error("`git {args}` failed in {dir}: {stderr}")]
    Git {
        /// The arguments, space-joined.
        args: String,
        /// Where it ran.
        dir: PathBuf,
        /// What git said.
        stderr: String,
    },
    /// The repository has no commit for a new worktree to start from.
    #[error("the repository at {0} has no commits yet, so there is nothing to start a session's worktree from: make a first commit (`git commit --allow-empty -m init`), or run the agent in this directory itself with `tyba run --here`")]
    NoCommits(PathBuf),
    /// The directory the agent would work in holds what the sandbox exists to keep from it
    /// ([`check_worktree`]).
    #[error("{path} cannot be the agent's working directory: {why}. Run tyba in a project directory (a git repository gets a worktree of its own), or pass `--worktree DIR`")]
    UnsafeWorktree {
        /// The directory (canonical).
        path: PathBuf,
        /// Why, for the person.
        why: String,
    },
    /// Filesystem error.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// How the worktree is chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorktreeChoice {
    /// A new linked worktree in the default location (or at this path when given).
    New {
        /// Where to create it; `None` for the default location.
        at: Option<PathBuf>,
        /// Branch name; `None` for `tyba/<session-id>`.
        branch: Option<String>,
    },
    /// Use this existing directory as the worktree (`--here`, or `--worktree DIR` naming an
    /// existing directory).
    Existing(PathBuf),
}

/// Git layout of a worktree, for the Landlock rules and the protected files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitLayout {
    /// `git rev-parse --absolute-git-dir`: the worktree's own git dir.
    pub git_dir: PathBuf,
    /// `git rev-parse --git-common-dir`, absolute: the shared git dir (objects, refs, hooks).
    pub common_dir: PathBuf,
}

/// A prepared session.
#[derive(Debug, Clone)]
pub struct Session {
    /// Session id: 12 lower-case hex digits.
    pub id: String,
    /// Physical path of the worktree (symlinks resolved).
    pub worktree: PathBuf,
    /// The git layout, when the worktree is in a git repository.
    pub git: Option<GitLayout>,
    /// When tyba created a linked worktree: its branch.
    pub created_branch: Option<String>,
    /// The main repository the linked worktree was added to.
    pub main_repo: Option<PathBuf>,
    /// When tyba created a linked worktree: the commit it started at (full hash).
    pub start_commit: Option<String>,
    /// When tyba created a linked worktree: the branch checked out in the main repository
    /// then (what the work is reviewed against), when there was one.
    pub base_branch: Option<String>,
    /// Things the person should know before the agent starts (one sentence each).
    pub warnings: Vec<String>,
    /// When the session was prepared, before the agent ran.
    pub started: std::time::SystemTime,
    /// For a session in the person's own checkout: the commit its HEAD named then, read from
    /// the git dir's files before the agent ran ([`head_commit`]).
    pub here_head: Option<String>,
}

/// The object ids of `git ls-files -s` (`MODE ID STAGE\tPATH`) or `git ls-tree`
/// (`MODE TYPE ID\tPATH`) lines: the field before the tab that is 40 or 64 hex digits.
fn object_ids(listing: &str) -> impl Iterator<Item = &str> {
    listing.lines().filter_map(|l| {
        l.split('\t')
            .next()?
            .split(' ')
            .find(|f| (f.len() == 40 || f.len() == 64) && f.bytes().all(|b| b.is_ascii_hexdigit()))
    })
}

/// What git keeps for tyba's own files in the person's checkout ([`Session::own_records`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnRecords {
    /// The files and directories, relative to the checkout.
    pub paths: Vec<String>,
    /// `git ls-files -s` of them: mode, blob and stage of each index entry.
    pub index: String,
    /// `git ls-tree -r HEAD` of them: what the branch holds.
    pub head: String,
    /// `git for-each-ref refs/replace/ refs/stash`: replacements of objects (which change what
    /// an unchanged entry checks out, git-replace(1)) and the stash (git-stash(1)).
    pub refs: String,
    /// `ID SHA-256` of the content of each object the entries name, as git reads it.
    pub contents: String,
}

impl OwnRecords {
    /// What changed between `self` (at the start) and `now` (at the end): the index, the
    /// branch, or both, for the person to read.
    pub fn changed(&self, now: &OwnRecords) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.index != now.index {
            out.push("the index (what `git restore` puts back)");
        }
        if self.head != now.head {
            out.push("the branch (what `git reset --hard` puts back)");
        }
        if self.contents != now.contents {
            out.push("the stored objects (what any checkout of the unchanged entries puts back)");
        }
        if self.refs != now.refs {
            out.push("the replacement refs or the stash (what any checkout or `git stash pop` puts back)");
        }
        out
    }
}

/// What [`Session::finish`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finished {
    /// Not a worktree tyba created: nothing to do.
    NotOurs,
    /// The session changed nothing: worktree and branch removed.
    Removed,
    /// The session changed nothing but removing failed.
    RemoveFailed(String),
    /// Work is there: kept.
    Kept {
        /// Commits on the branch since the start.
        commits: usize,
        /// Paths with uncommitted changes in the worktree.
        uncommitted: usize,
    },
}

impl Session {
    /// At the end of the session: removes the worktree and branch tyba created when the
    /// session left no commit and nothing uncommitted (untracked files included) and `keep`
    /// is false; otherwise says what is there. The start commit was taken before the agent
    /// ran, so nothing the agent wrote decides what "unchanged" means.
    pub fn finish(&self, keep: bool) -> Finished {
        let (Some(branch), Some(repo), Some(start)) = (
            self.created_branch.as_ref(),
            self.main_repo.as_ref(),
            self.start_commit.as_ref(),
        ) else {
            return Finished::NotOurs;
        };
        for w in self.disarm_symbolic_refs(branch, repo) {
            crate::broker::text::say(&format!("tyba: warning: {w}"));
        }
        let commits = git(
            repo,
            &["rev-list", "--count", &format!("{start}..{branch}")],
        )
        .ok()
        .and_then(|n| n.trim().parse().ok());
        let tip = git(repo, &["rev-parse", "--verify", branch]).ok();
        // The worktree itself must be where it started too: a detached or switched HEAD
        // may hold commits no branch has.
        let head = git(&self.worktree, &["rev-parse", "--verify", "HEAD"]).ok();
        let on_branch = git(&self.worktree, &["symbolic-ref", "--quiet", "HEAD"])
            .ok()
            .is_some_and(|r| r.trim() == format!("refs/heads/{branch}"));
        let uncommitted = git(
            &self.worktree,
            &[
                "status",
                "--porcelain",
                "--untracked-files=all",
                crate::worktrees::IGNORE_SUBMODULE_WORK,
            ],
        )
        .ok()
        .map(|s| s.lines().count() + crate::worktrees::populated_submodules(&self.worktree));
        match (commits, uncommitted) {
            (Some(0), Some(0))
                if !keep
                    && on_branch
                    && tip.as_deref() == Some(start.as_str())
                    && head.as_deref() == Some(start.as_str()) =>
            {
                let wt = self.worktree.to_string_lossy();
                // A lock left by this session (it is over) does not keep it.
                let _ = git(repo, &["worktree", "unlock", &wt]);
                crate::worktrees::drop_empty_modules_dir(&self.worktree);
                let removed = git(repo, &["worktree", "remove", &wt])
                    .and_then(|_| git(repo, &["branch", "-D", "--", branch]));
                match removed {
                    Ok(_) => Finished::Removed,
                    Err(e) => Finished::RemoveFailed(e.to_string()),
                }
            }
            (c, u) => Finished::Kept {
                commits: c.unwrap_or(0),
                uncommitted: u.unwrap_or(0),
            },
        }
    }

    /// Undoes symbolic refs the agent made towards other branches (`git symbolic-ref`,
    /// gitrepository-layout(5)): its branch `refs/heads/<branch>` pointing at `main`, or its
    /// worktree's `HEAD` pointing at a branch not its own. The agent cannot move those
    /// branches itself (the kernel layer keeps them read-only), but the person's next commit
    /// *in that worktree* would. The branch becomes a plain ref at the commit it resolved to;
    /// the `HEAD` is detached at its commit. Returns what was undone, for the person.
    fn disarm_symbolic_refs(&self, branch: &str, repo: &Path) -> Vec<String> {
        let mut undone = Vec::new();
        let own = format!("refs/heads/{branch}");
        if let Ok(target) = git(repo, &["symbolic-ref", "--quiet", &own]) {
            let target = target.trim().to_string();
            let to = git(
                repo,
                &[
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    &format!("{own}^{{commit}}"),
                ],
            );
            let fixed = match &to {
                Ok(c) => git(repo, &["update-ref", "--no-deref", &own, c.trim()]).is_ok(),
                Err(_) => git(repo, &["update-ref", "--no-deref", "-d", &own]).is_ok(),
            };
            undone.push(format!(
                "the agent made its branch {branch} a symbolic ref to {target} (a commit on it would have moved {target}): {}",
                if fixed { "made a plain branch again" } else { "could not be undone: remove it with git update-ref --no-deref -d before using the worktree" }
            ));
        }
        if let Ok(target) = git(&self.worktree, &["symbolic-ref", "--quiet", "HEAD"]) {
            let target = target.trim().to_string();
            // Any other branch, another session's `tyba/…` too: the person's next commit
            // there would move it.
            if target != own {
                let fixed = git(
                    &self.worktree,
                    &["rev-parse", "--verify", "--quiet", "HEAD"],
                )
                .and_then(|c| {
                    git(
                        &self.worktree,
                        &["update-ref", "--no-deref", "HEAD", c.trim()],
                    )
                })
                .is_ok();
                undone.push(format!(
                    "the agent pointed its worktree's HEAD at {target} (a commit made there would have moved {target}): {}",
                    if fixed { "detached it at its commit" } else { "could not be undone: do not commit in that worktree" }
                ));
            }
        }
        undone
    }

    /// The `tyba/…` branch this session owns, the only branch its agent writes (DESIGN.md
    /// §5; [`crate::own_branch`]): the branch tyba created, else the one checked out in an
    /// existing worktree when it is a `tyba/` branch, else none.
    pub fn own_branch(&self) -> Option<String> {
        if let Some(b) = &self.created_branch {
            return Some(b.clone());
        }
        self.head_branch()
            .filter(|b| b.starts_with("tyba/") && b.len() > "tyba/".len())
    }

    /// The branch the worktree's `HEAD` names (`ref: refs/heads/NAME`), read from the git
    /// dir's `HEAD` file (`gitrepository-layout(5)`; no git process at launch), with `git
    /// symbolic-ref` when the file does not say (the reftable backend's `refs/heads/.invalid`).
    fn head_branch(&self) -> Option<String> {
        let g = self.git.as_ref()?;
        let text = std::fs::read_to_string(g.git_dir.join("HEAD")).unwrap_or_default();
        let target = match text.lines().next().and_then(|l| l.strip_prefix("ref:")) {
            Some(t) if t.trim() != "refs/heads/.invalid" => t.trim().to_string(),
            _ if text.trim().len() >= 40 && !text.starts_with("ref:") => return None,
            _ => git(&self.worktree, &["symbolic-ref", "--quiet", "HEAD"]).ok()?,
        };
        target
            .trim()
            .strip_prefix("refs/heads/")
            .map(str::to_string)
    }

    /// The protected branch (DESIGN.md §5, `git.protected_branches`, compared
    /// case-insensitively like the git guard) checked out in an existing worktree (`--here`,
    /// `--worktree DIR`), if any: the agent's commits there would move it.
    pub fn protected_head(&self, protected: &[String]) -> Option<String> {
        if self.created_branch.is_some() {
            return None;
        }
        let b = self.head_branch()?;
        protected
            .iter()
            .any(|p| p.eq_ignore_ascii_case(&b))
            .then_some(b)
    }

    /// What git keeps for tyba's own files that lie in the person's own checkout (its
    /// configuration and a `--policy FILE`, where they resolve: a dotfiles repository that
    /// holds them): their index entries (`git ls-files -s`) and committed content
    /// (`git ls-tree -r HEAD`), read with tyba's hardened git. The files themselves are
    /// bound read-only for the session, but the index and the branch are the agent's to
    /// write, and the person's `git restore .` or `git reset --hard` would then install the
    /// agent's version (review 25's r25-04); so would a replacement of the blob they name
    /// (`git replace`, review 26's r26-02) or the stash. Compared at the end ([`OwnRecords`]).
    /// `None` for a linked worktree tyba made, outside git, or when none of them lies here
    /// (the usual case, which runs no git).
    pub fn own_records(&self) -> Option<OwnRecords> {
        if self.created_branch.is_some() || self.git.is_none() {
            return None;
        }
        let mut paths: Vec<String> = Vec::new();
        for d in crate::outside_fs::own_dirs() {
            let Ok(rel) = d.strip_prefix(&self.worktree) else {
                continue;
            };
            let rel = rel.to_string_lossy().into_owned();
            if !rel.is_empty() && !paths.contains(&rel) {
                paths.push(rel);
            }
        }
        if paths.is_empty() {
            return None;
        }
        let read = |args: &[&str]| {
            let mut a: Vec<&str> = args.to_vec();
            a.push("--");
            a.extend(paths.iter().map(String::as_str));
            git(&self.worktree, &a).unwrap_or_else(|e| format!("unreadable: {e}"))
        };
        // What changes the content those entries stand for without changing them (review
        // 26's r26-02: `git replace` of the person's blob), or puts other content back later:
        // the replacement refs and the stash.
        let refs = git(
            &self.worktree,
            &["for-each-ref", "refs/replace/", "refs/stash"],
        )
        .unwrap_or_else(|e| format!("unreadable: {e}"));
        let index = read(&["ls-files", "-s"]);
        let head = read(&["ls-tree", "-r", "HEAD"]);
        // What each entry's object holds as git reads it: an object file rewritten in place
        // under the same id (review 27's r27-01; git does not check an object's hash when it
        // checks a file out) changes it with no entry changed.
        let contents = object_ids(&index)
            .chain(object_ids(&head))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .map(|id| format!("{id} {}", self.content_digest(id)))
            .collect::<Vec<_>>()
            .join("\n");
        Some(OwnRecords {
            index,
            head,
            refs,
            contents,
            paths,
        })
    }

    /// SHA-256 of the content `git cat-file blob ID` gives (replacements honoured, as a
    /// checkout would), in hex; a message when git cannot read it.
    fn content_digest(&self, id: &str) -> String {
        use sha2::Digest as _;
        let out = Command::new("git")
            .arg("-C")
            .arg(&self.worktree)
            .args(crate::worktrees::HARDENED)
            .args(["cat-file", "blob", id])
            .env("GIT_NO_LAZY_FETCH", "1")
            .output();
        match out {
            Ok(o) if o.status.success() => sha2::Sha256::digest(&o.stdout)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
            Ok(o) => format!("unreadable: {}", String::from_utf8_lossy(&o.stderr).trim()),
            Err(e) => format!("unreadable: {e}"),
        }
    }

    /// For a session in the person's own checkout (`--here`): the paths (relative to the
    /// worktree) changed while the session ran, and those of commits made since the start
    /// (HEAD then, [`Session::here_head`], against HEAD now; no `git diff` when the same files
    /// still name the same commit).
    ///
    /// With `watched` (the events of a [`crate::here_watch::HereWatch`] sealed before the
    /// agent started): the entries they name that still exist, the files opened whose change
    /// time is the session's, and the files of the directories the session made or moved in.
    /// Without (the full look): every file of the checkout (its own `.git` aside, read from
    /// the disk by name; nothing the agent could have written, the index included, decides
    /// what is looked at: review 8, r8-01, r8-04) whose status change time (`ctime`, which no
    /// program can set: inode(7)), or that of a directory on its way (a directory moved keeps
    /// its files' times), is not older than the session's start, less 100 ms for the
    /// filesystem's coarse clock. What the person had changed before is not the session's.
    ///
    /// Then, when anything changed, the names the changes are also read by: every link of
    /// the checkout (found by a walk of the names) whose target is a changed file, or above
    /// one, adds that file by the link's name, and a link the session made or changed adds
    /// every file beneath its target; repeated so that links through links count (review 8,
    /// r8-05, r8-06, r8-08). A directory that cannot be read whole ([`WALK_MAX`] entries in
    /// all) is in [`HereChanges::unread`] (the checkout itself: [`HereChanges::checkout_unread`]). Names are exact bytes on the disk, shown lossily
    /// only in the list. Empty for a linked worktree ([`Session::changed_paths`] covers it)
    /// or outside git.
    pub fn changed_here(&self, watched: Option<crate::here_watch::Changes>) -> HereChanges {
        let mut out = HereChanges::default();
        if self.created_branch.is_some() || self.git.is_none() {
            return out;
        }
        let since = self.since();
        let mut budget = WALK_MAX;
        let mut unread: Vec<PathBuf> = Vec::new();
        let mut listing: Option<Listing> = None;
        let mut v: Vec<PathBuf> = match watched {
            Some(c) => {
                let mut v = c.entries;
                v.extend(
                    c.opened
                        .into_iter()
                        .filter(|p| changed_since(&self.worktree.join(p), since)),
                );
                for d in c.new_dirs {
                    if std::fs::symlink_metadata(self.worktree.join(&d)).is_ok() {
                        self.walk_into(&d, &mut v, &mut unread, &mut budget);
                    }
                }
                v
            }
            None => {
                let all = self.listing(&mut unread);
                let files = self.changed_by_times(&all.files, since);
                listing = Some(all);
                files
            }
        };
        // Commits made during the session: HEAD as it was at the start (read before the
        // agent ran) against HEAD now; no `git diff` when the same files still name the same
        // commit.
        if let Some(start) = &self.here_head {
            let same = self.git.as_ref().and_then(head_commit).as_ref() == Some(start);
            if !same {
                v.extend(
                    self.diff_names(&[start, "HEAD"])
                        .into_iter()
                        .map(PathBuf::from),
                );
            }
        }
        // What is gone runs nothing.
        v.retain(|p| std::fs::symlink_metadata(self.worktree.join(p)).is_ok());
        if !v.is_empty() {
            let all = listing.get_or_insert_with(|| self.listing(&mut unread));
            let (more, whole) = self.through_links(&v, all);
            v.extend(more);
            if !whole {
                unread.push(PathBuf::new());
            }
        }
        let text = |p: &PathBuf| p.to_string_lossy().into_owned();
        out.paths = v.iter().map(text).collect();
        out.paths.sort();
        out.paths.dedup();
        out.checkout_unread = unread.iter().any(|d| d.as_os_str().is_empty());
        out.unread = unread
            .iter()
            .filter(|d| !d.as_os_str().is_empty())
            .map(|d| format!("{}/", text(d)))
            .collect();
        out.unread.sort();
        out.unread.dedup();
        out
    }

    /// The names of the whole checkout (its own `.git` aside), as [`walk_names`] reads them;
    /// what cannot be read whole into `unread`.
    fn listing(&self, unread: &mut Vec<PathBuf>) -> Listing {
        let mut all = Listing::default();
        let mut budget = WALK_MAX;
        if !walk_names(&self.worktree, Path::new(""), true, &mut all, &mut budget) {
            unread.push(PathBuf::new());
        }
        all
    }

    /// Of `files`, those whose change time, or that of a directory on their way from the
    /// worktree, is not older than `since` (each directory looked at once).
    fn changed_by_times(&self, files: &[PathBuf], since: std::time::SystemTime) -> Vec<PathBuf> {
        let mut dirs: std::collections::HashMap<PathBuf, bool> = std::collections::HashMap::new();
        files
            .iter()
            .filter(|p| {
                changed_since(&self.worktree.join(p), since)
                    || p.ancestors().skip(1).any(|d| {
                        !d.as_os_str().is_empty()
                            && *dirs
                                .entry(d.to_path_buf())
                                .or_insert_with(|| changed_since(&self.worktree.join(d), since))
                    })
            })
            .cloned()
            .collect()
    }

    /// The names `changed` is also read by through the links of `all`: a link whose target
    /// (where it leads, and where its text leads without the links on the way) is a changed
    /// name or above one adds that name under the link; a link that is itself changed adds
    /// every file beneath its target. Repeated until nothing is added (links through links),
    /// at most 8 rounds and [`WALK_MAX`] names: past those, what was added so far and `false`
    /// (the list is then incomplete).
    fn through_links(&self, changed: &[PathBuf], all: &Listing) -> (Vec<PathBuf>, bool) {
        use std::collections::BTreeSet;
        // Ordered by components, the names beneath a path follow it: each link's look-up is a
        // range, not a pass over every name.
        let beneath = |set: &BTreeSet<PathBuf>, t: &Path| -> Vec<PathBuf> {
            set.range(t.to_path_buf()..)
                .take_while(|n| n.starts_with(t))
                .cloned()
                .collect()
        };
        let files: BTreeSet<PathBuf> = all.files.iter().cloned().collect();
        let mut names: BTreeSet<PathBuf> = changed.iter().cloned().collect();
        let targets: Vec<(PathBuf, Vec<PathBuf>)> = all
            .links
            .iter()
            .map(|l| (l.clone(), self.link_targets(l)))
            .collect();
        let mut added: Vec<PathBuf> = Vec::new();
        for _ in 0..8 {
            let mut round: Vec<PathBuf> = Vec::new();
            for (l, ts) in &targets {
                let own = names.contains(l);
                for t in ts {
                    let mut under = beneath(&names, t);
                    if own {
                        under.extend(beneath(&files, t));
                    }
                    for n in under {
                        // A name already through this link (a link to a directory above
                        // itself, `mise -> .`) is not taken through it again.
                        if n.starts_with(l) {
                            continue;
                        }
                        let rest = n.strip_prefix(t).unwrap_or(&n);
                        let via = if rest.as_os_str().is_empty() {
                            l.clone()
                        } else {
                            l.join(rest)
                        };
                        if !names.contains(&via) {
                            round.push(via);
                        }
                    }
                }
            }
            if round.is_empty() {
                return (added, true);
            }
            for r in round {
                if names.insert(r.clone()) {
                    added.push(r);
                }
            }
            if names.len() > WALK_MAX {
                return (added, false);
            }
        }
        (added, false)
    }

    /// Where link `l` (relative to the worktree) leads inside the worktree, relative to it:
    /// physically (every link on the way followed) and by its own text alone (joined to its
    /// directory, `..` taken lexically), each when inside.
    fn link_targets(&self, l: &Path) -> Vec<PathBuf> {
        let mut v = Vec::new();
        let full = self.worktree.join(l);
        if let Ok(t) = std::fs::canonicalize(&full) {
            if let Ok(rel) = t.strip_prefix(&self.worktree) {
                v.push(rel.to_path_buf());
            }
        }
        if let Ok(text) = std::fs::read_link(&full) {
            let mut lex = if text.is_absolute() {
                PathBuf::new()
            } else {
                full.parent().map(Path::to_path_buf).unwrap_or_default()
            };
            for c in text.components() {
                match c {
                    std::path::Component::ParentDir => {
                        lex.pop();
                    }
                    std::path::Component::Normal(n) => lex.push(n),
                    std::path::Component::RootDir => lex.push("/"),
                    _ => {}
                }
            }
            if let Ok(rel) = lex.strip_prefix(&self.worktree) {
                if !v.iter().any(|x| x == rel) {
                    v.push(rel.to_path_buf());
                }
            }
        }
        v
    }

    /// The files under `dir` (relative to the worktree) into `out`; `dir` into `unread` when
    /// it cannot be read whole.
    fn walk_into(
        &self,
        dir: &Path,
        out: &mut Vec<PathBuf>,
        unread: &mut Vec<PathBuf>,
        budget: &mut usize,
    ) {
        let mut found = Listing::default();
        if walk_names(&self.worktree, dir, false, &mut found, budget) {
            out.extend(found.files);
        } else {
            unread.push(dir.to_path_buf());
        }
    }

    /// The session's start less 100 ms, the coarse clock's tick of the filesystems' times.
    fn since(&self) -> std::time::SystemTime {
        self.started
            .checked_sub(std::time::Duration::from_millis(100))
            .unwrap_or(self.started)
    }

    /// The paths `git diff --name-only` gives against `revs` (one commit: with the worktree;
    /// two: between them), no renames, external diff or textconv run, submodules' own work
    /// left out; empty when git fails.
    fn diff_names(&self, revs: &[&str]) -> Vec<String> {
        let mut args = vec![
            "diff",
            "--name-only",
            "-z",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            crate::worktrees::IGNORE_SUBMODULE_WORK,
        ];
        args.extend_from_slice(revs);
        git(&self.worktree, &args).map(nul_list).unwrap_or_default()
    }

    /// The paths (relative to the worktree, as git names them) that the session changed
    /// since it started and that a merge of its work would bring: files of the branch or of
    /// the worktree that differ from the start commit, and untracked files, ignored ones
    /// included (a wholly ignored directory as one `dir/` entry). Empty for a worktree tyba did not create, or when git fails.
    pub fn changed_paths(&self) -> Vec<String> {
        let Some(start) = self.start_commit.as_ref() else {
            return Vec::new();
        };
        let mut v = self.diff_names(&[start]);
        v.extend(
            git(
                &self.worktree,
                &["ls-files", "--others", "--exclude-standard", "-z"],
            )
            .map(nul_list)
            .unwrap_or_default(),
        );
        // Ignored files too: a `.gitignore` the agent writes must not hide what it planted
        // (`.claude/settings.json`, `.envrc`). A wholly ignored directory is one entry
        // (`--directory`), so `target/` or `node_modules/` cost one line, not their trees;
        // a linked worktree starts with no ignored file, so each one is the session's.
        v.extend(
            git(
                &self.worktree,
                &[
                    "ls-files",
                    "--others",
                    "--ignored",
                    "--exclude-standard",
                    "--directory",
                    "-z",
                ],
            )
            .map(nul_list)
            .unwrap_or_default(),
        );
        v.sort();
        v.dedup();
        v
    }

    /// The lines printed at the end for a kept worktree: where the work is, how to review it,
    /// merge it and remove the worktree.
    pub fn review_hint(&self, commits: usize, uncommitted: usize) -> Vec<String> {
        let (Some(branch), Some(repo)) = (self.created_branch.as_ref(), self.main_repo.as_ref())
        else {
            return Vec::new();
        };
        // Every word of a command to paste is shell-quoted (names shown literally, `$(…)`
        // inert; `crate::broker::text::shell_word`).
        let q = |p: &Path| crate::broker::text::shell_word(&p.to_string_lossy());
        let (r, wt) = (q(repo), q(&self.worktree));
        let qb = crate::broker::text::shell_word(branch);
        let base = self
            .base_branch
            .clone()
            .or_else(|| {
                self.start_commit
                    .as_ref()
                    .map(|c| c[..c.len().min(12)].to_string())
            })
            .unwrap_or_else(|| "HEAD".into());
        let mut v = vec![format!(
            "the session's work is on branch {qb} ({commits} commit{}) in {wt}",
            if commits == 1 { "" } else { "s" }
        )];
        let on_branch = git(&self.worktree, &["symbolic-ref", "--quiet", "HEAD"])
            .ok()
            .is_some_and(|r| r.trim() == format!("refs/heads/{branch}"));
        if !on_branch {
            v.push(format!(
                "  the worktree is no longer on {qb} (switched or detached): see git -C {wt} log -1 HEAD before removing it"
            ));
        }
        if uncommitted > 0 {
            v.push(format!(
                "  {uncommitted} uncommitted path{} there, not in the branch yet: git -C {wt} status",
                if uncommitted == 1 { "" } else { "s" }
            ));
        }
        let range = crate::broker::text::shell_word(&format!("{base}...{branch}"));
        v.push(format!("  review: git -C {r} diff {range}"));
        v.push(format!("  merge:  git -C {r} merge {qb}"));
        v.push(format!(
            "  remove: tyba clean (once merged), or git -C {r} worktree remove --force {wt} && git -C {r} branch -D {qb}"
        ));
        v
    }

    /// The text printed at the end: where the worktree is and how to remove it.
    pub fn removal_hint(&self) -> Option<String> {
        let branch = self.created_branch.as_ref()?;
        let repo = self.main_repo.as_ref()?;
        Some(format!(
            "the session's worktree is kept at {wt} (branch {branch}); remove it with: git -C {repo} worktree remove --force {wt} && git -C {repo} branch -D {branch}",
            wt = crate::broker::text::shell_word(&self.worktree.to_string_lossy()),
            repo = crate::broker::text::shell_word(&repo.to_string_lossy()),
            branch = crate::broker::text::shell_word(branch),
        ))
    }
}

/// A new random session id (12 hex digits from the kernel's random source).
pub fn new_session_id() -> String {
    let mut b = [0u8; 6];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b));
    if ok.is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let mixed = t ^ (u128::from(std::process::id()) << 64);
        for (i, x) in b.iter_mut().enumerate() {
            *x = (mixed >> (i * 8)) as u8;
        }
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn git(dir: &Path, args: &[&str]) -> Result<String, SessionError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(crate::worktrees::HARDENED)
        .args(args)
        .env("GIT_NO_LAZY_FETCH", "1")
        .output()
        .map_err(|source| SessionError::Io {
            what: "cannot run git in",
            path: dir.to_path_buf(),
            source,
        })?;
    if !out.status.success() {
        return Err(SessionError::Git {
            args: args.join(" "),
            dir: dir.to_path_buf(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .trim_end_matches('\n')
        .to_string())
}

/// The top level of the git worktree containing `dir`, if any.
pub fn repo_toplevel(dir: &Path) -> Option<PathBuf> {
    git(dir, &["rev-parse", "--show-toplevel"])
        .ok()
        .map(PathBuf::from)
}

/// The git layout of the worktree at `dir`, if it is in a repository.
///
/// Found the way git finds it for a worktree (`gitrepository-layout(5)`), without running git
/// (a launch must stay fast): the nearest `.git` upwards, a directory or a `gitdir: PATH` file,
/// and the git dir's `commondir` file for linked worktrees. Falls back to `git rev-parse`
/// when `.git` is neither.
pub fn git_layout(dir: &Path) -> Option<GitLayout> {
    let mut cur = Some(dir);
    while let Some(d) = cur {
        let dotgit = d.join(".git");
        if let Ok(meta) = std::fs::symlink_metadata(&dotgit) {
            // A real `.git` directory here is this checkout's own; a `.git` file (`gitdir:`)
            // or link names a git dir elsewhere, which is only a claim until it names this
            // checkout back.
            let in_place = meta.is_dir();
            let git_dir = if in_place || meta.file_type().is_symlink() {
                dotgit
            } else if meta.is_file() {
                let text = std::fs::read_to_string(&dotgit).ok()?;
                match text.lines().next().and_then(|l| l.strip_prefix("gitdir:")) {
                    Some(p) => d.join(p.trim()),
                    None => return git_layout_by_git(dir),
                }
            } else {
                return git_layout_by_git(dir);
            };
            // A `commondir` makes this a linked worktree of another repository only when that
            // repository lists it (review 25's r25-01: a `.git/commondir` the agent unpacked
            // in a plain directory named the person's `~/proj/.git`, and the next session
            // there took that repository's identity, its approved policy and its objects). A
            // `.git` file or link naming another checkout's git dir, a bare repository, or one
            // whose `core.worktree` is elsewhere is no repository of this checkout (review
            // 26's r26-01): the directory is then no git checkout for tyba.
            let common = match std::fs::read_to_string(git_dir.join("commondir")) {
                Ok(c) if registered_worktree(d, &git_dir, &git_dir.join(c.trim())) => {
                    git_dir.join(c.trim())
                }
                Ok(_) if !in_place => return None,
                _ if !in_place && !may_be_this_checkouts(d, &git_dir) => return None,
                _ => git_dir.clone(),
            };
            return Some(GitLayout {
                git_dir: canonical(&git_dir),
                common_dir: canonical(&common),
            });
        }
        cur = d.parent();
    }
    None
}

/// Whether `git_dir`, named by the `.git` file or link of the checkout at `top` and holding no
/// `commondir`, may be that checkout's repository: not another checkout's own `.git`
/// directory, not a bare repository, and with no `core.worktree` naming another directory
/// (git-config(1)). A separate git dir (`git init --separate-git-dir`) names no checkout
/// back and may be; a submodule's (`.git/modules/<name>`, whose `core.worktree` is the
/// submodule) is.
fn may_be_this_checkouts(top: &Path, git_dir: &Path) -> bool {
    let Ok(g) = std::fs::canonicalize(git_dir) else {
        return false;
    };
    if g.file_name().is_some_and(|n| n == ".git") {
        if let Some(owner) = g.parent() {
            let elsewhere = std::fs::canonicalize(top).ok().as_deref() != Some(owner);
            if elsewhere && std::fs::symlink_metadata(owner.join(".git")).is_ok_and(|m| m.is_dir())
            {
                return false;
            }
        }
    }
    if config_value(&g, "--bool", "core.bare").as_deref() == Some("true") {
        return false;
    }
    worktree_setting_names(&g, top).unwrap_or(true)
}

/// Whether the `core.worktree` of `git_dir` (git-config(1), relative to the git dir) is the
/// checkout at `top`; `None` when it is not set.
fn worktree_setting_names(git_dir: &Path, top: &Path) -> Option<bool> {
    let w = config_value(git_dir, "--path", "core.worktree")?;
    Some(std::fs::canonicalize(git_dir.join(w)).ok() == std::fs::canonicalize(top).ok())
}

/// Whether the git layout `layout` of the checkout at `top` names that checkout back: its
/// `.git` is a directory in place, it is a worktree its repository lists, or its git dir's
/// `core.worktree` is `top`. What approvals of a repository's policy are keyed by
/// (`tyba policy allow`): a `.git` file that only claims a repository (a separate git dir, or
/// one the agent laid) keys by the checkout itself (review 26's r26-01).
pub fn names_checkout_back(top: &Path, layout: &GitLayout) -> bool {
    let dotgit = top.join(".git");
    if std::fs::symlink_metadata(&dotgit).is_ok_and(|m| m.is_dir())
        && std::fs::canonicalize(&dotgit).ok().as_deref() == Some(layout.git_dir.as_path())
    {
        return true;
    }
    if layout.git_dir != layout.common_dir {
        return registered_worktree(top, &layout.git_dir, &layout.common_dir);
    }
    worktree_setting_names(&layout.git_dir, top) == Some(true)
}

/// `git config --file <git_dir>/config TYPE --get KEY` with tyba's hardened git
/// (git-config(1)), when set.
fn config_value(git_dir: &Path, kind: &str, key: &str) -> Option<String> {
    let out = Command::new("git")
        .args(crate::worktrees::HARDENED)
        .arg("config")
        .arg("--file")
        .arg(git_dir.join("config"))
        .args([kind, "--get", key])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Whether the git dir `git_dir` of the checkout at `top`, whose `commondir` file names
/// `common`, is a linked worktree `common` lists (gitrepository-layout(5), git-worktree(1)):
/// the common dir itself, or its `worktrees/<id>/` whose `gitdir` file names the checkout's
/// `.git`. Anything else is a claim only: its own git dir is its repository.
fn registered_worktree(top: &Path, git_dir: &Path, common: &Path) -> bool {
    let (Ok(g), Ok(c)) = (
        std::fs::canonicalize(git_dir),
        std::fs::canonicalize(common),
    ) else {
        return false;
    };
    if g == c {
        return true;
    }
    if g.parent() != Some(c.join("worktrees").as_path()) {
        return false;
    }
    // Absolute, or relative to the worktree's admin dir (`worktree.useRelativePaths`).
    let back = std::fs::read_to_string(g.join("gitdir"))
        .ok()
        .and_then(|t| std::fs::canonicalize(g.join(t.trim())).ok());
    back.is_some() && back == std::fs::canonicalize(top.join(".git")).ok()
}

/// Whether git run in the checkout would obey `path` (relative to `worktree`) as a
/// repository's configuration, hooks or redirection, whatever the repository's directory is
/// called (review 8, r8-02: the policy knows git dirs by a `.git` name, while git takes any
/// directory holding `HEAD`, `objects/` and `refs/` for one,
/// [`crate::push_relay::is_git_dir`], and follows a `.git` file's `gitdir:`): the reason,
/// when it would. The checkout's own `.git` is the person's (its files git obeys are bound
/// read-only in a `--here` session).
pub fn git_obeys(worktree: &Path, path: &str) -> Option<String> {
    let p = Path::new(path);
    if p.file_name().is_some_and(|n| n == ".git")
        && std::fs::symlink_metadata(worktree.join(p)).is_ok_and(|m| m.is_file())
    {
        return Some(
            "a `.git` file: names the directory git takes for the repository there".into(),
        );
    }
    let d = p.ancestors().skip(1).find(|d| {
        !d.as_os_str().is_empty()
            && *d != Path::new(".git")
            && crate::push_relay::is_git_dir(&worktree.join(d))
    })?;
    let rest = p.strip_prefix(d).unwrap_or(p);
    let obeyed = ["config", "config.worktree", "commondir"]
        .iter()
        .any(|f| rest == Path::new(f))
        || rest.starts_with("hooks")
        || rest.starts_with("info");
    obeyed.then(|| {
        format!(
            "the configuration or hooks of the git repository in {}: run by git there",
            d.display()
        )
    })
}

/// What [`Session::changed_here`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HereChanges {
    /// The paths changed, relative to the worktree (shown lossily when not UTF-8).
    pub paths: Vec<String>,
    /// Directories that could not be read whole (`dir/`): their files are not judged, so
    /// the person is told to look at them.
    pub unread: Vec<String>,
    /// Whether the checkout itself could not be read whole ([`WALK_MAX`] names, or a
    /// directory that cannot be read): its files and the links to what changed were not all
    /// looked at.
    pub checkout_unread: bool,
}

/// Whether `p`'s status change time is not older than `since` (false when it cannot be read).
fn changed_since(p: &Path, since: std::time::SystemTime) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p)
        .ok()
        .and_then(|m| {
            let ctime = std::time::UNIX_EPOCH.checked_add(std::time::Duration::new(
                u64::try_from(m.ctime()).ok()?,
                u32::try_from(m.ctime_nsec()).ok()?,
            ))?;
            Some(ctime >= since)
        })
        .unwrap_or(false)
}

/// The non-empty entries of git's `-z` output.
fn nul_list(out: String) -> Vec<String> {
    out.split('\0')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// Entries [`Session::changed_here`] reads from the disk at most, in all (names only, as
/// `getdents64(2)` gives them with their types): past it, what is left unread is named for
/// the person to look at.
const WALK_MAX: usize = 500_000;

/// The names of a checkout ([`walk_names`]).
#[derive(Debug, Default)]
struct Listing {
    /// Every entry that is not a directory (links included), relative to the worktree.
    files: Vec<PathBuf>,
    /// The links among them.
    links: Vec<PathBuf>,
}

/// Adds to `all` every name under `root/rel` (but `root/.git` when `skip_git`), links not
/// followed, `budget` entries at most; `false` when the budget ran out or a directory cannot
/// be read (what was found is then incomplete).
fn walk_names(
    root: &Path,
    rel: &Path,
    skip_git: bool,
    all: &mut Listing,
    budget: &mut usize,
) -> bool {
    let Ok(rd) = std::fs::read_dir(root.join(rel)) else {
        return false;
    };
    for e in rd {
        let Ok(e) = e else {
            return false;
        };
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        if skip_git && rel.as_os_str().is_empty() && e.file_name() == ".git" {
            continue;
        }
        let child = rel.join(e.file_name());
        match e.file_type() {
            Ok(t) if t.is_dir() => {
                if !walk_names(root, &child, skip_git, all, budget) {
                    return false;
                }
            }
            Ok(t) => {
                if t.is_symlink() {
                    all.links.push(child.clone());
                }
                all.files.push(child);
            }
            Err(_) => return false,
        }
    }
    true
}

/// The commit HEAD names, read from the git dir's files (gitrepository-layout(5)): `HEAD`
/// (a detached hash, or `ref: NAME`, followed up to 5 symbolic refs), the loose ref in the
/// common dir, else its line in `packed-refs`. `None` for an unborn branch, a reftable
/// repository or anything unreadable. No git process: a launch pays a few reads.
pub fn head_commit(layout: &GitLayout) -> Option<String> {
    let is_hash =
        |s: &str| (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit());
    let mut text = std::fs::read_to_string(layout.git_dir.join("HEAD")).ok()?;
    for _ in 0..5 {
        let t = text.trim();
        if is_hash(t) {
            return Some(t.to_string());
        }
        let name = t.strip_prefix("ref:")?.trim();
        if !name.starts_with("refs/") || name.split('/').any(|c| c.is_empty() || c == "..") {
            return None;
        }
        // Per-worktree refs live in the worktree's git dir, the rest in the common dir.
        let dir = if name.starts_with("refs/bisect/") || name.starts_with("refs/worktree/") {
            &layout.git_dir
        } else {
            &layout.common_dir
        };
        match std::fs::read_to_string(dir.join(name)) {
            Ok(t) => text = t,
            Err(_) => {
                let packed = std::fs::read_to_string(layout.common_dir.join("packed-refs")).ok()?;
                return packed.lines().find_map(|l| {
                    let (h, n) = l.split_once(' ')?;
                    (n == name && is_hash(h)).then(|| h.to_string())
                });
            }
        }
    }
    None
}

fn git_layout_by_git(dir: &Path) -> Option<GitLayout> {
    let git_dir = git(dir, &["rev-parse", "--absolute-git-dir"]).ok()?;
    let common = git(
        dir,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )
    .ok()?;
    Some(GitLayout {
        git_dir: canonical(Path::new(&git_dir)),
        common_dir: canonical(Path::new(&common)),
    })
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The default parent of new worktrees: `$XDG_STATE_HOME/tyba/worktrees`, else
/// `$HOME/.local/state/tyba/worktrees`, else `<tmp>/tyba-worktrees`.
pub fn default_worktrees_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(x).join("tyba/worktrees");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(h).join(".local/state/tyba/worktrees");
    }
    std::env::temp_dir().join("tyba-worktrees")
}

/// Refuses a working directory for the agent that the sandbox could not confine it to in any
/// useful sense: the agent gets read and write access to its whole worktree, so a worktree
/// that is `/`, a system directory, the person's home, a directory holding the home, or a
/// directory inside one of the home's hidden directories (`~/.ssh`, `~/.config`, `~/.local`
/// with tyba's own state and logs…) would hand it the credentials, configuration the
/// person's programs run, shell startup files or other sessions' audit logs (DESIGN.md §5:
/// the agent is confined to its worktree). Directories are compared by identity (device and
/// inode) too, so a bind mount or another name of the home is the home. `home` is the
/// person's home.
///
/// # Errors
/// [`SessionError::UnsafeWorktree`] with the reason.
pub fn check_worktree(wt: &Path, home: Option<&Path>) -> Result<(), SessionError> {
    use std::os::unix::fs::MetadataExt;
    let refuse = |why: String| {
        Err(SessionError::UnsafeWorktree {
            path: wt.to_path_buf(),
            why,
        })
    };
    let id = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let wt_id = id(wt);
    if wt.parent().is_none() || (wt_id.is_some() && wt_id == id(Path::new("/"))) {
        return refuse("it is the root of the filesystem".into());
    }
    if crate::outside_fs::SYSTEM_ROOTS
        .iter()
        .any(|d| Path::new(d) == wt || (wt_id.is_some() && wt_id == id(Path::new(d))))
    {
        return refuse("it is a system directory".into());
    }
    let Some(h) = home else {
        return Ok(());
    };
    let h = canonical(h);
    let home_id = id(&h);
    // The home, or a directory holding it (by name, or the same directory by identity).
    if h == wt || (home_id.is_some() && wt_id == home_id) {
        return refuse(
            "it is your home directory, which holds your credentials, shell startup files and tyba's own state".into(),
        );
    }
    if h.starts_with(wt) || (wt_id.is_some() && h.ancestors().skip(1).any(|a| id(a) == wt_id)) {
        return refuse("it contains your home directory".into());
    }
    // Inside the home (by name, or through another name of it): not in a hidden directory.
    let rel = wt.strip_prefix(&h).ok().map(Path::to_path_buf).or_else(|| {
        let home_id = home_id?;
        wt.ancestors()
            .find(|a| id(a) == Some(home_id))
            .and_then(|a| wt.strip_prefix(a).ok().map(Path::to_path_buf))
    });
    // The worktrees tyba makes for sessions live there, and are projects.
    let worktrees = canonical(&default_worktrees_dir());
    let ours = wt.starts_with(&worktrees) && wt != worktrees;
    if let Some(first) = rel.as_ref().and_then(|r| r.components().next()) {
        let name = first.as_os_str().to_string_lossy();
        if name.starts_with('.') && !ours {
            return refuse(format!(
                "it is inside {}, a hidden directory of your home (configuration your programs run, credentials, tyba's own state and logs)",
                h.join(&*name).display()
            ));
        }
    }
    Ok(())
}

/// Prepares the session's worktree from the current directory `cwd`.
///
/// Outside a git repository a `New` choice falls back to using `cwd` itself (`--here` is
/// implied).
///
/// # Errors
/// [`SessionError`] when git fails or a directory cannot be made.
pub fn prepare(cwd: &Path, choice: &WorktreeChoice) -> Result<Session, SessionError> {
    let id = new_session_id();
    match choice {
        WorktreeChoice::Existing(dir) => {
            let wt = std::fs::canonicalize(dir).map_err(|source| SessionError::Io {
                what: "cannot open worktree",
                path: dir.clone(),
                source,
            })?;
            check_worktree(&wt, crate::broker::paths::env_dir("HOME").as_deref())?;
            let git = git_layout(&wt);
            let here_head = git.as_ref().and_then(head_commit);
            Ok(Session {
                id,
                worktree: wt,
                git,
                created_branch: None,
                main_repo: None,
                start_commit: None,
                base_branch: None,
                warnings: Vec::new(),
                started: std::time::SystemTime::now(),
                here_head,
            })
        }
        WorktreeChoice::New { at, branch } => {
            let Some(top) = repo_toplevel(cwd) else {
                let wt = std::fs::canonicalize(cwd).map_err(|source| SessionError::Io {
                    what: "cannot open",
                    path: cwd.to_path_buf(),
                    source,
                })?;
                check_worktree(&wt, crate::broker::paths::env_dir("HOME").as_deref())?;
                let warning = format!(
                    "{} is not in a git repository: the agent works in this directory itself, with no worktree or branch of its own to review (the kernel sandbox still confines it to this directory)",
                    wt.display()
                );
                return Ok(Session {
                    id,
                    worktree: wt,
                    git: None,
                    created_branch: None,
                    main_repo: None,
                    start_commit: None,
                    base_branch: None,
                    warnings: vec![warning],
                    started: std::time::SystemTime::now(),
                    here_head: None,
                });
            };
            let Ok(start) = git(&top, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
            else {
                return Err(SessionError::NoCommits(top));
            };
            let start = start.trim().to_string();
            let base_branch = git(&top, &["symbolic-ref", "--quiet", "--short", "HEAD"])
                .ok()
                .map(|b| b.trim().to_string())
                .filter(|b| !b.is_empty());
            let mut warnings = Vec::new();
            let dirty = git(
                &top,
                &[
                    "status",
                    "--porcelain",
                    "--untracked-files=normal",
                    crate::worktrees::IGNORE_SUBMODULE_WORK,
                ],
            )
            .map(|s| s.lines().count())
            .unwrap_or(0);
            if dirty > 0 {
                warnings.push(format!(
                    "{} has {dirty} uncommitted path{} (changes or untracked files): the session's worktree starts from HEAD ({}) without them; commit or stash them first, or run the agent in this directory with --here",
                    top.display(),
                    if dirty == 1 { "" } else { "s" },
                    &start[..start.len().min(12)]
                ));
            }
            let name = top
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "repo".into());
            let path = match at {
                Some(p) => p.clone(),
                None => default_worktrees_dir().join(format!("{name}-{id}")),
            };
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|source| SessionError::Io {
                    what: "cannot create",
                    path: parent.to_path_buf(),
                    source,
                })?;
            }
            let branch = branch.clone().unwrap_or_else(|| format!("tyba/{id}"));
            let path_s = path.to_string_lossy().into_owned();
            git(
                &top,
                &["worktree", "add", "--quiet", "-b", &branch, &path_s, &start],
            )?;
            let wt = canonical(&path);
            let git = git_layout(&wt);
            Ok(Session {
                id,
                worktree: wt,
                git,
                created_branch: Some(branch),
                main_repo: Some(top),
                start_commit: Some(start),
                base_branch,
                warnings,
                started: std::time::SystemTime::now(),
                here_head: None,
            })
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// The directories whose grant would hand the agent the person's files are refused; a
    /// project directory, including one inside the home, is not.
    #[test]
    fn the_root_system_dirs_and_the_home_are_no_worktree() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home/me");
        std::fs::create_dir_all(home.join("src/project")).unwrap();
        let home = std::fs::canonicalize(&home).unwrap();
        for bad in [
            PathBuf::from("/"),
            PathBuf::from("/etc"),
            PathBuf::from("/usr"),
            home.clone(),
            home.parent().unwrap().to_path_buf(),
            t.path().canonicalize().unwrap(),
        ] {
            let e = check_worktree(&bad, Some(&home)).unwrap_err();
            assert!(
                matches!(e, SessionError::UnsafeWorktree { .. }),
                "{}: {e}",
                bad.display()
            );
        }
        for hidden in [".ssh", ".config/git", ".local/state/tyba/log"] {
            std::fs::create_dir_all(home.join(hidden)).unwrap();
            let e = check_worktree(&home.join(hidden), Some(&home)).unwrap_err();
            assert!(e.to_string().contains("hidden directory"), "{hidden}: {e}");
        }
        // Another name of the home (a symbolic link here; a bind mount is the same
        // directory by identity too) is the home, and its hidden directories are too.
        let other = t.path().join("other-name");
        std::os::unix::fs::symlink(&home, &other).unwrap();
        let e = check_worktree(&other, Some(&home)).unwrap_err();
        assert!(e.to_string().contains("your home directory"), "{e}");
        let e = check_worktree(&other.join(".ssh"), Some(&home)).unwrap_err();
        assert!(e.to_string().contains("hidden directory"), "{e}");
        for good in [home.join("src/project"), home.join("src")] {
            check_worktree(&good, Some(&home)).unwrap();
        }
        // Without a home, only the root and the system directories are known.
        check_worktree(&home, None).unwrap();
        assert!(check_worktree(Path::new("/"), None).is_err());
    }

    fn git_ok(dir: &Path, args: &[&str]) {
        let st = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .status()
            .unwrap();
        assert!(st.success(), "git {args:?}");
    }

    #[test]
    fn layout_matches_git_for_main_and_linked_worktrees() {
        let t = tempfile::tempdir().unwrap();
        let repo = t.path().join("repo");
        std::fs::create_dir_all(repo.join("sub")).unwrap();
        git_ok(&repo, &["init", "-q"]);
        git_ok(
            &repo,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@e",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "i",
            ],
        );
        git_ok(
            &repo,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "x",
                t.path().join("wt").to_str().unwrap(),
            ],
        );
        for d in [repo.clone(), repo.join("sub"), t.path().join("wt")] {
            assert_eq!(git_layout(&d), git_layout_by_git(&d), "{}", d.display());
        }
        assert_eq!(git_layout(t.path()), None);
        // Review 25's r25-01: a `.git` laid in a plain directory whose `commondir` names the
        // repository above is not one of its worktrees: its own git dir is its repository.
        // The control: the registered worktree `wt` keeps the repository's common dir.
        let plain = t.path().join("plain");
        std::fs::create_dir_all(plain.join(".git")).unwrap();
        std::fs::write(
            plain.join(".git/commondir"),
            repo.join(".git").to_str().unwrap(),
        )
        .unwrap();
        let forged = git_layout(&plain).unwrap();
        assert_eq!(forged.common_dir, forged.git_dir);
        assert_eq!(forged.git_dir, plain.join(".git").canonicalize().unwrap());
        let real = repo.join(".git").canonicalize().unwrap();
        assert_eq!(git_layout(&t.path().join("wt")).unwrap().common_dir, real);
        // A `.git` file naming a worktree's admin dir that lists another checkout: the same.
        let other = t.path().join("other");
        std::fs::create_dir_all(&other).unwrap();
        let admin = git_layout(&t.path().join("wt")).unwrap().git_dir;
        std::fs::write(other.join(".git"), format!("gitdir: {}\n", admin.display())).unwrap();
        assert_eq!(git_layout(&other), None);
        // Review 26's r26-01: a `.git` file or link naming another checkout's own `.git`.
        let file = t.path().join("file");
        std::fs::create_dir_all(&file).unwrap();
        std::fs::write(file.join(".git"), format!("gitdir: {}\n", real.display())).unwrap();
        assert_eq!(git_layout(&file), None);
        let link = t.path().join("link");
        std::fs::create_dir_all(&link).unwrap();
        std::os::unix::fs::symlink(&real, link.join(".git")).unwrap();
        assert_eq!(git_layout(&link), None);
        // A separate git dir is a repository there, but vouches for no other checkout's
        // approvals; the person's own checkout and registered worktree do (the controls).
        let sep = t.path().join("sep");
        git_ok(
            t.path(),
            &[
                "init",
                "-q",
                "--separate-git-dir",
                t.path().join("store.git").to_str().unwrap(),
                sep.to_str().unwrap(),
            ],
        );
        let l = git_layout(&sep).unwrap();
        assert_eq!(
            l.git_dir,
            t.path().join("store.git").canonicalize().unwrap()
        );
        assert!(!names_checkout_back(&sep, &l));
        assert!(names_checkout_back(&repo, &git_layout(&repo).unwrap()));
        let wt = t.path().join("wt");
        assert!(names_checkout_back(&wt, &git_layout(&wt).unwrap()));
    }
}
