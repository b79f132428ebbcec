//! Reading the sandboxed processes through the supervisor's `/proc` (`proc(5)`): identity,
//! parentage, working directory and memory. The supervisor is the owner of the sandbox's user
//! namespace, so it has ptrace-read rights over every process in it.

use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// A process identity that survives pid reuse: thread-group id and [`Stat::start`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcId {
    /// Thread-group id in the supervisor's PID namespace.
    pub pid: u32,
    /// The process's identity ([`Stat::start`]).
    pub start: u64,
}

/// What the exec model knows of a process: its parent and an identity no later process with
/// the same pid can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Parent's thread-group id, in the supervisor's PID namespace.
    pub ppid: u32,
    /// The identity: the inode number of the process's pidfs entry (`pidfd_open(2)`; on
    /// Linux ≥ 6.9 pidfs numbers every `struct pid` uniquely, never reusing a number), or,
    /// where the kernel has no pidfs or no `PIDFD_GET_INFO`, the start time in clock ticks
    /// since boot (`proc(5)`, `/proc/<pid>/stat` field 22). One source for the whole run:
    /// [`ident_source`].
    pub start: u64,
}

/// Where [`Stat`] comes from on this kernel, probed once per process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentSource {
    /// `PIDFD_GET_INFO` and the pidfs inode: no `/proc` lookup (Linux ≥ 6.13).
    Pidfs,
    /// `/proc/<pid>/stat`.
    Proc,
}

/// `PID_FS_MAGIC` (`include/uapi/linux/magic.h`).
const PID_FS_MAGIC: i64 = 0x5049_4446;

/// The [`IdentSource`] of this kernel: pidfs when a pidfd of this process lives on pidfs and
/// answers `PIDFD_GET_INFO`.
pub fn ident_source() -> IdentSource {
    static SOURCE: std::sync::OnceLock<IdentSource> = std::sync::OnceLock::new();
    *SOURCE.get_or_init(|| {
        let ok = crate::sys::pidfd_open(std::process::id() as i32).is_ok_and(|fd| {
            use std::os::fd::AsFd;
            nix::sys::statfs::fstatfs(fd.as_fd())
                .is_ok_and(|f| f.filesystem_type().0 == PID_FS_MAGIC)
                && crate::sys::pidfd_get_info(fd.as_fd()).is_ok()
        });
        if ok {
            IdentSource::Pidfs
        } else {
            IdentSource::Proc
        }
    })
}

/// [`Stat`] of the process (thread-group leader) `pid` behind `pidfd`.
///
/// # Errors
/// ESRCH/ENOENT when it is gone; `Other` for a `/proc` line that does not parse.
pub fn stat_of(pidfd: std::os::fd::BorrowedFd<'_>, pid: u32) -> io::Result<Stat> {
    match ident_source() {
        IdentSource::Pidfs => {
            let info = crate::sys::pidfd_get_info(pidfd)?;
            let st = nix::sys::stat::fstat(pidfd).map_err(io::Error::from)?;
            Ok(Stat {
                ppid: info.ppid,
                start: st.st_ino,
            })
        }
        IdentSource::Proc => {
            let (ppid, start) = proc_stat(pid)?;
            Ok(Stat { ppid, start })
        }
    }
}

/// [`Stat`] of process (thread-group leader) `pid`.
///
/// # Errors
/// ESRCH/ENOENT when it is gone or `pid` is not a thread-group leader.
pub fn stat_ext(pid: u32) -> io::Result<Stat> {
    use std::os::fd::AsFd;
    let fd = crate::sys::pidfd_open(pid as i32)?;
    stat_of(fd.as_fd(), pid)
}

/// `(ppid, identity)` of process `pid` ([`Stat`]).
///
/// # Errors
/// As [`stat_ext`].
pub fn stat(pid: u32) -> io::Result<(u32, u64)> {
    stat_ext(pid).map(|s| (s.ppid, s.start))
}

/// The command name of thread `tid` (`/proc/<tid>/comm`, at most 15 bytes, set by the
/// process: shown, never trusted), printable characters only; `None` when unreadable.
pub fn comm(tid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{tid}/comm")).ok()?;
    let s: String = String::from_utf8_lossy(&raw)
        .trim_end_matches('\n')
        .chars()
        .filter(|c| !c.is_control() && *c != '`')
        .collect();
    (!s.is_empty()).then_some(s)
}

/// The fields of `/proc/<pid>/stat` after the command name, split on white space.
fn stat_fields(pid: u32) -> io::Result<Vec<u64>> {
    let mut buf = [0u8; 1024];
    let n = {
        use std::io::Read;
        let mut f = std::fs::File::open(format!("/proc/{pid}/stat"))?;
        f.read(&mut buf)?
    };
    fields_after_comm(&buf[..n])
}

/// The fields of a `/proc/<pid>/stat` line after the command name (which may hold spaces and
/// parentheses: the last `)` ends it), field 3 first; fields that are not numbers (the
/// state letter) are 0.
fn fields_after_comm(line: &[u8]) -> io::Result<Vec<u64>> {
    let s = std::str::from_utf8(line).map_err(|_| io::Error::other("bad stat"))?;
    let after = s
        .rsplit_once(')')
        .map(|(_, a)| a)
        .ok_or_else(|| io::Error::other("bad stat"))?;
    Ok(after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect())
}

/// `(ppid, starttime)` from `/proc/<pid>/stat` (fields 4 and 22).
fn proc_stat(pid: u32) -> io::Result<(u32, u64)> {
    let f = stat_fields(pid)?;
    // After ')' come fields 3 (state), 4 (ppid), … 22 (starttime) → indices 0, 1, … 19.
    let ppid = f
        .get(1)
        .and_then(|&x| u32::try_from(x).ok())
        .ok_or_else(|| io::Error::other("bad ppid"))?;
    let start = *f.get(19).ok_or_else(|| io::Error::other("bad starttime"))?;
    Ok((ppid, start))
}

/// The address of the start of process `pid`'s stack (`/proc/<pid>/stat` field 28): new, and
/// randomised, at every exec.
///
/// # Errors
/// ENOENT/ESRCH when it is gone; `Other` for a line that does not parse.
pub fn stack_start(pid: u32) -> io::Result<u64> {
    ProcDir::open(pid)?.stack_start()
}

