//! Directories held open, for the file operations tyba does as the person in places a
//! session's agent could write (the repository's git dir with `--here`, the object store, a
//! session's private branch directory): every name is looked up in a directory already
//! open, never through a symbolic link, so nothing the agent planted (a link in place of a
//! directory, a directory renamed over another) redirects an operation elsewhere.
//!
//! - Directories are opened with `openat2(2)` and `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//!   RESOLVE_NO_MAGICLINKS` from a directory already open (`O_DIRECTORY | O_NOFOLLOW`): a
//!   link anywhere on the way fails with `ELOOP`, a `..` leaving it with `EXDEV`.
//! - Entries are inspected without following them (`O_PATH | O_NOFOLLOW`, then `statx(2)` on
//!   that descriptor: the entry's own type, device, inode and birth time).
//! - Entries are renamed with `renameat2(2)` between two open directories (`RENAME_NOREPLACE`
//!   unless the caller replaces on purpose) and removed with `unlinkat(2)`; neither follows a
//!   link in the name it acts on.
//! - A name moved aside gets an unpredictable one (`<name>.tyba-<16 hex digits>` from the
//!   kernel's random source, retried when taken), so no name made in advance stops it.
//!
//! Callers check the identity ([`Id`]) of each directory against what they recorded before
//! the agent ran, and refuse to act in one that does not match.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use nix::fcntl::{OFlag, OpenHow, ResolveFlag};

/// A directory's or file's identity: its device and inode numbers (`stat(2)` `st_dev`,
/// `st_ino`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Id {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

impl Id {
    /// The identity of `m`.
    pub fn of(m: &std::fs::Metadata) -> Id {
        Id {
            dev: m.dev(),
            ino: m.ino(),
        }
    }
}

/// How many unpredictable names [`DirFd::rename_aside`] and [`DirFd::replace_file`] try
/// before giving up (each taken name costs one `EEXIST`).
const NAME_TRIES: usize = 16;

/// An open directory and the path it was reached by (for messages only: nothing is ever
/// resolved through the path again).
#[derive(Debug)]
pub struct DirFd {
    fd: OwnedFd,
    path: PathBuf,
}

fn errno(e: nix::errno::Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

/// `name` when it is one plain path component (no `/`, not `.` or `..`, not empty).
fn one_name(name: &OsStr) -> io::Result<&OsStr> {
    let mut c = Path::new(name).components();
    match (c.next(), c.next()) {
        (Some(Component::Normal(n)), None) if n.as_bytes() == name.as_bytes() => Ok(name),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not one file name"),
        )),
    }
}

/// `rel` when it is made of plain components only (relative, no `..`).
fn plain_relative(rel: &Path) -> io::Result<&Path> {
    if rel.as_os_str().is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a plain relative path", rel.display()),
        ));
    }
    Ok(rel)
}

/// `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS` with `flags`, close-on-exec
/// and never following the last component (`openat2(2)`).
fn how(flags: OFlag) -> OpenHow {
    OpenHow::new()
        .flags(flags | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
        .resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        )
}

/// A name for something moved aside or staged beside `name`: `<name>.tyba-<16 hex digits>`,
/// the digits from the kernel's random source (`getrandom(2)` through `/dev/urandom`).
fn unpredictable_name(name: &OsStr) -> io::Result<OsString> {
    use std::io::Read as _;
    let mut b = [0u8; 8];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    let mut s = name.to_os_string();
    s.push(".tyba-");
    s.push(b.iter().map(|x| format!("{x:02x}")).collect::<String>());
    Ok(s)
}

