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
//! upper layer). At the end, outside the sandbox, [`carry_in`] carries the agent's new objects
//! into the person's store only once each is checked to hash to its name: a loose object is
//! inflated and hashed as it is copied, a pack goes through `git index-pack`
//! (`git-index-pack(1)`), which names each object from its content. An object whose content
//! does not match the name the agent gave it is not carried, and nothing the agent wrote
//! beside the objects (a commit-graph, a multi-pack index, `info/alternates`, removals) is
//! carried at all. The session's branch moves only after that, to a commit the store then
//! holds.
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
/// What became of each of the agent's packs (`carried`, `refused`), beside the upper layer.
const MARKS: &str = "objects-packs";
/// The object directory a pack of the agent's is indexed in, beside the upper layer.
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
/// `volatile` (`overlayfs.rst`): without it, unmounting the layer at the end synced the
/// state dir's filesystem, +2.2 ms on each launch in a linked worktree (run 16). Nothing is
/// lost to it that [`carry_in`] would take: every object is hashed before it is carried, so a
/// file a host crash left half-written is refused; the cost is that a crash of the host
/// during the session can lose that session's commits (its worktree's files stay).
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
        true,
    )
}

/// Most of the person's packs [`hold_packs`] binds read-only.
const MAX_HELD_PACKS: usize = 512;

/// Binds each of the person's packs (`objects/pack/*.pack`, seen through the mounted layer)
/// read-only over itself (stage 2, after [`mount`]). git "freshens" an object it would
/// write again by setting the times of the pack that holds it (`object-file.c`,
/// `freshen_packed_object`), and overlayfs answers a change of a lower file's times by
/// copying the whole file up: a pack of gigabytes copied into the state dir for one `git
/// add`. On a read-only bind the times cannot be set (`EROFS`), and git writes the object
/// loose instead, as it does when the freshening fails. The agent's git can still make new
/// packs beside them; removing one of the person's (`git repack -d`, `git gc`) fails with
/// `EBUSY` and git says so. Only a cost is at stake, not a protection (the layer keeps the
/// packs as they are either way): a bind that fails is skipped; past [`MAX_HELD_PACKS`]
/// packs the rest are left to copy-ups. Returns how many were bound.
pub(crate) fn hold_packs(l: &ObjectsLayer) -> usize {
    let dir = l.objects.join("pack");
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return 0;
    };
    let mut held = 0;
    for e in rd.flatten() {
        if held >= MAX_HELD_PACKS {
            break;
        }
        let name = e.file_name();
        if !name.to_string_lossy().ends_with(".pack") || !e.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        if crate::launch::bind_read_only(&dir.join(&name)).is_ok() {
            held += 1;
        }
    }
    held
}

/// Most entries of the upper layer looked at (loose objects, packs, and the rest).
const MAX_ENTRIES: usize = 4_000_000;

/// Largest loose object compared with the repository's copy (bytes, compressed).
const MAX_COMPARED: u64 = 64 << 20;

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
    /// The loose objects the agent wrote that the repository did not hold, carried in.
    pub loose: usize,
    /// The packs the agent's git wrote, carried in.
    pub packs: usize,
    /// Names of loose objects the agent wrote that were not carried in: damaged, no object
    /// git can read, or content that hashes to another name ([`copy_checked`]).
    pub refused: Vec<String>,
    /// Packs the agent's git wrote that git refused (`git index-pack`): not carried.
    pub refused_packs: usize,
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
    // A partial clone would fetch each missing name from its promisor remote: the names are
    // the agent's to choose, so they would carry whatever it encodes in them off the machine.
    c.env("GIT_NO_LAZY_FETCH", "1");
    // It dies with tyba: a killed supervisor leaves no `index-pack` working on.
    crate::sys::die_with_parent(&mut c);
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

fn find(upper: &DirFd, names_max: usize) -> Result<Found, CarryInError> {
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
                // SHA-1 (38 more hex digits) or SHA-256 (62), at most `names_max` in all
                // (review 29's r29-01).
                if f.loose.len() >= names_max {
                    break;
                }
                if (is_hex(rest, 38) || is_hex(rest, 62)) && d.meta(&o).is_ok_and(|m| m.is_file()) {
                    f.loose.push((n.clone(), o.clone(), format!("{s}{rest}")));
                }
            }
        }
    }
    Ok(f)
}

/// Largest tree, commit or tag read whole to be parsed (bytes).
const MAX_PARSED: u64 = 64 << 20;

/// Largest object a loose object file may hold once inflated (bytes): a few compressed bytes
/// can inflate to far more, and each byte is hashed at the end of the session.
const MAX_OBJECT: u64 = 4 << 30;

/// How much work the carry-in does for the agent's content at most: whatever the agent wrote,
/// the end of its session (or a later command's recovery) is bounded in time (review 28:
/// a crafted pack of 2.2 KB kept `git index-pack` busy for 6.6 s, growing with its size).
#[derive(Debug, Clone, Copy)]
struct Limits {
    /// Bytes inflated and hashed for all loose objects together (past it the rest are
    /// refused as [`Bad::Large`]).
    inflated: u64,
    /// Time `git index-pack` gets for any pack.
    pack_base: std::time::Duration,
    /// More time per MiB of the pack (a pack git can read is indexed far faster).
    pack_per_mib: std::time::Duration,
    /// Time for all packs together, besides [`Limits::pack_per_mib`] for each.
    packs_base: std::time::Duration,
    /// Most packs indexed in one carry-in (past it the rest are refused).
    packs: usize,
    /// Most loose object names looked at, in all directories together.
    names: usize,
}