/// The soft stack size limit of process `pid` in bytes (`Max stack size` in
/// `/proc/<pid>/limits`); `None` when unlimited or unreadable.
pub fn stack_limit(pid: u32) -> Option<usize> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = s.lines().find(|l| l.starts_with("Max stack size"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// `(device, inode)` of the file process `pid` runs (`/proc/<pid>/exe`).
pub fn exe_id(pid: u32) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}/exe"))
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Reads NULL-terminated arrays of string pointers (argv, envp) of thread `tid` with a few
/// `process_vm_readv(2)` calls: the pointers a page at a time, then the strings in batches,
/// each read no further than the end of its page (a string that goes on is read on).
/// At most `max_items` items and `max_bytes` bytes in all.
///
/// # Errors
/// EFAULT for unmapped memory (what the kernel's exec would answer); E2BIG past the limits;
/// ESRCH when the thread is gone.
pub fn read_string_array(
    tid: u32,
    addr: u64,
    max_items: usize,
    max_bytes: usize,
) -> io::Result<Vec<Vec<u8>>> {
    if addr == 0 {
        return Ok(Vec::new());
    }
    let pid = nix::unistd::Pid::from_raw(tid as i32);
    // The pointers.
    let mut ptrs: Vec<u64> = Vec::new();
    let mut at = addr;
    let mut carry: Vec<u8> = Vec::new();
    'ptrs: loop {
        let len = (4096 - (at % 4096)) as usize;
        let bytes = vm_read(pid, at, len)?;
        at += len as u64;
        carry.extend_from_slice(&bytes);
        let mut off = 0;
        while carry.len() - off >= 8 {
            let mut w = [0u8; 8];
            w.copy_from_slice(&carry[off..off + 8]);
            off += 8;
            let p = u64::from_le_bytes(w);
            if p == 0 {
                break 'ptrs;
            }
            if ptrs.len() >= max_items {
                return Err(io::Error::from_raw_os_error(libc::E2BIG));
            }
            ptrs.push(p);
        }
        carry.drain(..off);
    }
    if let Some(out) = read_pages(pid, &ptrs, max_bytes)? {
        return Ok(out);
    }
    // The strings: a first batch of page-bounded chunks, then the rest of any that go on.
    let mut out: Vec<Vec<u8>> = vec![Vec::new(); ptrs.len()];
    let mut todo: Vec<(usize, u64)> = ptrs.iter().copied().enumerate().collect();
    let mut total = 0usize;
    while !todo.is_empty() {
        let mut next = Vec::new();
        for batch in todo.chunks(512) {
            let lens: Vec<usize> = batch
                .iter()
                .map(|&(_, p)| ((4096 - (p % 4096)) as usize).min(512))
                .collect();
            let mut bufs: Vec<Vec<u8>> = lens.iter().map(|&l| vec![0u8; l]).collect();
            let remote: Vec<nix::sys::uio::RemoteIoVec> = batch
                .iter()
                .zip(&lens)
                .map(|(&(_, p), &l)| nix::sys::uio::RemoteIoVec {
                    base: p as usize,
                    len: l,
                })
                .collect();
            let got = {
                let mut local: Vec<std::io::IoSliceMut<'_>> = bufs
                    .iter_mut()
                    .map(|b| std::io::IoSliceMut::new(b))
                    .collect();
                nix::sys::uio::process_vm_readv(pid, &mut local, &remote)
                    .map_err(io::Error::from)?
            };
            let mut left = got;
            let mut stopped = false;
            for ((&(i, p), buf), &l) in batch.iter().zip(&bufs).zip(&lens) {
                if stopped || left < l {
                    stopped = true;
                    // This one faulted (or a later one did and the batch stopped here):
                    // read it, and whatever follows, one at a time.
                    let s = read_cstr_vm(pid, p, max_bytes.saturating_sub(total) + 1)?;
                    total += s.len() + 1;
                    out[i].extend_from_slice(&s);
                    continue;
                }
                left -= l;
                match buf.iter().position(|&b| b == 0) {
                    Some(z) => {
                        out[i].extend_from_slice(&buf[..z]);
                        total += z + 1;
                    }
                    None => {
                        out[i].extend_from_slice(buf);
                        total += l;
                        next.push((i, p + l as u64));
                    }
                }
                if total > max_bytes {
                    return Err(io::Error::from_raw_os_error(libc::E2BIG));
                }
            }
        }
        todo = next;
    }
    Ok(out)
}

/// What an exec names in the caller's memory ([`read_exec_args`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecArgs {
    /// The file name, without its NUL.
    pub path: Vec<u8>,
    /// The argument strings.
    pub argv: Vec<Vec<u8>>,
    /// The environment strings.
    pub envp: Vec<Vec<u8>>,
}

