//! The agent's new git objects, kept apart until checked (issue 13 classes 5 and 6; review
//! 27's r27-01).
//!
//! git names an object by the hash of its content, and trusts the name: it does not hash an
//! object again when it checks it out (`git-fsck(1)` does). So an agent that can write the
//! person's object store can rewrite an existing object under its own name: the person's
//! `main` keeps pointing at the same commit, their index and refs stay the same, and their
//! next `git restore`, `checkout` or `reset --hard` installs the agent's content (a
//! `Makefile`, a `.envrc`, tyba's own policy) with nothing to review. The same goes for the
//! files git reads beside the objects (`objects/info/commit-graph` holds each commit's tree,
//! a pack's index maps names to content).
//!
//! So in a session with its own branch ([`crate::own_branch`]) the agent never writes the
//! person's object store. The store is the lower layer of an overlay mounted over it in the
//! sandbox's mount namespace (`Documentation/filesystems/overlayfs.rst`): what the agent's
//! git writes (loose objects, packs, a commit-graph) goes to the upper layer, a directory of
//! the session's private branch directory in tyba's state dir, and every existing object, pack
//! and index stays as it is (a write to one copies it up; a removal leaves a whiteout in the
//! upper layer). At the end, outside the sandbox, [`carry_in`] hands the agent's new objects
//! to git in the person's repository, which names each by hashing its content
//! (`git-index-pack(1)`, `git-unpack-objects(1)`): an object whose content does not match
//! the name the agent gave it is not carried, and nothing the agent wrote beside the objects
//! (a commit-graph, a multi-pack index, `info/alternates`, removals) is carried at all. The
//! session's branch moves only after that, to a commit the store then holds.
//!
//! The upper layer lives on the disk, in the private branch directory: when the supervisor
//! is killed, the objects wait there with the branch's tip, and the next `tyba run`, `tyba
//! worktrees` or `tyba clean` of the repository carries both in ([`crate::own_branch::recover`]).
//!
//! Not layered: `--here` (the agent works on the person's own index and branch, which must
//! name objects the person's store holds while the session runs) and sessions without a
//! branch of their own (no state dir, a reftable repository); `docs/sandbox.md` says so.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::dirfd::DirFd;

/// The upper layer's directory in a private branch directory.
pub const UPPER: &str = "objects-upper";
/// The overlay's work directory (on the upper layer's filesystem).
pub const WORK: &str = "objects-work";
/// The directory the checked objects are gathered in for git, beside the upper layer.
const GATHER: &str = "objects-gather";

/// The overlay over a common git dir's `objects/` (stage 2 mounts it: [`mount`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectsLayer {
    /// The object store: the overlay's lower layer and its mount point.
    pub objects: PathBuf,
    /// The upper layer ([`UPPER`] in the session's private branch directory).
    pub upper: PathBuf,
    /// The overlay's work directory ([`WORK`], on the same filesystem).
    pub work: PathBuf,
}

/// Mounts `l` over its object store (stage 2, in the sandbox's mount namespace, after the git
/// layer and before any Landlock rule: the rule on `objects/` is then made on the overlay).
/// Not `volatile`: the agent's commits are kept on the disk as git asked (`fsync(2)`).
///
/// # Errors
/// A description of the failure (the caller keeps the store read-only then).
pub(crate) fn mount(l: &ObjectsLayer) -> Result<(), String> {
    use nix::mount::MsFlags;
    crate::caches::mount_overlay(
        &l.objects,
        &l.upper,
        &l.work,
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        false,
    )
}

/// Most entries of the upper layer looked at (loose objects, packs, and the rest).
const MAX_ENTRIES: usize = 4_000_000;

/// Largest loose object compared with the repository's copy (bytes, compressed).
const MAX_COMPARED: u64 = 64 << 20;

/// Above this many objects git writes a pack instead of loose objects (its own
/// `transfer.unpackLimit` default, `git-config(1)`).
const UNPACK_LIMIT: usize = 100;

/// Errors carrying the agent's objects in: the objects stay in the upper layer, and the
/// session's branch is not moved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CarryInError {
    /// The upper layer or the gathering directory could not be read or made.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A git command failed.
    #[error("`git {args}` failed: {stderr}")]
    Git {
        /// The arguments, space-joined.
        args: String,
        /// What git said.
        stderr: String,
    },
}

/// What [`carry_in`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Carried {
    /// The loose objects the agent wrote that the repository did not hold, handed to git.
    pub loose: usize,
    /// The packs the agent's git wrote, handed to git.
    pub packs: usize,
    /// Names of objects the agent wrote that the repository still lacks after git hashed
    /// their content: their content is another object's, or no object at all.
    pub refused: Vec<String>,
    /// Names of the repository's loose objects the agent rewrote in its session (their copy
    /// in the upper layer differs from the repository's, which is unchanged).
    pub rewritten: Vec<String>,
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> CarryInError {
    let path = path.to_path_buf();
    move |source| CarryInError::Io { what, path, source }
}

