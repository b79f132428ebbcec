//! Network destinations: parsing socket addresses read from the sandboxed process, and the
//! hosts the agent program itself may reach (policy `network.agent_hosts`, `--allow-host`).

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A destination a process asked to connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
    /// An IPv4/IPv6 address and port.
    Inet(SocketAddr),
    /// A unix socket path (as given, maybe relative).
    UnixPath(Vec<u8>),
    /// An abstract unix socket name (without the leading NUL).
    UnixAbstract(Vec<u8>),
    /// An unnamed unix address or another family.
    Other(u16),
}

impl std::fmt::Display for Dest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dest::Inet(a) => write!(f, "{a}"),
            Dest::UnixPath(p) => write!(f, "unix socket {}", String::from_utf8_lossy(p)),
            Dest::UnixAbstract(p) => {
                write!(f, "abstract unix socket @{}", String::from_utf8_lossy(p))
            }
            Dest::Other(fam) => write!(f, "address family {fam}"),
        }
    }
}

/// Parses a `struct sockaddr` of `raw.len()` bytes (`ip(7)`, `ipv6(7)`, `unix(7)`).
pub fn parse_sockaddr(raw: &[u8]) -> Option<Dest> {
    if raw.len() < 2 {
        return None;
    }
    let family = u16::from_ne_bytes([raw[0], raw[1]]);
    match i32::from(family) {
        libc::AF_INET if raw.len() >= 8 => {
            let port = u16::from_be_bytes([raw[2], raw[3]]);
            let ip = Ipv4Addr::new(raw[4], raw[5], raw[6], raw[7]);
            Some(Dest::Inet(SocketAddr::new(IpAddr::V4(ip), port)))
        }
        libc::AF_INET6 if raw.len() >= 24 => {
            let port = u16::from_be_bytes([raw[2], raw[3]]);
            let mut o = [0u8; 16];
            o.copy_from_slice(&raw[8..24]);
            Some(Dest::Inet(SocketAddr::new(
                IpAddr::V6(Ipv6Addr::from(o)),
                port,
            )))
        }
        libc::AF_UNIX => {
            let path = &raw[2..];
            if path.is_empty() {
                Some(Dest::Other(family))
            } else if path[0] == 0 {
                Some(Dest::UnixAbstract(path[1..].to_vec()))
            } else {
                let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
                Some(Dest::UnixPath(path[..end].to_vec()))
            }
        }
        _ => Some(Dest::Other(family)),
    }
}

/// A `sockaddr_un` for `path` (at most 107 bytes).
pub fn sockaddr_un(path: &[u8]) -> Option<Vec<u8>> {
    if path.len() > 107 {
        return None;
    }
    let mut v = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
    v.extend_from_slice(path);
    v.push(0);
    Some(v)
}

/// One allowed host entry: a name or address, and a port (`None`: any port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    /// Host name or IP literal (IPv6 without brackets).
    pub host: String,
    /// Port, when given.
    pub port: Option<u16>,
}

/// Parses `HOST`, `HOST:PORT`, `[V6]` or `[V6]:PORT`.
pub fn parse_host_spec(s: &str) -> Option<HostSpec> {
    let s = s.trim();
    if let Some(rest) = s.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p.parse().ok()?),
            None if after.is_empty() => None,
            None => return None,
        };
        return Some(HostSpec {
            host: h.to_string(),
            port,
        });
    }
    if s.parse::<Ipv6Addr>().is_ok() {
        return Some(HostSpec {
            host: s.to_string(),
            port: None,
        });
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() => Some(HostSpec {
            host: h.to_string(),
            port: Some(p.parse().ok()?),
        }),
        Some(_) => None,
        None if !s.is_empty() => Some(HostSpec {
            host: s.to_string(),
            port: None,
        }),
        None => None,
    }
}

/// Resolved `(address, port)` pairs and when they were resolved.
type Resolved = (HashSet<(IpAddr, Option<u16>)>, Option<Instant>);