/// Reads an exec's file name (at most `max_path` bytes) and its argv and envp arrays (each at
/// most `max_items` items and `max_bytes` bytes) from thread `tid`, as [`read_cstr`] and
/// [`read_string_array`] do, with two `process_vm_readv(2)` calls where the memory allows:
/// the name and the first page of each pointer array in one, every string of both arrays in
/// one read of the pages they lie on ([`read_pages`]). Each system call pays for reaching the process and its
/// memory map again, and a decision per exec is on the path of every command the agent runs.
/// Anything out of the usual shape (an array past its first page, strings spread wide, a
/// fault) is read by the one-at-a-time functions, so the result and errors are theirs.
///
/// # Errors
/// As [`read_cstr`] and [`read_string_array`]: EFAULT, E2BIG, ESRCH.
pub fn read_exec_args(
    tid: u32,
    path_ptr: u64,
    argv_ptr: u64,
    envp_ptr: u64,
    max_path: usize,
    max_items: usize,
    max_bytes: usize,
) -> io::Result<ExecArgs> {
    let pid = nix::unistd::Pid::from_raw(tid as i32);
    let to_page_end = |a: u64| (4096 - (a % 4096)) as usize;
    // The first read: up to the end of the page of each of the three pointers.
    let parts = [path_ptr, argv_ptr, envp_ptr];
    let lens: Vec<usize> = parts
        .iter()
        .enumerate()
        .map(|(i, &a)| match (i, a) {
            (_, 0) => 0,
            (0, a) => to_page_end(a).min(max_path.saturating_add(1)),
            (_, a) => to_page_end(a),
        })
        .collect();
    // The thread's kept buffers (no allocation of three zeroed pages per exec); given back
    // below on the usual path.
    let mut bufs = HEAD_BUFFERS.with_borrow_mut(std::mem::take);
    for (b, &l) in bufs.iter_mut().zip(&lens) {
        b.clear();
        b.resize(l, 0);
    }
    let remote: Vec<nix::sys::uio::RemoteIoVec> = parts
        .iter()
        .zip(&lens)
        .filter(|(_, &l)| l > 0)
        .map(|(&a, &l)| nix::sys::uio::RemoteIoVec {
            base: a as usize,
            len: l,
        })
        .collect();
    let got = {
        let mut local: Vec<std::io::IoSliceMut<'_>> = bufs
            .iter_mut()
            .filter(|b| !b.is_empty())
            .map(|b| std::io::IoSliceMut::new(b))
            .collect();
        match nix::sys::uio::process_vm_readv(pid, &mut local, &remote) {
            Ok(n) => n,
            Err(nix::errno::Errno::EFAULT) => 0,
            Err(e) => return Err(e.into()),
        }
    };
    let slow = || -> io::Result<ExecArgs> {
        Ok(ExecArgs {
            path: read_cstr_vm(pid, path_ptr, max_path)?,
            argv: read_string_array(tid, argv_ptr, max_items, max_bytes)?,
            envp: read_string_array(tid, envp_ptr, max_items, max_bytes)?,
        })
    };
    if got != lens.iter().sum::<usize>() {
        return slow();
    }
    // The name, when its NUL is in what was read.
    let Some(path) = bufs[0]
        .iter()
        .position(|&b| b == 0)
        .map(|z| bufs[0][..z].to_vec())
    else {
        return slow();
    };
    // The pointers, when each array ends within its first page.
    let ptrs_of = |buf: &[u8]| -> Option<Vec<u64>> {
        let mut out = Vec::new();
        for w in buf.chunks_exact(8) {
            let p = u64::from_le_bytes(w.try_into().ok()?);
            if p == 0 {
                return Some(out);
            }
            out.push(p);
        }
        None
    };
    // The pointers, read on from the next page (both arrays in one call) while an array
    // has not ended: a shell's environment array often crosses a page.
    let mut arrays = [
        (argv_ptr, std::mem::take(&mut bufs[1])),
        (envp_ptr, std::mem::take(&mut bufs[2])),
    ];
    let mut ptrs: [Option<Vec<u64>>; 2] = [None, None];
    for round in 0..=MAX_POINTER_PAGES {
        for (k, (base, buf)) in arrays.iter().enumerate() {
            if ptrs[k].is_none() {
                ptrs[k] = if *base == 0 {
                    Some(Vec::new())
                } else {
                    ptrs_of(buf)
                };
            }
        }
        if ptrs.iter().all(Option::is_some) || round == MAX_POINTER_PAGES {
            break;
        }
        let on: Vec<(usize, u64)> = arrays
            .iter()
            .enumerate()
            .filter(|(k, _)| ptrs[*k].is_none())
            .map(|(k, (base, buf))| (k, base.saturating_add(buf.len() as u64)))
            .collect();
        let mut pages: Vec<Vec<u8>> = on.iter().map(|_| vec![0u8; 4096]).collect();
        let remote: Vec<nix::sys::uio::RemoteIoVec> = on
            .iter()
            .map(|&(_, at)| nix::sys::uio::RemoteIoVec {
                base: at as usize,
                len: 4096,
            })
            .collect();
        let got = {
            let mut local: Vec<std::io::IoSliceMut<'_>> = pages
                .iter_mut()
                .map(|b| std::io::IoSliceMut::new(b))
                .collect();
            nix::sys::uio::process_vm_readv(pid, &mut local, &remote).unwrap_or(0)
        };
        if got != 4096 * on.len() {
            return slow();
        }
        for (&(k, _), page) in on.iter().zip(&pages) {
            arrays[k].1.extend_from_slice(page);
        }
    }
    let [Some(av), Some(ev)] = ptrs else {
        return slow();
    };
    if av.len() > max_items || ev.len() > max_items {
        return Err(io::Error::from_raw_os_error(libc::E2BIG));
    }
    let all: Vec<u64> = av.iter().chain(&ev).copied().collect();
    let Some(mut strings) = read_pages(pid, &all, max_bytes.saturating_mul(2))? else {
        return slow();
    };
    let envp = strings.split_off(av.len());
    let [(_, a), (_, e)] = arrays;
    HEAD_BUFFERS.with_borrow_mut(|kept| {
        if a.capacity() <= KEPT_HEAD_BUFFER && e.capacity() <= KEPT_HEAD_BUFFER {
            *kept = [std::mem::take(&mut bufs[0]), a, e];
        }
    });
    let within = |v: &[Vec<u8>]| v.iter().map(|s| s.len() + 1).sum::<usize>() <= max_bytes;
    if !within(&strings) || !within(&envp) {
        return Err(io::Error::from_raw_os_error(libc::E2BIG));
    }
    Ok(ExecArgs {
        path,
        argv: strings,
        envp,
    })
}

thread_local! {
    /// The buffers [`read_exec_args`] reads an exec's name and pointer arrays into, kept by
    /// each thread (the notify loop's own) from one exec to the next.
    static HEAD_BUFFERS: std::cell::RefCell<[Vec<u8>; 3]> = const {
        std::cell::RefCell::new([Vec::new(), Vec::new(), Vec::new()])
    };
}

/// A pointer array's buffer larger than this (bytes) is not kept after the exec that needed it.
const KEPT_HEAD_BUFFER: usize = 64 << 10;

/// Pages past the first that [`read_exec_args`] reads of a pointer array before it reads
/// the arrays the slow way (about 2,000 pointers).
const MAX_POINTER_PAGES: usize = 4;

/// The most pages [`read_pages`] reads for one call's strings (4 MiB) before it hands them
/// over to the one-at-a-time readers.
const MAX_PAGES: usize = 1024;

