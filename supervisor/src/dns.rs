//! The agent's name resolution: a resolver relay of the supervisor inside the sandbox's own
//! network namespace (issue 13 class 1).
//!
//! The sandbox's network namespace has only `lo`. Stage 2 gives `lo` each IPv4 name server
//! address of `/etc/resolv.conf` (a `/32` alias; loopback ones are there already) and binds a
//! UDP socket to `<name server>:53` there, before the agent starts; the supervisor takes that
//! socket (`pidfd_getfd`) and serves it on a thread of its own ([`serve`]). So a resolver in
//! the sandbox (glibc, c-ares, musl: connected or not) sends its query to the name server's
//! address as usual, and the answer comes back from that same address and port, as resolvers
//! check. No socket of the host's network namespace is ever handed to a process of the
//! sandbox: the relay's upstream socket is the supervisor's own, one per query.
//!
//! The relay answers only for the agent's own hosts (`network.agent_hosts` and
//! `--allow-host` names; IP literals need no name): a query is forwarded upstream only when
//! it is one plain question (`QDCOUNT` 1, no answer or authority records, at most one
//! additional record for EDNS, class `IN`, no compression in the name) for one of those names
//! (case-insensitive, RFC 4343), and the upstream answer is passed back only when its id and
//! question are the query's. Everything else gets `REFUSED` (RFC 1035 §4.1.1 rcode 5) at once,
//! so no query with other data in its name ever leaves the sandbox. Name servers given by an
//! IPv6 address other than `::1` get no relay (the agent's lookups through them fail).
//!
//! An approved command's own lookups of the hosts its approved line names are answered too
//! ([`Lookups`]): when such a command's process connects a datagram socket (the resolver's
//! `connect` to the name server), the supervisor records the socket's local address and
//! inode with the host names; a query whose source is that address, while the socket bound
//! there is still that one (and the only one: `SO_REUSEPORT` twins are not trusted), may
//! ask for those names. The addresses every passed-back answer gives a name are remembered
//! for the session, so a later connect to one of them is shown, and matched, by its name.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Longest DNS message over UDP the relay carries (EDNS buffers above this are truncated by
/// the upstream server as it sees fit; RFC 6891 suggests 1232 on the wire).
pub const MAX_MESSAGE: usize = 4096;

/// How long the relay waits for the upstream name server.
pub const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(3);

