//! Answers to a process-table look at the session's own processes, without running `ps`
//! (probe decision `answer-own-processes`, `tyba_policy::agents::ProbeDecision`; DESIGN.md §5
//! "who is the agent", issue 12).
//!
//! Codex's daemon checks the process it has just started with `ps -p PID -o stat= -o
//! lstart=` and gives up without the answer. `ps` is not on DESIGN.md §2a's green list, so it
//! would be asked; inside the sandbox PID is a process of the sandbox's private pid namespace
//! and everything `ps` would print is in the sandbox's private `/proc`, which the agent reads
//! itself. So the supervisor answers in `ps`'s place from that `/proc` (`proc(5)`:
//! `/proc/PID/stat`, `/proc/stat` `btime`) and nothing runs.
//!
//! Only this form is answered: `ps`, then `-p PIDS` (or `-pPIDS`, `--pid PIDS`; PIDS decimal,
//! comma-separated) and `-o FIELDS` (or `-oFIELDS`; each `NAME=`, headers empty), in any
//! order, at least one of each, with NAME one of `pid`, `ppid`, `stat`, `lstart`, `comm`. The
//! output is procps-ng's for the same command (columns of its widths, one line per process
//! found, in pid order, each once; exit 1 when none is found). Anything else is no answer: the
//! caller refuses the exec quietly.

/// One output field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Pid,
    Ppid,
    Stat,
    Lstart,
    Comm,
}

impl Field {
    fn parse(spec: &str) -> Option<Field> {
        Some(match spec.strip_suffix('=')? {
            "pid" => Field::Pid,
            "ppid" => Field::Ppid,
            "stat" => Field::Stat,
            "lstart" => Field::Lstart,
            "comm" => Field::Comm,
            _ => return None,
        })
    }

    /// procps-ng's column width and alignment (`true`: right-aligned).
    fn width(self) -> (usize, bool) {
        match self {
            Field::Pid | Field::Ppid => (5, true),
            Field::Stat => (4, false),
            Field::Lstart => (24, false),
            Field::Comm => (15, false),
        }
    }
}

/// A parsed `ps -p PIDS -o FIELDS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pids: Vec<u32>,
    fields: Vec<Field>,
}

/// Parses `argv` (the exec's, `argv[0]` a `ps`) as the one form answered; `None` otherwise.
pub fn parse(argv: &[String]) -> Option<Query> {
    let prog = argv.first()?;
    if prog.rsplit('/').next() != Some("ps") {
        return None;
    }
    let mut q = Query {
        pids: Vec::new(),
        fields: Vec::new(),
    };
    let mut it = argv[1..].iter();
    while let Some(a) = it.next() {
        let (opt, val) = match a.as_str() {
            "-p" | "--pid" => ("p", it.next()?.as_str()),
            "-o" => ("o", it.next()?.as_str()),
            s if s.starts_with("-p") && s.len() > 2 => ("p", &s[2..]),
            s if s.starts_with("-o") && s.len() > 2 => ("o", &s[2..]),
            _ => return None,
        };
        for part in val.split(',') {
            if opt == "p" {
                if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                q.pids.push(part.parse().ok().filter(|&n| n > 0)?);
            } else {
                q.fields.push(Field::parse(part)?);
            }
        }
    }
    (!q.pids.is_empty() && !q.fields.is_empty() && q.pids.len() <= 64 && q.fields.len() <= 16)
        .then_some(q)
}

/// What `/proc/PID/stat` says (`proc(5)`), the fields the answer needs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stat {
    comm: String,
    state: char,
    ppid: i64,
    pgrp: i64,
    session: i64,
    tpgid: i64,
    nice: i64,
    threads: i64,
    /// Clock ticks after boot.
    start: u64,
}