/// The limits of [`carry_in`] (review 29: the end of a session is not the agent's to
/// lengthen): 16 GiB inflated (about 14 s of hashing here), `index-pack` 20 s plus 1 s per
/// MiB for one pack and 30 s plus 1 s per MiB for all, 64 packs, a million loose names.
const LIMITS: Limits = Limits {
    inflated: 16 << 30,
    pack_base: std::time::Duration::from_secs(20),
    pack_per_mib: std::time::Duration::from_secs(1),
    packs_base: std::time::Duration::from_secs(30),
    packs: 64,
    names: 1_000_000,
};

/// `base` plus `per_mib` for each MiB of `bytes`.
fn time_for(
    base: std::time::Duration,
    per_mib: std::time::Duration,
    bytes: u64,
) -> std::time::Duration {
    base.saturating_add(per_mib.saturating_mul(u32::try_from(bytes >> 20).unwrap_or(u32::MAX)))
}

/// Why a loose object of the agent's is not carried in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bad {
    /// Not a whole zlib stream ending where the file ends.
    Stream,
    /// Its content is no git object (`<type> <size>\0` and `size` bytes).
    Object,
    /// Its content hashes to another name.
    Name,
    /// Larger than [`MAX_OBJECT`] once inflated, or past the carry-in's budget
    /// ([`Limits::inflated`]).
    Large,
}

/// Copies the loose object file `from` to `to` while checking it, streamed (never held whole):
/// a zlib stream (RFC 1950) that ends where the file ends, inflating to a git object (a
/// `blob`, `tree`, `commit` or `tag` header `<type> <size>\0` and exactly `size` bytes,
/// `gitformat-loose(5)`) whose hash (SHA-1 with collision detection, or SHA-256, by the
/// name's length) is `id`.
fn copy_checked(
    from: &mut std::fs::File,
    to: &mut std::fs::File,
    id: &str,
    budget: &mut u64,
) -> Result<Result<(), Bad>, std::io::Error> {
    use gix::zlib::{FlushDecompress, Status};
    use std::io::Read as _;
    let hash_kind = if id.len() == 40 {
        gix::hash::Kind::Sha1
    } else {
        gix::hash::Kind::Sha256
    };
    let mut hasher = gix::hash::hasher(hash_kind);
    let mut z = gix::zlib::Decompress::new();
    let (mut input, mut output) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
    let mut header: Vec<u8> = Vec::new();
    let mut want: Option<u64> = None;
    // A tree, commit or tag, kept whole to be parsed at the end.
    let mut parsed: Option<(gix::objs::Kind, Vec<u8>)> = None;
    let mut got = 0u64;
    let mut ended = false;
    loop {
        let n = from.read(&mut input)?;
        if n == 0 {
            break;
        }
        if ended {
            // Bytes after the end of the stream.
            return Ok(Err(Bad::Stream));
        }
        to.write_all(&input[..n])?;
        let mut at = 0;
        while at < n && !ended {
            let (before_in, before_out) = (z.total_in(), z.total_out());
            let status = match z.decompress(&input[at..n], &mut output, FlushDecompress::None) {
                Ok(s) => s,
                Err(_) => return Ok(Err(Bad::Stream)),
            };
            let used = usize::try_from(z.total_in() - before_in).unwrap_or(usize::MAX);
            let made = usize::try_from(z.total_out() - before_out).unwrap_or(usize::MAX);
            at = at.saturating_add(used);
            let mut out = &output[..made.min(output.len())];
            match budget.checked_sub(out.len() as u64) {
                Some(left) => *budget = left,
                None => return Ok(Err(Bad::Large)),
            }
            hasher.update(out);
            if want.is_none() {
                let take = out.len().min(64usize.saturating_sub(header.len()));
                header.extend_from_slice(&out[..take]);
                match header.iter().position(|b| *b == 0) {
                    Some(nul) => {
                        // As git reads it (`object-file.c`, `parse_loose_header`): one of the
                        // four types, a space, the size in canonical decimal (digits only,
                        // no leading zero: review 29's r29-02, `blob 07` and `blob +7`).
                        // A tree, commit or tag is parsed at the end; a blob is not.
                        let Some((kind, size)) = std::str::from_utf8(&header[..nul])
                            .ok()
                            .and_then(|h| h.split_once(' '))
                            .and_then(|(t, s)| {
                                let kind = match t {
                                    "blob" => None,
                                    "tree" => Some(gix::objs::Kind::Tree),
                                    "commit" => Some(gix::objs::Kind::Commit),
                                    "tag" => Some(gix::objs::Kind::Tag),
                                    _ => return None,
                                };
                                let canonical = !s.is_empty()
                                    && s.bytes().all(|b| b.is_ascii_digit())
                                    && (s.len() == 1 || !s.starts_with('0'));
                                canonical
                                    .then(|| s.parse::<u64>().ok())
                                    .flatten()
                                    .map(|n| (kind, n))
                            })
                        else {
                            return Ok(Err(Bad::Object));
                        };
                        if size > MAX_OBJECT {
                            return Ok(Err(Bad::Large));
                        }
                        if let Some(k) = kind {
                            if size > MAX_PARSED {
                                return Ok(Err(Bad::Large));
                            }
                            parsed = Some((k, Vec::new()));
                        }
                        want = Some(size);
                        // What followed the header in this piece of output.
                        let before = header.len() - take;
                        out = &out[(nul + 1 - before).min(out.len())..];
                    }
                    None if header.len() >= 64 => return Ok(Err(Bad::Object)),
                    None => out = &[],
                }
            }
            got = got.saturating_add(out.len() as u64);
            if want.is_some_and(|w| got > w) {
                return Ok(Err(Bad::Object));
            }
            if let Some((_, v)) = parsed.as_mut() {
                v.extend_from_slice(out);
            }
            match status {
                Status::StreamEnd => ended = true,
                _ if used == 0 && made == 0 => return Ok(Err(Bad::Stream)),
                _ => {}
            }
        }
        if ended && at < n {
            // Bytes after the end of the stream, in the same read.
            return Ok(Err(Bad::Stream));
        }
    }
    if !ended {
        return Ok(Err(Bad::Stream));
    }
    if want != Some(got) {
        return Ok(Err(Bad::Object));
    }
    match hasher.try_finalize() {
        Ok(o) if o.to_hex() == id => {}
        _ => return Ok(Err(Bad::Name)),
    }
    // A tree, commit or tag must parse as one (review 30: a tree of garbage under its right
    // name, unreachable, made the person's `git gc` stop with "too-short tree object" while
    // it wrote its cruft pack, until the object expired).
    match parsed {
        Some((k, v)) => match gix::objs::ObjectRef::from_bytes(&v, k, hash_kind) {
            // git's own tree reader also stops at an entry with no name (`tree-walk.c`,
            // `decode_tree_entry`), which gix reads.
            Ok(gix::objs::ObjectRef::Tree(t))
                if t.entries
                    .iter()
                    .any(|e| e.filename.is_empty() || e.filename.contains(&b'/')) =>
            {
                Ok(Err(Bad::Object))
            }
            Ok(_) => Ok(Ok(())),
            Err(_) => Ok(Err(Bad::Object)),
        },
        None => Ok(Ok(())),
    }
}