/// The name servers of `/etc/resolv.conf` (`resolv.conf(5)` `nameserver` lines), in order.
pub fn nameservers() -> Vec<IpAddr> {
    std::fs::read_to_string("/etc/resolv.conf")
        .map(|t| {
            t.lines()
                .filter_map(|l| l.trim().strip_prefix("nameserver"))
                .filter_map(|v| v.trim().parse::<IpAddr>().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The names the relay answers for: the non-literal hosts of `hosts` (`host[:port]`
/// entries), lower case, without a trailing dot.
pub fn allowed_names(hosts: &[String]) -> Vec<String> {
    let mut v: Vec<String> = hosts
        .iter()
        .filter_map(|h| crate::net::parse_host_spec(h))
        .map(|s| s.host.trim_end_matches('.').to_ascii_lowercase())
        .filter(|h| !h.is_empty() && h.parse::<IpAddr>().is_err())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The question of a plain query: `(name in lower case without the final dot, end offset of
/// the question section)`. `None` for anything else (a response, another opcode, several or
/// no questions, records other than one EDNS additional, a compressed or malformed name, a
/// class other than `IN`).
pub fn query_question(msg: &[u8]) -> Option<(String, usize)> {
    if msg.len() < 12 || msg.len() > MAX_MESSAGE {
        return None;
    }
    let flags = u16::from_be_bytes([msg[2], msg[3]]);
    let count = |i: usize| u16::from_be_bytes([msg[i], msg[i + 1]]);
    let (qd, an, ns, ar) = (count(4), count(6), count(8), count(10));
    if flags & 0x8000 != 0 || (flags >> 11) & 0xf != 0 || qd != 1 || an != 0 || ns != 0 || ar > 1 {
        return None;
    }
    let mut i = 12;
    let mut labels: Vec<String> = Vec::new();
    let mut wire_len = 0usize;
    loop {
        let len = usize::from(*msg.get(i)?);
        i += 1;
        wire_len += len + 1;
        if len == 0 {
            break;
        }
        if len > 63 || wire_len > 255 {
            return None;
        }
        let label = msg.get(i..i + len)?;
        if !label
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
        {
            return None;
        }
        labels.push(String::from_utf8_lossy(label).to_ascii_lowercase());
        i += len;
    }
    let class = u16::from_be_bytes([*msg.get(i + 2)?, *msg.get(i + 3)?]);
    if class != 1 || labels.is_empty() {
        return None;
    }
    Some((labels.join("."), i + 4))
}

/// A `REFUSED` answer to `query` (its id, `RD` bit and question, if it has a readable one).
pub fn refused(query: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    let id = query.get(0..2).unwrap_or(&[0, 0]);
    let rd = query.get(2).map_or(0, |b| b & 0x01);
    out.extend_from_slice(id);
    out.push(0x80 | rd);
    out.push(0x80 | 5);
    match query_question(query) {
        Some((_, end)) => {
            out.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
            out.extend_from_slice(&query[12..end]);
        }
        None => out.extend_from_slice(&[0; 8]),
    }
    out
}

/// Whether `answer` is a response to `query`: same id, `QR` set, same question.
pub fn answers(query: &[u8], answer: &[u8]) -> bool {
    let Some((_, end)) = query_question(query) else {
        return false;
    };
    answer.len() >= end
        && answer[0..2] == query[0..2]
        && answer[2] & 0x80 != 0
        && answer[4..6] == query[4..6]
        && answer[12..end] == query[12..end]
}

/// What the relay replies to one query from `from`: the upstream answer for a name the agent
/// may resolve (`names`) or the querying socket's approved command named ([`Lookups`]),
/// else `REFUSED`. The addresses of a passed-back answer are remembered in `lookups`.
fn reply_for(
    query: &[u8],
    from: SocketAddr,
    names: &[String],
    lookups: &Lookups,
    upstream: SocketAddr,
) -> Vec<u8> {
    let Some((name, _)) = query_question(query) else {
        return refused(query);
    };
    if !names.contains(&name) && !lookups.covers(from, &name) {
        lookups.report_refused(from, &name);
        return refused(query);
    }
    let Some(ours) = upstream_query(query, fresh_id()) else {
        return refused(query);
    };
    match ask_upstream(&ours, upstream) {
        Some(answer) => {
            lookups.remember(&name, &answer_addresses(&answer));
            to_client(query, &ours, answer)
        }
        None => refused(query),
    }
}

/// Most sockets [`Lookups`] keeps approved names for, and most names it remembers addresses of.
const MAX_LOOKUPS: usize = 1024;

/// Most addresses remembered per name.
const MAX_ADDRESSES: usize = 32;

/// The session's name resolution memory, shared by the relay and the notify loop: which
/// sockets of approved commands may resolve which names, and which addresses names resolved
/// to.
pub struct Lookups {
    /// `/proc/<pid>/net/udp{,6}` of this process shows the sandbox's sockets (stage 2).
    netns_pid: u32,
    /// Local address of a datagram socket in the sandbox → (its inode, the names it may ask).
    sockets: Mutex<HashMap<SocketAddr, (u64, Vec<String>)>>,
    /// Name (lower case, no final dot) → addresses the passed-back answers gave it.
    seen: Mutex<HashMap<String, HashSet<IpAddr>>>,
    /// Hears the refused lookups ([`Lookups::on_refused`]).
    sink: std::sync::OnceLock<RefusalSink>,
    /// The (querying address, name) pairs already reported: a resolver asks each name for
    /// A and AAAA, of each name server, several times.
    reported: Mutex<HashSet<(SocketAddr, String)>>,
}

/// Hears one refused lookup: the querying socket's local address in the sandbox, the
/// inode of the one socket bound there (`None` when there is none or several), and the name
/// asked (lower case, no final dot).
pub type RefusalSink = Box<dyn Fn(SocketAddr, Option<u64>, &str) + Send + Sync>;

impl std::fmt::Debug for Lookups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lookups")
            .field("netns_pid", &self.netns_pid)
            .field("sockets", &self.sockets)
            .field("seen", &self.seen)
            .field("sink", &self.sink.get().is_some())
            .finish_non_exhaustive()
    }
}

impl Lookups {
    /// An empty memory for the sandbox whose network namespace process `netns_pid` is in.
    pub fn new(netns_pid: u32) -> Arc<Lookups> {
        Arc::new(Lookups {
            netns_pid,
            sockets: Mutex::new(HashMap::new()),
            seen: Mutex::new(HashMap::new()),
            sink: std::sync::OnceLock::new(),
            reported: Mutex::new(HashSet::new()),
        })
    }

    /// Sets what hears the refused lookups (once; a later call is ignored): a refusal is
    /// never silent (the notify loop logs it and tells the querying process, naming the
    /// command it runs).
    pub fn on_refused(&self, sink: RefusalSink) {
        let _ = self.sink.set(sink);
    }

    /// Reports that a query from `from` for `name` was refused, once per querying address
    /// and name (at most [`MAX_LOOKUPS`] remembered; then the memory starts afresh).
    /// Returns whether it was reported now.
    pub fn report_refused(&self, from: SocketAddr, name: &str) -> bool {
        {
            let Ok(mut g) = self.reported.lock() else {
                return false;
            };
            if g.len() >= MAX_LOOKUPS {
                g.clear();
            }
            if !g.insert((from, name.to_string())) {
                return false;
            }
        }
        let Some(sink) = self.sink.get() else {
            return true;
        };
        let bound = self.bound_inodes();
        let inode = match bound.get(&from).map(Vec::as_slice) {
            Some([one]) => Some(*one),
            _ => None,
        };
        sink(from, inode, name);
        true
    }

    /// The process whose network namespace is the sandbox's (stage 2).
    pub fn netns_pid(&self) -> u32 {
        self.netns_pid
    }

    /// Records that the datagram socket bound at `local` in the sandbox, whose inode is
    /// `inode`, belongs to an approved command whose line named `hosts` (`host[:port]`):
    /// its queries for those names (IP literals dropped) are answered.
    pub fn cover_socket(&self, local: SocketAddr, inode: u64, hosts: &[String]) {
        let names = allowed_names(hosts);
        if names.is_empty() {
            return;
        }
        let Ok(mut g) = self.sockets.lock() else {
            return;
        };
        if g.len() >= MAX_LOOKUPS {
            let live = self.bound_inodes();
            g.retain(|a, (ino, _)| live.get(a).is_some_and(|v| v.as_slice() == [*ino]));
            if g.len() >= MAX_LOOKUPS {
                g.clear();
            }
        }
        g.insert(local, (inode, names));
    }

    /// Whether a query from `from` may ask for `name` as an approved command's own lookup: a
    /// socket was recorded at `from`, and the only socket bound there now is that one.
    pub fn covers(&self, from: SocketAddr, name: &str) -> bool {
        let entry = match self.sockets.lock() {
            Ok(g) => g.get(&from).cloned(),
            Err(_) => None,
        };
        let Some((inode, names)) = entry else {
            return false;
        };
        if !names.iter().any(|n| n == name) {
            return false;
        }
        let bound = self.bound_inodes();
        let same_port: Vec<u64> = bound
            .iter()
            .filter(|(a, _)| {
                a.port() == from.port() && (a.ip() == from.ip() || a.ip().is_unspecified())
            })
            .flat_map(|(_, v)| v.iter().copied())
            .collect();
        same_port == [inode]
    }

    /// The sandbox's bound UDP sockets: local address → inodes.
    fn bound_inodes(&self) -> HashMap<SocketAddr, Vec<u64>> {
        let mut out: HashMap<SocketAddr, Vec<u64>> = HashMap::new();
        for table in ["udp", "udp6"] {
            let Ok(t) = std::fs::read_to_string(format!("/proc/{}/net/{table}", self.netns_pid))
            else {
                continue;
            };
            for (a, ino) in t.lines().skip(1).filter_map(proc_net_line) {
                out.entry(a).or_default().push(ino);
            }
        }
        out
    }

    /// Remembers that `name` resolved to `addrs`.
    pub fn remember(&self, name: &str, addrs: &[IpAddr]) {
        if addrs.is_empty() {
            return;
        }
        let Ok(mut g) = self.seen.lock() else {
            return;
        };
        if g.len() >= MAX_LOOKUPS && !g.contains_key(name) {
            g.clear();
        }
        let set = g.entry(name.to_string()).or_default();
        for a in addrs {
            if set.len() < MAX_ADDRESSES {
                set.insert(canonical(*a));
            }
        }
    }

    /// The names remembered for address `ip`, sorted.
    pub fn names_of(&self, ip: IpAddr) -> Vec<String> {
        let ip = canonical(ip);
        let mut v: Vec<String> = match self.seen.lock() {
            Ok(g) => g
                .iter()
                .filter(|(_, s)| s.contains(&ip))
                .map(|(n, _)| n.clone())
                .collect(),
            Err(_) => Vec::new(),
        };
        v.sort();
        v
    }

    /// Whether `name` was seen resolving to `ip`.
    pub fn resolved_to(&self, name: &str, ip: IpAddr) -> bool {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        self.seen
            .lock()
            .is_ok_and(|g| g.get(&name).is_some_and(|s| s.contains(&canonical(ip))))
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it maps.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// One line of `/proc/net/udp` or `udp6` (`proc(5)`): the local address and the inode.
/// Addresses are printed as the kernel's 32-bit words in host byte order, ports in hex.
fn proc_net_line(line: &str) -> Option<(SocketAddr, u64)> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let (addr, port) = f.get(1)?.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let inode: u64 = f.get(9)?.parse().ok()?;
    let word = |s: &str| u32::from_str_radix(s, 16).ok().map(u32::to_ne_bytes);
    let ip = match addr.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(addr)?)),
        32 => {
            let mut o = [0u8; 16];
            for i in 0..4 {
                o[i * 4..i * 4 + 4].copy_from_slice(&word(addr.get(i * 8..i * 8 + 8)?)?);
            }
            canonical(IpAddr::V6(Ipv6Addr::from(o)))
        }
        _ => return None,
    };
    Some((SocketAddr::new(ip, port), inode))
}

/// Skips a (possibly compressed) name at `i` of `msg`; the offset after it.
fn skip_name(msg: &[u8], mut i: usize) -> Option<usize> {
    for _ in 0..128 {
        let len = *msg.get(i)?;
        match len {
            0 => return Some(i + 1),
            l if l & 0xc0 == 0xc0 => return Some(i + 2),
            l if l & 0xc0 == 0 => i += 1 + usize::from(l),
            _ => return None,
        }
    }
    None
}

/// The A and AAAA addresses of the answer section of `answer` (RFC 1035 §4.1.3, RFC 3596).
pub fn answer_addresses(answer: &[u8]) -> Vec<IpAddr> {
    let mut out = Vec::new();
    if answer.len() < 12 {
        return out;
    }
    let count = |i: usize| u16::from_be_bytes([answer[i], answer[i + 1]]);
    let (qd, an) = (count(4), count(6));
    let mut i = 12;
    for _ in 0..qd {
        let Some(j) = skip_name(answer, i) else {
            return out;
        };
        i = j + 4;
    }
    for _ in 0..an {
        let Some(j) = skip_name(answer, i) else {
            return out;
        };
        let Some(h) = answer.get(j..j + 10) else {
            return out;
        };
        let ty = u16::from_be_bytes([h[0], h[1]]);
        let len = usize::from(u16::from_be_bytes([h[8], h[9]]));
        let Some(data) = answer.get(j + 10..j + 10 + len) else {
            return out;
        };
        match (ty, len) {
            (1, 4) => out.push(IpAddr::V4(Ipv4Addr::new(
                data[0], data[1], data[2], data[3],
            ))),
            (28, 16) => {
                let mut o = [0u8; 16];
                o.copy_from_slice(data);
                out.push(IpAddr::V6(Ipv6Addr::from(o)));
            }
            _ => {}
        }
        i = j + 10 + len;
    }
    out
}

/// The record types a query may ask for upstream: addresses, aliases, mail, text, services,
/// name servers, reverse lookups, CAA and HTTPS/SVCB.
const QUERY_TYPES: &[u16] = &[1, 2, 5, 6, 12, 15, 16, 28, 33, 64, 65, 257];

/// The query the relay sends upstream for the client's `query`, built anew from its question
/// alone (no byte of the client's message is copied): `id`, recursion desired, the question's
/// name in lower case, its type (one of [`QUERY_TYPES`]) and class `IN`, and an EDNS record of
/// the relay's own (UDP payload 1232, RFC 6891). So nothing the sandbox puts after the
/// question, in an EDNS option, in its id, in the letter case of the name or in an odd type
/// leaves the sandbox. `None` for a query that is not a plain question of such a type.
pub fn upstream_query(query: &[u8], id: u16) -> Option<Vec<u8>> {
    let (name, end) = query_question(query)?;
    let qtype = u16::from_be_bytes([query[end - 4], query[end - 3]]);
    if !QUERY_TYPES.contains(&qtype) {
        return None;
    }
    let mut out = Vec::with_capacity(end + 11);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1]);
    for label in name.split('.') {
        out.push(u8::try_from(label.len()).ok()?);
        out.extend_from_slice(label.as_bytes());
    }
    out.push(0);
    out.extend_from_slice(&qtype.to_be_bytes());
    out.extend_from_slice(&[0, 1]);
    // OPT: root name, type 41, UDP payload size 1232, extended rcode/version/flags 0, no data.
    out.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]);
    Some(out)
}