/// Bytes in a page of the target's memory, the unit [`read_pages`] reads.
const PAGE: u64 = 4096;

/// The strings at `ptrs` read by the distinct pages they lie on: first, in one
/// `process_vm_readv(2)`, each page a string starts on, once however many strings share it
/// (adjacent pages as one remote piece); then, while some string has no NUL in the pages read,
/// the page each such string runs on into, all of them in one further call per round.
///
/// Reading only the pages that hold strings matters: each page read from a process that has
/// just forked costs the kernel a page-table walk and, for a page still shared copy-on-write
/// with its parent, a copy (`FOLL_PIN` unshares it), while a shell's environment strings lie
/// a few pages apart in its heap. `Ok(None)` when a page is not mapped or the strings need
/// more than [`MAX_PAGES`] pages: the caller then reads string by string, whose errors are
/// the kernel's exec's (EFAULT).
///
/// # Errors
/// E2BIG when the strings, each with its NUL, are more than `max_bytes` in all; ESRCH when the
/// process is gone.
fn read_pages(
    pid: nix::unistd::Pid,
    ptrs: &[u64],
    max_bytes: usize,
) -> io::Result<Option<Vec<Vec<u8>>>> {
    let mut want: Vec<u64> = ptrs.iter().map(|&p| p & !(PAGE - 1)).collect();
    want.sort_unstable();
    want.dedup();
    PAGE_BUFFER.with_borrow_mut(|buf| {
        let mut pages = PageMap::default();
        // The length of each string, once its NUL has been read.
        let mut lens: Vec<Option<usize>> = vec![None; ptrs.len()];
        loop {
            if pages.at.len() + want.len() > MAX_PAGES {
                return Ok(None);
            }
            if !pages.read(pid, &want, buf)? {
                return Ok(None);
            }
            want.clear();
            let mut total = 0usize;
            for (&p, len) in ptrs.iter().zip(lens.iter_mut()) {
                if let Some(n) = len {
                    total = total.saturating_add(*n + 1);
                    continue;
                }
                match pages.scan(p, buf) {
                    Ok(n) => {
                        *len = Some(n);
                        total = total.saturating_add(n + 1);
                    }
                    Err(next) => {
                        total = total.saturating_add((next - p) as usize);
                        want.push(next);
                    }
                }
            }
            if total > max_bytes {
                return Err(io::Error::from_raw_os_error(libc::E2BIG));
            }
            if want.is_empty() {
                break;
            }
            want.sort_unstable();
            want.dedup();
        }
        let out = ptrs
            .iter()
            .zip(&lens)
            .map(|(&p, len)| pages.copy(p, len.unwrap_or(0), buf))
            .collect();
        if buf.capacity() > KEPT_PAGE_BUFFER {
            *buf = Vec::new();
        }
        Ok(Some(out))
    })
}

/// The pages [`read_pages`] has read: their addresses, sorted, and where each is in the
/// buffer.
#[derive(Default)]
struct PageMap {
    /// `(page address, offset in the buffer)`, by address.
    at: Vec<(u64, usize)>,
    /// Bytes of the buffer in use.
    used: usize,
}

impl PageMap {
    /// Reads the pages `want` (sorted, distinct, none read yet) of `pid` into `buf` after the
    /// ones already there, in one call. `Ok(false)` when one is not mapped.
    fn read(&mut self, pid: nix::unistd::Pid, want: &[u64], buf: &mut Vec<u8>) -> io::Result<bool> {
        let size = want.len() * PAGE as usize;
        let end = self.used + size;
        if buf.len() < end {
            buf.resize(end, 0);
        }
        let mut remote: Vec<nix::sys::uio::RemoteIoVec> = Vec::with_capacity(want.len());
        for &p in want {
            match remote.last_mut() {
                Some(r) if r.base as u64 + r.len as u64 == p => r.len += PAGE as usize,
                _ => remote.push(nix::sys::uio::RemoteIoVec {
                    base: p as usize,
                    len: PAGE as usize,
                }),
            }
        }
        // The remote pieces fill the one local piece in order.
        let got = match nix::sys::uio::process_vm_readv(
            pid,
            &mut [std::io::IoSliceMut::new(&mut buf[self.used..end])],
            &remote,
        ) {
            Ok(n) => n,
            Err(nix::errno::Errno::EFAULT) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        if got != size {
            return Ok(false);
        }
        let mut merged = Vec::with_capacity(self.at.len() + want.len());
        let (mut old, mut new) = (
            self.at.iter().peekable(),
            want.iter().enumerate().peekable(),
        );
        loop {
            let take_old = match (old.peek(), new.peek()) {
                (Some(o), Some((_, &n))) => o.0 < n,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            if take_old {
                merged.extend(old.next().copied());
            } else if let Some((i, &n)) = new.next() {
                merged.push((n, self.used + i * PAGE as usize));
            }
        }
        self.at = merged;
        self.used = end;
        Ok(true)
    }

    /// Where page `page` is in the buffer, when it has been read.
    fn offset(&self, page: u64) -> Option<usize> {
        self.at
            .binary_search_by_key(&page, |&(a, _)| a)
            .ok()
            .map(|i| self.at[i].1)
    }

    /// The length of the string at `p` when its NUL is in the pages read; else `Err` with the
    /// first page it runs on into that has not been read.
    fn scan(&self, p: u64, buf: &[u8]) -> Result<usize, u64> {
        let mut page = p & !(PAGE - 1);
        let mut from = (p - page) as usize;
        let mut len = 0usize;
        loop {
            let Some(off) = self.offset(page) else {
                return Err(page);
            };
            let bytes = &buf[off + from..off + PAGE as usize];
            if let Some(z) = bytes.iter().position(|&b| b == 0) {
                return Ok(len + z);
            }
            len += bytes.len();
            page += PAGE;
            from = 0;
        }
    }

    /// The `len` bytes at `p`, all in pages read ([`PageMap::scan`] said so).
    fn copy(&self, p: u64, len: usize, buf: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        let mut at = p;
        while out.len() < len {
            let page = at & !(PAGE - 1);
            let Some(off) = self.offset(page) else {
                break;
            };
            let from = off + (at - page) as usize;
            let n = (len - out.len()).min((page + PAGE - at) as usize);
            out.extend_from_slice(&buf[from..from + n]);
            at += n as u64;
        }
        out
    }
}

thread_local! {
    /// The buffer the page reads of one thread reuse ([`read_pages`]), so that an exec's
    /// strings are read without a fresh zeroed allocation each time (the notify loop's own
    /// thread).
    static PAGE_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A page buffer larger than this (bytes) is not kept after the read that needed it.
const KEPT_PAGE_BUFFER: usize = 1 << 20;

/// Reads exactly `len` bytes of `pid`'s memory at `addr` (EFAULT when part is unmapped).
fn vm_read(pid: nix::unistd::Pid, addr: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let n = nix::sys::uio::process_vm_readv(
        pid,
        &mut [std::io::IoSliceMut::new(&mut buf)],
        &[nix::sys::uio::RemoteIoVec {
            base: addr as usize,
            len,
        }],
    )
    .map_err(io::Error::from)?;
    if n < len {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    Ok(buf)
}

/// A NUL-terminated string of at most `max` bytes at `addr`, a page at a time.
fn read_cstr_vm(pid: nix::unistd::Pid, addr: u64, max: usize) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < max {
        let room = ((4096 - (at % 4096)) as usize).min(max - out.len());
        let chunk = vm_read(pid, at, room)?;
        if let Some(z) = chunk.iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..z]);
            return Ok(out);
        }
        out.extend_from_slice(&chunk);
        at += room as u64;
    }
    Err(io::Error::from_raw_os_error(libc::E2BIG))
}