/// `git --git-dir=<common> ARGS` with none of the person's `GIT_*` variables that would
/// point it at another repository or object store.
fn git(common: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("git");
    c.arg("--git-dir").arg(common).args(args);
    for v in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_COMMON_DIR",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_QUARANTINE_PATH",
    ] {
        c.env_remove(v);
    }
    c
}

fn failed(args: &[&str], stderr: &[u8]) -> CarryInError {
    CarryInError::Git {
        args: args.join(" "),
        stderr: String::from_utf8_lossy(stderr).trim().to_string(),
    }
}

/// Runs `cmd` with `input` on its standard input; its standard output.
fn run_with_input(mut cmd: Command, args: &[&str], input: &[u8]) -> Result<Vec<u8>, CarryInError> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| failed(args, e.to_string().as_bytes()))?;
    let mut stdin = child.stdin.take();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        if let Some(s) = stdin.as_mut() {
            let _ = s.write_all(&input);
        }
    });
    let out = child
        .wait_with_output()
        .map_err(|e| failed(args, e.to_string().as_bytes()))?;
    let _ = writer.join();
    if !out.status.success() {
        return Err(failed(args, &out.stderr));
    }
    Ok(out.stdout)
}

/// The names of `ids` the repository does not hold (`git cat-file --batch-check`).
fn missing(common: &Path, ids: &[String]) -> Result<Vec<String>, CarryInError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let args = ["cat-file", "--batch-check=%(objectname)"];
    let input: String = ids.iter().map(|i| format!("{i}\n")).collect();
    let out = run_with_input(git(common, &args), &args, input.as_bytes())?;
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .filter_map(|l| l.strip_suffix(" missing"))
        .map(str::to_string)
        .collect())
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// What the upper layer holds that could be objects: loose ones as `(directory, file name,
/// object name)`, and the names of the packs in `pack/`. Only regular files reached through
/// no link count (a whiteout is a character device, an agent's link is a link).
struct Found {
    loose: Vec<(OsString, OsString, String)>,
    packs: Vec<OsString>,
}

fn find(upper: &DirFd) -> Result<Found, CarryInError> {
    let mut f = Found {
        loose: Vec::new(),
        packs: Vec::new(),
    };
    let names = upper
        .names(MAX_ENTRIES)
        .map_err(io("cannot list", upper.path()))?;
    for n in names {
        let Some(s) = n.to_str() else { continue };
        if !upper.meta(&n).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        let Ok(d) = upper.open_dir(Path::new(&n)) else {
            continue;
        };
        if s == "pack" {
            for p in d.names(MAX_ENTRIES).map_err(io("cannot list", d.path()))? {
                if p.to_str().is_some_and(|p| p.ends_with(".pack"))
                    && d.meta(&p).is_ok_and(|m| m.is_file())
                {
                    f.packs.push(p);
                }
            }
        } else if is_hex(s, 2) {
            for o in d.names(MAX_ENTRIES).map_err(io("cannot list", d.path()))? {
                let Some(rest) = o.to_str() else { continue };
                // SHA-1 (38 more hex digits) or SHA-256 (62).
                if (is_hex(rest, 38) || is_hex(rest, 62)) && d.meta(&o).is_ok_and(|m| m.is_file()) {
                    f.loose.push((n.clone(), o.clone(), format!("{s}{rest}")));
                }
            }
        }
    }
    Ok(f)
}