/// Carries the loose object `dir/file` (`id`) of the upper layer `up` into the store `store`
/// (the person's `objects/`): copied into a new file (`tmp_obj_tyba_…`, mode 0444, as git
/// makes its own) while it is checked ([`copy_checked`]), then given its name with
/// `link(2)` (an object that arrived meanwhile is kept) and the new file's name removed.
fn carry_loose(
    up: &DirFd,
    store: &DirFd,
    dir: &OsString,
    file: &OsString,
    id: &str,
    budget: &mut u64,
) -> Result<Result<(), Bad>, std::io::Error> {
    let mut from = up.open_regular(&Path::new(dir).join(file))?;
    // Written in the store's root first: the object's directory is made only for an object
    // that passed (review 29's r29-06: refused ones left empty directories).
    let mut tmp = OsString::from("tmp_obj_tyba_");
    tmp.push(dir);
    tmp.push(file);
    let _ = store.unlink(&tmp);
    let mut to = store.create_new(&tmp, 0o444)?;
    let checked = copy_checked(&mut from, &mut to, id, budget).and_then(|c| {
        if c.is_ok() {
            to.sync_all()?;
        }
        Ok(c)
    });
    drop(to);
    let done = match checked {
        Ok(Ok(())) => store.make_dirs(Path::new(dir)).and_then(|to_dir| {
            match store.hard_link(&tmp, &to_dir, file) {
                Ok(()) => Ok(Ok(())),
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(Ok(())),
                Err(e) => Err(e),
            }
        }),
        other => other,
    };
    let _ = store.unlink(&tmp);
    done
}