/// The upstream `answer` to the relay's own query `ours`, given back as the answer to the
/// client's `query`: the client's id, and its question as it spelled it (the same bytes but
/// for letter case, which `ours` folded).
fn to_client(query: &[u8], ours: &[u8], mut answer: Vec<u8>) -> Vec<u8> {
    let (Some((_, qend)), Some((_, oend))) = (query_question(query), query_question(ours)) else {
        return refused(query);
    };
    if qend != oend || answer.len() < oend {
        return refused(query);
    }
    answer[0..2].copy_from_slice(&query[0..2]);
    answer[12..oend].copy_from_slice(&query[12..qend]);
    answer
}

/// A query id the sandbox does not choose.
fn fresh_id() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish() as u16
}

fn ask_upstream(query: &[u8], upstream: SocketAddr) -> Option<Vec<u8>> {
    let local: SocketAddr = match upstream {
        SocketAddr::V4(_) => "0.0.0.0:0".parse().ok()?,
        SocketAddr::V6(_) => "[::]:0".parse().ok()?,
    };
    let s = UdpSocket::bind(local).ok()?;
    s.connect(upstream).ok()?;
    s.set_read_timeout(Some(UPSTREAM_TIMEOUT)).ok()?;
    s.send(query).ok()?;
    let mut buf = vec![0u8; MAX_MESSAGE];
    let deadline = std::time::Instant::now() + UPSTREAM_TIMEOUT;
    while std::time::Instant::now() < deadline {
        let n = s.recv(&mut buf).ok()?;
        if answers(query, &buf[..n]) {
            buf.truncate(n);
            return Some(buf);
        }
    }
    None
}