fn parse_stat(text: &str) -> Option<Stat> {
    // `pid (comm) state …`: comm may hold spaces and parentheses; it ends at the last `)`.
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // rest[0] is field 3 (state).
    let f = |n: usize| rest.get(n - 3).copied();
    let num = |n: usize| f(n).and_then(|v| v.parse::<i64>().ok());
    Some(Stat {
        comm,
        state: f(3)?.chars().next()?,
        ppid: num(4)?,
        pgrp: num(5)?,
        session: num(6)?,
        tpgid: num(8)?,
        nice: num(19)?,
        threads: num(20)?,
        start: f(22)?.parse().ok()?,
    })
}

/// procps-ng's `stat` column: the state, then `<`/`N` (priority), `s` (session leader), `l`
/// (multi-threaded), `+` (in the foreground process group of its terminal). (`L`, locked
/// pages, would need `/proc/PID/status`: not shown.)
fn stat_flags(pid: u32, s: &Stat) -> String {
    let mut out = String::from(s.state);
    if s.nice < 0 {
        out.push('<');
    } else if s.nice > 0 {
        out.push('N');
    }
    if s.session == i64::from(pid) {
        out.push('s');
    }
    if s.threads > 1 {
        out.push('l');
    }
    if s.tpgid == s.pgrp {
        out.push('+');
    }
    out
}

/// The system facts an answer needs besides each process's `stat`.
#[derive(Debug, Clone)]
pub struct Clock {
    /// Boot time, seconds since the epoch (`/proc/stat` `btime`).
    pub boot: i64,
    /// Clock ticks per second (`sysconf(_SC_CLK_TCK)`).
    pub ticks: u64,
    /// The local time zone the `lstart` column is written in.
    pub tz: jiff::tz::TimeZone,
}

impl Clock {
    /// The machine's: `btime` of `/proc/stat`, 100 ticks a second unless `sysconf` says
    /// otherwise, the system time zone (`TZ`, `/etc/localtime`).
    pub fn system() -> Option<Clock> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let boot = stat
            .lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse().ok())?;
        let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .and_then(|t| u64::try_from(t).ok())
            .filter(|&t| t > 0)
            .unwrap_or(100);
        Some(Clock {
            boot,
            ticks,
            tz: jiff::tz::TimeZone::system(),
        })
    }

    fn lstart(&self, start: u64) -> Option<String> {
        let secs = self
            .boot
            .checked_add(i64::try_from(start / self.ticks).ok()?)?;
        let t = jiff::Timestamp::from_second(secs).ok()?;
        Some(
            t.to_zoned(self.tz.clone())
                .strftime("%a %b %e %H:%M:%S %Y")
                .to_string(),
        )
    }
}