/// Carries the pack `name` of the upper layer's `pack/` into the store: `git index-pack
/// --stdin --fix-thin` names each object from its content and writes the pack and its index
/// into an object directory of its own beside `upper` (the person's store its alternate, for
/// the bases of a thin pack), and the files it made are then linked (else copied) into the
/// store's `pack/`, the index last (git finds a pack by its index). A pack git refuses leaves
/// nothing in the person's store.
fn carry_pack(
    common: &Path,
    upper: &Path,
    packs: &DirFd,
    name: &OsString,
    limits: &Limits,
    all_until: std::time::Instant,
) -> Result<bool, CarryInError> {
    let parent = upper.parent().unwrap_or(upper);
    let scratch = parent.join(GATHER);
    let _ = crate::sandbox::remove_tree(&scratch);
    let made = scratch.join("pack");
    std::fs::create_dir_all(&made).map_err(io("cannot create", &made))?;
    let file = packs
        .open_regular(Path::new(name))
        .map_err(io("cannot open", &upper.join("pack").join(name)))?;
    let allowed = time_for(
        limits.pack_base,
        limits.pack_per_mib,
        file.metadata().map_or(0, |m| m.len()),
    );
    // `--strict`: every object of the pack must pass git's own checks (`git-fsck(1)`), not
    // only hash to its name (review 30's r30-01: a pack of 181 bytes with a commit without
    // a tree line stopped the person's `git gc`).
    let args = ["index-pack", "--stdin", "--fix-thin", "--strict"];
    let child = git(common, &args)
        .env("GIT_OBJECT_DIRECTORY", &scratch)
        .env("GIT_ALTERNATE_OBJECT_DIRECTORIES", common.join("objects"))
        .stdin(Stdio::from(file))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let indexed = child.is_ok_and(|mut c| {
        let deadline = (std::time::Instant::now() + allowed).min(all_until);
        loop {
            match c.try_wait() {
                Ok(Some(st)) => break st.success(),
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                _ => {
                    // Past its time: the pack is refused, and git's half-made files go with
                    // the scratch directory.
                    let _ = c.kill();
                    let _ = c.wait();
                    break false;
                }
            }
        }
    });
    let result = match indexed {
        true => {
            let store = common.join("objects/pack");
            let mut names: Vec<PathBuf> = std::fs::read_dir(&made)
                .map_err(io("cannot list", &made))?
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("pack-"))
                })
                .collect();
            // The pack first, its index last.
            names.sort_by_key(|p| p.extension().is_some_and(|e| e == "idx"));
            for p in &names {
                let Some(n) = p.file_name() else { continue };
                let to = store.join(n);
                if to.exists() {
                    continue;
                }
                if std::fs::hard_link(p, &to).is_err() {
                    std::fs::copy(p, &to).map_err(io("cannot copy to", &to))?;
                }
            }
            Ok(true)
        }
        false => Ok(false),
    };
    let _ = crate::sandbox::remove_tree(&scratch);
    result
}

/// Carries the objects the agent's git wrote in the upper layer `upper` into the object
/// store of the repository whose common git dir is `common` (module doc). Each loose object
/// the repository does not hold is copied in only once it is checked to be a whole object
/// whose content hashes to its name ([`copy_checked`]; a copy of an existing object, whatever
/// it now holds, is left, and one whose bytes differ from the person's loose copy is named);
/// each pack the agent's git wrote under a new name goes through `git index-pack --stdin
/// --fix-thin --strict` in a directory of its own ([`carry_pack`]). One object or pack
/// refused refuses only itself. Nothing else of the upper layer is read, and no git command
/// run here may fetch a missing object from a promisor remote (`GIT_NO_LAZY_FETCH`): the
/// names the agent chose never leave the machine. The work is bounded ([`LIMITS`]), past
/// which the rest is refused. An absent `upper` carries nothing.
///
/// # Errors
/// [`CarryInError`] when the upper layer or the person's store cannot be read or written;
/// what was carried before stays carried.
pub fn carry_in(common: &Path, upper: &Path) -> Result<Carried, CarryInError> {
    carry_in_with(common, upper, &LIMITS, true, None)
}

/// What the passes of one [`Carrier`] remember (review 30's r30-03: refused objects were
/// checked again at every pass, each with a fresh budget, keeping a core busy): the loose
/// names already decided, and the bytes inflated so far by all passes together.
#[derive(Debug, Default)]
struct Memory {
    decided: std::collections::HashSet<String>,
    inflated: u64,
}