/// Serves `sock` (bound to `<name server>:53` in the sandbox's network namespace) until it
/// fails: each query from the sandbox is answered by [`reply_for`] with `upstream` (the real
/// name server, reached from the supervisor's own network namespace), each on a thread of its
/// own so that a slow upstream holds up no other lookup.
pub fn serve(sock: UdpSocket, names: Vec<String>, lookups: Arc<Lookups>, upstream: SocketAddr) {
    let sock = std::sync::Arc::new(sock);
    let names = std::sync::Arc::new(names);
    let in_flight = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut buf = vec![0u8; MAX_MESSAGE];
    loop {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            return;
        };
        let query = buf[..n].to_vec();
        use std::sync::atomic::Ordering;
        if in_flight.fetch_add(1, Ordering::AcqRel) >= 32 {
            in_flight.fetch_sub(1, Ordering::AcqRel);
            let _ = sock.send_to(&refused(&query), from);
            continue;
        }
        let (s, nm, fl, lk) = (
            std::sync::Arc::clone(&sock),
            std::sync::Arc::clone(&names),
            std::sync::Arc::clone(&in_flight),
            Arc::clone(&lookups),
        );
        let spawned = std::thread::Builder::new()
            .name("tyba-dns".into())
            .spawn(move || {
                let _ = s.send_to(&reply_for(&query, from, &nm, &lk, upstream), from);
                fl.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            in_flight.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn query(name: &str, id: u16) -> Vec<u8> {
        let mut q = id.to_be_bytes().to_vec();
        q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
        for l in name.split('.') {
            q.push(l.len() as u8);
            q.extend_from_slice(l.as_bytes());
        }
        q.extend_from_slice(&[0, 0, 1, 0, 1]);
        q
    }

    #[test]
    fn questions_parse_and_odd_queries_do_not() {
        let q = query("Api.Anthropic.com", 7);
        assert_eq!(
            query_question(&q),
            Some(("api.anthropic.com".to_string(), q.len()))
        );
        // A response, two questions, an answer record, class CH, compression, bad bytes.
        let mut r = q.clone();
        r[2] |= 0x80;
        assert_eq!(query_question(&r), None);
        let mut two = q.clone();
        two[5] = 2;
        assert_eq!(query_question(&two), None);
        let mut an = q.clone();
        an[7] = 1;
        assert_eq!(query_question(&an), None);
        let mut ch = q.clone();
        let l = ch.len();
        ch[l - 1] = 3;
        assert_eq!(query_question(&ch), None);
        let mut comp = q[..12].to_vec();
        comp.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1]);
        assert_eq!(query_question(&comp), None);
        assert_eq!(query_question(&query("a b.example", 1)), None);
        assert_eq!(query_question(&q[..14]), None);
        assert_eq!(query_question(&[]), None);
    }

    #[test]
    fn other_names_are_refused_without_going_upstream() {
        let names = allowed_names(&[
            "api.anthropic.com:443".into(),
            "127.0.0.1:8080".into(),
            "Models.Example.:443".into(),
        ]);
        assert_eq!(names, ["api.anthropic.com", "models.example"]);
        // An upstream nobody answers on: an allowed name would wait for it, a refused one not.
        let dead: SocketAddr = "127.0.0.1:9".parse().unwrap();
        for name in [
            "exfil-4142434445.attacker.example",
            "api.anthropic.com.attacker.example",
            "anthropic.com",
        ] {
            let q = query(name, 0x1234);
            let t = std::time::Instant::now();
            let lookups = Lookups::new(std::process::id());
            let from: SocketAddr = "127.0.0.1:5000".parse().unwrap();
            lookups.cover_socket(from, 1, &["anthropic.com".into()]);
            let r = reply_for(&q, from, &names, &lookups, dead);
            assert!(t.elapsed() < Duration::from_millis(500), "{name}");
            assert_eq!(&r[0..2], &[0x12, 0x34]);
            assert_eq!(r[3] & 0x0f, 5, "{name}: REFUSED");
            assert!(answers(&q, &r), "{name}: it answers the query");
        }
    }

    #[test]
    fn a_refused_lookup_is_reported_once_per_socket_and_name() {
        let names = allowed_names(&["api.anthropic.com:443".into()]);
        let dead: SocketAddr = "127.0.0.1:9".parse().unwrap();
        type Heard = Vec<(SocketAddr, Option<u64>, String)>;
        let heard: Arc<Mutex<Heard>> = Arc::default();
        let lookups = Lookups::new(std::process::id());
        let h = Arc::clone(&heard);
        lookups.on_refused(Box::new(move |from, ino, name| {
            h.lock().unwrap().push((from, ino, name.to_string()));
        }));
        // A socket really bound here: the report names its inode.
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let from = sock.local_addr().unwrap();
        let other: SocketAddr = "127.0.0.1:1".parse().unwrap();
        for (f, name) in [
            (from, "registry.npmjs.org"),
            (from, "registry.npmjs.org"),
            (from, "Registry.NPMJS.org."),
            (other, "registry.npmjs.org"),
            (from, "api.anthropic.com"),
        ] {
            let r = reply_for(&query(name, 9), f, &names, &lookups, dead);
            if name != "api.anthropic.com" {
                assert_eq!(r[3] & 0x0f, 5, "{name}: REFUSED");
            }
        }
        let heard = heard.lock().unwrap();
        assert_eq!(heard.len(), 2, "{heard:?}");
        assert_eq!(heard[0].0, from);
        assert_eq!(heard[0].2, "registry.npmjs.org");
        assert!(heard[0].1.is_some(), "the one socket bound there");
        assert_eq!(
            (heard[1].0, heard[1].1),
            (other, None),
            "nothing bound there"
        );
    }

    #[test]
    fn the_upstream_query_is_built_from_the_question_alone() {
        // A query with data after its question, an EDNS option and upper case in its name.
        let mut q = query("Example.COM", 0x4242);
        q[11] = 1; // ARCOUNT 1
        q.extend_from_slice(&[0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 6, 0, 9, 0, 2, b'S', b'X']);
        q.extend_from_slice(b"SECRET-TAIL");
        let ours = upstream_query(&q, 7).unwrap();
        assert_eq!(&ours[0..2], &[0, 7]);
        let (name, end) = query_question(&ours).unwrap();
        assert_eq!(name, "example.com");
        assert!(ours[12..end].iter().all(|b| !b.is_ascii_uppercase()));
        assert_eq!(&ours[end..], &[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]);
        assert!(!ours.windows(6).any(|w| w == b"SECRET"));
        // An odd record type does not go upstream.
        let mut odd = query("example.com", 1);
        let n = odd.len();
        odd[n - 4] = 0x53;
        odd[n - 3] = 0x45;
        assert!(upstream_query(&odd, 1).is_none());
        // The answer goes back with the client's id and spelling.
        let mut answer = ours.clone();
        answer[2] |= 0x80;
        let back = to_client(&q, &ours, answer);
        assert_eq!(&back[0..2], &[0x42, 0x42]);
        assert_eq!(&back[12..end], &q[12..end]);
    }

    #[test]
    fn an_answer_must_match_the_query() {
        let q = query("api.anthropic.com", 9);
        let mut a = q.clone();
        a[2] |= 0x80;
        assert!(answers(&q, &a));
        let mut other_id = a.clone();
        other_id[1] = 10;
        assert!(!answers(&q, &other_id));
        let other_name = {
            let mut x = query("api.anthropic.org", 9);
            x[2] |= 0x80;
            x
        };
        assert!(!answers(&q, &other_name));
        assert!(!answers(&q, &q), "a query is no answer");
    }

    #[test]
    fn an_approved_socket_may_ask_its_names_only_while_it_is_bound_there() {
        use std::os::unix::fs::MetadataExt;
        let lookups = Lookups::new(std::process::id());
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let local = sock.local_addr().unwrap();
        let inode = {
            let fd = std::os::fd::AsFd::as_fd(&sock)
                .try_clone_to_owned()
                .unwrap();
            std::fs::File::from(fd).metadata().unwrap().ino()
        };
        lookups.cover_socket(local, inode, &["http://x".into(), "Pypi.Org".into()]);
        lookups.cover_socket(local, inode, &["pypi.org".into(), "127.0.0.1:80".into()]);
        assert!(lookups.covers(local, "pypi.org"));
        assert!(
            !lookups.covers(local, "files.pythonhosted.org"),
            "a name not on the line"
        );
        let other: SocketAddr = SocketAddr::new(local.ip(), local.port().wrapping_add(1));
        assert!(!lookups.covers(other, "pypi.org"), "another socket");
        // The socket closed: whatever binds that port next is not the approved command's.
        drop(sock);
        assert!(!lookups.covers(local, "pypi.org"));
        let squatter = UdpSocket::bind(local).unwrap();
        assert!(
            !lookups.covers(local, "pypi.org"),
            "a later socket on the same port"
        );
        drop(squatter);
    }

    #[test]
    fn answers_give_their_addresses_by_name() {
        let q = query("pypi.org", 3);
        let mut a = q.clone();
        a[2] |= 0x80;
        a[7] = 3; // ANCOUNT 3: a CNAME, an A and an AAAA, names compressed
        a.extend_from_slice(&[0xc0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 2, 0xc0, 12]);
        a.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 203, 0, 113, 80]);
        a.extend_from_slice(&[0xc0, 12, 0, 28, 0, 1, 0, 0, 0, 60, 0, 16]);
        a.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
        let addrs = answer_addresses(&a);
        assert_eq!(
            addrs,
            vec![
                "203.0.113.80".parse::<IpAddr>().unwrap(),
                "::1".parse().unwrap()
            ]
        );
        // Truncated records give what was read before them, never a panic.
        for n in 0..a.len() {
            let _ = answer_addresses(&a[..n]);
        }
        let l = Lookups::new(std::process::id());
        l.remember("pypi.org", &addrs);
        assert_eq!(l.names_of("203.0.113.80".parse().unwrap()), ["pypi.org"]);
        assert!(l.resolved_to("PyPI.org.", "::ffff:203.0.113.80".parse().unwrap()));
        assert!(l.names_of("203.0.113.81".parse().unwrap()).is_empty());
    }

    #[test]
    fn proc_net_lines_parse() {
        let v4 = "  12: 0100007F:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000  1000        0 4242 2 0000000000000000 0";
        assert_eq!(
            proc_net_line(v4),
            Some(("127.0.0.1:53".parse().unwrap(), 4242))
        );
        let v6 = "  3: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000  0 0 77 2 0 0";
        assert_eq!(proc_net_line(v6), Some(("[::1]:8080".parse().unwrap(), 77)));
        assert_eq!(proc_net_line("sl local_address"), None);
    }
}