/// Carries the objects the agent's git wrote in the upper layer `upper` into the object
/// store of the repository whose common git dir is `common`, each named by git from its
/// content (module doc). Loose objects the repository already holds are left (a copy-up of
/// an existing object, whatever it now holds); the others are gathered (hard links, in a
/// directory beside `upper` that holds nothing else: no agent's `info/alternates` or pack
/// is read with them) and packed by `git pack-objects`, whose stream `git unpack-objects`
/// (or, above [`UNPACK_LIMIT`] objects, `git index-pack --stdin`) hashes into the store;
/// each pack the agent's git wrote goes through `git index-pack --stdin --fix-thin`. Nothing
/// else of the upper layer is read. An absent `upper` carries nothing.
///
/// # Errors
/// [`CarryInError`] when the upper layer cannot be read or a git command fails; what was
/// carried before stays carried.
pub fn carry_in(common: &Path, upper: &Path) -> Result<Carried, CarryInError> {
    let mut done = Carried::default();
    let up = match DirFd::open(upper) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(done),
        Err(e) => return Err(io("cannot open", upper)(e)),
    };
    let found = find(&up)?;
    if found.loose.is_empty() && found.packs.is_empty() {
        return Ok(done);
    }
    let ids: Vec<String> = found.loose.iter().map(|(_, _, id)| id.clone()).collect();
    let new = missing(common, &ids)?;
    // A copy of an object the repository holds loose: git's own copy-up (it freshens an
    // object it would write again by setting its times) holds the same bytes; other bytes
    // are the agent's attempt to rewrite it, which the person hears of.
    let store = DirFd::open(&common.join("objects")).ok();
    for (dir, file, id) in &found.loose {
        if new.contains(id) {
            continue;
        }
        let rel = Path::new(dir).join(file);
        let theirs = store
            .as_ref()
            .and_then(|s| s.read_file(&rel, MAX_COMPARED).ok());
        let ours = up.read_file(&rel, MAX_COMPARED).ok();
        if let (Some(t), Some(o)) = (theirs, ours) {
            if t != o {
                done.rewritten.push(id.clone());
            }
        }
    }
    if !new.is_empty() {
        let parent = upper.parent().unwrap_or(upper);
        let gather_path = parent.join(GATHER);
        let _ = crate::sandbox::remove_tree(&gather_path);
        std::fs::create_dir(&gather_path).map_err(io("cannot create", &gather_path))?;
        let gather = DirFd::open(&gather_path).map_err(io("cannot open", &gather_path))?;
        let wanted: std::collections::HashSet<&str> = new.iter().map(String::as_str).collect();
        let mut listed = String::new();
        for (dir, file, id) in &found.loose {
            if !wanted.contains(id.as_str()) {
                continue;
            }
            let (Ok(from), Ok(to)) = (
                up.open_dir(Path::new(dir)),
                gather.make_dirs(Path::new(dir)),
            ) else {
                continue;
            };
            if from.hard_link(file, &to, file).is_ok() {
                listed.push_str(id);
                listed.push('\n');
                done.loose += 1;
            }
        }
        let pack_args = ["pack-objects", "--stdout", "-q", "--window=0"];
        let mut pack = git(common, &pack_args);
        pack.env("GIT_OBJECT_DIRECTORY", &gather_path);
        let stream = run_with_input(pack, &pack_args, listed.as_bytes());
        let _ = crate::sandbox::remove_tree(&gather_path);
        let stream = stream?;
        let take_args: &[&str] = if done.loose > UNPACK_LIMIT {
            &["index-pack", "--stdin"]
        } else {
            &["unpack-objects", "-q"]
        };
        run_with_input(git(common, take_args), take_args, &stream)?;
    }
    if !found.packs.is_empty() {
        let packs = up
            .open_dir(Path::new("pack"))
            .map_err(io("cannot open", &upper.join("pack")))?;
        let theirs = store
            .as_ref()
            .and_then(|s| s.open_dir(Path::new("pack")).ok());
        for p in &found.packs {
            // A copy-up of one of the repository's packs (git freshens a pack holding an
            // object it would write again): the repository's own stays as it is.
            if theirs.as_ref().is_some_and(|t| t.meta(p).is_ok()) {
                continue;
            }
            let file = packs
                .open_regular(Path::new(p))
                .map_err(io("cannot open", &upper.join("pack").join(p)))?;
            let args = ["index-pack", "--stdin", "--fix-thin"];
            let out = git(common, &args)
                .stdin(Stdio::from(file))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .output()
                .map_err(|e| failed(&args, e.to_string().as_bytes()))?;
            if !out.status.success() {
                return Err(failed(&args, &out.stderr));
            }
            done.packs += 1;
        }
    }
    done.refused = missing(common, &new)?;
    Ok(done)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn git_in(dir: &Path, args: &[&str], input: &[u8]) -> Vec<u8> {
        let mut c = Command::new("git");
        c.arg("-C").arg(dir).args(args);
        c.env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@e")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@e");
        run_with_input(c, args, input).unwrap()
    }

    fn text(b: Vec<u8>) -> String {
        String::from_utf8(b).unwrap().trim().to_string()
    }

    fn loose(store: &Path, id: &str) -> PathBuf {
        store.join(&id[..2]).join(&id[2..])
    }

    /// An upper layer as the agent's git (and the agent) leave it: a new loose object, a
    /// pack of new objects, a copy-up of the person's loose object with other bytes, a copy
    /// of the person's pack under its own name, an object whose bytes are another object's,
    /// a link named like an object, `info/alternates` and a commit-graph.
    #[test]
    fn only_objects_git_names_from_their_content_are_carried_in() {
        let t = tempfile::tempdir().unwrap();
        let (person, agent, upper) = (t.path().join("p"), t.path().join("a"), t.path().join("u"));
        for d in [&person, &agent] {
            std::fs::create_dir_all(d).unwrap();
            git_in(d, &["init", "-q", "-b", "main"], b"");
        }
        let common = person.join(".git");
        let packed = text(git_in(
            &person,
            &["hash-object", "-w", "--stdin"],
            b"packed\n",
        ));
        let base = common.join("objects/pack/pack");
        git_in(
            &person,
            &["pack-objects", "-q", &base.to_string_lossy()],
            format!("{packed}\n").as_bytes(),
        );
        git_in(&person, &["prune-packed"], b"");
        let theirs = text(git_in(
            &person,
            &["hash-object", "-w", "--stdin"],
            b"person\n",
        ));
        let their_pack = std::fs::read_dir(common.join("objects/pack"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .find(|n| n.to_string_lossy().ends_with(".pack"))
            .unwrap();
        // The agent's objects: one loose, two in a pack of their own.
        let new = text(git_in(
            &agent,
            &["hash-object", "-w", "--stdin"],
            b"agent loose\n",
        ));
        let in_pack: Vec<String> = [&b"agent packed 1\n"[..], b"agent packed 2\n"]
            .iter()
            .map(|b| text(git_in(&agent, &["hash-object", "-w", "--stdin"], b)))
            .collect();
        let stream = git_in(
            &agent,
            &["pack-objects", "--stdout", "-q"],
            format!("{}\n{}\n", in_pack[0], in_pack[1]).as_bytes(),
        );
        let agent_store = agent.join(".git/objects");
        std::fs::create_dir_all(upper.join("pack")).unwrap();
        std::fs::create_dir_all(upper.join("info")).unwrap();
        std::fs::write(upper.join("pack/pack-agent.pack"), &stream).unwrap();
        let copy = |from: &Path, to: &Path| {
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(from, to).unwrap();
        };
        copy(&loose(&agent_store, &new), &loose(&upper, &new));
        // The person's loose object, rewritten with the agent's bytes.
        copy(&loose(&agent_store, &new), &loose(&upper, &theirs));
        // A copy-up of the person's pack, with other bytes: never read.
        std::fs::write(upper.join("pack").join(&their_pack), b"not a pack").unwrap();
        let forged = format!("ab{}", "c".repeat(38));
        copy(&loose(&agent_store, &new), &loose(&upper, &forged));
        let linked = format!("cd{}", "e".repeat(38));
        std::os::unix::fs::symlink(
            loose(&common.join("objects"), &theirs),
            loose(&upper, &linked),
        )
        .unwrap_or_else(|_| {
            std::fs::create_dir_all(upper.join("cd")).unwrap();
            std::os::unix::fs::symlink("/etc/passwd", loose(&upper, &linked)).unwrap()
        });
        std::fs::write(
            upper.join("info/alternates"),
            agent_store.to_string_lossy().as_bytes(),
        )
        .unwrap();
        std::fs::write(upper.join("info/commit-graph"), b"CGPH").unwrap();

        let before_theirs = std::fs::read(loose(&common.join("objects"), &theirs)).unwrap();
        let c = carry_in(&common, &upper).unwrap();
        assert_eq!(c.loose, 2, "{c:?}");
        assert_eq!(c.packs, 1, "{c:?}");
        assert_eq!(c.refused, vec![forged.clone()]);
        assert_eq!(c.rewritten, vec![theirs.clone()]);
        let cat = |id: &str| text(git_in(&person, &["cat-file", "-p", id], b""));
        assert_eq!(cat(&new), "agent loose");
        assert_eq!(cat(&in_pack[1]), "agent packed 2");
        assert_eq!(cat(&theirs), "person");
        assert_eq!(cat(&packed), "packed");
        assert_eq!(
            std::fs::read(loose(&common.join("objects"), &theirs)).unwrap(),
            before_theirs
        );
        let check = text(git_in(
            &person,
            &["cat-file", "--batch-check=%(objectname)"],
            format!("{forged}\n{linked}\n").as_bytes(),
        ));
        assert_eq!(check, format!("{forged} missing\n{linked} missing"));
        assert!(!common.join("objects/info/commit-graph").exists());
        assert!(!common.join("objects/info/alternates").exists());
        assert!(!t.path().join(GATHER).exists());
        let fsck = Command::new("git")
            .arg("-C")
            .arg(&person)
            .args(["fsck", "--strict"])
            .output()
            .unwrap();
        assert!(
            fsck.status.success(),
            "{}",
            String::from_utf8_lossy(&fsck.stderr)
        );
        // Nothing left to carry the second time but the same refusals.
        let again = carry_in(&common, &upper).unwrap();
        assert_eq!((again.loose, again.refused.len()), (1, 1), "{again:?}");
        // No upper layer: nothing.
        assert_eq!(
            carry_in(&common, &t.path().join("none")).unwrap(),
            Carried::default()
        );
    }
}