/// [`carry_in`] within `limits`; `compare`: whether copies of the repository's own loose
/// objects are compared with them ([`Carried::rewritten`]; a pass of [`Carrier`] does not);
/// `memory`: what earlier passes decided (none for the end's own carry-in).
fn carry_in_with(
    common: &Path,
    upper: &Path,
    limits: &Limits,
    compare: bool,
    mut memory: Option<&mut Memory>,
) -> Result<Carried, CarryInError> {
    let mut budget = limits
        .inflated
        .saturating_sub(memory.as_ref().map_or(0, |m| m.inflated));
    let mut done = Carried::default();
    let up = match DirFd::open(upper) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(done),
        Err(e) => return Err(io("cannot open", upper)(e)),
    };
    let mut found = find(&up, limits.names)?;
    if found.loose.is_empty() && found.packs.is_empty() {
        return Ok(done);
    }
    if !found.loose.is_empty() {
        // Names of the repository's own object format only (review 29's r29-05: a SHA-256
        // name in a SHA-1 repository is garbage to git, and the other way round).
        let format_args = ["rev-parse", "--show-object-format"];
        let format = run_with_input(git(common, &format_args), &format_args, b"")?;
        let hex_len = if String::from_utf8_lossy(&format).trim() == "sha256" {
            64
        } else {
            40
        };
        found.loose.retain(|(_, _, id)| id.len() == hex_len);
    }
    let store_path = common.join("objects");
    let store = DirFd::open(&store_path).map_err(io("cannot open", &store_path))?;
    if let Some(m) = memory.as_ref() {
        found.loose.retain(|(_, _, id)| !m.decided.contains(id));
    }
    let ids: Vec<String> = found.loose.iter().map(|(_, _, id)| id.clone()).collect();
    let new: std::collections::HashSet<String> = missing(common, &ids)?.into_iter().collect();
    for (dir, file, id) in &found.loose {
        let rel = Path::new(dir).join(file);
        if !new.contains(id) {
            // A copy of an object the repository holds loose: git's own copy-up (it freshens
            // an object it would write again by setting its times) holds the same bytes;
            // other bytes are the agent's attempt to rewrite it, which the person hears of.
            if compare {
                let theirs = store.read_file(&rel, MAX_COMPARED).ok();
                let ours = up.read_file(&rel, MAX_COMPARED).ok();
                if theirs.is_some() && ours.is_some() && theirs != ours {
                    done.rewritten.push(id.clone());
                }
            }
            continue;
        }
        let before = budget;
        let result = carry_loose(&up, &store, dir, file, id, &mut budget);
        if let Some(m) = memory.as_mut() {
            m.inflated = m.inflated.saturating_add(before - budget);
            if result.is_ok() {
                m.decided.insert(id.clone());
            }
        }
        match result {
            Ok(Ok(())) => done.loose += 1,
            Ok(Err(_)) => done.refused.push(id.clone()),
            Err(e) => return Err(io("cannot carry in", &store_path.join(&rel))(e)),
        }
    }
    if !found.packs.is_empty() {
        let packs = up
            .open_dir(Path::new("pack"))
            .map_err(io("cannot open", &upper.join("pack")))?;
        let theirs = store.open_dir(Path::new("pack")).ok();
        // What each pack came to, kept beside the upper layer: a pass of [`Carrier`] or an
        // earlier end indexes a pack once (`index-pack` names a thin pack it completed
        // otherwise, so the pack's own name need not appear in the store).
        let marks = upper.parent().unwrap_or(upper).join(MARKS);
        let _ = std::fs::create_dir(&marks);
        // All packs together get their own time; past it, or past the count, the rest are
        // refused (review 29's r29-04).
        let bytes: u64 = found
            .packs
            .iter()
            .filter_map(|p| packs.meta(p).ok())
            .map(|m| m.len())
            .sum();
        let all_until =
            std::time::Instant::now() + time_for(limits.packs_base, limits.pack_per_mib, bytes);
        let mut indexed = 0usize;
        for p in &found.packs {
            // A copy-up of one of the repository's packs (git freshens a pack holding an
            // object it would write again): the repository's own stays as it is.
            if theirs.as_ref().is_some_and(|t| t.meta(p).is_ok()) {
                continue;
            }
            let mark = marks.join(p);
            let carried = match std::fs::read(&mark).ok().as_deref() {
                Some(b"carried") => true,
                Some(b"refused") => false,
                _ if indexed >= limits.packs || std::time::Instant::now() >= all_until => {
                    let _ = std::fs::write(&mark, "refused");
                    false
                }
                _ => {
                    indexed += 1;
                    let c = carry_pack(common, upper, &packs, p, limits, all_until)?;
                    let _ = std::fs::write(&mark, if c { "carried" } else { "refused" });
                    c
                }
            };
            if carried {
                done.packs += 1;
            } else {
                done.refused_packs += 1;
            }
        }
    }
    Ok(done)
}

/// Mends the session's linked worktree `worktree` (its git dir `git_dir`, the admin dir in
/// the person's repository) when the agent left objects that were refused or commits naming
/// objects the repository lacks (review 30's r30-02): its `HEAD` reflog and its index are
/// walked by the person's `git gc`, `repack -ad` and `prune`, which stop at the first object
/// they cannot read. When `git rev-list --objects --verify-objects --reflog
/// --indexed-objects` in the worktree fails, the worktree's `HEAD` reflog (the agent's own
/// history there) is removed and its index read anew from its `HEAD` (`git read-tree`; the
/// agent's files stay as they are, unstaged). Returns what was done, for the person; `None`
/// when nothing needed mending.
pub fn mend_worktree(worktree: &Path, git_dir: &Path) -> Option<String> {
    let check = || {
        crate::worktrees::git(
            worktree,
            &[
                "rev-list",
                "--objects",
                "--verify-objects",
                "--quiet",
                "--reflog",
                "--indexed-objects",
                "--not",
                "--branches",
                "--tags",
            ],
        )
        .is_ok()
    };
    if check() {
        return None;
    }
    let logs = DirFd::open(git_dir).and_then(|d| d.open_dir(Path::new("logs")));
    let reflog_gone = logs.is_ok_and(|l| l.unlink(std::ffi::OsStr::new("HEAD")).is_ok());
    let reread = crate::worktrees::git(worktree, &["read-tree", "HEAD"]).is_ok();
    let mended = check();
    Some(format!(
        "the session's worktree {} named objects the repository lacks or cannot read: {}{}{}",
        worktree.display(),
        if reflog_gone {
            "its HEAD reflog was removed"
        } else {
            "its HEAD reflog could not be removed"
        },
        if reread {
            ", its index read anew from its branch (the agent's files are unchanged, now unstaged)"
        } else {
            ", its index could not be read anew"
        },
        if mended {
            ""
        } else {
            "; your git gc may stop on them until `tyba clean --unmerged` removes the worktree"
        }
    ))
}

