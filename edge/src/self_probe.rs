//! `openclaw-proxy --probe URL`: one `GET` of a plain `http://` URL, for a
//! container health check in an image that has no shell and no curl.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// `GET`s `url` (`http://host[:port][/path]`) and succeeds when it answers
/// `200`; the error says what happened instead. The whole exchange takes at
/// most about `timeout` per step (connect, write, read).
pub fn probe(url: &str, timeout: Duration) -> Result<(), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        format!("--probe takes an http:// URL (such as http://127.0.0.1:8000/ready), not {url:?}")
    })?;
    let (authority, path) = match rest.find('/') {
        Some(slash) => rest.split_at(slash),
        None => (rest, "/"),
    };
    if authority.is_empty() {
        return Err(format!("--probe {url:?} names no host"));
    }
    // A bare host (or a bracketed IPv6 address) means port 80.
    let target = if authority
        .rsplit_once(':')
        .is_some_and(|(_, port)| !port.contains(']'))
    {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let addresses = target
        .to_socket_addrs()
        .map_err(|error| format!("cannot resolve {authority}: {error}"))?;
    let (mut stream, address) = connect_first(authority, addresses, timeout)?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|error| format!("cannot set timeouts: {error}"))?;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .map_err(|error| format!("cannot send the request to {address}: {error}"))?;
    // The status line is all that is read: a server that keeps the
    // connection open past it does not hold the probe up.
    let mut head = Vec::new();
    let mut byte = [0_u8; 1];
    while !head.ends_with(b"\r\n") && head.len() < 1024 {
        match stream.read(&mut byte) {
            Ok(0) => break,
            Ok(_) => head.push(byte[0]),
            Err(error) => return Err(format!("no answer from {address}: {error}")),
        }
    }
    let status_line = String::from_utf8_lossy(&head).trim().to_owned();
    match status_line.split_whitespace().nth(1) {
        Some("200") => Ok(()),
        Some(_) => Err(format!("{url} answered {status_line:?}")),
        None => Err(format!("{url} gave no HTTP answer ({status_line:?})")),
    }
}

/// The first of `addresses` that connects, tried in order: `localhost` is
/// often `::1` first, and the server may listen on 127.0.0.1 alone.
fn connect_first(
    authority: &str,
    addresses: impl Iterator<Item = SocketAddr>,
    timeout: Duration,
) -> Result<(TcpStream, SocketAddr), String> {
    let mut refusals = Vec::new();
    for address in addresses {
        match TcpStream::connect_timeout(&address, timeout) {
            Ok(stream) => return Ok((stream, address)),
            Err(error) => refusals.push(format!("{address}: {error}")),
        }
    }
    Err(match refusals.is_empty() {
        true => format!("{authority} resolves to no address"),
        false => format!("cannot connect to {}", refusals.join("; ")),
    })
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    #[test]
    fn an_address_that_refuses_gives_way_to_the_next() {
        let open = TcpListener::bind("127.0.0.1:0").expect("a listener");
        let open_address = open.local_addr().expect("its address");
        let closed = TcpListener::bind("127.0.0.1:0").expect("a listener");
        let closed_address = closed.local_addr().expect("its address");
        drop(closed);
        let timeout = Duration::from_secs(5);
        let (_, connected) = connect_first(
            "localhost",
            [closed_address, open_address].into_iter(),
            timeout,
        )
        .expect("the second address");
        assert_eq!(connected, open_address);
        let refused = connect_first("localhost", [closed_address].into_iter(), timeout)
            .expect_err("nothing listens");
        assert!(refused.contains(&closed_address.to_string()), "{refused}");
        let none = connect_first("nowhere", std::iter::empty(), timeout).expect_err("none");
        assert!(none.contains("resolves to no address"), "{none}");
    }
}
