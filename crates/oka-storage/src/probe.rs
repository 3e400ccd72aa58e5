//! Why a store's address cannot be reached, in words. Drivers flatten the
//! operating system's error into text (fred keeps only a Debug dump of it), so a
//! backend whose connection failed asks the network itself: it resolves the
//! address and opens a TCP connection, and the typed outcome says what is wrong.

use std::io;
use std::time::Duration;

/// What a TCP connection to `host:port` shows, in words: `nothing listens at
/// h:p (connection refused)`, `the host name h does not resolve`, `no answer from
/// h:p within 2 s`, or, when a connection opens, that the server there accepts
/// connections (so the failure was above TCP: TLS, the protocol, the server).
pub async fn reachability(host: &str, port: u16, timeout: Duration) -> String {
    let at = format!("{host}:{port}");
    let addrs = match tokio::time::timeout(timeout, tokio::net::lookup_host(&at)).await {
        Err(_) => {
            return format!(
                "the host name {host} did not resolve within {}",
                secs(timeout)
            );
        }
        Ok(Err(_)) => return format!("the host name {host} does not resolve"),
        Ok(Ok(addrs)) => addrs.collect::<Vec<_>>(),
    };
    let Some(addr) = addrs.first().copied() else {
        return format!("the host name {host} has no address");
    };
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await {
        Err(_) => format!("no answer from {at} within {}", secs(timeout)),
        Ok(Ok(_)) => format!(
            "{at} accepts connections, but the store's connection on it failed (is that port the store's, and TLS on or off as the server expects?)"
        ),
        Ok(Err(e)) => match e.kind() {
            io::ErrorKind::ConnectionRefused => {
                format!("nothing listens at {at} (the connection was refused)")
            }
            io::ErrorKind::TimedOut => format!("no answer from {at} (the connection timed out)"),
            io::ErrorKind::HostUnreachable | io::ErrorKind::NetworkUnreachable => {
                format!("{at} cannot be reached from this machine (no route)")
            }
            io::ErrorKind::PermissionDenied => {
                format!("connecting to {at} is not permitted here (a firewall or policy)")
            }
            _ => format!("connecting to {at} failed ({})", e.kind()),
        },
    }
}

fn secs(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_closed_port_and_an_open_one_are_told_apart() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let open = reachability("127.0.0.1", port, Duration::from_secs(1)).await;
        assert!(open.contains("accepts connections"), "{open}");
        drop(listener);
        let closed = reachability("127.0.0.1", port, Duration::from_secs(1)).await;
        assert_eq!(
            closed,
            format!("nothing listens at 127.0.0.1:{port} (the connection was refused)")
        );
        let unknown = reachability("no-such-host.invalid", 1, Duration::from_secs(2)).await;
        assert!(unknown.contains("does not resolve"), "{unknown}");
    }
}