impl DirFd {
    /// Opens the directory at `path` (absolute), its last component never through a link
    /// (`O_DIRECTORY | O_NOFOLLOW`). The components before it are the caller's to trust: use
    /// it for a directory tyba found itself (a git dir it resolved), then compare its
    /// [`DirFd::id`] with the one recorded.
    ///
    /// # Errors
    /// The `open(2)` error (`ELOOP` for a link, `ENOTDIR` for a file).
    pub fn open(path: &Path) -> io::Result<DirFd> {
        let fd = nix::fcntl::open(
            path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(errno)?;
        Ok(DirFd {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// The path this directory was reached by (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Another descriptor of the same open directory.
    ///
    /// # Errors
    /// The `fcntl(2)` `F_DUPFD_CLOEXEC` error.
    pub fn try_clone(&self) -> io::Result<DirFd> {
        Ok(DirFd {
            fd: self.fd.try_clone()?,
            path: self.path.clone(),
        })
    }

    /// The directory's identity now.
    ///
    /// # Errors
    /// The `fstat(2)` error.
    pub fn id(&self) -> io::Result<Id> {
        let s = nix::sys::stat::fstat(self.fd.as_fd()).map_err(errno)?;
        Ok(Id {
            dev: s.st_dev,
            ino: s.st_ino,
        })
    }

    /// Opens the directory `rel` (plain components) beneath this one, following no link on
    /// the way or at the end.
    ///
    /// # Errors
    /// `ELOOP` when a component is a link, `ENOTDIR` when one is no directory, `ENOENT`.
    pub fn open_dir(&self, rel: &Path) -> io::Result<DirFd> {
        let rel = plain_relative(rel)?;
        let fd = nix::fcntl::openat2(
            self.fd.as_fd(),
            rel,
            how(OFlag::O_RDONLY | OFlag::O_DIRECTORY),
        )
        .map_err(errno)?;
        Ok(DirFd {
            fd,
            path: self.path.join(rel),
        })
    }

    /// Opens the directory `rel` (plain components) beneath this one, making each component
    /// that does not exist (`mkdirat(2)`, mode 0777 less the umask, as `mkdir -p`), following
    /// no link on the way.
    ///
    /// # Errors
    /// `ELOOP`/`ENOTDIR` when a component is a link or no directory; the `mkdirat(2)` error.
    pub fn make_dirs(&self, rel: &Path) -> io::Result<DirFd> {
        let rel = plain_relative(rel)?;
        let mut at = self.try_clone()?;
        for c in rel.components() {
            let name = Path::new(c.as_os_str());
            at = match at.open_dir(name) {
                Ok(d) => d,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    match nix::sys::stat::mkdirat(
                        at.fd.as_fd(),
                        name,
                        nix::sys::stat::Mode::from_bits_truncate(0o777),
                    ) {
                        Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
                        Err(e) => return Err(errno(e)),
                    }
                    at.open_dir(name)?
                }
                Err(e) => return Err(e),
            };
        }
        Ok(at)
    }

    /// Makes the new regular file `name` in this directory holding `bytes` (`O_CREAT |
    /// O_EXCL | O_NOFOLLOW`: never over anything, a link included; mode 0666 less the umask).
    ///
    /// # Errors
    /// `EEXIST` when the name is taken; the first failing system call's error.
    pub fn create_new_file(&self, name: &OsStr, bytes: &[u8]) -> io::Result<()> {
        use std::io::Write as _;
        let h = how(OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL)
            .mode(nix::sys::stat::Mode::from_bits_truncate(0o666));
        let fd = nix::fcntl::openat2(self.fd.as_fd(), one_name(name)?, h).map_err(errno)?;
        std::fs::File::from(fd).write_all(bytes)
    }

    /// The metadata of the entry `name` itself (a link is not followed: its own type and
    /// times), through an `O_PATH` descriptor (`statx(2)`: birth time where the filesystem
    /// keeps one).
    ///
    /// # Errors
    /// `ENOENT` when there is no such entry; `EINVAL` for a `name` that is no single name.
    pub fn meta(&self, name: &OsStr) -> io::Result<std::fs::Metadata> {
        let name = one_name(name)?;
        let fd = nix::fcntl::openat2(self.fd.as_fd(), name, how(OFlag::O_PATH)).map_err(errno)?;
        std::fs::File::from(fd).metadata()
    }

    /// The names in the directory (without `.` and `..`), at most `max` (more is an error).
    ///
    /// # Errors
    /// The `getdents(2)` error, or `E2BIG` past `max` entries.
    pub fn names(&self, max: usize) -> io::Result<Vec<OsString>> {
        let mut d = nix::dir::Dir::openat(
            self.fd.as_fd(),
            ".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(errno)?;
        let mut out = Vec::new();
        for e in d.iter() {
            let e = e.map_err(errno)?;
            let n = e.file_name().to_bytes();
            if n == b"." || n == b".." {
                continue;
            }
            if out.len() >= max {
                return Err(io::Error::from_raw_os_error(libc::E2BIG));
            }
            out.push(OsStr::from_bytes(n).to_os_string());
        }
        Ok(out)
    }

    /// The text of the link `name` (`readlinkat(2)`), for a message.
    ///
    /// # Errors
    /// `EINVAL` when it is no link.
    pub fn link_text(&self, name: &OsStr) -> io::Result<OsString> {
        nix::fcntl::readlinkat(self.fd.as_fd(), one_name(name)?).map_err(errno)
    }

    /// Renames the entry `from` of this directory to `to_name` in `to`, never over an
    /// existing name (`renameat2(2)` `RENAME_NOREPLACE`). A link is moved as a link.
    ///
    /// # Errors
    /// `EEXIST` when `to_name` is taken; the other `renameat2(2)` errors.
    pub fn rename_noreplace(&self, from: &OsStr, to: &DirFd, to_name: &OsStr) -> io::Result<()> {
        nix::fcntl::renameat2(
            self.fd.as_fd(),
            one_name(from)?,
            to.fd.as_fd(),
            one_name(to_name)?,
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        )
        .map_err(errno)
    }

    /// Moves the entry `name` aside, in this directory, to an unpredictable new name
    /// (`<name>.tyba-<16 hex digits>`, never over anything, another tried when one is taken);
    /// returns the name it got.
    ///
    /// # Errors
    /// The `renameat2(2)` error, or `EEXIST` when every name tried was taken.
    pub fn rename_aside(&self, name: &OsStr) -> io::Result<OsString> {
        for _ in 0..NAME_TRIES {
            let aside = unpredictable_name(name)?;
            match self.rename_noreplace(name, self, &aside) {
                Ok(()) => return Ok(aside),
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::from_raw_os_error(libc::EEXIST))
    }

    /// Removes the entry `name` when it is no directory (`unlinkat(2)`; a link is removed,
    /// not what it names).
    ///
    /// # Errors
    /// The `unlinkat(2)` error (`EISDIR` for a directory).
    pub fn unlink(&self, name: &OsStr) -> io::Result<()> {
        nix::unistd::unlinkat(
            self.fd.as_fd(),
            one_name(name)?,
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        )
        .map_err(errno)
    }

    /// Reads the regular file `rel` beneath this directory (no link followed; `O_NONBLOCK`,
    /// so a pipe put there cannot stall the read), at most `max` bytes (more is an error).
    ///
    /// # Errors
    /// The `openat2(2)` error, `EINVAL` for something other than a regular file, `EFBIG`
    /// past `max`.
    pub fn read_file(&self, rel: &Path, max: u64) -> io::Result<Vec<u8>> {
        use std::io::Read as _;
        let f = self.open_regular(rel)?;
        let mut out = Vec::new();
        f.take(max.saturating_add(1)).read_to_end(&mut out)?;
        if out.len() as u64 > max {
            return Err(io::Error::from_raw_os_error(libc::EFBIG));
        }
        Ok(out)
    }

    /// Opens the regular file `rel` beneath this directory for reading (no link followed;
    /// `O_NONBLOCK`, so a pipe put there cannot stall the open).
    ///
    /// # Errors
    /// The `openat2(2)` error, `EINVAL` for something other than a regular file.
    pub fn open_regular(&self, rel: &Path) -> io::Result<std::fs::File> {
        let rel = plain_relative(rel)?;
        let fd = nix::fcntl::openat2(
            self.fd.as_fd(),
            rel,
            how(OFlag::O_RDONLY | OFlag::O_NONBLOCK),
        )
        .map_err(errno)?;
        let f = std::fs::File::from(fd);
        if !f.metadata()?.is_file() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        Ok(f)
    }

    /// Makes the new regular file `name` in this directory for writing (`O_CREAT | O_EXCL |
    /// O_NOFOLLOW`: never over anything, a link included), with `mode` less the umask.
    ///
    /// # Errors
    /// `EEXIST` when the name is taken; the `openat2(2)` error.
    pub fn create_new(&self, name: &OsStr, mode: u32) -> io::Result<std::fs::File> {
        let h = how(OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL)
            .mode(nix::sys::stat::Mode::from_bits_truncate(mode));
        let fd = nix::fcntl::openat2(self.fd.as_fd(), one_name(name)?, h).map_err(errno)?;
        Ok(std::fs::File::from(fd))
    }

    /// Makes `to_name` in `to` another name of the entry `name` of this directory
    /// (`linkat(2)` without `AT_SYMLINK_FOLLOW`: a link is linked as a link, never followed).
    ///
    /// # Errors
    /// The `linkat(2)` error (`EEXIST` when `to_name` is taken, `EXDEV` across filesystems).
    pub fn hard_link(&self, name: &OsStr, to: &DirFd, to_name: &OsStr) -> io::Result<()> {
        nix::unistd::linkat(
            self.fd.as_fd(),
            one_name(name)?,
            to.fd.as_fd(),
            one_name(to_name)?,
            nix::fcntl::AtFlags::empty(),
        )
        .map_err(errno)
    }

    /// Writes `bytes` to a new file of this directory under an unpredictable name
    /// (`O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0644 before the umask) and renames it over
    /// `name` (`renameat(2)`: whatever entry `name` was, a link included, is replaced, not
    /// followed). The new file is removed again when a step fails.
    ///
    /// # Errors
    /// The first failing system call's error.
    pub fn replace_file(&self, name: &OsStr, bytes: &[u8]) -> io::Result<()> {
        use std::io::Write as _;
        let name = one_name(name)?;
        let mut made = None;
        for _ in 0..NAME_TRIES {
            let tmp = unpredictable_name(name)?;
            let h = how(OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL)
                .mode(nix::sys::stat::Mode::from_bits_truncate(0o644));
            match nix::fcntl::openat2(self.fd.as_fd(), tmp.as_os_str(), h) {
                Ok(fd) => {
                    made = Some((tmp, std::fs::File::from(fd)));
                    break;
                }
                Err(nix::errno::Errno::EEXIST) => continue,
                Err(e) => return Err(errno(e)),
            }
        }
        let Some((tmp, mut f)) = made else {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        };
        let r = f.write_all(bytes).and_then(|()| {
            nix::fcntl::renameat(self.fd.as_fd(), tmp.as_os_str(), self.fd.as_fd(), name)
                .map_err(errno)
        });
        if r.is_err() {
            let _ = self.unlink(&tmp);
        }
        r
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_reached_through_a_link() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        let outside = t.path().join("outside");
        std::fs::create_dir_all(root.join("real/sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), "s").unwrap();
        std::fs::write(root.join("real/file"), "f").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        std::os::unix::fs::symlink("../outside", root.join("real/up")).unwrap();
        let d = DirFd::open(&root).unwrap();
        // Controls: plain paths open and read.
        assert!(d.open_dir(Path::new("real/sub")).is_ok());
        assert_eq!(d.read_file(Path::new("real/file"), 10).unwrap(), b"f");
        // A link as the last component or on the way, relative or absolute: refused (the
        // last one as no directory, `O_NOFOLLOW | O_DIRECTORY`).
        for rel in ["link", "link/", "real/up", "real/up/"] {
            let e = d.open_dir(Path::new(rel)).unwrap_err();
            assert!(
                matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)),
                "{rel}: {e}"
            );
        }
        assert!(d.open_dir(Path::new("link/x")).is_err());
        assert_eq!(
            d.read_file(Path::new("link/secret"), 10)
                .unwrap_err()
                .raw_os_error(),
            Some(libc::ELOOP)
        );
        assert!(d.open_dir(Path::new("../outside")).is_err());
        assert!(d.open_dir(Path::new("/tmp")).is_err());
        assert!(DirFd::open(&root.join("link")).is_err());
        // The link's own metadata, not its target's.
        assert!(d.meta(OsStr::new("link")).unwrap().file_type().is_symlink());
        assert!(d.meta(OsStr::new("real/file")).is_err(), "one name only");
        // Removing a link removes the link.
        d.unlink(OsStr::new("link")).unwrap();
        assert!(outside.join("secret").exists());
        // Directories made beneath, never through a link.
        assert!(d.make_dirs(Path::new("real/new/deeper")).is_ok());
        assert!(root.join("real/new/deeper").is_dir());
        assert!(d.make_dirs(Path::new("real/up/made")).is_err());
        assert!(!outside.join("made").exists());
        let sub = d.open_dir(Path::new("real")).unwrap();
        sub.create_new_file(OsStr::new("new-file"), b"x").unwrap();
        assert!(sub.create_new_file(OsStr::new("new-file"), b"y").is_err());
        assert!(sub.create_new_file(OsStr::new("up"), b"y").is_err());
        assert_eq!(std::fs::read(root.join("real/new-file")).unwrap(), b"x");
        // Too big, not a file.
        assert!(d.read_file(Path::new("real/file"), 0).is_err());
        assert!(d.read_file(Path::new("real"), 10).is_err());
    }

    #[test]
    fn asides_are_unpredictable_and_replacing_follows_no_link() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        std::fs::create_dir_all(root.join("x")).unwrap();
        let d = DirFd::open(&root).unwrap();
        let a = d.rename_aside(OsStr::new("x")).unwrap();
        let a = a.to_string_lossy().into_owned();
        assert!(
            a.starts_with("x.tyba-") && a.len() == "x.tyba-".len() + 16,
            "{a}"
        );
        assert!(root.join(&a).is_dir() && !root.join("x").exists());
        // A file replaced through a link replaces the link, never its target.
        let target = t.path().join("target");
        std::fs::write(&target, "person's").unwrap();
        std::os::unix::fs::symlink(&target, root.join("HEAD")).unwrap();
        d.replace_file(OsStr::new("HEAD"), b"ref: refs/heads/main\n")
            .unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "person's");
        assert!(!std::fs::symlink_metadata(root.join("HEAD"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            std::fs::read_to_string(root.join("HEAD")).unwrap(),
            "ref: refs/heads/main\n"
        );
        // The rename between two open directories never replaces.
        std::fs::create_dir(root.join("y")).unwrap();
        std::fs::create_dir(root.join("z")).unwrap();
        let e = d
            .rename_noreplace(OsStr::new("y"), &d, OsStr::new("z"))
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EEXIST));
    }
}