/// The thread-group id of thread `tid` (`Tgid:` in `/proc/<tid>/status`).
pub fn tgid(tid: u32) -> io::Result<u32> {
    let s = std::fs::read_to_string(format!("/proc/{tid}/status"))?;
    s.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| io::Error::other("no Tgid"))
}

/// The identity of the process thread `tid` belongs to.
pub fn proc_id(tid: u32) -> io::Result<ProcId> {
    use std::os::fd::AsFd;
    // `pidfd_open` succeeds only for thread-group leaders, the common case.
    let (pid, fd) = match crate::sys::pidfd_open(tid as i32) {
        Ok(fd) => (tid, fd),
        Err(_) => {
            let pid = tgid(tid)?;
            (pid, crate::sys::pidfd_open(pid as i32)?)
        }
    };
    let st = stat_of(fd.as_fd(), pid)?;
    Ok(ProcId {
        pid,
        start: st.start,
    })
}

/// A thread's `/proc/<tid>` directory, opened once (`O_PATH`) for the few entries one
/// decision reads: the first lookup of a new process's `/proc` directory is most of what each
/// entry costs.
#[derive(Debug, Clone)]
pub struct ProcDir(std::sync::Arc<std::os::fd::OwnedFd>);

impl ProcDir {
    /// Opens `/proc/<tid>`.
    ///
    /// # Errors
    /// ENOENT when the thread is gone.
    pub fn open(tid: u32) -> io::Result<ProcDir> {
        let fd = nix::fcntl::open(
            format!("/proc/{tid}").as_str(),
            nix::fcntl::OFlag::O_PATH
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(io::Error::from)?;
        Ok(ProcDir(std::sync::Arc::new(fd)))
    }

    /// The directory's descriptor, shared: it stays open while the result lives.
    pub fn shared(&self) -> std::sync::Arc<std::os::fd::OwnedFd> {
        std::sync::Arc::clone(&self.0)
    }

    /// The working directory, as the kernel names it (`cwd`).
    ///
    /// # Errors
    /// ENOENT/EACCES when gone or not readable.
    pub fn cwd(&self) -> io::Result<PathBuf> {
        use std::os::fd::AsFd;
        nix::fcntl::readlinkat(self.0.as_fd(), "cwd")
            .map(PathBuf::from)
            .map_err(io::Error::from)
    }

    /// `(device, inode)` of the file the process runs (`exe`).
    pub fn exe_id(&self) -> Option<(u64, u64)> {
        use std::os::fd::AsFd;
        nix::sys::stat::fstatat(self.0.as_fd(), "exe", nix::fcntl::AtFlags::empty())
            .ok()
            .map(|st| (st.st_dev, st.st_ino))
    }

    /// The start of the stack (`stat` field 28; [`stack_start`]).
    ///
    /// # Errors
    /// As [`stack_start`].
    pub fn stack_start(&self) -> io::Result<u64> {
        use std::os::fd::AsFd;
        let fd = nix::fcntl::openat(
            self.0.as_fd(),
            "stat",
            nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(io::Error::from)?;
        let mut buf = [0u8; 1024];
        let n = nix::unistd::read(&fd, &mut buf).map_err(io::Error::from)?;
        startstack_of(&buf[..n])
    }
}

/// Field 28 (`startstack`) of a `/proc/<pid>/stat` line.
fn startstack_of(line: &[u8]) -> io::Result<u64> {
    fields_after_comm(line)?
        .get(25)
        .copied()
        .ok_or_else(|| io::Error::other("bad startstack"))
}

/// Whether fd `fd` of process `pid` has close-on-exec (`flags:` in `/proc/<pid>/fdinfo/<fd>`).
pub fn fd_cloexec(pid: u32, fd: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .is_some_and(|f| f & libc::O_CLOEXEC as u32 != 0)
}

/// A handle on another process's memory (`/proc/<tid>/mem`).
#[derive(Debug)]
pub struct Mem(std::fs::File);

impl Mem {
    /// Opens the memory of thread `tid`.
    ///
    /// # Errors
    /// ESRCH/ENOENT when gone, EACCES without ptrace rights.
    pub fn open(tid: u32) -> io::Result<Mem> {
        Ok(Mem(std::fs::File::open(format!("/proc/{tid}/mem"))?))
    }

    /// Reads exactly `len` bytes at `addr`.
    ///
    /// # Errors
    /// EIO for unmapped memory.
    pub fn read(&self, addr: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.0.read_exact_at(&mut buf, addr)?;
        Ok(buf)
    }

    /// Reads a NUL-terminated string of at most `max` bytes at `addr`.
    ///
    /// # Errors
    /// EIO for unmapped memory; `ENAMETOOLONG` when no NUL is found within `max` bytes.
    pub fn read_cstr(&self, addr: u64, max: usize) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut at = addr;
        while out.len() < max {
            // Read up to the end of the page so an unmapped next page does not fail the read.
            let room = 4096 - (at % 4096) as usize;
            let mut chunk = vec![0u8; room.min(max - out.len())];
            let n = self.0.read_at(&mut chunk, at)?;
            if n == 0 {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            if let Some(z) = chunk[..n].iter().position(|&b| b == 0) {
                out.extend_from_slice(&chunk[..z]);
                return Ok(out);
            }
            out.extend_from_slice(&chunk[..n]);
            at += n as u64;
        }
        Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG))
    }
}

