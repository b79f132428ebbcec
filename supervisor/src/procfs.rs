//! Reading the sandboxed processes through the supervisor's `/proc` (`proc(5)`): identity,
//! parentage, working directory and memory. The supervisor is the owner of the sandbox's user
//! namespace, so it has ptrace-read rights over every process in it.

use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// A process identity that survives pid reuse: thread-group id and start time (clock ticks
/// since boot, `proc(5)` field 22).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcId {
    /// Thread-group id in the supervisor's PID namespace.
    pub pid: u32,
    /// Start time in clock ticks since boot.
    pub start: u64,
}

/// `(ppid, starttime)` of a process from `/proc/<pid>/stat`.
pub fn stat(pid: u32) -> io::Result<(u32, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = s
        .rsplit_once(')')
        .map(|(_, a)| a)
        .ok_or_else(|| io::Error::other("bad stat"))?;
    let f: Vec<&str> = after.split_whitespace().collect();
    // after ')' come fields 3 (state), 4 (ppid), … 22 (starttime) → indices 0, 1, … 19.
    let ppid = f
        .get(1)
        .and_then(|x| x.parse().ok())
        .ok_or_else(|| io::Error::other("bad ppid"))?;
    let start = f
        .get(19)
        .and_then(|x| x.parse().ok())
        .ok_or_else(|| io::Error::other("bad starttime"))?;
    Ok((ppid, start))
}

/// What the exec model reads of a process in one pass over `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Parent pid (field 4).
    pub ppid: u32,
    /// Start time in clock ticks since boot (field 22).
    pub start: u64,
    /// Address of the start of the stack (field 28): new, and randomised, at every exec.
    pub stack: u64,
}

/// [`Stat`] of process `pid`.
///
/// # Errors
/// ENOENT/ESRCH when it is gone; `Other` for a line that does not parse.
pub fn stat_ext(pid: u32) -> io::Result<Stat> {
    let mut buf = [0u8; 1024];
    let n = {
        use std::io::Read;
        let mut f = std::fs::File::open(format!("/proc/{pid}/stat"))?;
        f.read(&mut buf)?
    };
    let s = std::str::from_utf8(&buf[..n]).map_err(|_| io::Error::other("bad stat"))?;
    let after = s
        .rsplit_once(')')
        .map(|(_, a)| a)
        .ok_or_else(|| io::Error::other("bad stat"))?;
    let f: Vec<&str> = after.split_whitespace().collect();
    // after ')' come fields 3 (state), 4 (ppid), … 22 (starttime), … 28 (startstack).
    let num = |i: usize| -> io::Result<u64> {
        f.get(i)
            .and_then(|x| x.parse().ok())
            .ok_or_else(|| io::Error::other("bad stat field"))
    };
    Ok(Stat {
        ppid: u32::try_from(num(1)?).map_err(|_| io::Error::other("bad ppid"))?,
        start: num(19)?,
        stack: num(25)?,
    })
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

/// A NUL-terminated string of thread `tid` of at most `max` bytes at `addr`
/// (`process_vm_readv(2)`).
///
/// # Errors
/// EFAULT for unmapped memory; E2BIG when no NUL is found within `max` bytes.
pub fn read_cstr(tid: u32, addr: u64, max: usize) -> io::Result<Vec<u8>> {
    read_cstr_vm(nix::unistd::Pid::from_raw(tid as i32), addr, max)
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
    let pid = tgid(tid)?;
    let (_, start) = stat(pid)?;
    Ok(ProcId { pid, start })
}

/// The working directory of thread `tid`, as the kernel names it.
pub fn cwd(tid: u32) -> io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/{tid}/cwd"))
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