/// The answer to `q`: (stdout, exit status), reading each process's `/proc/PID/stat` text
/// with `stat_of` (`None`: no such process). `None` when a process's `stat` cannot be read
/// as `proc(5)` says.
pub fn answer(
    q: &Query,
    clock: &Clock,
    stat_of: &dyn Fn(u32) -> Option<String>,
) -> Option<(String, i32)> {
    let mut out = String::new();
    let mut found = 0;
    let mut pids = q.pids.clone();
    pids.sort_unstable();
    pids.dedup();
    for &pid in &pids {
        let Some(text) = stat_of(pid) else {
            continue;
        };
        let s = parse_stat(&text)?;
        found += 1;
        let mut line = String::new();
        for (i, f) in q.fields.iter().enumerate() {
            let v = match f {
                Field::Pid => pid.to_string(),
                Field::Ppid => s.ppid.to_string(),
                Field::Stat => stat_flags(pid, &s),
                Field::Lstart => clock.lstart(s.start)?,
                Field::Comm => s.comm.clone(),
            };
            let (w, right) = f.width();
            if i > 0 {
                line.push(' ');
            }
            if right {
                line.push_str(&format!("{v:>w$}"));
            } else if i + 1 == q.fields.len() {
                line.push_str(&v);
            } else {
                line.push_str(&format!("{v:<w$}"));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    Some((out, if found == 0 { 1 } else { 0 }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn only_the_one_form_is_parsed() {
        for ok in [
            "ps -p 30 -o stat= -o lstart=",
            "/bin/ps -o stat=,lstart= -p 30,31",
            "ps -p30 -ostat= --pid 4",
            "ps -o comm= -p 13",
            "ps -o ppid=,comm= -p 13",
        ] {
            assert!(parse(&argv(ok)).is_some(), "{ok}");
        }
        for bad in [
            "ps aux",
            "ps -p 30",
            "ps -o stat=",
            "ps -e -o stat=",
            "ps -p 30 -o stat",
            "ps -p 30 -o stat=STATE",
            "ps -p 30 -o args=",
            "ps -p 30 -o command=",
            "ps -p 30 -o environ=",
            "ps -p x -o stat=",
            "ps -p 0 -o stat=",
            "ps -p 30 -o stat= -u root",
            "ps -p 30 -o stat= --sort pid",
            "ps -p -o stat=",
            "ps -p 30 -o",
            "ps -p 3,,4 -o stat=",
            "sh -p 30 -o stat=",
            "pstree -p 30 -o stat=",
            "ps -p 30 -o stat= e",
        ] {
            assert_eq!(parse(&argv(bad)), None, "{bad}");
        }
    }

    fn clock() -> Clock {
        Clock {
            boot: 1_796_160_000,
            ticks: 100,
            tz: jiff::tz::TimeZone::UTC,
        }
    }

    #[test]
    fn the_answer_reads_proc_5_as_ps_prints_it() {
        // pid 30: comm with a space and a parenthesis, session leader, 4 threads, in the
        // foreground; start 123.45 s after boot.
        let stat30 = "30 (co dex)) S 1 30 30 34816 30 4194560 0 0 0 0 0 0 0 0 20 0 4 0 12345 0 0";
        let stat31 = "31 (ps) Z 30 30 30 0 -1 0 0 0 0 0 0 0 0 0 20 5 1 0 12400 0 0";
        let of = |pid: u32| match pid {
            30 => Some(stat30.to_string()),
            31 => Some(stat31.to_string()),
            _ => None,
        };
        let q = parse(&argv("ps -p 31,99,30,31 -o stat= -o lstart=")).unwrap();
        let (out, code) = answer(&q, &clock(), &of).unwrap();
        assert_eq!(
            out,
            "Ssl+ Tue Dec  1 21:22:03 2026\nZN   Tue Dec  1 21:22:04 2026\n"
        );
        assert_eq!(code, 0);
        let q = parse(&argv("ps -o pid=,ppid=,comm= -p 30")).unwrap();
        assert_eq!(
            answer(&q, &clock(), &of).unwrap().0,
            "   30     1 co dex)\n"
        );
        // No such process: nothing, exit 1 (as ps); an unreadable stat: no answer.
        let q = parse(&argv("ps -p 99 -o stat=")).unwrap();
        assert_eq!(answer(&q, &clock(), &of), Some((String::new(), 1)));
        let q = parse(&argv("ps -p 30 -o stat=")).unwrap();
        assert_eq!(answer(&q, &clock(), &|_| Some("garbage".into())), None);
    }

    /// The same answer as the machine's own `ps` for this test's own process, when there is
    /// one (procps-ng; skipped where `ps` is missing).
    #[test]
    fn the_answer_is_what_procps_prints_for_the_same_process() {
        let me = std::process::id();
        let cmd = format!("ps -p {me},1 -o pid=,ppid=,lstart=,comm=");
        let Ok(o) = std::process::Command::new("ps")
            .args(cmd.split(' ').skip(1))
            .output()
        else {
            return;
        };
        let q = parse(&argv(&cmd)).unwrap();
        let clock = Clock::system().unwrap();
        let (out, code) = answer(&q, &clock, &|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).ok()
        })
        .unwrap();
        assert_eq!(code, 0);
        assert_eq!(out, String::from_utf8_lossy(&o.stdout));
    }
}