/// The pid of `pid` in its innermost PID namespace (last field of `NSpid:` in
/// `/proc/<pid>/status`).
pub fn ns_pid(pid: u32) -> Option<u32> {
    status_field(pid, "NSpid:")?
        .split_whitespace()
        .last()?
        .parse()
        .ok()
}

/// The number of threads of process `pid` (`Threads:` in `/proc/<pid>/status`).
pub fn threads(pid: u32) -> Option<u32> {
    status_field(pid, "Threads:")?.trim().parse().ok()
}

/// Whether thread `tid` (or process) is gone or on its way out: no `/proc/<tid>/status`, a
/// state of zombie or dead (`Z`, `X`: a thread group whose leader exited waits there for its
/// other threads), or `SIGKILL` pending for the thread or its whole group (`SigPnd:`,
/// `ShdPnd:`, bit 8). Such a process cannot use an answer: it may be blocked where only the
/// answer lets the kill finish (a FUSE request the server has read waits for its reply
/// uninterruptibly, `fs/fuse/dev.c` `request_wait_answer`), which is why an ask of it is
/// withdrawn instead of waited on (`proc(5)`).
pub fn ending(tid: u32) -> bool {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{tid}/status")) else {
        return true;
    };
    let field = |name: &str| s.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
    let dead = field("State:").is_some_and(|v| v.starts_with(['Z', 'X']));
    let killed = ["SigPnd:", "ShdPnd:"].iter().any(|n| {
        field(n)
            .and_then(|v| u64::from_str_radix(v, 16).ok())
            .is_some_and(|m| m & (1 << (libc::SIGKILL - 1)) != 0)
    });
    dead || killed
}

fn status_field(pid: u32, name: &str) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(name))
        .map(str::to_string)
}

/// Whether `[addr, addr + len)` lies in one private mapping of `pid` (`p` in the permissions
/// of `/proc/<pid>/maps`), so that writing it through `/proc/<pid>/mem` copies the page for
/// that process and changes no file or shared memory.
pub fn private_mapping(pid: u32, addr: u64, len: u64) -> bool {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return false;
    };
    let Some(end) = addr.checked_add(len) else {
        return false;
    };
    maps.lines().any(|l| {
        let mut f = l.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            return false;
        };
        let Some((a, b)) = range.split_once('-') else {
            return false;
        };
        let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else {
            return false;
        };
        a <= addr && end <= b && perms.as_bytes().get(3) == Some(&b'p')
    })
}