/// How often [`Carrier`] carries the agent's new objects in while the session runs.
const CARRY_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Carries the agent's new objects in while the session runs ([`carry_in`] every
/// [`CARRY_EVERY`], on a thread of its own), so that the person's store holds them soon after
/// the agent's git made them. The session's worktree (its index, its `HEAD` reflog) names
/// them at once, and the person's own `git gc`, `git repack -ad` and `git prune` walk every
/// worktree: with the objects only in the layer, those stopped with `bad tree object` until
/// the end (review 28's r28-03). An object still being written fails its check and is taken
/// on a later pass; nothing is said until the end's own [`carry_in`], which runs after
/// [`Carrier::stop`].
#[derive(Debug)]
pub struct Carrier {
    stop: std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Carrier {
    /// Starts carrying `upper` into the store of `common`; `None` when the thread cannot be
    /// started (the end's [`carry_in`] then carries everything).
    pub fn start(common: &Path, upper: &Path) -> Option<Carrier> {
        let stop = std::sync::Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let (common, upper, s) = (
            common.to_path_buf(),
            upper.to_path_buf(),
            std::sync::Arc::clone(&stop),
        );
        let thread = std::thread::Builder::new()
            .name("tyba-objects".into())
            .spawn(move || {
                let (lock, cv) = &*s;
                let mut memory = Memory::default();
                let Ok(mut stopped) = lock.lock() else { return };
                loop {
                    let Ok((g, _)) = cv.wait_timeout(stopped, CARRY_EVERY) else {
                        return;
                    };
                    stopped = g;
                    if *stopped {
                        return;
                    }
                    drop(stopped);
                    let _ = carry_in_with(&common, &upper, &LIMITS, false, Some(&mut memory));
                    let Ok(g) = lock.lock() else { return };
                    stopped = g;
                }
            })
            .ok()?;
        Some(Carrier {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the thread and waits for the pass it may be in to end (as dropping it does).
    pub fn stop(self) {}
}

impl Drop for Carrier {
    fn drop(&mut self) {
        if let Ok(mut g) = self.stop.0.lock() {
            *g = true;
            self.stop.1.notify_all();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
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

    /// The carry-in's work is bounded whatever the agent wrote: a crafted pack whose deltas
    /// inflate to hundreds of MiB (review 28's r28-02) is refused once `git index-pack` is past
    /// its time, leaving nothing in the store; loose objects past the inflated budget are
    /// refused. The same pack indexed with no limit takes longer than the limit (control).
    #[test]
    fn the_carry_in_is_bounded_in_time_and_bytes() {
        let t = tempfile::tempdir().unwrap();
        let (person, upper) = (t.path().join("p"), t.path().join("u"));
        std::fs::create_dir_all(&person).unwrap();
        git_in(&person, &["init", "-q", "-b", "main"], b"");
        let common = person.join(".git");
        std::fs::create_dir_all(upper.join("pack")).unwrap();
        // A pack of one 1 MiB blob and 16 deltas, each copying it 16 times: 2 KiB on disk,
        // 256 MiB to inflate and hash.
        let bomb = r#"
import sys, zlib, hashlib, struct
def hdr(t, size):
    b = []; c = (t << 4) | (size & 15); size >>= 4
    while size:
        b.append(c | 0x80); c = size & 0x7f; size >>= 7
    b.append(c); return bytes(b)
def varint(v):
    b = []
    while True:
        c = v & 0x7f; v >>= 7
        if v: b.append(c | 0x80)
        else: b.append(c); return bytes(b)
def ofs(d):
    b = [d & 0x7f]; d >>= 7
    while d:
        d -= 1; b.insert(0, 0x80 | (d & 0x7f)); d >>= 7
    return bytes(b)
BASE = 1 << 20; N = 16; REPS = 16
body = b"PACK" + struct.pack(">II", 2, N + 1)
first = len(body)
body += hdr(3, BASE) + zlib.compress(b"\0" * BASE, 9)
for i in range(N):
    off = len(body)
    d = varint(BASE) + varint(REPS * BASE + 4) + bytes([0xc0, 0x10]) * REPS + bytes([4]) + struct.pack(">I", i)
    body += hdr(6, len(d)) + ofs(off - first) + zlib.compress(d, 9)
body += hashlib.sha1(body).digest()
sys.stdout.buffer.write(body)
"#;
        let mut c = Command::new("python3");
        c.args(["-c", bomb]);
        let pack = run_with_input(c, &["python3"], b"").unwrap();
        assert!(pack.len() < 8192, "{}", pack.len());
        for n in ["pack-bomb.pack", "pack-bomb2.pack", "pack-bomb3.pack"] {
            std::fs::write(upper.join("pack").join(n), &pack).unwrap();
        }
        let tight = Limits {
            inflated: 8,
            pack_base: std::time::Duration::from_millis(150),
            pack_per_mib: std::time::Duration::ZERO,
            packs_base: std::time::Duration::from_millis(200),
            ..LIMITS
        };
        let loose_id = text(git_in(
            &person,
            &["hash-object", "--stdin"],
            b"a loose object\n",
        ));
        let agent = t.path().join("a");
        std::fs::create_dir_all(&agent).unwrap();
        git_in(&agent, &["init", "-q", "-b", "main"], b"");
        text(git_in(
            &agent,
            &["hash-object", "-w", "--stdin"],
            b"a loose object\n",
        ));
        let from = loose(&agent.join(".git/objects"), &loose_id);
        std::fs::create_dir_all(upper.join(&loose_id[..2])).unwrap();
        std::fs::copy(&from, loose(&upper, &loose_id)).unwrap();
        let started = std::time::Instant::now();
        let c = carry_in_with(&common, &upper, &tight, true, None).unwrap();
        let took = started.elapsed();
        // Three packs, one time for all of them (review 29's r29-04): all refused, in about
        // one pack's time.
        assert_eq!((c.packs, c.refused_packs), (0, 3), "{c:?}");
        assert_eq!(c.refused, vec![loose_id.clone()], "{c:?}");
        assert!(took < std::time::Duration::from_secs(3), "{took:?}");
        let left: Vec<_> = std::fs::read_dir(common.join("objects/pack"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "{left:?}");
        // A later pass does not index the refused packs again: what they came to is kept.
        for n in ["pack-bomb.pack", "pack-bomb2.pack", "pack-bomb3.pack"] {
            assert_eq!(
                std::fs::read(t.path().join(MARKS).join(n)).unwrap(),
                b"refused"
            );
        }
        let again = carry_in_with(&common, &upper, &tight, true, None).unwrap();
        assert_eq!((again.packs, again.refused_packs), (0, 3), "{again:?}");
        // Control: with room (and the pack's mark gone), the loose object arrives, and
        // indexing the pack takes longer than the tight limit allowed.
        std::fs::remove_dir_all(t.path().join(MARKS)).unwrap();
        let roomy = Limits {
            inflated: 1 << 20,
            pack_base: std::time::Duration::from_secs(600),
            pack_per_mib: std::time::Duration::ZERO,
            packs_base: std::time::Duration::from_secs(600),
            ..LIMITS
        };
        let started = std::time::Instant::now();
        let c = carry_in_with(&common, &upper, &roomy, true, None).unwrap();
        assert!(
            started.elapsed() > tight.pack_base,
            "{:?}",
            started.elapsed()
        );
        assert_eq!((c.loose, c.packs), (1, 3), "{c:?}");
    }

    /// The passes of one [`Carrier`] decide each loose name once, and share one budget
    /// (review 30's r30-03: refused objects were checked again at every pass).
    #[test]
    fn a_carriers_passes_decide_each_name_once() {
        let t = tempfile::tempdir().unwrap();
        let (person, upper) = (t.path().join("p"), t.path().join("u"));
        std::fs::create_dir_all(&person).unwrap();
        git_in(&person, &["init", "-q", "-b", "main"], b"");
        let common = person.join(".git");
        let forged = format!("ab{}", "c".repeat(38));
        std::fs::create_dir_all(upper.join("ab")).unwrap();
        std::fs::write(loose(&upper, &forged), b"x\x9c\x03\x00\x00\x00\x00\x01").unwrap();
        let mut memory = Memory::default();
        let first = carry_in_with(&common, &upper, &LIMITS, false, Some(&mut memory)).unwrap();
        assert_eq!(first.refused, vec![forged.clone()]);
        assert!(memory.decided.contains(&forged));
        let second = carry_in_with(&common, &upper, &LIMITS, false, Some(&mut memory)).unwrap();
        assert!(second.refused.is_empty(), "{second:?}");
        // The end's own carry-in, with no memory, decides it again and says so.
        assert_eq!(carry_in(&common, &upper).unwrap().refused, vec![forged]);
    }

    /// In a partial clone, a name the agent chose that the repository lacks is never asked of
    /// the promisor remote (review 28: the names carried data off the machine). The remote's
    /// `uploadpack` is a script that leaves a mark; the control, git's own `cat-file` on the
    /// same name, leaves it.
    #[test]
    fn no_name_the_agent_chose_reaches_a_promisor_remote() {
        let t = tempfile::tempdir().unwrap();
        let (remote, person, upper) = (
            t.path().join("r.git"),
            t.path().join("p"),
            t.path().join("u"),
        );
        let mark = t.path().join("asked");
        let script = t.path().join("upload-pack");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho \"$@\" >> '{}'\nexec git-upload-pack \"$@\"\n",
                mark.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        std::fs::create_dir_all(&remote).unwrap();
        git_in(&remote, &["init", "-q", "--bare", "-b", "main"], b"");
        git_in(&remote, &["config", "uploadpack.allowFilter", "true"], b"");
        let seed = t.path().join("seed");
        std::fs::create_dir_all(&seed).unwrap();
        git_in(&seed, &["init", "-q", "-b", "main"], b"");
        std::fs::write(seed.join("f"), "x\n").unwrap();
        git_in(&seed, &["add", "f"], b"");
        git_in(&seed, &["commit", "-q", "-m", "s"], b"");
        git_in(
            &seed,
            &["push", "-q", &remote.to_string_lossy(), "main"],
            b"",
        );
        let url = format!("file://{}", remote.display());
        git_in(
            t.path(),
            &[
                "clone",
                "-q",
                "--filter=blob:none",
                "--no-checkout",
                &url,
                "p",
            ],
            b"",
        );
        git_in(
            &person,
            &[
                "config",
                "remote.origin.uploadpack",
                &script.to_string_lossy(),
            ],
            b"",
        );
        let chosen = format!("5e{}", "c".repeat(38));
        std::fs::create_dir_all(upper.join("5e")).unwrap();
        std::fs::write(loose(&upper, &chosen), b"the agent's data").unwrap();
        let c = carry_in(&person.join(".git"), &upper).unwrap();
        assert_eq!(c.refused, vec![chosen.clone()]);
        assert!(
            !mark.exists(),
            "the promisor remote was asked: {}",
            std::fs::read_to_string(&mark).unwrap_or_default()
        );
        // Control: git itself fetches a missing name from the promisor remote.
        let _ = Command::new("git")
            .arg("-C")
            .arg(&person)
            .args(["cat-file", "-e", &chosen])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output();
        assert!(
            mark.exists(),
            "control: git asks the promisor remote for a missing name"
        );
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
        // Damaged ones (review 28), each named by the hash of what it inflates to, so that
        // only the check of the stream and the header can refuse them: bytes after the
        // stream's end, a header whose size is not the content's, no object header at all;
        // and one that is no zlib stream.
        let py = |code: &str, b: &[u8]| {
            let mut c = Command::new("python3");
            c.args(["-c", code]);
            run_with_input(c, &["python3"], b).unwrap()
        };
        let deflate = |b: &[u8]| {
            py(
                "import sys,zlib; sys.stdout.buffer.write(zlib.compress(sys.stdin.buffer.read()))",
                b,
            )
        };
        let sha1 = |b: &[u8]| {
            text(py(
                "import sys,hashlib; print(hashlib.sha1(sys.stdin.buffer.read()).hexdigest())",
                b,
            ))
        };
        let mut damaged: Vec<(String, Vec<u8>)> = Vec::new();
        let whole = b"blob 9\0trailing\n";
        let mut trailing = deflate(whole);
        trailing.extend_from_slice(b"more");
        damaged.push((sha1(whole), trailing));
        let sized = b"blob 99\0wrong size\n";
        damaged.push((sha1(sized), deflate(sized)));
        let bare = b"no header\n";
        damaged.push((sha1(bare), deflate(bare)));
        // A tree and a commit under their right names whose content is no tree or commit
        // (review 30): git's cruft pack then stops the person's `git gc`.
        let tree = b"tree 20\0garbage tree content";
        damaged.push((sha1(tree), deflate(tree)));
        let commit = b"commit 23\0author nobody\n\nno tree\n";
        damaged.push((sha1(commit), deflate(commit)));
        // A tree entry with no name, and one whose mode is no octal number.
        let mut empty_name = b"tree 28\x00100644 \x00".to_vec();
        empty_name.extend_from_slice(&[0x11; 20]);
        damaged.push((sha1(&empty_name), deflate(&empty_name)));
        let mut bad_mode = b"tree 29\x0010064x a\x00".to_vec();
        bad_mode.extend_from_slice(&[0x11; 20]);
        damaged.push((sha1(&bad_mode), deflate(&bad_mode)));
        // Sizes git does not read as sizes (review 29's r29-02).
        for h in [&b"blob 08\0leading\n"[..], b"blob +9\0plussign\n"] {
            damaged.push((sha1(h), deflate(h)));
        }
        damaged.push((format!("ad{}", "0".repeat(38)), b"not zlib at all".to_vec()));
        for (id, bytes) in &damaged {
            std::fs::create_dir_all(upper.join(&id[..2])).unwrap();
            std::fs::write(loose(&upper, id), bytes).unwrap();
        }
        std::fs::write(upper.join("pack/pack-garbage.pack"), b"PACK garbage").unwrap();
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
        assert_eq!(c.loose, 1, "{c:?}");
        assert_eq!((c.packs, c.refused_packs), (1, 1), "{c:?}");
        let mut refused = c.refused.clone();
        refused.sort();
        let mut expected: Vec<String> = damaged.iter().map(|(i, _)| i.clone()).collect();
        expected.push(forged.clone());
        expected.sort();
        assert_eq!(refused, expected);
        // A name of SHA-256's length in this SHA-1 repository (its content hashing to it with
        // SHA-256) is no object here: not carried, nor counted (review 29's r29-05).
        let long = text(py(
            "import sys,hashlib; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())",
            b"blob 5\0long\n",
        ));
        std::fs::create_dir_all(upper.join(&long[..2])).unwrap();
        std::fs::write(loose(&upper, &long), deflate(b"blob 5\0long\n")).unwrap();
        let c2 = carry_in(&common, &upper).unwrap();
        assert!(!c2.refused.contains(&long), "{c2:?}");
        assert!(!loose(&common.join("objects"), &long).exists());
        // No directory is made for a refused object (review 29's r29-06).
        for (id, _) in &damaged {
            let d = common.join("objects").join(&id[..2]);
            assert!(
                !d.exists() || d.read_dir().unwrap().next().is_some(),
                "{} left empty",
                d.display()
            );
        }
        // Nothing of a refused one is left in the person's store (no `tmp_obj_*`,
        // `tmp_pack_*`).
        let dirs: Vec<String> = damaged
            .iter()
            .map(|(i, _)| i[..2].to_string())
            .chain(["ab".to_string(), "pack".to_string()])
            .collect();
        for d in &dirs {
            if let Ok(rd) = std::fs::read_dir(common.join("objects").join(d)) {
                for e in rd.flatten() {
                    let n = e.file_name().to_string_lossy().into_owned();
                    assert!(!n.starts_with("tmp_"), "{d}/{n} left in the store");
                }
            }
        }
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
        assert_eq!((again.loose, again.refused.len()), (0, 11), "{again:?}");
        // No upper layer: nothing.
        assert_eq!(
            carry_in(&common, &t.path().join("none")).unwrap(),
            Carried::default()
        );
    }
}