/// The agent's allowed destinations, resolved by the supervisor (re-resolved on a miss at most
/// every 30 s, since model APIs sit behind changing CDN addresses). The name servers of
/// `/etc/resolv.conf` are not among them: name resolution goes to the supervisor's relay in
/// the sandbox's own network namespace (`crate::dns`).
#[derive(Debug)]
pub struct AgentHosts {
    specs: Vec<HostSpec>,
    resolved: Mutex<Resolved>,
}

impl AgentHosts {
    /// From `host[:port]` strings; unparseable ones are dropped.
    pub fn new(list: &[String]) -> AgentHosts {
        let specs: Vec<HostSpec> = list.iter().filter_map(|s| parse_host_spec(s)).collect();
        // Names are resolved on the agent's first connection, not here: a launch must not
        // wait on DNS.
        AgentHosts {
            specs,
            resolved: Mutex::new((HashSet::new(), None)),
        }
    }

    fn refresh(&self) {
        let mut set = HashSet::new();
        for s in &self.specs {
            if let Ok(ip) = s.host.parse::<IpAddr>() {
                set.insert((ip, s.port));
                continue;
            }
            if let Ok(addrs) = (s.host.as_str(), s.port.unwrap_or(443)).to_socket_addrs() {
                for a in addrs {
                    set.insert((a.ip(), s.port));
                }
            }
        }
        if let Ok(mut g) = self.resolved.lock() {
            *g = (set, Some(Instant::now()));
        }
    }

    fn matches(&self, a: &SocketAddr) -> bool {
        let ip = match a.ip() {
            IpAddr::V6(v6) => v6
                .to_ipv4_mapped()
                .map(IpAddr::V4)
                .unwrap_or(IpAddr::V6(v6)),
            v4 => v4,
        };
        self.resolved
            .lock()
            .map(|g| g.0.contains(&(ip, Some(a.port()))) || g.0.contains(&(ip, None)))
            .unwrap_or(false)
    }

    /// Whether the agent program may have a stream socket of the host's network namespace
    /// connected to `a` (one of its hosts; name servers are not).
    pub fn allows(&self, a: &SocketAddr) -> bool {
        if self.matches(a) {
            return true;
        }
        let stale = self
            .resolved
            .lock()
            .map(|g| g.1.is_none_or(|t| t.elapsed() > Duration::from_secs(30)))
            .unwrap_or(false);
        if stale {
            self.refresh();
            return self.matches(a);
        }
        false
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn host_specs() {
        assert_eq!(
            parse_host_spec("api.x.com:443"),
            Some(HostSpec {
                host: "api.x.com".into(),
                port: Some(443)
            })
        );
        assert_eq!(
            parse_host_spec("127.0.0.1"),
            Some(HostSpec {
                host: "127.0.0.1".into(),
                port: None
            })
        );
        assert_eq!(
            parse_host_spec("[::1]:8080"),
            Some(HostSpec {
                host: "::1".into(),
                port: Some(8080)
            })
        );
        assert_eq!(
            parse_host_spec("::1"),
            Some(HostSpec {
                host: "::1".into(),
                port: None
            })
        );
        assert_eq!(parse_host_spec("h:notaport"), None);
    }

    #[test]
    fn literal_hosts_allow_their_port_only() {
        let h = AgentHosts::new(&["127.0.0.1:8080".to_string()]);
        assert!(h.allows(&"127.0.0.1:8080".parse().unwrap()));
        assert!(!h.allows(&"127.0.0.1:8081".parse().unwrap()));
        assert!(!h.allows(&"10.0.0.1:8080".parse().unwrap()));
    }

    #[test]
    fn sockaddrs_parse() {
        let mut v4 = (libc::AF_INET as u16).to_ne_bytes().to_vec();
        v4.extend(8080u16.to_be_bytes());
        v4.extend([127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            parse_sockaddr(&v4),
            Some(Dest::Inet("127.0.0.1:8080".parse().unwrap()))
        );
        let un = sockaddr_un(b"/tmp/s").unwrap();
        assert_eq!(
            parse_sockaddr(&un),
            Some(Dest::UnixPath(b"/tmp/s".to_vec()))
        );
    }
}