impl Mem {
    /// Opens the memory of thread `tid` for writing.
    ///
    /// # Errors
    /// ESRCH/ENOENT when gone, EACCES without ptrace rights.
    pub fn open_rw(tid: u32) -> io::Result<Mem> {
        Ok(Mem(std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{tid}/mem"))?))
    }

    /// Writes all of `bytes` at `addr` (through page protections, as a debugger does: the
    /// kernel copies a private page before writing it).
    ///
    /// # Errors
    /// EIO for unmapped memory.
    pub fn write(&self, addr: u64, bytes: &[u8]) -> io::Result<()> {
        self.0.write_all_at(bytes, addr)
    }
}

/// Every descendant of process `root` (not `root` itself), parents before children, from one
/// pass over `/proc/<pid>/stat`. A snapshot: processes forked after it are not in it.
pub fn descendants(root: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Ok((ppid, _)) = stat(pid) {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        for (c, pp) in &parent_of {
            if *pp == p && !tree.contains(c) {
                tree.push(*c);
            }
        }
        i += 1;
    }
    tree.remove(0);
    tree
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// The two-read path gives exactly what the one-at-a-time readers give, for the usual
    /// shape and for the shapes it hands over to them (arrays past a page, strings spread
    /// wide, no environment, a name without its NUL within the limit, unmapped memory).
    #[test]
    fn exec_args_read_in_two_calls_match_the_readers_one_at_a_time() {
        use std::ffi::CString;
        let me = std::process::id();
        let pid = nix::unistd::Pid::from_raw(me as i32);
        let owned = |v: &[String]| -> Vec<CString> {
            v.iter()
                .map(|a| CString::new(a.as_str()).unwrap())
                .collect()
        };
        let ptrs = |v: &[CString]| -> Vec<u64> {
            let mut p: Vec<u64> = v.iter().map(|c| c.as_ptr() as u64).collect();
            p.push(0);
            p
        };
        let check = |name: &str, argv: Vec<String>, envp: Option<Vec<String>>| {
            let path = CString::new(name).unwrap();
            let (a, e) = (owned(&argv), owned(envp.as_deref().unwrap_or(&[])));
            let (ap, ep) = (ptrs(&a), ptrs(&e));
            let envp_ptr = if envp.is_some() {
                ep.as_ptr() as u64
            } else {
                0
            };
            let got = read_exec_args(
                me,
                path.as_ptr() as u64,
                ap.as_ptr() as u64,
                envp_ptr,
                4096,
                65_536,
                2 << 20,
            )
            .unwrap();
            let want = ExecArgs {
                path: read_cstr_vm(pid, path.as_ptr() as u64, 4096).unwrap(),
                argv: read_string_array(me, ap.as_ptr() as u64, 65_536, 2 << 20).unwrap(),
                envp: read_string_array(me, envp_ptr, 65_536, 2 << 20).unwrap(),
            };
            assert_eq!(got, want, "{name}");
            assert_eq!(got.argv.len(), argv.len());
            assert_eq!(
                got.argv
                    .first()
                    .map(|s| String::from_utf8_lossy(s).into_owned()),
                argv.first().cloned()
            );
        };
        let words = |n: usize, w: usize| -> Vec<String> {
            (0..n).map(|i| format!("{i}-{}", "a".repeat(w))).collect()
        };
        check("/bin/true", vec!["true".into()], Some(words(40, 30)));
        check("/usr/bin/env", words(3, 5), None);
        check("/bin/sh", Vec::new(), Some(Vec::new()));
        // Pointer arrays of more than a page, long strings, strings in many allocations.
        check("/bin/echo", words(2_000, 3), Some(words(600, 200)));
        check(
            "/bin/echo",
            vec!["x".repeat(70_000)],
            Some(vec!["Y=".to_string() + &"y".repeat(9_000)]),
        );
        // An environment array that crosses a page a few words in (as a shell's often does).
        let strings = owned(&words(6, 10));
        let mut room = vec![0u64; 2048];
        let start = room.as_ptr() as u64;
        let at = ((start | 4095) + 1 - start) as usize / 8 - 2;
        for (i, c) in strings.iter().enumerate() {
            room[at + i] = c.as_ptr() as u64;
        }
        room[at + strings.len()] = 0;
        let crossing = room[at..].as_ptr() as u64;
        assert_eq!(
            (crossing + 16) % 4096,
            0,
            "set-up: two words before a page ends"
        );
        let path = CString::new("/bin/true").unwrap();
        let a = owned(&words(2, 4));
        let ap = ptrs(&a);
        let got = read_exec_args(
            me,
            path.as_ptr() as u64,
            ap.as_ptr() as u64,
            crossing,
            4096,
            65_536,
            2 << 20,
        )
        .unwrap();
        assert_eq!(
            got.envp,
            read_string_array(me, crossing, 65_536, 2 << 20).unwrap()
        );
        assert_eq!(got.envp.len(), 6);
        // Limits and faults are the readers' own.
        let long = CString::new("p".repeat(5_000)).unwrap();
        let (a, e) = (owned(&words(1, 1)), owned(&[]));
        let (ap, ep) = (ptrs(&a), ptrs(&e));
        let e2big = read_exec_args(
            me,
            long.as_ptr() as u64,
            ap.as_ptr() as u64,
            ep.as_ptr() as u64,
            4096,
            65_536,
            2 << 20,
        )
        .unwrap_err();
        assert_eq!(e2big.raw_os_error(), Some(libc::E2BIG));
        let fault = read_exec_args(
            me,
            8,
            ap.as_ptr() as u64,
            ep.as_ptr() as u64,
            4096,
            65_536,
            2 << 20,
        )
        .unwrap_err();
        assert_eq!(fault.raw_os_error(), Some(libc::EFAULT));
        let many = read_exec_args(
            me,
            long.as_ptr() as u64,
            ap.as_ptr() as u64,
            ep.as_ptr() as u64,
            8192,
            0,
            2 << 20,
        )
        .unwrap_err();
        assert_eq!(many.raw_os_error(), Some(libc::E2BIG));
    }

    #[test]
    fn a_process_identity_is_stable_and_tells_processes_apart() {
        let me = std::process::id();
        let a = stat_ext(me).unwrap();
        assert_eq!(stat_ext(me).unwrap(), a);
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let c = stat_ext(child.id()).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(c.ppid, me);
        assert_ne!(c.start, a.start);
        // Gone and reaped: no identity at all.
        assert!(stat_ext(child.id()).is_err_and(|e| e.raw_os_error() == Some(libc::ESRCH)));
        // The same answers from /proc where the kernel has pidfs (ppid agrees).
        assert_eq!(proc_stat(me).unwrap().0, a.ppid);
    }

    #[test]
    fn this_kernel_identifies_processes_without_proc() {
        // Linux 6.18 here: pidfs and PIDFD_GET_INFO are both present. An older kernel takes
        // `/proc`, which the other tests cover.
        let release = nix::sys::utsname::uname().unwrap();
        let r = release.release().to_string_lossy().into_owned();
        let mut it = r
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|x| x.parse::<u32>().ok());
        let (maj, min) = (it.next().unwrap(), it.next().unwrap());
        if (maj, min) >= (6, 13) {
            assert_eq!(ident_source(), IdentSource::Pidfs);
        }
    }

    /// Strings laid out at chosen places of one buffer of this process, read back through
    /// `read_string_array` as another process's argv would be.
    fn read_back(buf: &[u8], offsets: &[usize]) -> Vec<Vec<u8>> {
        let base = buf.as_ptr() as u64;
        let mut ptrs: Vec<u64> = offsets.iter().map(|&o| base + o as u64).collect();
        ptrs.push(0);
        read_string_array(std::process::id(), ptrs.as_ptr() as u64, 1000, 1 << 20).unwrap()
    }

    #[test]
    fn strings_near_and_far_and_across_pages_read_whole() {
        let mut buf = vec![b'.'; 3 << 20];
        let put = |buf: &mut Vec<u8>, at: usize, s: &[u8]| {
            buf[at..at + s.len()].copy_from_slice(s);
            buf[at + s.len()] = 0;
        };
        // Close together; one across a page boundary of the buffer; one long one; one far
        // away (another span); one beyond the widest gap.
        let page = 4096 - (buf.as_ptr() as usize % 4096);
        let long = vec![b'L'; 10_000];
        let cases: Vec<(usize, Vec<u8>)> = vec![
            (10, b"PATH=/usr/bin".to_vec()),
            (40, b"".to_vec()),
            (page + 4096 - 3, b"ACROSS=the page end".to_vec()),
            (page + 3 * 4096 + 100, long.clone()),
            (page + 300_000, b"FAR=away".to_vec()),
            (page + 2_900_000, b"FARTHER=still".to_vec()),
        ];
        for (at, s) in &cases {
            put(&mut buf, *at, s);
        }
        let offs: Vec<usize> = cases.iter().map(|(a, _)| *a).collect();
        let want: Vec<Vec<u8>> = cases.iter().map(|(_, s)| s.clone()).collect();
        assert_eq!(read_back(&buf, &offs), want);
        // Out of order and repeated pointers keep their order.
        let offs2 = vec![offs[4], offs[0], offs[4], offs[2]];
        let want2 = vec![
            want[4].clone(),
            want[0].clone(),
            want[4].clone(),
            want[2].clone(),
        ];
        assert_eq!(read_back(&buf, &offs2), want2);
    }

    /// Pointers at chosen offsets of `mem`, read by [`read_pages`].
    fn by_pages(mem: &[u8], offsets: &[usize], max: usize) -> io::Result<Option<Vec<Vec<u8>>>> {
        let base = mem.as_ptr() as u64;
        let ptrs: Vec<u64> = offsets.iter().map(|&o| base + o as u64).collect();
        read_pages(nix::unistd::Pid::this(), &ptrs, max)
    }

    #[test]
    fn strings_are_read_by_the_pages_they_lie_on_across_boundaries() {
        let mut g = crate::sys::GuardedPages::new(6).unwrap();
        let mem = g.bytes();
        let put = |mem: &mut [u8], at: usize, s: &[u8]| {
            mem[at..at + s.len()].copy_from_slice(s);
            mem[at + s.len()] = 0;
        };
        let long: Vec<u8> = (0..9000).map(|i| b'a' + (i % 26) as u8).collect();
        let cases: Vec<(usize, Vec<u8>)> = vec![
            // Several on one page, one empty.
            (0, b"A=1".to_vec()),
            (10, Vec::new()),
            (100, b"PATH=/usr/bin:/bin".to_vec()),
            // Across the boundary of pages 0 and 1 (page 1 holds no string start).
            (4096 - 5, b"ACROSS=two pages".to_vec()),
            // Starting on page 2 and running over pages 3 and 4.
            (2 * 4096 + 7, long.clone()),
            // Its NUL the last byte of the last mapped page.
            (6 * 4096 - 4, b"END".to_vec()),
        ];
        for (at, s) in &cases {
            put(mem, *at, s);
        }
        let offs: Vec<usize> = cases.iter().map(|(a, _)| *a).collect();
        let want: Vec<Vec<u8>> = cases.iter().map(|(_, s)| s.clone()).collect();
        assert_eq!(by_pages(mem, &offs, 1 << 20).unwrap(), Some(want.clone()));
        // Repeated and out of order: each pointer its own string, in the order given.
        let offs2 = vec![offs[4], offs[0], offs[4], offs[3]];
        let want2 = vec![
            want[4].clone(),
            want[0].clone(),
            want[4].clone(),
            want[3].clone(),
        ];
        assert_eq!(by_pages(mem, &offs2, 1 << 20).unwrap(), Some(want2));
        // The same through the array reader.
        let mut ptrs: Vec<u64> = offs
            .iter()
            .map(|&o| mem.as_ptr() as u64 + o as u64)
            .collect();
        ptrs.push(0);
        assert_eq!(
            read_string_array(std::process::id(), ptrs.as_ptr() as u64, 100, 1 << 20).unwrap(),
            want
        );
    }

    #[test]
    fn a_string_into_unmapped_memory_is_left_to_the_slow_readers_and_is_efault() {
        let mut g = crate::sys::GuardedPages::new(2).unwrap();
        let mem = g.bytes();
        mem.fill(b'x');
        mem[0] = 0;
        // The string at 100 has no NUL before the unmapped page; the one at 0 is empty.
        assert_eq!(by_pages(mem, &[0, 100], 1 << 20).unwrap(), None);
        let ptrs = [mem.as_ptr() as u64, mem.as_ptr() as u64 + 100, 0];
        let e =
            read_string_array(std::process::id(), ptrs.as_ptr() as u64, 10, 1 << 20).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EFAULT));
        // A string starting on the unmapped page itself.
        assert_eq!(by_pages(mem, &[0, 2 * 4096 + 8], 1 << 20).unwrap(), None);
    }

    #[test]
    fn strings_past_the_byte_limit_are_e2big_and_at_it_are_read() {
        let mut g = crate::sys::GuardedPages::new(4).unwrap();
        let mem = g.bytes();
        // Three strings of 999 bytes and their NULs: 3,000 bytes.
        for k in 0..3 {
            mem[k * 1000..k * 1000 + 999].fill(b'e');
        }
        assert_eq!(
            by_pages(mem, &[0, 1000, 2000], 3000)
                .unwrap()
                .unwrap()
                .len(),
            3
        );
        let e = by_pages(mem, &[0, 1000, 2000], 2999).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::E2BIG));
        // A string that runs on past the limit is E2BIG before all of it is read.
        mem[3000..].fill(b'f');
        let e = by_pages(mem, &[3000], 5000).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::E2BIG));
    }

    #[test]
    fn strings_on_too_many_pages_are_left_to_the_slow_readers() {
        let pages = MAX_PAGES + 8;
        let mut buf = vec![0u8; (pages + 1) * 4096];
        let first = 4096 - (buf.as_ptr() as usize % 4096);
        let offs: Vec<usize> = (0..pages).map(|i| first + i * 4096).collect();
        for (i, &o) in offs.iter().enumerate() {
            let s = format!("V{i}=x");
            buf[o..o + s.len()].copy_from_slice(s.as_bytes());
        }
        assert_eq!(by_pages(&buf, &offs, 1 << 20).unwrap(), None);
        let mut ptrs: Vec<u64> = offs
            .iter()
            .map(|&o| buf.as_ptr() as u64 + o as u64)
            .collect();
        ptrs.push(0);
        let got =
            read_string_array(std::process::id(), ptrs.as_ptr() as u64, 65_536, 1 << 20).unwrap();
        assert_eq!(got.len(), pages);
        assert_eq!(got[pages - 1], format!("V{}=x", pages - 1).into_bytes());
    }

    #[test]
    fn too_many_bytes_is_e2big_and_unmapped_is_efault() {
        let buf = vec![b'x'; 70_000];
        let mut z = buf.clone();
        z.push(0);
        let mut ptrs = [z.as_ptr() as u64, 0];
        let e = read_string_array(std::process::id(), ptrs.as_ptr() as u64, 10, 1000).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::E2BIG));
        ptrs[0] = 8; // never mapped
        let e =
            read_string_array(std::process::id(), ptrs.as_ptr() as u64, 10, 1 << 20).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EFAULT));
    }
}
