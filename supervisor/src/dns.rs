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

use std::net::{IpAddr, SocketAddr, UdpSocket};
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

/// What the relay replies to one query: the upstream answer for an allowed name, else
/// `REFUSED`.
fn reply_for(query: &[u8], names: &[String], upstream: SocketAddr) -> Vec<u8> {
    let allowed = query_question(query).is_some_and(|(n, _)| names.contains(&n));
    if !allowed {
        return refused(query);
    }
    let Some(ours) = upstream_query(query, fresh_id()) else {
        return refused(query);
    };
    match ask_upstream(&ours, upstream) {
        Some(answer) => to_client(query, &ours, answer),
        None => refused(query),
    }
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
pub fn serve(sock: UdpSocket, names: Vec<String>, upstream: SocketAddr) {
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
        let (s, nm, fl) = (
            std::sync::Arc::clone(&sock),
            std::sync::Arc::clone(&names),
            std::sync::Arc::clone(&in_flight),
        );
        let spawned = std::thread::Builder::new()
            .name("tyba-dns".into())
            .spawn(move || {
                let _ = s.send_to(&reply_for(&query, &nm, upstream), from);
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
            let r = reply_for(&q, &names, dead);
            assert!(t.elapsed() < Duration::from_millis(500), "{name}");
            assert_eq!(&r[0..2], &[0x12, 0x34]);
            assert_eq!(r[3] & 0x0f, 5, "{name}: REFUSED");
            assert!(answers(&q, &r), "{name}: it answers the query");
        }
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
}
